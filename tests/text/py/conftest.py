"""Shared fixtures for the text layer's Python reference tests: the frost binary (FROST_BIN) and
the real Qwen3 tokenizer folder (FROST_TOKENIZER_DIR, default tests/fixtures/tokenizer-qwen3)."""
import json
import os
import pathlib
import subprocess

import pytest

HERE = pathlib.Path(__file__).resolve().parent
DEFAULT_TOKENIZER_DIR = HERE.parents[1] / "fixtures" / "tokenizer-qwen3"


@pytest.fixture(scope="session")
def frost_bin():
    path = os.environ.get("FROST_BIN")
    if not path or not os.path.exists(path):
        pytest.fail("FROST_BIN does not name the frost binary (run through ctest)")
    return path


@pytest.fixture(scope="session")
def tokenizer_dir():
    d = pathlib.Path(os.environ.get("FROST_TOKENIZER_DIR", str(DEFAULT_TOKENIZER_DIR)))
    if not (d / "tokenizer.json").exists():
        pytest.fail(f"fixture missing: no tokenizer.json in {d}")
    return d


def run_jsonl(frost_bin, args, lines, tmp_path, name):
    """Writes `lines` (JSON values) to a file, runs `frost <args> --jsonl FILE`, returns parsed lines."""
    src = tmp_path / name
    src.write_text("".join(json.dumps(x, ensure_ascii=True) + "\n" for x in lines), encoding="ascii")
    out = subprocess.run([frost_bin, *args, "--jsonl", str(src)], capture_output=True, check=True)
    # split on "\n" only: str.splitlines() would also split inside U+2028 / U+0085 in the text.
    return [json.loads(l) for l in out.stdout.decode("utf-8").split("\n") if l]
