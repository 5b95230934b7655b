#!/usr/bin/env bash
# Fuzz vkattn's loaders with libFuzzer (clang; ASan + UBSan + LeakSanitizer): see README.md,
# "Fuzzing and sanitizers".
#   tools/fuzz.sh [SECONDS] [TARGET...]  build build-fuzz (-DVKATTN_FUZZ=ON) and run each target
#                                        (default: all of tests/fuzz/fuzz_*.c) for SECONDS
#                                        (default 30), one process at a time; prints the runs
#                                        per target and exits 1 if any found a crash
#   tools/fuzz.sh seeds                  regenerate the binary seeds in tests/fuzz/corpus with
#                                        the vkattn command line (a small model, its state,
#                                        tokenizers of both kinds, token files)
# A target's corpus grows in build-fuzz/corpus/TARGET (seeded from tests/fuzz/corpus/TARGET);
# crashing inputs are written to build-fuzz/crashes/TARGET-*. Reproduce one with
#   build-fuzz/tests/fuzz/fuzz_TARGET build-fuzz/crashes/TARGET-crash-...
# Environment: FUZZ_BUILD (default build-fuzz), CC (default clang), FUZZ_FLAGS (extra libFuzzer
# flags), JOBS (build parallelism, default 2).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${FUZZ_BUILD:-build-fuzz}
seeds=tests/fuzz/corpus

configure() {
  if [ ! -f "$build/CMakeCache.txt" ]; then
    CC=${CC:-clang} cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVKATTN_FUZZ=ON \
      -DVKATTN_TESTS=OFF -DVKATTN_OPENMP=OFF >/dev/null
  fi
  cmake --build "$build" -j"${JOBS:-2}" >/dev/null
}

make_seeds() {
  configure
  local cli="$build/vkattn" tmp
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  mkdir -p "$seeds"/{model,state,tokenizer,token_file}
  # The smallest model the format allows in practice: 1 layer, 1 head, C = 2, context 8.
  local shape=(--backend cpu --layers 1 --heads 1 --embd 2 --ctx 8 --batch 2 --steps 2
               --eval-every 0 --quiet)
  "$cli" train "${shape[@]}" --data "$seeds/text/story.txt" --out "$tmp/char.bin" >/dev/null
  "$cli" train "${shape[@]}" --data "$seeds/text/story.txt" --vocab-size 264 \
    --out "$tmp/bpe.bin" >/dev/null
  for kind in char bpe; do
    cp "$tmp/$kind.bin" "$seeds/model/$kind.bin"
    cp "$tmp/$kind.state.bin" "$seeds/state/$kind.state.bin"
    cp "$tmp/$kind.tokenizer.bin" "$seeds/tokenizer/$kind.tokenizer.bin"
    "$cli" tokenize --tokenizer "$tmp/$kind.tokenizer.bin" --data "$seeds/text/story.txt" \
      --out "$seeds/token_file/$kind.tokens.bin" >/dev/null
  done
  ls -l "$seeds"/*/
}

run_targets() {
  local seconds=$1
  shift
  configure
  local targets=("$@")
  if [ ${#targets[@]} -eq 0 ]; then
    for f in tests/fuzz/fuzz_*.c; do targets+=("$(basename "$f" .c | sed 's/^fuzz_//')"); done
  fi
  mkdir -p "$build/crashes"
  local failed=0 total=0
  for t in "${targets[@]}"; do
    local corpus="$build/corpus/$t" log="$build/fuzz-$t.log"
    mkdir -p "$corpus"
    # -rss_limit_mb / -malloc_limit_mb: a header that claims gigabytes must be refused before
    # anything that size is allocated (the context's memory ceiling is 256 MiB).
    set +e
    "$build/tests/fuzz/fuzz_$t" -max_total_time="$seconds" -rss_limit_mb=2048 \
      -malloc_limit_mb=512 -timeout=20 -max_len=16384 -print_final_stats=1 \
      -artifact_prefix="$build/crashes/$t-" ${FUZZ_FLAGS:-} "$corpus" "$seeds/$t" >"$log" 2>&1
    local rc=$?
    set -e
    local runs
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    runs=${runs:-0}
    total=$((total + runs))
    if [ $rc -ne 0 ]; then
      failed=1
      echo "fuzz_$t: FAILED after $runs runs (exit $rc); see $log:" >&2
      grep -E "ERROR|SUMMARY|fuzz: |Test unit written" "$log" | head -20 >&2 || true
    else
      echo "fuzz_$t: $runs runs in ${seconds} s, no crash ($(ls "$corpus" | wc -l) inputs in $corpus)"
    fi
  done
  echo "fuzz: $total runs in all"
  return $failed
}

case "${1:-}" in
  seeds) make_seeds ;;
  ''|[0-9]*) seconds=${1:-30}; shift || true; run_targets "$seconds" "$@" ;;
  *) echo "usage: tools/fuzz.sh [SECONDS] [TARGET...] | tools/fuzz.sh seeds" >&2; exit 2 ;;
esac
