"""Issue 17 regressions that need the REAL CPU engine (tiny synthetic checkpoint with the Qwen3
vocabulary, max_position_embeddings 32768) and the official `openai` client, on 127.0.0.1. Each
test failed on the main branch before its fix; the bug number is in the test name."""
import json
import os
import random

import pytest
from serve_proc import FROST, ServeProcess

openai = pytest.importorskip("openai")

KEY = "sk-frost-i17"
pytestmark = pytest.mark.skipif(not FROST or not os.path.exists(FROST), reason="FROST_BIN not set")


class Server(ServeProcess):
    def __init__(self, model, sessions=1, extra=(), max_seq_len=1024):
        super().__init__(model, extra, key=KEY, sessions=sessions, max_seq_len=max_seq_len)
        self.client = openai.OpenAI(base_url=self.base + "/v1", api_key=KEY, max_retries=0, timeout=300)


@pytest.fixture(scope="module")
def server(model_dir):
    s = Server(model_dir)
    yield s
    s.stop()


def test_bug5_default_context_is_the_models(model_dir):
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    ctx = cfg.get("max_position_embeddings") or cfg["text_config"]["max_position_embeddings"]
    s = Server(model_dir, max_seq_len=None)
    try:
        banner = "".join(s.lines)
        assert f"max_seq_len {ctx} [the model's context]" in banner, banner
        # A prompt past the old 4096 default is served without any flag.
        rng = random.Random()
        ids = [rng.randrange(1000, 20000) for _ in range(4200)]
        r = s.client.completions.create(model="frost", prompt=ids, max_tokens=2, temperature=0)
        assert r.usage.prompt_tokens == 4200
        assert r.usage.completion_tokens >= 1
    finally:
        s.stop()
