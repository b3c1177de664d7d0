#!/usr/bin/env bash
# Capsule TTFT on the GPU (issues 5 and 6): cold versus capsule TTFT (device, host, disk tiers) with a
# 64-token suffix across 2k..32k prefixes of the 9B-style and 0.8B-style synthetic models, restore GB/s
# against the copy ceilings measured in the same run. Expects build-gpu from run_all.sh.
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
done
