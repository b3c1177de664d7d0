"""pytest fixtures of the end-to-end server tests (see serve_proc.py), and the chain-scripted
servers (chain_model.py) the Messages and Responses tests share: `chain` answers a forced
get_weather call with {"city": "Paris"}, `thinker` answers with a think block and "Hi there"."""
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


def chain_server(model_dir, tmp_path_factory, make_chain):
    from api_common import TOKENIZER, ApiServer
    from chain_model import chain_model
    from tokenizers import Tokenizer
    out = str(tmp_path_factory.mktemp(make_chain.__name__))
    chain_model(model_dir, out, make_chain(Tokenizer.from_file(TOKENIZER)))
    return ApiServer(out)


@pytest.fixture(scope="module")
def chain(model_dir, tmp_path_factory):
    from chain_model import weather_call_chain
    s = chain_server(model_dir, tmp_path_factory, weather_call_chain)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def thinker(model_dir, tmp_path_factory):
    from chain_model import thinking_chain
    s = chain_server(model_dir, tmp_path_factory, thinking_chain)
    yield s
    s.stop()
