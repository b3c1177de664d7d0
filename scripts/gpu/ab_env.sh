#!/usr/bin/env bash
# Same-run A/B of environment settings (the kernels' opt-in switches, read at launch) through
# `frost bench engine`: each round runs every setting once, in order, each in its own process, so
# drift of the machine (clocks, power, L2 state) hits all settings alike. Prints decode ms/token and
# cold TTFT per setting and round. Expects build-gpu (or FROST_GPU_BUILD_DIR) and a model directory.
#   scripts/gpu/ab_env.sh MODEL_DIR ROUNDS SETTING...
#   a SETTING is "-" (no extra environment) or space-separated NAME=VALUE pairs, e.g.
#   scripts/gpu/ab_env.sh /dev/shm/m35 3 - "FROST_MOE_DECODE=fused"
# FROST_AB_ARGS replaces the bench arguments (default: --ttft 1024 --decode 1024 --decode-steps 64 --reps 3).
set -uo pipefail
cd "$(dirname "$0")/../.."
[ $# -ge 3 ] || { sed -n 2,10p "$0"; exit 2; }
model=$1 rounds=$2; shift 2
FROST=${FROST_GPU_BUILD_DIR:-build-gpu}/tools/frost/frost
[ -x "$FROST" ] || { echo "ab_env: no $FROST (build frost first)"; exit 1; }
read -r -a args <<<"${FROST_AB_ARGS:---ttft 1024 --decode 1024 --decode-steps 64 --reps 3}"
for ((r = 1; r <= rounds; r++)); do
  for setting in "$@"; do
    envs=()
    [ "$setting" = - ] || read -r -a envs <<<"$setting"
    out=$(env "${envs[@]}" timeout 600 "$FROST" bench engine --model "$model" --backend cuda "${args[@]}" 2>&1)
    rc=$?
    decode=$(grep -E "decode @" <<<"$out" | sed -E 's/ +/ /g' | tr '\n' ';')
    ttft=$(grep -E "cold TTFT" <<<"$out" | sed -E 's/^ *cold TTFT +([0-9]+) tok: +([0-9.]+) ms.*/\1: \2 ms/' | tr '\n' ';')
    printf 'round %d  %-40s rc=%d  %s %s\n' "$r" "$setting" "$rc" "$ttft" "$decode"
  done
done
