"""POST /tokenize, POST /detokenize (vLLM's shapes) and GET /v1/models/{id}, against the
`tokenizers` / `transformers` packages on the real Qwen3 tokenizer and the official openai client."""
import os

import pytest
from api_common import KEY, type_confusions, TOKENIZER, ApiServer, fresh_rng, random_text
from serve_proc import FIXTURES, FROST

pytestmark = pytest.mark.skipif(not FROST or not os.path.exists(FROST), reason="FROST_BIN not set")


@pytest.fixture(scope="module")
def server(model_dir):
    s = ApiServer(model_dir)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def tok():
    from tokenizers import Tokenizer
    assert os.path.exists(TOKENIZER), "fixture missing: " + TOKENIZER
    return Tokenizer.from_file(TOKENIZER)


def post(server, path, body):
    import json
    status, _, data = server.raw("POST", path, body, {"Authorization": "Bearer " + KEY})
    return status, json.loads(data)


def awkward_text(rng):
    parts = [random_text(rng, rng.randrange(1, 6)), "  ", "\n\n", "😀", "naïve café", "def f(x):\n    return x",
             "12345.678", "<think>", "ÄÖÜ", "\t", "中文字符", "  trailing  "]
    return "".join(rng.choice(parts) for _ in range(rng.randrange(3, 12)))


def test_tokenize_prompt_matches_tokenizers(server, tok):
    rng = fresh_rng()
    max_len = server.openai.models.retrieve("frost").model_extra["max_model_len"]
    for _ in range(20):
        text = awkward_text(rng)
        for special in (True, False):
            status, r = post(server, "/tokenize", {"prompt": text, "add_special_tokens": special})
            assert status == 200, r
            want = tok.encode(text, add_special_tokens=special).ids
            assert r["tokens"] == want, text
            assert r["count"] == len(want)
            assert r["max_model_len"] == max_len


def test_tokenize_messages_matches_transformers_chat_template(server):
    from transformers import AutoTokenizer
    hf = AutoTokenizer.from_pretrained(os.path.join(FIXTURES, "tokenizer-qwen3"))
    rng = fresh_rng()
    msgs = [{"role": "system", "content": random_text(rng)}, {"role": "user", "content": awkward_text(rng)},
            {"role": "assistant", "content": random_text(rng)}, {"role": "user", "content": awkward_text(rng)}]
    for agp in (True, False):
        status, r = post(server, "/tokenize", {"messages": msgs, "add_generation_prompt": agp})
        assert status == 200, r
        want = hf.apply_chat_template(msgs, tokenize=True, add_generation_prompt=agp)
        want = want["input_ids"] if isinstance(want, dict) or hasattr(want, "keys") else want
        assert r["tokens"] == list(want)
        assert r["count"] == len(want)


def test_detokenize_round_trip(server, tok):
    rng = fresh_rng()
    for _ in range(20):
        text = awkward_text(rng)
        ids = tok.encode(text, add_special_tokens=False).ids
        status, r = post(server, "/detokenize", {"tokens": ids})
        assert status == 200, r
        assert r["prompt"] == tok.decode(ids, skip_special_tokens=False) == text


@pytest.mark.parametrize("path,body,param", [
    ("/tokenize", {}, "prompt"),
    ("/tokenize", {"prompt": "a", "messages": [{"role": "user", "content": "b"}]}, "messages"),
    ("/tokenize", {"prompt": 5}, "prompt"),
    ("/tokenize", {"prompt": "a", "add_special_tokens": "yes"}, "add_special_tokens"),
    ("/tokenize", {"prompt": "a", "return_token_strs": True}, "return_token_strs"),
    ("/tokenize", {"messages": [{"role": "wizard", "content": "b"}]}, "messages[0].role"),
    ("/detokenize", {}, "tokens"),
    ("/detokenize", {"tokens": [1, -1]}, "tokens[1]"),
    ("/detokenize", {"tokens": [1, 99999999]}, "tokens[1]"),
    ("/detokenize", {"tokens": [1], "skip": 1}, "skip"),
])
def test_tokenize_errors_name_the_field(server, path, body, param):
    status, r = post(server, path, body)
    assert status == 400, r
    assert r["error"]["param"] == param, r
    assert param.split("[")[0].split(".")[0] in r["error"]["message"], r


def test_models_retrieve(server):
    import openai
    m = server.openai.models.retrieve("frost")
    assert m.id == "frost" and m.object == "model"
    with pytest.raises(openai.NotFoundError) as e:
        server.openai.models.retrieve("no-such-model")
    assert e.value.body["code"] == "model_not_found"
    assert "no-such-model" in e.value.body["message"]


def test_type_confused_bodies_are_400s_never_a_crash(server):
    import json
    bodies = [("/tokenize", {"model": "frost", "prompt": "hi", "add_special_tokens": True}),
              ("/tokenize", {"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": True,
                             "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
                             "chat_template_kwargs": {"enable_thinking": False}}),
              ("/detokenize", {"model": "frost", "tokens": [1, 2]}),
              ("/v1/messages/count_tokens", {"model": "frost", "system": "s", "messages": [{"role": "user", "content": "hi"}]})]
    for path, body in bodies:
        for p, b in type_confusions(body):
            status, _, data = server.raw("POST", path, b, {"Authorization": "Bearer " + KEY})
            assert status in (200, 400, 404), (path, p, b, status, data)
            assert json.loads(data)
    assert server.proc.poll() is None
