#!/usr/bin/env bash
# Same-run regression check between two source trees (issue 12's "must not regress"): builds the
# `frost` CLI of a reference tree (default .before/, an export of the commit to compare against,
# carried with the device tool) and uses build-gpu of this tree, then runs `frost bench engine` and
# `frost bench capsule` for each preset, alternating reference and current per preset so drift of
# the machine hits both alike, and prints every metric as current / reference.
#   usage: scripts/gpu/compare_builds.sh [REF_DIR] [presets...]     (default presets: 0.8b 9b)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
REF=${1:-.before}; shift || true
presets=("$@"); [ ${#presets[@]} -gt 0 ] || presets=(0.8b 9b)
[ -f "$REF/CMakeLists.txt" ] || { echo "compare: no source tree at $REF"; exit 1; }
if [ ! -x "$REF/build-gpu/tools/frost/frost" ]; then
  cmake -S "$REF" -B "$REF/build-gpu" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFROST_CUDA=ON -DFROST_NATIVE=ON \
    -DFROST_TESTS=OFF -DFROST_BENCH=OFF >"$OUT/ref_configure.log" 2>&1 &&
    ninja -C "$REF/build-gpu" -j16 frost >"$OUT/ref_build.log" 2>&1 || { tail -30 "$OUT/ref_build.log"; exit 1; }
fi
declare -A BIN=([ref]="$REF/build-gpu/tools/frost/frost" [cur]="build-gpu/tools/frost/frost")
for preset in "${presets[@]}"; do
  dir=/tmp/frost-synth-$preset
  [ -f "$dir/config.json" ] || "${BIN[cur]}" synth --out "$dir" --preset "$preset" >/dev/null 2>&1
  for which in ref cur; do
    timeout 300 "${BIN[$which]}" bench engine --model "$dir" --backend cuda --ttft 1024,4096,16384,32768 \
      --decode 1024,32768 --decode-steps 64 --chunk 0 --reps 3 --json \
      >"$OUT/cmp_engine_${which}_$preset.json" 2>"$OUT/cmp_engine_${which}_$preset.log"
    echo "engine $which $preset: rc=$?"
    timeout 240 "${BIN[$which]}" bench capsule --model "$dir" --backend cuda --lengths 2048,32768 --suffix 64 \
      --reps 3 --out-dir "/tmp/cmp_capsule_${which}_$preset" --json \
      >"$OUT/cmp_capsule_${which}_$preset.json" 2>"$OUT/cmp_capsule_${which}_$preset.log"
    echo "capsule $which $preset: rc=$?"
    rm -rf "/tmp/cmp_capsule_${which}_$preset"
  done
done
python3 bench/python/compare_builds.py "$OUT" "${presets[@]}" | tee "$OUT/compare.txt"
