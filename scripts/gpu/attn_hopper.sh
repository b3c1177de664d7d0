#!/bin/bash
# One device iteration of the Hopper attention kernel (issue 18): parity tests, then old vs new
# timings at the brief's shapes in the same process, the per-op table's attention line of the 9B
# 32k last chunk for each FROST_ATTN_HOPPER variant, then the kernels' resource use from SASS.
# Expects the stripped binaries under $BIN (default /tmp/attn); logs go to $OUT. Each step has its
# own time limit, so a hang in one variant leaves the others' results.
#   ATTN_OPS_VARIANTS="1 4 5"   variants bench_ops runs (FROST_ATTN_HOPPER), in this order
BIN=${BIN:-/tmp/attn}
OUT=${OUT:-/tmp/attn_out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv | tee "$OUT/smi.txt"
summary='^\[ *(OK|FAILED|PASSED|SKIPPED) |Failure|Which is|row |differ|wrote|pick'
t() {  # t NAME LIMIT FILTER
    timeout "$2" "$BIN/kernels_test_cuda_attention" --gtest_filter="$3" 2>&1 | tee "$OUT/test_$1.log" | grep -E "$summary" | head -30
    echo "$1 test exit ${PIPESTATUS[0]}"
}
t tma 30 '*HopperTmaPrefill*'
t rest 90 '-*HopperWs*:*HopperTma*'
t ws 40 '*HopperWs*'
t tma_others 60 '*HopperTmaPingpong*:*HopperTmaK3*'
timeout 90 "$BIN/bench_cuda_kernels" --attn "$OUT/attn.json" 2>&1 | tee "$OUT/bench.log"
echo "bench exit ${PIPESTATUS[0]}"
for v in ${ATTN_OPS_VARIANTS:-1 4 5}; do
    FROST_ATTN_HOPPER=$v TMPDIR=${TMPDIR:-/dev/shm} timeout 120 "$BIN/bench_ops" --preset 9b --backend cuda --rows 2048 --pos 30720 \
        --json "$OUT/ops_$v.json" > "$OUT/ops_$v.log" 2>&1
    echo "bench_ops FROST_ATTN_HOPPER=$v exit $?: $(grep -iE 'attn|attention' "$OUT/ops_$v.log" | head -3)"
    grep -iE 'total|sum' "$OUT/ops_$v.log" | tail -2
done
if command -v cuobjdump >/dev/null; then
    cuobjdump -res-usage "$BIN/kernels_test_cuda_attention" 2>/dev/null | grep -A1 'attn_prefill_hopper' | grep -oE 'Function [^ ]*|REG:[0-9]+|STACK:[0-9]+|LOCAL:[0-9]+' | paste - - - - > "$OUT/res.txt"
    cat "$OUT/res.txt"
fi
