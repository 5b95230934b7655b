#!/bin/sh
# test_host_alloc_calls: every block vkattn allocates goes through vka_malloc & co. (src/alloc.c,
# where vka_context_desc.host_allocator is called): no other object file of the library may call
# libc's allocator itself. Argument: the folder of the library's object files.
dir=$1
n=0
bad=0
for o in $(find "$dir" -name '*.o' ! -name 'alloc.c.o'); do
    n=$((n + 1))
    syms=$(nm -u "$o" | awk '{print $NF}' |
           grep -xE 'malloc|calloc|realloc|reallocarray|free|strdup|strndup|aligned_alloc|posix_memalign' |
           tr "\n" " " | sed "s/ $//")
    if [ -n "$syms" ]; then
        echo "$o calls $syms itself: use vka_malloc, vka_calloc, vka_realloc, vka_free, vka_strdup (src/alloc.h)"
        bad=1
    fi
done
[ "$n" -gt 10 ] || { echo "only $n object files under $dir"; exit 1; }
[ "$bad" = 0 ] && echo "$n object files: none calls libc's allocator itself"
exit $bad
