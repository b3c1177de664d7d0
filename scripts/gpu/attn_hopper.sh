#!/bin/bash
# One device iteration of the Hopper attention kernel (issue 18): parity tests, then old vs new
# timings at the brief's shapes in the same process, the per-op table's attention line of the 9B
# 32k last chunk and the engine's 32k cold TTFT for each FROST_ATTN_HOPPER variant (same binary),
# then the kernels' resource use from SASS.
# Expects the stripped binaries under $BIN (default /tmp/attn: kernels_test_cuda_attention,
# bench_cuda_kernels, bench_ops, frost); logs go to $OUT. Each step has its own time limit, so a
# hang in one variant leaves the others' results. Knobs (empty = skip the step):
#   ATTN_TESTS="tma:*HopperTma*:60 rest:-*HopperTma*:90"   name:gtest filter:seconds
#   ATTN_EXTRA="ops_test_backend_ops:60"   other test binaries under $BIN (name:seconds), default off
#   ATTN_BENCH=1                 bench_cuda_kernels --attn (every variant, the shapes of the brief)
#   ATTN_OPS_VARIANTS="1 5"      bench_ops --preset 9b --rows 2048 --pos 30720 per variant
#   ATTN_ENGINE_VARIANTS="1 5"   frost bench engine --ttft 32768 per variant (0: the default)
set -f  # the gtest filters below are patterns for gtest, not the shell
BIN=${BIN:-/tmp/attn}
OUT=${OUT:-/tmp/attn_out}
SYNTH=${FROST_SYNTH_DIR:-/dev/shm}/frost-synth-9b
[ -f "$SYNTH/config.json" ] || [ ! -f /dev/shm/frost-bench-ops-9b/config.json ] || SYNTH=/dev/shm/frost-bench-ops-9b  # bench_ops' copy
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv | tee "$OUT/smi.txt"
summary='^\[ *(OK|FAILED|PASSED|SKIPPED) |Failure|Which is|row |differ|wrote|pick'
for spec in ${ATTN_TESTS-tma:*HopperTma*:150 rest:-*HopperTma*:90}; do
    name=${spec%%:*}; rest=${spec#*:}; limit=${rest##*:}; filter=${rest%:*}
    timeout "$limit" "$BIN/kernels_test_cuda_attention" --gtest_filter="$filter" 2>&1 | tee "$OUT/test_$name.log" | grep -E "$summary" | head -30
    echo "$name test exit ${PIPESTATUS[0]}"
done
for spec in ${ATTN_EXTRA-}; do
    timeout "${spec##*:}" "$BIN/${spec%%:*}" 2>&1 | tee "$OUT/test_${spec%%:*}.log" | grep -E "$summary" | tail -8
    echo "${spec%%:*} exit ${PIPESTATUS[0]}"
done
if [ "${ATTN_BENCH:-1}" = 1 ]; then
    timeout 120 "$BIN/bench_cuda_kernels" --attn "$OUT/attn.json" 2>&1 | tee "$OUT/bench.log"
    echo "bench exit ${PIPESTATUS[0]}"
fi
for v in ${ATTN_OPS_VARIANTS-1 5}; do
    FROST_ATTN_HOPPER=$v TMPDIR=${TMPDIR:-/dev/shm} timeout 120 "$BIN/bench_ops" --preset 9b --backend cuda --rows 2048 --pos 30720 \
        --json "$OUT/ops_$v.json" > "$OUT/ops_$v.log" 2>&1
    echo "bench_ops FROST_ATTN_HOPPER=$v exit $?: $(grep -E '^ +attn_prefill' "$OUT/ops_$v.log")"
    grep -E '^prefill:' "$OUT/ops_$v.log"
done
if [ -n "${ATTN_ENGINE_VARIANTS-1 5}" ] && [ ! -f "$SYNTH/config.json" ]; then
    timeout 120 "$BIN/frost" synth --out "$SYNTH" --preset 9b > "$OUT/synth.log" 2>&1; echo "synth exit $?"
fi
for v in ${ATTN_ENGINE_VARIANTS-1 5}; do
    FROST_ATTN_HOPPER=$v timeout 90 "$BIN/frost" bench engine --model "$SYNTH" --backend cuda --ttft 32768 \
        --decode 1024 --decode-steps 8 --chunk 2048 --reps 2 --json > "$OUT/engine_$v.json" 2> "$OUT/engine_$v.log"
    echo "engine FROST_ATTN_HOPPER=$v exit $?"; grep -iE 'ttft|32768' "$OUT/engine_$v.log" | head -4
done
if command -v cuobjdump >/dev/null; then
    cuobjdump -res-usage "$BIN/kernels_test_cuda_attention" 2>/dev/null | grep -A1 'attn_prefill_hopper' | grep -oE 'REG:[0-9]+|STACK:[0-9]+|LOCAL:[0-9]+' | paste - - - > "$OUT/res.txt"
    echo "resources (REG STACK LOCAL) of the hopper kernels:"; sort "$OUT/res.txt" | uniq -c
fi
