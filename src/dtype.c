/* Element types (include/vkattn.h, vka_dtype): their names and sizes, for every layer. */
#include "vkattn.h"

const char *vka_dtype_string(vka_dtype dtype) {
    switch (dtype) {
    case VKA_F32: return "f32";
    case VKA_BF16: return "bf16";
    case VKA_F16: return "f16";
    }
    return "unknown";
}

size_t vka_dtype_size(vka_dtype dtype) {
    switch (dtype) {
    case VKA_F32: return 4;
    case VKA_BF16: case VKA_F16: return 2;
    }
    return 0;
}
