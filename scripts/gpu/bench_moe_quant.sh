#!/usr/bin/env bash
# Quantized MoE experts on the CUDA engine (issues 14 + 15): the 35B-A3B shape cut to its first
# MOE_LAYERS layers (synth --layers: every per-layer kernel at the released shapes, without writing
# 35-70 GB), as bf16 and with --quant fp8 / int4 / nvfp4, each through `frost bench engine`
# (decode ms/token @1k beside the active-bytes floor of the cost model, which counts a quantized
# expert's packed bytes + scales; cold TTFT 1k / 4k, whose prefill dequantizes every expert of a
# layer into a bf16 tile; peak memory) in the same run. Writes $OUT/moe_quant_<format>.json and
# a table, then `bench_quant_gemv --moe` (the routed-expert GEMVs alone). Expects build-gpu (or
# FROST_GPU_BUILD_DIR). MOE_QUANT_FORMATS limits the rows; the
# fp8-unfolded row runs the fp8 checkpoint with FROST_MOE_SHARED_FOLD=0 (the shared expert's own
# decode launches instead of entries of the routed ones), the A/B of the fold, and fp8-nomix with
# FROST_MOE_DOWN_MIX=0 (the down GEMV and the combine as two launches), the A/B of the mix launch;
# fp8-w8a8 runs it with --fp8-prefill w8a8 (the experts' grouped GEMMs on FP8 tensor cores).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
FROST=${FROST_GPU_BUILD_DIR:-build-gpu}/tools/frost/frost
LAYERS=${MOE_LAYERS:-8}
rc=0
printf '%-9s %11s %14s %10s %7s %11s %11s %12s\n' format weights_GB decode_ms/tok floor_ms ratio ttft1k_ms ttft4k_ms \
  peak_GB >"$OUT/moe_quant_table.txt"
for row in ${MOE_QUANT_FORMATS:-bf16 fp8 fp8-w8a8 fp8-nomix fp8-unfolded int4 nvfp4}; do
  fmt=${row%-*}
  fold=1; [ "$row" = "$fmt-unfolded" ] && fold=0
  mix=1; [ "$row" = "$fmt-nomix" ] && mix=0
  w8a8=(); [ "$row" = "$fmt-w8a8" ] && w8a8=(--fp8-prefill w8a8)
  dir=/tmp/frost-synth-35b-a3b-l$LAYERS-$fmt
  quant=(); [ "$fmt" = bf16 ] || quant=(--quant "$fmt")
  [ -f "$dir/config.json" ] || timeout 600 "$FROST" synth --out "$dir" --preset 35b-a3b --layers "$LAYERS" "${quant[@]}" \
    >"$OUT/moe_quant_synth_$fmt.log" 2>&1 \
    || { echo "synth 35b-a3b --layers $LAYERS $fmt failed"; tail -5 "$OUT/moe_quant_synth_$fmt.log"; rc=1; continue; }
  FROST_MOE_SHARED_FOLD=$fold FROST_MOE_DOWN_MIX=$mix timeout 300 "$FROST" bench engine --model "$dir" --backend cuda --ttft 1024,4096 --decode 1024 \
    --decode-steps 64 --chunk 4096 --reps 3 "${w8a8[@]}" --json >"$OUT/moe_quant_$row.json" 2>"$OUT/moe_quant_$row.log"
  r=$?; [ $r -eq 0 ] || rc=$r
  echo "moe quant bench $row: rc=$r"; tail -8 "$OUT/moe_quant_$row.log"
  python3 bench/python/engine_row.py "$OUT/moe_quant_$row.json" "$row" --ttft 1024,4096 --peak \
    >>"$OUT/moe_quant_table.txt" || true
  # the fp8 checkpoint stays for its fp8-nomix / fp8-unfolded rows
  [ "$fmt" = fp8 ] || rm -rf "$dir"
done
rm -rf "/tmp/frost-synth-35b-a3b-l$LAYERS-fp8"
echo "== 35B-A3B shape, first $LAYERS layers: quantized experts vs bf16 (decode @1k vs the active-bytes floor)"
cat "$OUT/moe_quant_table.txt"
# The routed-expert GEMVs alone (8 routed + the folded shared expert, fresh experts every launch).
echo "== bench_quant_gemv --moe"
"${FROST_GPU_BUILD_DIR:-build-gpu}/bench/bench_quant_gemv" 25 --moe >"$OUT/bench_quant_gemv_moe.log" 2>&1 || rc=1
cat "$OUT/bench_quant_gemv_moe.log"
exit $rc
