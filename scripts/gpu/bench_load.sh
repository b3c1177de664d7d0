#!/usr/bin/env bash
# Weight loading to the GPU (issue 3): `frost bench load` on a synthetic 9B-style checkpoint, which
# prints the loader's GB/s next to a raw sequential read of the same files measured in the same run
# (cold page cache where permitted, and warm). Expects build-gpu from run_all.sh.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
FROST=${FROST_GPU_BUILD_DIR:-build-gpu}/tools/frost/frost
DIR=/tmp/frost-synth-9b
[ -f "$DIR/config.json" ] || "$FROST" synth --out "$DIR" --preset 9b >"$OUT/synth_9b.log" 2>&1 || { tail -5 "$OUT/synth_9b.log"; exit 1; }
"$FROST" bench load "$DIR" --json | tee "$OUT/bench_load.json"
