#!/usr/bin/env bash
# Per-op table of the 9B-style engine (bench/bench_cuda_kernels.cpp: the engine's own recorded ops,
# each timed alone), with the copy and GEMM ceilings measured in the same run. Whole-step times are
# `frost bench engine`'s (bench_engine.sh). Then the kernel sweeps of bench_cuda_kernels (--attn,
# --attn-splits, --conv, --gemm, --swiglu, --gemm-sustained, --fp8, --launch-chain: what one launch per op
# and per matrix can reach in a decode graph) and the MoE prefill's tile shapes
# (bench_moe_prefill). Expects build-gpu from run_all.sh.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
BUILD=${FROST_GPU_BUILD_DIR:-build-gpu}
dir=/tmp/frost-synth-9b  # shared with bench_engine.sh
[ -f "$dir/config.json" ] || "$BUILD/tools/frost/frost" synth --out "$dir" --preset 9b >/dev/null 2>&1
"$BUILD/bench/bench_cuda_kernels" "$OUT/bench_cuda_kernels.json" "$dir" 2048 1024 32768 \
  >"$OUT/bench_cuda_kernels.log" 2>&1
rc=$?
sed -n '/ceilings/,$p' "$OUT/bench_cuda_kernels.log" | tail -60
# The kernels alone, same run: attention prefill per Hopper variant, the GDN conv1d, the 9B (and
# 0.8B) prefill GEMMs per cuBLASLt heuristic rank (bf16), one of them in bursts and back to back for 3 s (the
# power cap's clock; nvidia-smi samples beside it) and FP8 W8A8 against bf16.
"$BUILD/bench/bench_cuda_kernels" --attn "$OUT/bench_attention.json" >"$OUT/bench_attention.log" 2>&1 || rc=1
"$BUILD/bench/bench_cuda_kernels" --attn-splits >"$OUT/bench_attention_splits.log" 2>&1 || rc=1
"$BUILD/bench/bench_cuda_kernels" --conv >"$OUT/bench_conv.log" 2>&1 || rc=1
"$BUILD/bench/bench_cuda_kernels" --gemm 2048 >"$OUT/bench_gemm.log" 2>&1 || rc=1
# The 0.8B's shapes at its 1k prompt (rank 0 is the engine's; see the README's 2026-11-30 section).
"$BUILD/bench/bench_cuda_kernels" --gemm 1024 0.8b >>"$OUT/bench_gemm.log" 2>&1 || rc=1
# gate|up + SwiGLU: cuBLASLt and the SwiGLU kernel against the fused GEMM (lm_gemm_swiglu.cu).
for a in "1024 0.8b" "4096 0.8b" "1024 9b" "4096 9b"; do
  "$BUILD/bench/bench_cuda_kernels" --swiglu $a >>"$OUT/bench_gemm.log" 2>&1 || rc=1
done
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,clocks_event_reasons.active --format=csv -lms 200 \
  >"$OUT/bench_gemm_sustained_smi.csv" 2>/dev/null &
smi=$!
"$BUILD/bench/bench_cuda_kernels" --gemm-sustained 2048 3 >"$OUT/bench_gemm_sustained.log" 2>&1 || rc=1
kill $smi 2>/dev/null
"$BUILD/bench/bench_cuda_kernels" --fp8 >"$OUT/bench_fp8.log" 2>&1 || rc=1
"$BUILD/bench/bench_cuda_kernels" --launch-chain >"$OUT/bench_launch_chain.log" 2>&1 || rc=1
# The MoE prefill's grouped GEMMs per tile shape (the launcher's pick: 5 on Hopper; lm_moe_prefill.cu).
"$BUILD/bench/bench_moe_prefill" --shape 35b --rows 1024,4096,8192 --tiles 1,5,7 >"$OUT/bench_moe_prefill.log" 2>&1 || rc=1
cat "$OUT/bench_attention_splits.log" "$OUT/bench_conv.log" "$OUT/bench_gemm.log" "$OUT/bench_gemm_sustained.log" \
  "$OUT/bench_fp8.log" "$OUT/bench_launch_chain.log" "$OUT/bench_moe_prefill.log"
grep -E "TF/s" "$OUT/bench_attention.log" | tail -28
exit $rc
