#!/usr/bin/env bash
# Configures and builds Frost into build/ (CPU backend always; CUDA when nvcc is found unless
# FROST_CUDA=OFF is exported). Extra arguments go to cmake's configure step.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc)}
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DFROST_CUDA="${FROST_CUDA:-AUTO}" "$@" >/dev/null
ninja -C build -j"$JOBS"
