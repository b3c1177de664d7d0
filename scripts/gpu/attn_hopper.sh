#!/bin/bash
# One device iteration of the Hopper attention kernel (issue 18): parity tests, then old vs new
# timings at the brief's shapes in the same process, then the kernel's resource use from SASS.
# Expects the stripped binaries under $BIN (default /tmp/attn); logs go to $OUT. Each step has its
# own time limit, so a hang in one variant leaves the others' results.
BIN=${BIN:-/tmp/attn}
OUT=${OUT:-/tmp/attn_out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv | tee "$OUT/smi.txt"
summary='^\[ *(OK|FAILED|PASSED|SKIPPED) |Failure|Which is|row |differ|wrote|pick'
timeout 100 "$BIN/kernels_test_cuda_attention" --gtest_filter='-*HopperWs*' 2>&1 | tee "$OUT/test.log" | grep -E "$summary" | head -40
echo "test exit ${PIPESTATUS[0]}"
for v in HopperWsPrefill HopperWsPingpong; do
    timeout 40 "$BIN/kernels_test_cuda_attention" --gtest_filter="*$v*" 2>&1 | tee "$OUT/test_$v.log" | grep -E "$summary" | head -20
    echo "$v test exit ${PIPESTATUS[0]}"
done
timeout 70 "$BIN/bench_cuda_kernels" --attn "$OUT/attn.json" 2>&1 | tee "$OUT/bench.log"
echo "bench exit ${PIPESTATUS[0]}"
if command -v cuobjdump >/dev/null; then
    cuobjdump -sass "$BIN/kernels_test_cuda_attention" | awk '/Function : .*attn_prefill_hopper/{f=1} f&&/Function : / && !/attn_prefill_hopper/{f=0} f' > "$OUT/hopper.sass"
    echo "sass: $(grep -c HGMMA "$OUT/hopper.sass") HGMMA, $(grep -c 'STL\|LDL' "$OUT/hopper.sass") local-memory ops"
fi
