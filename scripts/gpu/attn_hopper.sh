#!/bin/bash
# One device iteration of the Hopper attention kernel (issue 18): parity tests, then old vs new
# timings at the brief's shapes in the same process, then the kernel's resource use from SASS.
# Expects the stripped binaries under $BIN (default /tmp/attn); logs go to $OUT.
BIN=${BIN:-/tmp/attn}
OUT=${OUT:-/tmp/attn_out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv | tee "$OUT/smi.txt"
timeout 200 "$BIN/kernels_test_cuda_attention" 2>&1 | tee "$OUT/test.log" | grep -E "^\[ *(OK|FAILED|PASSED|SKIPPED) |Failure|Expected|Which is|actual|row|differ|rel|Value of|wrote|pick" | head -60
echo "test exit ${PIPESTATUS[0]}"
timeout 60 "$BIN/bench_cuda_kernels" --attn "$OUT/attn.json" 2>&1 | tee "$OUT/bench.log"
echo "bench exit ${PIPESTATUS[0]}"
if command -v cuobjdump >/dev/null; then
    cuobjdump -sass "$BIN/kernels_test_cuda_attention" | awk '/Function : .*attn_prefill_hopper/{f=1} f&&/Function : / && !/attn_prefill_hopper/{f=0} f' > "$OUT/hopper.sass"
    echo "sass: $(grep -c HGMMA "$OUT/hopper.sass") HGMMA, $(grep -c 'STL\|LDL' "$OUT/hopper.sass") local-memory ops"
fi
