#!/usr/bin/env bash
# Serving numbers through the real Engine (issue 6): `frost bench engine` on the 0.8B-style and
# 9B-style synthetic models: cold start (process start -> ready, by phase), cold TTFT at 1k/4k/16k/32k,
# decode ms/token at 1k and 32k context, peak GPU memory, each beside its floor. Writes
# $OUT/engine_bench_<preset>.json ("frost_results", read by bench/python/report.py). Expects build-gpu.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
FROST=${FROST_GPU_BUILD_DIR:-build-gpu}/tools/frost/frost
for preset in 0.8b 9b; do
  dir=/tmp/frost-synth-$preset
  [ -f "$dir/config.json" ] || "$FROST" synth --out "$dir" --preset "$preset" >/dev/null 2>&1
  # The table goes to the log (stderr with --json), the JSON to its own file.
  timeout 300 "$FROST" bench engine --model "$dir" --backend cuda --ttft 64,1024,4096,16384,32768 \
    --decode 1024,32768 --decode-steps 64 --chunk 2048 --reps 3 --json \
    >"$OUT/engine_bench_$preset.json" 2>"$OUT/engine_bench_$preset.log"
  echo "engine bench $preset: rc=$?"; tail -12 "$OUT/engine_bench_$preset.log"
done
