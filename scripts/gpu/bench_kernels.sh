#!/usr/bin/env bash
# Per-kernel table and whole-forward graphs of the 9B-style shapes (bench/bench_cuda_kernels.cpp),
# with the copy and GEMM ceilings measured in the same run. Expects build-gpu from run_all.sh.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
BUILD=${FROST_GPU_BUILD_DIR:-build-gpu}
"$BUILD/bench/bench_cuda_kernels" "$OUT/bench_cuda_kernels.json" 1024,4096,16384 1024 32768 \
  >"$OUT/bench_cuda_kernels.log" 2>&1
rc=$?
sed -n '/ceilings/,$p' "$OUT/bench_cuda_kernels.log" | tail -60
exit $rc
