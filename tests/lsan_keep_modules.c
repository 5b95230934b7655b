/* Linked into the tests and the command line only in the sanitizer build (VKATTN_SANITIZE):
 * dlclose does nothing, so the Vulkan loader, the driver (lavapipe, with its LLVM) and the
 * validation layer stay mapped until exit. LeakSanitizer then names the library a leak was
 * allocated in, and tests/lsan.supp suppresses those third-party leaks by library. Otherwise
 * their frames are "<unknown module>", which no suppression can match. */
#include <dlfcn.h>

int dlclose(void *handle) {
    (void)handle;
    return 0;
}
