#!/usr/bin/env bash
# Coding-agent benchmark on the GPU machine (issue 7): bench/python/agent_bench.py (stdlib only)
# against a real `frost serve --backend cuda`, with and without capsules, over a synthetic
# 0.8b-preset model whose vocab matches the real Qwen3 tokenizer (tests/fixtures). JSON to
# $OUT/agent_bench_gpu.json (the only file it puts in $OUT); the SVG goes to $AGENT_BENCH_SVG.
# Env: AGENT_BENCH_PRESET (0.8b), AGENT_BENCH_BACKEND (cuda), AGENT_BENCH_ARGS (extra bench
# arguments), FROST_BIN. CPU check: AGENT_BENCH_PRESET=tiny AGENT_BENCH_BACKEND=cpu
#   FROST_BIN=build/tools/frost/frost AGENT_BENCH_ARGS="--turns 2 --prefix-words 60" scripts/gpu/bench_agent.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
FROST=${FROST_BIN:-${FROST_GPU_BUILD_DIR:-build-gpu}/tools/frost/frost}
PRESET=${AGENT_BENCH_PRESET:-0.8b}
BACKEND=${AGENT_BENCH_BACKEND:-cuda}
SVG=${AGENT_BENCH_SVG:-/tmp/agent_bench_gpu_$PRESET.svg}
PY=${PYTHON:-python3}
TOK=tests/fixtures/tokenizer-qwen3
[ -f "$TOK/tokenizer.json" ] || { echo "agent bench: no tokenizer fixture at $TOK"; exit 1; }
model=/tmp/frost-agent-synth-$PRESET
if [ ! -f "$model/config.json" ] || [ ! -f "$model/tokenizer.json" ]; then
  "$FROST" synth --out "$model" --preset "$PRESET" --tokenizer "$TOK" || { echo "agent bench: synth failed"; exit 1; }
fi
# shellcheck disable=SC2086  # AGENT_BENCH_ARGS is a list of arguments
timeout 300 "$PY" bench/python/agent_bench.py --frost "$FROST" --model "$model" \
  --server-args="--backend $BACKEND" --out-json "$OUT/agent_bench_gpu.json" --out-svg "$SVG" ${AGENT_BENCH_ARGS:-}
rc=$?
echo "agent bench ($PRESET, $BACKEND): rc=$rc, json $OUT/agent_bench_gpu.json, svg $SVG"
exit $rc
