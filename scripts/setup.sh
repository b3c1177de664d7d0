#!/usr/bin/env bash
# Installs everything Frost's build and tests need on a fresh Debian/Ubuntu machine, idempotently:
# Debian packages via apt-get (only the missing ones), a Python virtual environment at .venv with the
# pinned reference packages, and the real Qwen tokenizer used by the demo (scripts/fetch_tokenizer.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS=(cmake ninja-build g++ make git pkg-config python3 python3-venv python3-pip
      libgtest-dev libgmock-dev libbenchmark-dev libboost-dev nlohmann-json3-dev
      clang libclang-rt-dev)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Python reference packages (tokenizers, transformers' apply_chat_template, the openai client).
REQ=scripts/requirements-test.txt
STAMP=.venv/.frost-requirements
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
if ! cmp -s "$REQ" "$STAMP" 2>/dev/null; then
  echo "setup: installing Python test packages into .venv"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -r "$REQ"
  cp "$REQ" "$STAMP"
fi

if [ -x scripts/fetch_tokenizer.sh ]; then
  scripts/fetch_tokenizer.sh
fi
echo "setup: ok"
