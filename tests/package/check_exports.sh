#!/usr/bin/env bash
# The libraries define only the public API (ctest: test_exports, label "package"): every global
# symbol libvkattn.so exports, and every one libvkattn.a defines, starts with vka_, is not one of
# volk's renamed globals (vka_volk_*), and is declared in vkattn.h.
# Usage: check_exports.sh HEADER LIBRARY...
set -euo pipefail
header=$1
shift
status=0
for lib in "$@"; do
    case "$lib" in
        *.a) names=$(nm -g --defined-only "$lib" | awk 'NF == 3 { print $3 }') ;;
        *) names=$(nm -gD --defined-only "$lib" | awk 'NF == 3 { print $3 }') ;;
    esac
    n=$(echo "$names" | grep -c . || true)
    bad=0
    for name in $names; do
        case "$name" in
            vka_volk_*) echo "$lib: exports volk's $name" >&2; bad=$((bad + 1)) ;;
            vka_*) grep -Eq "\b$name\s*\(" "$header" \
                       || { echo "$lib: exports $name, not declared in vkattn.h" >&2; bad=$((bad + 1)); } ;;
            *) echo "$lib: exports $name (no vka_ prefix)" >&2; bad=$((bad + 1)) ;;
        esac
    done
    echo "$lib: $n global symbols, $bad not the public API"
    if [ "$n" -lt 50 ] || ! echo "$names" | grep -qx vka_context_create; then
        echo "$lib: too few symbols ($n), vka_context_create missing?" >&2
        bad=$((bad + 1))
    fi
    [ $bad -eq 0 ] || status=1
done
exit $status
