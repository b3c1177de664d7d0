#!/usr/bin/env bash
# Capsule TTFT on the GPU (issues 5 and 6): cold versus capsule TTFT (device, host, disk tiers) with a
# 64-token suffix across 2k..32k prefixes of the 9B-style and 0.8B-style synthetic models, restore GB/s
# against the copy ceilings measured in the same run; then the engine's own prefill chunk with the default
# numerics and with --chunk-invariant, prefixes off the chunk grid, where the "logits" column says whether
# restore + append equals the cold prefill bit for bit. Expects build-gpu from run_all.sh.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
FROST=${FROST_GPU_BUILD_DIR:-build-gpu}/tools/frost/frost
for preset in 0.8b 9b; do
  dir=/tmp/frost-synth-$preset
  [ -f "$dir/config.json" ] || "$FROST" synth --out "$dir" --preset "$preset" >/dev/null 2>&1
  timeout 240 "$FROST" bench capsule --model "$dir" --backend cuda --lengths 2048,8192,32768 --suffix 64 \
    --reps 3 --out-dir "$OUT/capsule_$preset" --json >"$OUT/capsule_bench_$preset.json" 2>"$OUT/capsule_bench_$preset.log"
  echo "capsule bench $preset: rc=$?"; tail -15 "$OUT/capsule_bench_$preset.log"
  for inv in "" --chunk-invariant; do
    timeout 240 "$FROST" bench capsule --model "$dir" --backend cuda --lengths 4032,16320,30720 --suffix 64 \
      --chunk 0 --reps 3 --out-dir "$OUT/capsule_${preset}_auto$inv" $inv >"$OUT/capsule_bench_${preset}_auto$inv.log" 2>&1
    echo "capsule bench $preset, the engine's chunk ${inv:-(default numerics)}: rc=$?"; tail -5 "$OUT/capsule_bench_${preset}_auto$inv.log"
  done
done
