#!/usr/bin/env bash
# The CUDA engine on the GPU machine: configures a CUDA build in build-gpu (reused if present),
# builds the frost CLI, the CUDA engine tests and the capsule suite, runs them (fixtures vs the
# transformers goldens incl. the MoE fixtures, CUDA vs CPU engine, determinism, captures only at load; capsules on both
# backends), then `frost generate --backend cuda` on a synthetic 0.8B-shape model and
# `frost eval --backend cuda` on a fixture, and prints a short summary. Logs go to $OUT
# (./gpu-out elsewhere).
# Carried inputs (device tool `carry`), used only where the machine lacks them:
#   build-cudaengine-deps/usr            GoogleTest, nlohmann_json, the Boost headers serve includes
# Usage: scripts/gpu/engine_check.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
BUILD=${FROST_GPU_BUILD_DIR:-build-gpu}
JOBS=${JOBS:-16}
DEPS=$PWD/build-cudaengine-deps
summary=()
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"


CONFIG=(-DFROST_CUDA=ON -DCMAKE_BUILD_TYPE=Release
  # CMake 3.25 does not know nvcc's C++20 flag; naming it is harmless on newer CMake.
  -DCMAKE_CUDA20_STANDARD_COMPILE_OPTION=-std=c++20 -DCMAKE_CUDA20_EXTENSION_COMPILE_OPTION=-std=c++20)
if [[ ( ! -f /usr/include/gtest/gtest.h || ! -d /usr/include/nlohmann ) && -d "$DEPS/usr" ]]; then
  CONFIG+=(-DCMAKE_PREFIX_PATH="$DEPS/usr")
fi
if [[ ! -d /usr/include/boost && -d "$DEPS/usr/include/boost" ]]; then
  CONFIG+=(-DCMAKE_CXX_FLAGS="-isystem $DEPS/usr/include/boost/.. ")
fi
if [[ ! -f "$BUILD/CMakeCache.txt" ]] && command -v ninja >/dev/null 2>&1; then CONFIG+=(-G Ninja); fi
t0=$(date +%s)
cmake -S . -B "$BUILD" "${CONFIG[@]}" >"$OUT/engine_configure.log" 2>&1 ||
  { tail -30 "$OUT/engine_configure.log"; exit 1; }
grep -q 'frost: CUDA backend ON' "$OUT/engine_configure.log" ||
  { echo "engine_check: the configure did not enable CUDA" >&2; exit 1; }
mapfile -t TESTS < <(cmake --build "$BUILD" --target help 2>/dev/null |
  grep -oE 'model_test_(cuda_engine[A-Za-z0-9_]*|capsule_[A-Za-z0-9_]*|engine_fixtures|engine_moe_fixtures|state_layout)|ops_test_backend_ops' | sort -u)
cmake --build "$BUILD" -j "$JOBS" --target frost "${TESTS[@]}" >"$OUT/engine_build.log" 2>&1 ||
  { grep -E "error|Error" "$OUT/engine_build.log" | head -40; exit 1; }
summary+=("build: ok in $(( $(date +%s) - t0 )) s (${TESTS[*]})")

# Engine + capsule tests (each test executable is one ctest entry named after it).
t0=$(date +%s)
ctest --test-dir "$BUILD" -R 'model_test_(cuda_engine|capsule_|engine_fixtures|engine_moe_fixtures|state_layout)|ops_test_backend_ops' --output-on-failure \
  --timeout 300 >"$OUT/engine_ctest.log" 2>&1
rc=$?
grep -E "\*\*\*Failed|Failure|Expected|Which is|Value of|actual|error|Timeout|SKIPPED|tests passed" \
  "$OUT/engine_ctest.log" | head -60
summary+=("ctest (rc=$rc): $(grep -E 'tests passed' "$OUT/engine_ctest.log") in $(( $(date +%s) - t0 )) s")
for b in "$BUILD"/tests/model/model_test_cuda_engine "$BUILD"/tests/model/model_test_cuda_engine_moe; do
  log=$OUT/$(basename "$b" | sed 's/^model_test_//')_gtest.log  # cuda_engine_gtest.log, cuda_engine_moe_gtest.log
  [[ -x $b ]] && "$b" --gtest_brief=1 >"$log" 2>&1
  summary+=("$(basename "$b") gtest: $(grep -E '^\[  (PASSED|FAILED) ' "$log" | tr '\n' ' ')")
  while read -r line; do summary+=("$line"); done < <(grep -hE '^\[ cuda (moe )?vs' "$log")
