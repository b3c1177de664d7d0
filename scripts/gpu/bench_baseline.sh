#!/usr/bin/env bash
# Same-run baseline on the GPU machine: transformers' Qwen3_5ForCausalLM (9B- and 0.8B-style synthetic
# bf16 models, eager attention) plus the ceilings, via bench/python/baseline_hf.py; JSON to
# $OUT/baseline.json (./gpu-out elsewhere), then the comparison table of bench/python/report.py over
# whatever JSON the other benches left in $OUT. Extra arguments go to baseline_hf.py.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1
"$PY" -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__, "cuda", torch.cuda.is_available())'
"$PY" bench/python/baseline_hf.py --out "$OUT/baseline.json" "$@"
rc=$?
"$PY" bench/python/report.py "$OUT"
exit $rc
