#!/usr/bin/env bash
# Quantized weights on the CUDA engine (issue 15): the 9B-style synthetic model as bf16 and with
# --quant fp8 / nvfp4 / int4, each through `frost bench engine` (decode ms/token @1k, cold TTFT
# 1k / 4k / 16k) in the same run, beside the floor from the cost model (a quantized GEMV's bytes =
# packed weights + scales, so the decode floor shrinks with the format), then bench_quant_gemv
# (the kernels alone on the 9B shapes; with --dequant, the prefill's dequantization). Prefill dequantizes each quantized weight into a bf16 tile
# before the bf16 GEMM, so TTFT is expected at or slightly above bf16; the fp8-w8a8 row runs the
# same fp8 checkpoint with --fp8-prefill w8a8 (activations quantized per 128-group, cuBLASLt
# block-scaled FP8 GEMM) and --fp8-decode w8a8 (the decode GEMVs quantize x the same way and run
# FP8 mma): the checkpoint's declared W8A8 scheme end to end; fp8-w8a8p is the same with prefill
# only (decode W8A16, what fp8-w8a8 meant before the W8A8 GEMV); fp8-dynamic-w8a8 is the
# per-channel FP8 checkpoint (compressed-tensors FP8-dynamic) with --fp8-prefill w8a8, and
# int4-w8a8 the INT4 one with it (W4A8: its values converted to e4m3 per chunk; INT4 decode is
# unchanged). Each quantized row also runs
# `frost bench accuracy` against the bf16 model (the same weights before quantization). Writes
# $OUT/quant_bench_<variant>.json ("frost_results"). Expects build-gpu (or FROST_GPU_BUILD_DIR).
# QUANT_VARIANTS limits the rows (default: all).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
BUILD=${FROST_GPU_BUILD_DIR:-build-gpu}
FROST=$BUILD/tools/frost/frost
rc=0
printf '%-9s %11s %14s %10s %7s %11s %11s %11s\n' format weights_GB decode_ms/tok floor_ms ratio ttft1k_ms \
  ttft4k_ms ttft16k_ms >"$OUT/quant_bench_table.txt"
# fp8-fused: the same fp8 checkpoint with the GDN in_proj bound as one fused matrix, which a
# checkpoint leaving in_proj_a / in_proj_b in bf16 (as the published ones and synth do) then
# dequantizes to bf16: what such checkpoints ran before the split (FROST_GDN_IN_PROJ_SPLIT=0).
for variant in ${QUANT_VARIANTS:-bf16 fp8 fp8-fused fp8-w8a8 fp8-dynamic-w8a8 nvfp4 int4 int4-w8a8}; do
  fmt=${variant%-w8a8}; fmt=${fmt%-w8a8p}; fmt=${fmt%-fused}
  extra=""
  case "$variant" in *-w8a8) extra="--fp8-prefill w8a8 --fp8-decode w8a8" ;; esac
  [ "$variant" = fp8-w8a8p ] && extra="--fp8-prefill w8a8"
  split=""; [ "$variant" = fp8-fused ] && split="FROST_GDN_IN_PROJ_SPLIT=0"
  if [ "$fmt" = bf16 ]; then
    dir=/tmp/frost-synth-9b  # shared with bench_engine.sh / bench_kernels.sh
    [ -f "$dir/config.json" ] || "$FROST" synth --out "$dir" --preset 9b >/dev/null 2>&1
  else
    dir=/tmp/frost-synth-9b-$fmt
    [ -f "$dir/config.json" ] || timeout 900 "$FROST" synth --out "$dir" --preset 9b --quant "$fmt" \
      >"$OUT/quant_synth_$fmt.log" 2>&1 || { echo "synth 9b --quant $fmt failed"; tail -5 "$OUT/quant_synth_$fmt.log"; rc=1; continue; }
  fi
  # shellcheck disable=SC2086
  env $split timeout 420 "$FROST" bench engine --model "$dir" --backend cuda --ttft 1024,4096,16384 --decode 1024 \
    --decode-steps 64 --chunk 0 --reps 3 --json $extra >"$OUT/quant_bench_$variant.json" 2>"$OUT/quant_bench_$variant.log"
  r=$?; [ $r -eq 0 ] || rc=$r
  echo "quant bench $variant: rc=$r"; tail -8 "$OUT/quant_bench_$variant.log"
  python3 bench/python/engine_row.py "$OUT/quant_bench_$variant.json" "$variant" --ttft 1024,4096,16384 \
    >>"$OUT/quant_bench_table.txt" || true
  # Accuracy against the bf16 model of the same weights (`frost bench accuracy`: relative logit
  # error and greedy agreement over a 512-token prompt and 256 teacher-forced decode steps).
  if [ "$fmt" != bf16 ] && [ "$variant" != fp8-fused ]; then
    ref=/tmp/frost-synth-9b
    [ -f "$ref/config.json" ] || "$FROST" synth --out "$ref" --preset 9b >/dev/null 2>&1
    # shellcheck disable=SC2086
    timeout 300 "$FROST" bench accuracy --model "$dir" --reference "$ref" --backend cuda --prompt-len 512 \
      --gen 256 $extra >"$OUT/quant_accuracy_$variant.log" 2>&1 || { echo "accuracy $variant failed"; rc=1; }
    { echo "$variant:"; tail -3 "$OUT/quant_accuracy_$variant.log"; } >>"$OUT/quant_accuracy.txt"
  fi
  # ~5-9 GB each; the disk holds the bf16 model for the other benches (fp8 stays for fp8-w8a8,
  # int4 for int4-w8a8)
  [ "$fmt" = bf16 ] || [ "$fmt" = fp8 ] || [ "$fmt" = int4 ] || rm -rf "$dir"
