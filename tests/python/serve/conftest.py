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
        pytest.skip("no ../shared tokenizer fixture")
    return out
