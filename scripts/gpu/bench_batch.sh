#!/usr/bin/env bash
# Several streams at once (issue 16), on synthetic models with the real Qwen3 tokenizer:
#  - `frost bench batch`: per-stream ms/token and aggregate tokens/s at B = 1, 2, 4, 8 through the
#    engine (one batched decode step per round), the bytes floor of a batched step, and the
#    inter-token latency of 3 streams while a 16k-token prompt is admitted in 512-token steps (the
#    server's SchedulerConfig::prefill_step), sliced per layer within 0.6 of the decode step (the
#    server's prefill_share) and, for comparison, whole (512 and the former 128);
#  - bench/python/stream_bench.py: the same through the HTTP API of `frost serve` (concurrent
#    streaming clients; every stream's greedy text checked against its solo run).
# Logs and JSON go to $OUT. Expects build-gpu.
#   scripts/gpu/bench_batch.sh [PRESET...]   (default: 0.8b 9b)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
FROST=${FROST_GPU_BUILD_DIR:-build-gpu}/tools/frost/frost
SYNTH_DIR=${FROST_SYNTH_DIR:-/tmp}
presets=("$@")
[ ${#presets[@]} -gt 0 ] || presets=(0.8b 9b)
for preset in "${presets[@]}"; do
  dir=$SYNTH_DIR/frost-synth-$preset-tok
  if [ ! -f "$dir/config.json" ]; then
    "$FROST" synth --out "$dir" --preset "$preset" --tokenizer tests/fixtures/tokenizer-qwen3 \
      >"$OUT/batch_bench_${preset}_synth.log" 2>&1 || { echo "batch bench $preset: synth failed"; continue; }
  fi
  timeout 300 "$FROST" bench batch --backend cuda --model "$dir" --sizes 1,2,4,8 --context 1024 --steps 32 \
    --admit 16384 --admit-step 512 >"$OUT/batch_bench_$preset.log" 2>&1
  echo "batch bench $preset (engine): rc=$?"; tail -12 "$OUT/batch_bench_$preset.log"
  # The same admission without slicing, for comparison: whole 512-token steps between two of the
  # streams' steps, and whole 128-token steps (the server before sliced prefill).
  for step in 512 128; do
    timeout 200 "$FROST" bench batch --backend cuda --model "$dir" --sizes 1 --context 1024 --steps 32 \
      --admit 16384 --admit-step $step --admit-share 0 >"$OUT/batch_bench_${preset}_whole$step.log" 2>&1
    echo "batch bench $preset (engine, whole $step-token steps): rc=$?"; tail -1 "$OUT/batch_bench_${preset}_whole$step.log"
  done
  timeout 400 python3 bench/python/stream_bench.py --frost "$FROST" --model "$dir" --server-args="--backend cuda" \
    --sizes 1,2,4,8 --context 1024 --tokens 128 --admit 16384 --admit-tokens 768 \
    --out-json "$OUT/stream_bench_$preset.json" >"$OUT/stream_bench_$preset.log" 2>&1
  echo "batch bench $preset (HTTP): rc=$?"; tail -8 "$OUT/stream_bench_$preset.log"
done