done
echo "== quantized engine vs bf16 (decode @1k: ms/token vs the quantized-bytes floor)"
cat "$OUT/quant_bench_table.txt"
echo "== accuracy against the bf16 model (frost bench accuracy)"
cat "$OUT/quant_accuracy.txt" 2>/dev/null
# The paper's deployment: a 27B-style model as NVFP4 weights at 32k context, peak GPU memory
# against the 32 GB card it targets (issue 15: <= 26 GB). QUANT_27B=0 skips it.
if [ "${QUANT_27B:-1}" = 1 ]; then
  dir=/tmp/frost-synth-27b-nvfp4
  if [ -f "$dir/config.json" ] || timeout 900 "$FROST" synth --out "$dir" --preset 27b --quant nvfp4 \
       >"$OUT/quant_synth_27b.log" 2>&1; then
    timeout 420 "$FROST" bench engine --model "$dir" --backend cuda --ttft 32768 --decode 1024,32768 \
      --decode-steps 32 --reps 1 --json >"$OUT/quant_bench_27b_nvfp4.json" 2>"$OUT/quant_bench_27b_nvfp4.log"
    r=$?; [ $r -eq 0 ] || rc=$r
    echo "== 27B-style NVFP4 @32k (rc=$r)"; grep -iE "peak|ttft|decode|weights" "$OUT/quant_bench_27b_nvfp4.log" | head -12
    rm -rf "$dir"
  else
    echo "synth 27b --quant nvfp4 failed"; tail -5 "$OUT/quant_synth_27b.log"; rc=1
  fi
fi
echo "== bench_quant_gemv"
"$BUILD/bench/bench_quant_gemv" 25 >"$OUT/bench_quant_gemv.log" 2>&1 || rc=1
cat "$OUT/bench_quant_gemv.log"
# The prefill's dequantization to the bf16 tile alone (row-major and 8-row blocks) against its bytes.
echo "== bench_quant_gemv --dequant"
"$BUILD/bench/bench_quant_gemv" 25 --dequant >"$OUT/bench_quant_dequant.log" 2>&1 || rc=1
cat "$OUT/bench_quant_dequant.log"
exit $rc
