#!/usr/bin/env bash
# The robot episode host on the GPU (issue 8): per-tick latency, time to first action after a
# capsule reset, capture counts and per-episode action digests. Expects build-gpu from run_all.sh.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
FROST=${FROST_GPU_BUILD_DIR:-build-gpu}/tools/frost/frost
"$FROST" robot-demo --backend cuda --episodes 8 | tee "$OUT/robot_demo.txt"
"$FROST" robot-demo --backend cuda --episodes 8 --json >"$OUT/robot_demo.json"
