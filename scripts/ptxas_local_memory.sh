#!/usr/bin/env bash
# Kernels that use local memory, as ptxas reports them for the device build: a stack frame
# (an array the compiler could not keep in registers, e.g. one indexed at run time) and register
# spills, per kernel, largest first. Why: until 2026-12-02 the INT4 dequantization kept its eight
# values in local memory because one store used a runtime index (`v[flag ? 2 * j : j]`); it cost
# the 9B INT4 1k prompt 35 against 27.6 ms and no timing pointed at it, ptxas -v did.
# Needs nvcc only (no GPU). Usage: scripts/ptxas_local_memory.sh [FILE.cu ...] (default: every
# src/kernels/cuda/*.cu); ARCH=sm_90a by default. Prints "stack spill-stores spill-loads kernel".
set -euo pipefail
cd "$(dirname "$0")/.."
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
ARCH=${ARCH:-sm_90a}
[ -x "$NVCC" ] || { echo "ptxas_local_memory: no nvcc (set NVCC)" >&2; exit 2; }
files=("$@")
[ ${#files[@]} -gt 0 ] || files=(src/kernels/cuda/*.cu)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "stack spill-st spill-ld (bytes per thread)  file: kernel"
for f in "${files[@]}"; do
  if ! "$NVCC" -DFROST_WITH_CUDA=1 -Iinclude -Isrc -gencode=arch=compute_${ARCH#sm_},code="$ARCH" -O3 -DNDEBUG \
      --expt-relaxed-constexpr -std=c++20 -Xptxas -v -c -o "$tmp/o.o" "$f" >"$tmp/log" 2>&1; then
    echo "== $f: nvcc failed: $(grep -m1 error "$tmp/log" | head -c 300)"
    continue
  fi
  # ptxas prints "Compiling entry function 'NAME' for 'ARCH'", then "N bytes stack frame, S bytes
  # spill stores, L bytes spill loads" for it.
  awk -v file="$(basename "$f")" '
    /Compiling entry function/ { name = $0; sub(/.*function \047/, "", name); sub(/\047.*/, "", name) }
    /bytes stack frame/ && name != "" {  # "  S bytes stack frame, T bytes spill stores, L bytes spill loads"
      if ($1 + $5 + $9 > 0) printf "%d %d %d %s %s\n", $1, $5, $9, file, name
      name = ""
    }' "$tmp/log"
done | sort -k1,1nr -k2,2nr | while read -r st ss sl file name; do
  printf '%5s %5s %5s  %s: %s\n' "$st" "$ss" "$sl" "$file" "$(echo "$name" | c++filt 2>/dev/null | sed 's/frost::kernels:://g; s/(anonymous namespace):://g' | cut -c1-150)"
done