done

# frost generate on a synthetic 0.8B-shape model (vocab 248320), greedy, then eval on a fixture.
FROST=$BUILD/tools/frost/frost
MODEL=/tmp/frost-synth-0.8b
t0=$(date +%s)
"$FROST" synth --out "$MODEL" --preset 0.8b --seed 7 >"$OUT/synth.log" 2>&1 || { tail -5 "$OUT/synth.log"; }
summary+=("synth 0.8b: $(( $(date +%s) - t0 )) s")
IDS=$(python3 -c 'import random; r=random.Random(5); print(",".join(str(r.randrange(248000)) for _ in range(1000)))')
gfail=0
for run in 1 2; do
  "$FROST" generate --model "$MODEL" --backend cuda --prompt-ids "$IDS" --max-new-tokens 64 --json \
    >"$OUT/generate_$run.json" 2>"$OUT/generate_$run.err"
  grc=$?
  [[ $grc -ne 0 ]] && gfail=1
  cat "$OUT/generate_$run.err" | tail -5
  summary+=("generate 0.8b cuda run $run (rc=$grc): $(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print("ttft %.2f ms, %.3f ms/token, fingerprint %s, graphs %s captured in %s ms" % (j["ttft_ms"], j["ms_per_token"], j["fingerprint"], j.get("graphs"), j.get("capture_ms")))' "$OUT/generate_$run.json" 2>&1 | tail -1)")
done
cmp -s <(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["ids"])' "$OUT/generate_1.json") \
       <(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["ids"])' "$OUT/generate_2.json") &&
  summary+=("generate: the two runs produced identical ids") || summary+=("generate: the two runs DIFFER")
# The same checkpoint against transformers' own Qwen3.5 code in fp32 (issue 6 item 3), 128 positions.
HF_IDS=$(echo "$IDS" | cut -d, -f1-128)
"$FROST" eval --model "$MODEL" --prompt-ids "$HF_IDS" --dump-logits /tmp/frost-0.8b-logits.f32 --backend cuda \
  >"$OUT/eval_0.8b.log" 2>&1
timeout 240 python3 scripts/gpu/engine_vs_hf.py "$MODEL" "$HF_IDS" /tmp/frost-0.8b-logits.f32 \
  >"$OUT/engine_vs_hf.log" 2>&1
hrc=$?
summary+=("transformers 0.8b (rc=$hrc): $(tail -1 "$OUT/engine_vs_hf.log")")
rm -f /tmp/frost-0.8b-logits.f32

FIX=tests/fixtures/qwen35-tiny-a
if [[ -d $FIX ]]; then
  PIDS=$(python3 -c 'import json,sys; print(",".join(map(str, json.load(open(sys.argv[1]))["prompt_ids"])))' "$FIX/golden.json")
  for be in cpu cuda; do
    "$FROST" eval --model "$FIX" --prompt-ids "$PIDS" --dump-logits "$OUT/eval_$be.f32" --backend "$be" \
      >"$OUT/eval_$be.log" 2>&1
    summary+=("eval $be (rc=$?): $(tail -1 "$OUT/eval_$be.log")")
  done
  summary+=("eval cuda vs cpu: $(python3 -c '
import numpy as np, sys
a = np.fromfile(sys.argv[1], np.float32); b = np.fromfile(sys.argv[2], np.float32)
print("rel L2 %.3e over %d values" % (np.linalg.norm(a - b) / np.linalg.norm(a), a.size) if a.size == b.size and a.size else "sizes differ")
' "$OUT/eval_cpu.f32" "$OUT/eval_cuda.f32" 2>&1 | tail -1)")
  rm -f "$OUT"/eval_*.f32
fi

echo
echo "== engine_check summary ($(head -1 "$OUT/gpu.txt"))"
for s in "${summary[@]}"; do echo "  $s"; done
# Non-zero when the tests, a generate run or the transformers comparison failed.
exit $(( rc != 0 || gfail != 0 || hrc != 0 ))
