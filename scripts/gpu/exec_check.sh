#!/usr/bin/env bash
# Runs the execution-contract tests on a GPU machine: configures a CUDA build in build-gpu
# (reused if present), builds frost_exec and every exec test, and runs them. The contract tests
# are parameterised over the available backends, so on a GPU they cover cpu and cuda; the
# cuda-only tests are in tests/exec/test_cuda_specific.cpp. Log in $OUT (./gpu-out elsewhere).
# Usage: scripts/gpu/exec_check.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
BUILD=${FROST_GPU_BUILD_DIR:-build-gpu}
JOBS=${JOBS:-16}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true

CONFIG=(-DFROST_CUDA=ON -DCMAKE_BUILD_TYPE=Release
  # CMake 3.25 does not know nvcc's C++20 flag; naming it is harmless on newer CMake.
  -DCMAKE_CUDA20_STANDARD_COMPILE_OPTION=-std=c++20 -DCMAKE_CUDA20_EXTENSION_COMPILE_OPTION=-std=c++20)
# The GPU image may lack GoogleTest / nlohmann_json: use a carried copy (build-deps/usr) if so.
if [[ ! -f /usr/include/gtest/gtest.h || ! -d /usr/include/nlohmann ]] && [[ -d build-deps/usr ]]; then
  CONFIG+=(-DCMAKE_PREFIX_PATH="$PWD/build-deps/usr")
fi
if [[ ! -f "$BUILD/CMakeCache.txt" ]] && command -v ninja >/dev/null 2>&1; then CONFIG+=(-G Ninja); fi
cmake -S . -B "$BUILD" "${CONFIG[@]}" >"$OUT/exec_configure.log" 2>&1 ||
  { tail -30 "$OUT/exec_configure.log"; exit 1; }
grep -q 'frost: CUDA backend ON' "$OUT/exec_configure.log" ||
  { echo "exec_check: the configure did not enable CUDA" >&2; exit 1; }

# Every exec test executable, found in the build system so new test files need no edit here.
mapfile -t TARGETS < <(cmake --build "$BUILD" --target help 2>/dev/null | grep -o 'exec_test_[A-Za-z0-9_]*' | sort -u)
[[ ${#TARGETS[@]} -gt 0 ]] || { echo "exec_check: no exec_test_* targets found" >&2; exit 1; }
cmake --build "$BUILD" -j "$JOBS" --target frost_exec "${TARGETS[@]}" >"$OUT/exec_build.log" 2>&1 ||
  { grep -E "error|Error" "$OUT/exec_build.log" | head -40; exit 1; }

# The exec tests carry the ctest label "exec"; their names start with the executable's name.
ctest --test-dir "$BUILD" -L '^exec$' --output-on-failure --timeout 120 >"$OUT/exec_ctest.log" 2>&1
rc=$?
grep -E "\*\*\*Failed|Timeout|Exception" "$OUT/exec_ctest.log" | head -40
grep -E "tests passed" "$OUT/exec_ctest.log"
echo "exec_check: cuda cases passed $(grep -c '/cuda .*Passed' "$OUT/exec_ctest.log")," \
     "failed $(grep -c '/cuda .*\*\*\*Failed' "$OUT/exec_ctest.log")," \
     "skipped $(grep -c '/cuda .*\*\*\*Skipped' "$OUT/exec_ctest.log") (rc=$rc)"
exit "$rc"
