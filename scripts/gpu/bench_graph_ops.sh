#!/usr/bin/env bash
# What each op of a decode step costs inside the captured, PDL-chained graph (`frost bench
# graph-ops`: the step timed with each op label left out in turn, against the full step in the
# same run; outputs of the probes are wrong, only their time is used). The GPU machine has no
# Nsight Systems; this is the in-graph view that `bench_ops` (ops timed alone) cannot give.
# Writes $OUT/graph_ops_<preset>.json and .txt. Expects build-gpu.
#   scripts/gpu/bench_graph_ops.sh [PRESET[:QUANT]...]   (default: 0.8b 9b, the checkpoints bench_engine.sh
#   writes; 9b:int4 / 9b:fp8 / 9b:nvfp4 synthesise `--preset 9b --quant Q` under frost-synth-9b-Q)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
FROST=${FROST_GPU_BUILD_DIR:-build-gpu}/tools/frost/frost
SYNTH_DIR=${FROST_SYNTH_DIR:-/tmp}
presets=("$@")
[ ${#presets[@]} -gt 0 ] || presets=(0.8b 9b)
rc=0
for spec in "${presets[@]}"; do
  preset=${spec%%:*}; quant=""; [ "$spec" = "$preset" ] || quant=${spec#*:}
  name=$preset${quant:+-$quant}
  dir=$SYNTH_DIR/frost-synth-$name
  [ -f "$dir/config.json" ] || "$FROST" synth --out "$dir" --preset "$preset" ${quant:+--quant "$quant"} >/dev/null 2>&1 ||
    { echo "synth $spec failed"; rc=1; continue; }
  timeout 420 "$FROST" bench graph-ops --model "$dir" --backend cuda --context 1024 --steps 32 --reps 3 --json \
    >"$OUT/graph_ops_$name.json" 2>"$OUT/graph_ops_$name.txt"
  r=$?; [ $r -eq 0 ] || rc=$r
  echo "graph-ops $spec: rc=$r"; cat "$OUT/graph_ops_$name.txt"
done
exit $rc
