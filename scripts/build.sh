#!/usr/bin/env bash
# Configures and builds Frost into build/ (CPU backend always; CUDA when nvcc is found unless
# FROST_CUDA=OFF is exported). Extra arguments go to cmake's configure step.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc)}
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DFROST_CUDA="${FROST_CUDA:-AUTO}" "$@" >/dev/null
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
ninja -C build -j"$JOBS" 2>&1 | tee "$log"
# ptxas's wgmma performance advisories (C75xx: it injected waits or serialized a kernel's wgmmas, so
# each waits for the one before) cost a Hopper kernel much of its speed and change no result, so
# no test would notice. The build refuses them. It happened once, to an A/B switch written as a
# runtime branch between two wgmma waits (README, thirty-sixth session): variants of a wgmma loop
# belong in template parameters. Only files compiled in this run are checked (all of them in a
# fresh build, as CI's).
if grep -E "ptxas info +: \(C75[0-9][0-9]\)" "$log" >/dev/null; then
  echo "build: ptxas reported wgmma performance advisories (above); see docs/design/architecture.md, 'What \"done\" means everywhere'" >&2
  exit 1
fi
