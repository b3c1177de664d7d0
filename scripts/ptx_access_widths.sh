#!/usr/bin/env bash
# Per kernel, how wide its global and shared memory accesses are in the PTX nvcc makes of it:
# counts of each ld/st form (ld.global.v4.u32 = 16 bytes, ld.global.v2.u16 = 4 bytes, ...).
# Why: a bandwidth-bound kernel that runs well under the copy ceiling may simply not issue the
# accesses its source suggests. Until 2026-11-29 the shared 8 x bf16 vector (lm_common.cuh Bf16x8)
# compiled to four 4-byte accesses in every row kernel, which no timing pointed at; the PTX did.
# Needs nvcc only (no GPU). Usage: scripts/ptx_access_widths.sh [FILE.cu ...] (default: every
# src/kernels/cuda/*.cu); ARCH=sm_90a by default. Prints "kernel: count form; ..." per entry,
# kernels sorted by name.
set -euo pipefail
cd "$(dirname "$0")/.."
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
ARCH=${ARCH:-sm_90a}
[ -x "$NVCC" ] || { echo "ptx_access_widths: no nvcc (set NVCC)" >&2; exit 2; }
files=("$@")
[ ${#files[@]} -gt 0 ] || files=(src/kernels/cuda/*.cu)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for f in "${files[@]}"; do
  ptx="$tmp/$(basename "$f" .cu).ptx"
  if ! "$NVCC" -DFROST_WITH_CUDA=1 -Iinclude -Isrc -arch="$ARCH" -O3 -DNDEBUG --expt-relaxed-constexpr -std=c++20 \
      -ptx -o "$ptx" "$f" 2>"$tmp/err"; then
    echo "== $f: nvcc failed: $(head -c 300 "$tmp/err")"
    continue
  fi
  echo "== $f"
  # One line per .entry: its demangled name (namespace and arguments dropped) and the count of
  # each access form.
  awk '
    /^\.visible \.entry|^\.entry/ { name = $0; sub(/.*\.entry[ \t]+/, "", name); sub(/\(.*/, "", name) }
    /^[ \t]+(ld|st)\.(global|shared)/ && name != "" { forms[name, $1]++; seen[$1] = 1; names[name] = 1 }
    END {
      for (n in names) {
        line = ""
        for (f in seen) if ((n, f) in forms) line = line sprintf("%d %s; ", forms[n, f], f)
        printf "%s\t%s\n", n, line
      }
    }' "$ptx" | while IFS=$'\t' read -r name forms; do
      short=$(echo "$name" | c++filt 2>/dev/null || echo "$name")
      short=${short#void }
      short=${short//"frost::kernels::(anonymous namespace)::"/}
      printf '  %-50s %s\n' "${short%%(*}" "$forms"
    done | sort
done
