#!/usr/bin/env bash
# CUDA kernel parity and per-kernel benchmark on the GPU machine: configures a CUDA build in
# build-gpu (reused if present), builds the kernels_test_cuda_* tests and bench_cuda_kernels,
# runs the CUDA kernel tests (fp64 references, poisoned outputs, determinism), then the bench
# (ceilings + 1024- and 4096-token prefill chunks + decode steps at 1k and 32k), table printed last.
# Logs and JSON go to $OUT (./gpu-out elsewhere). Usage: scripts/gpu/kernels_check.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
BUILD=${FROST_GPU_BUILD_DIR:-build-gpu}
JOBS=${JOBS:-16}
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$OUT/gpu.txt"

CONFIG=(-DFROST_CUDA=ON -DCMAKE_BUILD_TYPE=Release
  # CMake 3.25 does not know nvcc's C++20 flag; naming it is harmless on newer CMake.
  -DCMAKE_CUDA20_STANDARD_COMPILE_OPTION=-std=c++20 -DCMAKE_CUDA20_EXTENSION_COMPILE_OPTION=-std=c++20)
if [[ ! -f "$BUILD/CMakeCache.txt" ]] && command -v ninja >/dev/null 2>&1; then CONFIG+=(-G Ninja); fi
t0=$(date +%s)
cmake -S . -B "$BUILD" "${CONFIG[@]}" >"$OUT/kernels_configure.log" 2>&1 || { tail -30 "$OUT/kernels_configure.log"; exit 1; }
mapfile -t TARGETS < <(cmake --build "$BUILD" --target help | grep -o 'kernels_test_cuda_[A-Za-z0-9_]*' | sort -u)
cmake --build "$BUILD" -j "$JOBS" --target "${TARGETS[@]}" bench_cuda_kernels >"$OUT/kernels_build.log" 2>&1 ||
  { grep -E "error|Error" "$OUT/kernels_build.log" | head -40; exit 1; }
echo "kernels_check: built ${#TARGETS[@]} test programs + bench in $(( $(date +%s) - t0 )) s"

# ctest names are <executable>.<suite>.<test>: every CUDA kernel test program is kernels_test_cuda_*.
ctest --test-dir "$BUILD" -R '^kernels_test_cuda' --output-on-failure --timeout 300 >"$OUT/kernels_ctest.log" 2>&1
rc=$?
grep -E "\[.*\] seed|Failure|Expected|Which is|rel_l2|Failed|Passed|tests passed|tests failed" "$OUT/kernels_ctest.log" | grep -v "^\[" | tail -60

"$BUILD/bench/bench_cuda_kernels" "$OUT/bench_cuda_kernels.json" 1024,4096 1024 32768 >"$OUT/bench_cuda_kernels.log" 2>&1
brc=$?

# compute-sanitizer: memcheck over every CUDA kernel test, racecheck / synccheck over the kernels
# that share memory between threads (small cases; each run time-boxed, all of them together
# stop starting after SANITIZE_BUDGET_S seconds of this script so the call stays in its lease).
SANITIZE_BUDGET_S=${SANITIZE_BUDGET_S:-300}
san=()
if command -v compute-sanitizer >/dev/null 2>&1; then
  : >"$OUT/kernels_sanitizer.log"
  for exe in "$BUILD"/tests/kernels/kernels_test_cuda_*; do
    [[ -x "$exe" && ! "$exe" == *.cmake ]] || continue
    (( SECONDS < SANITIZE_BUDGET_S )) || { san+=("memcheck $(basename "$exe"): skipped (budget)"); continue; }
    name=$(basename "$exe")
    r=$(timeout 60 compute-sanitizer --tool memcheck --error-exitcode 3 "$exe" >>"$OUT/kernels_sanitizer.log" 2>&1; echo $?)
    san+=("memcheck $name: rc=$r")
  done
  for spec in "kernels_test_cuda_attention:*PositionZero*:*Decode*" "kernels_test_cuda_gdn:*Recurrent*:*OffGrid*" \
              "kernels_test_cuda_sample:*" "kernels_test_cuda_conv1d:*"; do
    exe=${spec%%:*}; filter=${spec#*:}
    for tool in racecheck synccheck; do
      (( SECONDS < SANITIZE_BUDGET_S )) || { san+=("$tool $exe: skipped (budget)"); continue; }
      r=$(timeout 60 compute-sanitizer --tool $tool --error-exitcode 3 "$BUILD/tests/kernels/$exe" --gtest_filter="$filter" \
          >>"$OUT/kernels_sanitizer.log" 2>&1; echo $?)
      san+=("$tool $exe: rc=$r")
    done
  done
fi
echo "== ctest (rc=$rc): $(grep -E 'tests passed' "$OUT/kernels_ctest.log")"
echo "== compute-sanitizer (rc 0 clean, 3 errors found, 124 time-boxed):"; printf '   %s\n' "${san[@]}"
echo "== bench (rc=$brc)"
sed -n '/^\[.*\] ceilings/,$p' "$OUT/bench_cuda_kernels.log"
[[ $brc -eq 0 ]] || tail -20 "$OUT/bench_cuda_kernels.log"
exit $(( rc != 0 || brc != 0 ))
