#!/usr/bin/env bash
# Serving numbers through the real Engine (issue 6): `frost bench engine` on synthetic models: cold
# start (process start -> ready, by phase), cold TTFT, decode ms/token at 1k and 32k context, peak
# GPU memory, each beside its floor (the ops' cost model; for MoE the ACTIVE experts only). Writes
# $OUT/engine_bench_<preset>.json ("frost_results", read by bench/python/report.py). Expects build-gpu.
#   scripts/gpu/bench_engine.sh [PRESET...]   presets to bench (default: 0.8b 9b)
#   FROST_BENCH_MOE=1                         also bench 35b-a3b (Qwen3.5-35B-A3B shape, 256 experts
#                                             top-8): TTFT 1k..16k, decode 1k/32k. Its bf16
#                                             checkpoint is ~70 GB, more than the GPU machine's 64 GiB
#                                             disk: give FROST_SYNTH_DIR=/dev/shm after
#                                             `mount -o remount,size=100G /dev/shm` (128 GiB RAM).
#                                             FROST_MOE_QUANT=fp8 writes Qwen's FP8 layout instead
#                                             (~36 GB; MoE layers dequantized to bf16 at load).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
FROST=${FROST_GPU_BUILD_DIR:-build-gpu}/tools/frost/frost
SYNTH_DIR=${FROST_SYNTH_DIR:-/tmp}
presets=("$@")
[ ${#presets[@]} -gt 0 ] || presets=(0.8b 9b)
if [ "${FROST_BENCH_MOE:-0}" = 1 ]; then
  case " ${presets[*]} " in *" 35b-a3b "*) ;; *) presets+=(35b-a3b) ;; esac
fi
for preset in "${presets[@]}"; do
  dir=$SYNTH_DIR/frost-synth-$preset
  ttft=64,1024,4096,16384,32768
  limit=300
  chunk=0  # the engine's own choice (auto_prefill_chunk), as serve and generate take it
  case "$preset" in
    # 35B weights: TTFT 1k..16k, at the engine's 8192-row chunks for bf16 MoE (the grouped expert
    # GEMMs see more rows per expert: 16k TTFT 471 / 352 / 329 ms at 2048 / 4096 / 8192, H100
    # 2026-11-24; 151.2 / 137.7 ms at 4096 / 8192 on the first 20 layers, H200 2026-11-30).
    35b-a3b) ttft=1024,2048,4096,8192,16384; limit=600 ;;
  esac
  quant=()
  if [ "$preset" = 35b-a3b ] && [ -n "${FROST_MOE_QUANT:-}" ]; then
    quant=(--quant "$FROST_MOE_QUANT"); dir=$dir-$FROST_MOE_QUANT
  fi
  if [ ! -f "$dir/config.json" ]; then
    "$FROST" synth --out "$dir" --preset "$preset" "${quant[@]}" >"$OUT/engine_bench_${preset}_synth.log" 2>&1 \
      || { echo "engine bench $preset: synth failed (see $OUT/engine_bench_${preset}_synth.log)"; continue; }
  fi
  # The table goes to the log (stderr with --json), the JSON to its own file.
  timeout "$limit" "$FROST" bench engine --model "$dir" --backend cuda --ttft "$ttft" \
    --decode 1024,32768 --decode-steps 64 --chunk "$chunk" --reps 3 --json \
    >"$OUT/engine_bench_$preset.json" 2>"$OUT/engine_bench_$preset.log"
  echo "engine bench $preset: rc=$?"; tail -12 "$OUT/engine_bench_$preset.log"
done
