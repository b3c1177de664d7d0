#!/usr/bin/env bash
# Quantized weights on the CUDA engine (issue 15): the 9B-style synthetic model as bf16 and with
# --quant fp8 / nvfp4 / int4, each through `frost bench engine` (decode ms/token @1k, cold TTFT
# 1k / 4k) in the same run, beside the floor from the cost model (a quantized GEMV's bytes = packed
# weights + scales, so the decode floor shrinks with the format), then bench_quant_gemv (the
# kernels alone on the 9B shapes). Prefill dequantizes each quantized weight into a bf16 tile
# before the bf16 GEMM (an FP8 tensor-core GEMM is the next step), so TTFT is expected at or
# slightly above bf16. Writes $OUT/quant_bench_<fmt>.json ("frost_results"). Expects build-gpu.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
BUILD=${FROST_GPU_BUILD_DIR:-build-gpu}
FROST=$BUILD/tools/frost/frost
rc=0
printf '%-6s %12s %14s %12s %8s %12s %12s\n' format weights_GB decode_ms/tok floor_ms ratio ttft1k_ms ttft4k_ms \
  >"$OUT/quant_bench_table.txt"
for fmt in bf16 fp8 nvfp4 int4; do
  if [ "$fmt" = bf16 ]; then
    dir=/tmp/frost-synth-9b  # shared with bench_engine.sh / bench_kernels.sh
    [ -f "$dir/config.json" ] || "$FROST" synth --out "$dir" --preset 9b >/dev/null 2>&1
  else
    dir=/tmp/frost-synth-9b-$fmt
    [ -f "$dir/config.json" ] || timeout 900 "$FROST" synth --out "$dir" --preset 9b --quant "$fmt" \
      >"$OUT/quant_synth_$fmt.log" 2>&1 || { echo "synth 9b --quant $fmt failed"; tail -5 "$OUT/quant_synth_$fmt.log"; rc=1; continue; }
  fi
  timeout 420 "$FROST" bench engine --model "$dir" --backend cuda --ttft 1024,4096 --decode 1024 \
    --decode-steps 64 --chunk 2048 --reps 3 --json >"$OUT/quant_bench_$fmt.json" 2>"$OUT/quant_bench_$fmt.log"
  r=$?; [ $r -eq 0 ] || rc=$r
  echo "quant bench $fmt: rc=$r"; tail -8 "$OUT/quant_bench_$fmt.log"
  python3 - "$OUT/quant_bench_$fmt.json" "$fmt" >>"$OUT/quant_bench_table.txt" <<'PY' || true
import json, sys
d = json.load(open(sys.argv[1]))
def find(o, key):  # first dict holding `key`, depth first
    if isinstance(o, dict):
        if key in o: return o
        for v in o.values():
            r = find(v, key)
            if r is not None: return r
    if isinstance(o, list):
        for v in o:
            r = find(v, key)
            if r is not None: return r
    return None
dec = find(d, "ms_per_token") or {}
ttft = {}
def walk(o):
    if isinstance(o, dict):
        if "tokens" in o and "ms" in o: ttft[o["tokens"]] = o["ms"]
        for v in o.values(): walk(v)
    elif isinstance(o, list):
        for v in o: walk(v)
walk(d)
w = (find(d, "cuda_engine_info") or {}).get("cuda_engine_info", {}).get("weight_bytes", 0)
print("%-6s %12.2f %14.3f %12.3f %8.2f %12.1f %12.1f" % (sys.argv[2], w / 1e9, dec.get("ms_per_token", 0),
      dec.get("floor_ms", 0), dec.get("ms_over_floor", 0), ttft.get(1024, 0), ttft.get(4096, 0)))
PY
  [ "$fmt" = bf16 ] || rm -rf "$dir"  # ~5-9 GB each; the disk holds the bf16 model for the other benches
done
echo "== quantized engine vs bf16 (decode @1k: ms/token vs the quantized-bytes floor)"
cat "$OUT/quant_bench_table.txt"
echo "== bench_quant_gemv"
"$BUILD/bench/bench_quant_gemv" 25 >"$OUT/bench_quant_gemv.log" 2>&1 || rc=1
tail -40 "$OUT/bench_quant_gemv.log"
exit $rc
