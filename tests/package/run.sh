#!/usr/bin/env bash
# The installed package, used as another project would (ctest: test_package, label "package"):
# cmake --install into a temporary prefix, then build and run consumer.c
#   1. with find_package(vkattn CONFIG) (the shared library; docs/library.md's example is built too),
#   2. with vkattn_USE_STATIC_LIBS=ON (libvkattn.a and its dependencies through CMake),
#   3. with pkg-config against the shared library,
#   4. with pkg-config --static against libvkattn.a,
# checking each links the installed library, not the build tree's.
# Usage: run.sh BUILD_DIR SOURCE_DIR WORK_DIR C_COMPILER
set -euo pipefail
build=$1 src=$2 work=$3 cc=$4
here="$src/tests/package"
rm -rf "$work"
mkdir -p "$work"
prefix="$work/prefix"
cmake --install "$build" --prefix "$prefix" > "$work/install.log"

awk '/^#+ Using vkattn as a library/{f=1} f&&/^```c/{p=1;next} p&&/^```/{exit} p' \
    "$src/docs/library.md" > "$work/readme_example.c"
[ -s "$work/readme_example.c" ] || { echo "no C example in docs/library.md" >&2; exit 1; }

run() { # name binary: runs it, checks its last line and what it linked
    local name=$1 bin=$2 out
    out=$("$bin") || { echo "$name: $bin failed" >&2; exit 1; }
    echo "$out" | tail -1 | grep -q "^vkattn .*: loss .* -> .*, generated 8 tokens$" \
        || { echo "$name: unexpected output: $out" >&2; exit 1; }
    echo "$name: $(echo "$out" | tail -1)"
}
linked_shared() { # binary: libvkattn.so.0 resolves into the prefix
    local lib
    lib=$(ldd "$1" | sed -n 's/^[[:space:]]*libvkattn\.so\.0 => \([^ ]*\) .*/\1/p')
    case "$(readlink -f "$lib" 2>/dev/null)" in
        "$(readlink -f "$prefix")"/*) ;;
        *) echo "$1 does not link $prefix's libvkattn.so.0:" >&2; ldd "$1" >&2; exit 1 ;;
    esac
}
linked_static() {
    if ldd "$1" | grep -q libvkattn; then echo "$1 links libvkattn.so" >&2; exit 1; fi
}

# 1, 2: CMake
for kind in shared static; do
    static=OFF
    [ $kind = static ] && static=ON
    cmake -S "$here" -B "$work/cmake_$kind" -DCMAKE_PREFIX_PATH="$prefix" \
          -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE=Release -Dvkattn_USE_STATIC_LIBS=$static \
          -DREADME_EXAMPLE="$work/readme_example.c" > "$work/cmake_$kind.log" \
        || { cat "$work/cmake_$kind.log" >&2; exit 1; }
    cmake --build "$work/cmake_$kind" -j2 >> "$work/cmake_$kind.log" 2>&1 \
        || { cat "$work/cmake_$kind.log" >&2; exit 1; }
    linked_$kind "$work/cmake_$kind/consumer"
    run "find_package, $kind" "$work/cmake_$kind/consumer"
done

# docs/library.md's example, run as written (200 training steps on the default Vulkan
# device, then 200 sampled tokens) against the installed shared library: with
# VKATTN_RUN_README_EXAMPLE=1 (about a minute on lavapipe when idle, three when loaded).
if [ "${VKATTN_RUN_README_EXAMPLE:-0}" = 1 ]; then
linked_shared "$work/cmake_shared/readme_example"
"$work/cmake_shared/readme_example" > "$work/readme_example.out" \
    || { echo "docs/library.md's example failed:" >&2; cat "$work/readme_example.out" >&2; exit 1; }
grep -q "^step 200: loss " "$work/readme_example.out" \
    || { echo "docs/library.md's example did not train 200 steps:" >&2; cat "$work/readme_example.out" >&2; exit 1; }
echo "README example (shared): $(grep '^step 20: ' "$work/readme_example.out"), $(grep '^step 200: ' "$work/readme_example.out")"
fi

# 3, 4: pkg-config
export PKG_CONFIG_PATH="$(dirname "$(find "$prefix" -name vkattn.pc)")"
libdir=$(pkg-config --variable=libdir vkattn)
[ "$(pkg-config --modversion vkattn)" = "$(sed -n 's/^#define VKA_VERSION_STRING "\(.*\)"/\1/p' "$prefix/include/vkattn.h")" ] \
    || { echo "vkattn.pc's version is not the header's" >&2; exit 1; }
"$cc" -std=c11 -o "$work/pc_shared" "$here/consumer.c" $(pkg-config --cflags --libs vkattn) -lm \
      -Wl,-rpath,"$libdir"
linked_shared "$work/pc_shared"
run "pkg-config, shared" "$work/pc_shared"
"$cc" -std=c11 -o "$work/pc_static" "$here/consumer.c" $(pkg-config --cflags vkattn) \
      "$libdir/libvkattn.a" $(pkg-config --static --libs vkattn | sed 's/-lvkattn\b//')
linked_static "$work/pc_static"
run "pkg-config --static" "$work/pc_static"
