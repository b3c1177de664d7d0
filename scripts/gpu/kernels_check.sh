#!/usr/bin/env bash
# CUDA kernel parity and per-kernel benchmark on the GPU machine: configures a CUDA build in
# build-gpu (reused if present), builds the kernels_test_cuda_* tests and bench_cuda_kernels,
# runs the CUDA kernel tests (fp64 references, poisoned outputs, determinism), then the bench
# (ceilings + one 1024-token prefill chunk + decode steps at 1k and 32k), table printed last.
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
# The GPU image may lack GoogleTest / nlohmann_json: use a carried copy (build-deps/usr) if so.
if [[ ! -f /usr/include/gtest/gtest.h || ! -d /usr/include/nlohmann ]] && [[ -d build-deps/usr ]]; then
  CONFIG+=(-DCMAKE_PREFIX_PATH="$PWD/build-deps/usr")
fi
if [[ ! -f "$BUILD/CMakeCache.txt" ]] && command -v ninja >/dev/null 2>&1; then CONFIG+=(-G Ninja); fi
t0=$(date +%s)
cmake -S . -B "$BUILD" "${CONFIG[@]}" >"$OUT/kernels_configure.log" 2>&1 || { tail -30 "$OUT/kernels_configure.log"; exit 1; }
mapfile -t TARGETS < <(cmake --build "$BUILD" --target help | grep -o 'kernels_test_cuda_[A-Za-z0-9_]*' | sort -u)
cmake --build "$BUILD" -j "$JOBS" --target "${TARGETS[@]}" bench_cuda_kernels >"$OUT/kernels_build.log" 2>&1 ||
  { grep -E "error|Error" "$OUT/kernels_build.log" | head -40; exit 1; }
echo "kernels_check: built ${#TARGETS[@]} test programs + bench in $(( $(date +%s) - t0 )) s"

# gtest names of the CUDA kernel tests all start with "Cuda" and carry the label "kernels".
ctest --test-dir "$BUILD" -L '^kernels$' -R '^Cuda' --output-on-failure --timeout 300 >"$OUT/kernels_ctest.log" 2>&1
rc=$?
grep -E "\[.*\] seed|Failure|Expected|Which is|rel_l2|Failed|Passed|tests passed|tests failed" "$OUT/kernels_ctest.log" | grep -v "^\[" | tail -60

"$BUILD/bench/bench_cuda_kernels" "$OUT/bench_cuda_kernels.json" 1024 1024 32768 >"$OUT/bench_cuda_kernels.log" 2>&1
brc=$?
echo "== ctest (rc=$rc): $(grep -E 'tests passed' "$OUT/kernels_ctest.log")"
echo "== bench (rc=$brc)"
sed -n '/^\[.*\] ceilings/,$p' "$OUT/bench_cuda_kernels.log"
[[ $brc -eq 0 ]] || tail -20 "$OUT/bench_cuda_kernels.log"
exit $(( rc != 0 || brc != 0 ))
