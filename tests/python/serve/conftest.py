"""pytest fixtures of the end-to-end server tests (see serve_proc.py)."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_proc  # noqa: E402


@pytest.fixture(scope="module")
def model_dir():
    out = serve_proc.synth_model_dir()
    if out is None:
        pytest.fail("fixture missing: tests/fixtures/tokenizer-qwen3/tokenizer.json (the repository ships it)")
    return out
