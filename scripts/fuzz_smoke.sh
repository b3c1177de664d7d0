#!/usr/bin/env bash
# Builds every libFuzzer target in fuzz/ with clang (ASan+UBSan) and runs each for a short time on
# its checked-in seed corpus (fuzz/corpus/<name without fuzz_>/). Usage:
#   scripts/fuzz_smoke.sh [SECONDS_PER_TARGET=30] [BUILD_DIR=build-fuzz]
# (8 targets: the default keeps a CI run near 4 minutes of fuzzing.)
# Exit status is non-zero if any target crashes; crash inputs are left in BUILD_DIR/fuzz-artifacts.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
secs="${1:-30}"
build="${2:-$root/build-fuzz}"
cmake -S "$root" -B "$build" -G Ninja -DFROST_FUZZ=ON -DFROST_TESTS=OFF -DFROST_BENCH=OFF -DFROST_CUDA=OFF \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
targets=()
for src in "$root"/fuzz/fuzz_*.cpp; do targets+=("$(basename "$src" .cpp)"); done
ninja -C "$build" "${targets[@]}"
mkdir -p "$build/fuzz-artifacts"
status=0
for t in "${targets[@]}"; do
  corpus="$root/fuzz/corpus/${t#fuzz_}"
  work="$build/fuzz-corpus/${t#fuzz_}"   # new inputs go here, the checked-in corpus stays read-only
  mkdir -p "$work"
  echo "== $t: ${secs}s on $corpus"
  # libFuzzer's progress lines go to a log; the summary (runs, coverage) and any crash are printed.
  log="$build/fuzz-artifacts/$t.log"
  if ! "$build/fuzz/$t" -max_total_time="$secs" -max_len=65536 -rss_limit_mb=2048 -timeout=10 \
       -artifact_prefix="$build/fuzz-artifacts/$t-" "$work" "$corpus" >"$log" 2>&1; then
    tail -40 "$log"
    echo "!! $t failed"
    status=1
  else
    grep -E "^Done|stat::number_of_executed_units" "$log" | tail -2
    tail -1 "$log"
  fi
done
exit $status
