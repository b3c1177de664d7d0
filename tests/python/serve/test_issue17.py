"""Issue 17 regressions that need the REAL CPU engine (tiny synthetic checkpoint with the Qwen3
vocabulary, max_position_embeddings 32768) and the official `openai` client, on 127.0.0.1. Each
test failed on the main branch before its fix; the bug number is in the test name."""
import json
import os
import random

import pytest
from api_common import OpenAIServer
from serve_proc import BACKEND, FROST

openai = pytest.importorskip("openai")

KEY = "sk-frost-i17"
pytestmark = pytest.mark.skipif(not FROST or not os.path.exists(FROST), reason="FROST_BIN not set")


class Server(OpenAIServer):
    def __init__(self, model, sessions=1, extra=(), max_seq_len=1024):
        super().__init__(model, KEY, sessions=sessions, extra=extra, max_seq_len=max_seq_len)


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


# --- Bug 1: a scripted checkpoint --------------------------------------------------------------
# The tiny synthetic model with every mixer's and MLP's output projection zeroed: each layer adds
# nothing, so the last hidden state is the last token's embedding. The embeddings (tied with the
# LM head) put " apple" at 0.625 and " banana" at 0.5625 along one axis and every other token at
# 2^-10 along another, and the final norm is the identity (zero weight, Qwen3.5's 1 + w): after
# " apple" or " banana" the logits are apple 10, banana 9 (0.625 * 16, 0.5625 * 16), all others 0.

def scripted_model(base, out):
    """The edit above (chain_model.edit_checkpoint); returns the ids of apple and banana."""
    from chain_model import bf16, edit_checkpoint
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(base, "tokenizer.json"))
    apple, banana = (tok.encode(w, add_special_tokens=False).ids for w in (" apple", " banana"))
    assert len(apple) == 1 and len(banana) == 1
    apple, banana = apple[0], banana[0]

    def embed(view):
        view[...] = 0
        view[:, 1] = bf16(2.0 ** -10)
        view[apple, :] = 0
        view[banana, :] = 0
        view[apple, 0] = bf16(0.625)
        view[banana, 0] = bf16(0.5625)
    edit_checkpoint(base, out, embed, copy=(".json",))
    return apple, banana


@pytest.fixture(scope="module")
def scripted(model_dir, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("scripted"))
    apple, banana = scripted_model(model_dir, out)
    s = Server(out, max_seq_len=256, extra=["--no-capsules"])
    s.apple, s.banana = apple, banana
    yield s
    s.stop()


def words(s, text):
    """The output as a/b letters (apple/banana), '?' for anything else."""
    out, rest = [], text
    while rest:
        if rest.startswith(" apple"):
            out.append("a"); rest = rest[6:]
        elif rest.startswith(" banana"):
            out.append("b"); rest = rest[7:]
        else:
            out.append("?"); rest = rest[1:]
    return "".join(out)


def run(s, **kw):
    kw.setdefault("temperature", 0)
    r = s.client.completions.create(model="frost", prompt=[s.apple], max_tokens=8, **kw)
    return words(s, r.choices[0].text)


def test_bug1_scripted_model_repeats_apple(scripted):
    assert run(scripted) == "aaaaaaaa"


def test_bug1_frequency_penalty_takes_effect(scripted):
    # apple 10 - 2k vs banana 9 - 2j: the two alternate.
    assert run(scripted, frequency_penalty=2.0) == "abababab"


def test_bug1_presence_penalty_takes_effect(scripted):
    # Once both were seen (8 vs 7), apple wins for good.
    assert run(scripted, presence_penalty=2.0) == "abaaaaaa"


def test_bug1_repetition_penalty_takes_effect(scripted):
    # The prompt's apple is divided first (6.67 < 9), then banana too (6 < 6.67).
    r = scripted.client.completions.create(model="frost", prompt=[scripted.apple], max_tokens=8, temperature=0,
                                           extra_body={"repetition_penalty": 1.5})
    assert words(scripted, r.choices[0].text) == "baaaaaaa"


def test_bug1_logit_bias_takes_effect(scripted):
    assert run(scripted, logit_bias={str(scripted.banana): 2}) == "bbbbbbbb"


@pytest.mark.xfail(BACKEND == "cuda", strict=True,
                   reason="the CUDA sampler serves top_k = 0 as the 256 best candidates (lm_sample_topk.cu), so "
                          "the flat 151k-token tail this test relies on never reaches the draw")
def test_bug1_min_p_takes_effect(scripted):
    # At temperature 1 the 151k other tokens (logit 0) hold most of the mass; min_p 0.1 keeps
    # only apple and banana. Without it an unrelated token shows up.
    kw = dict(temperature=1.0, max_tokens=24, prompt=[scripted.apple], model="frost")
    plain = scripted.client.completions.create(**kw, seed=5)
    assert "?" in words(scripted, plain.choices[0].text)
    for seed in range(3):
        r = scripted.client.completions.create(**kw, seed=seed, extra_body={"min_p": 0.1})
        assert set(words(scripted, r.choices[0].text)) <= {"a", "b"}, r.choices[0].text


def test_bug1_penalties_also_in_chat_and_streams(scripted):
    # Chat renders a template (tokens other than apple/banana), so only check the effect exists:
    # with logit_bias +100 on banana every output token is banana, streamed or not.
    msgs = [{"role": "user", "content": "fruit"}]
    r = scripted.client.chat.completions.create(model="frost", messages=msgs, max_tokens=5, temperature=0,
                                                logit_bias={str(scripted.banana): 100},
                                                extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    assert words(scripted, r.choices[0].message.content) == "bbbbb"
    st = scripted.client.chat.completions.create(model="frost", messages=msgs, max_tokens=5, temperature=0,
                                                 logit_bias={str(scripted.banana): 100}, stream=True,
                                                 extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    text = "".join(c.choices[0].delta.content or "" for c in st if c.choices)
    assert words(scripted, text) == "bbbbb"


def test_bug1_unknown_fields_are_400_naming_them(server):
    with pytest.raises(openai.BadRequestError) as e:
        server.client.chat.completions.create(model="frost", messages=[{"role": "user", "content": "x"}],
                                              max_tokens=2, extra_body={"foo_bar": 1, "min_q": 2})
    assert "foo_bar" in str(e.value) and "min_q" in str(e.value)


# --- Bug 10: one chat renderer for generate and serve; CLI messages name their cause -----------

def frost_cli(*args):
    import subprocess
    return subprocess.run([FROST, *args], capture_output=True, text=True, timeout=300)


def test_bug10_generate_chat_renders_as_serve(model_dir, tmp_path):
    # The model folder without a chat_template: both commands fall back to the built-in Qwen3.5
    # renderer, whose generation prompt opens a <think> block (plain ChatML would not).
    d = tmp_path / "m"
    d.mkdir()
    for name in os.listdir(model_dir):
        src = os.path.join(model_dir, name)
        if name == "tokenizer_config.json":
            cfg = json.load(open(src))
            cfg.pop("chat_template", None)
            json.dump(cfg, open(d / name, "w"))
        elif not name.startswith("."):
            os.symlink(src, d / name)
    msg = "Name three colours."
    g = frost_cli("generate", "--model", str(d), "--prompt", msg, "--chat", "--json", "--max-new-tokens", "4")
    assert g.returncode == 0, g.stderr
    gen = json.loads(g.stdout.strip().split("\n")[-1])
    server = Server(str(d))
    try:
        assert "built-in Qwen3.5 template" in "".join(server.lines)
        r = server.client.chat.completions.create(model="frost", messages=[{"role": "user", "content": msg}],
                                                  max_tokens=4, temperature=0)
    finally:
        server.stop()
    assert gen["prompt_tokens"] == r.usage.prompt_tokens
    # Same prompt, same greedy tokens: the server's text (reasoning split out) is generate's text.
    import re
    m = r.choices[0].message
    served = (m.model_extra or {}).get("reasoning_content") or ""
    served += m.content or ""
    norm = lambda t: re.sub(r"\s+|</?think>", "", t)
    assert norm(gen["text"]) == norm(served), (gen["text"], served)


def test_bug10_cli_errors_name_their_cause(model_dir, tmp_path):
    bad = frost_cli("generate", "--model", str(tmp_path / "nope"), "--prompt", "hi")
    assert bad.returncode != 0 and "config.json" in bad.stderr and "tokenizer.json" not in bad.stderr, bad.stderr
    num = frost_cli("generate", "--model", model_dir, "--prompt", "hi", "--max-new-tokens", "12x")
    assert num.returncode == 2 and "--max-new-tokens" in num.stderr.split("\n")[0], num.stderr
    top = frost_cli("generate", "--model", model_dir, "--prompt", "hi", "--top-p", "abc")
    assert top.returncode == 2 and "--top-p" in top.stderr.split("\n")[0], top.stderr
    missing = frost_cli("generate", "--model", model_dir)
    assert missing.returncode == 2 and "--prompt" in missing.stderr.split("\n")[0], missing.stderr
    h = frost_cli("help", "serve")
    text = h.stdout + h.stderr
    for word in ("sessions", "fork", "rollback"):
        assert word in text, f"frost help serve omits {word}:\n{text}"


# --- Bug 9: sessions come back with their capsules after a restart ------------------------------

def test_bug9_sessions_survive_a_restart_with_their_capsules(model_dir, tmp_path):
    caps = str(tmp_path / "caps")
    extra = ["--capsule-dir", caps]
    s = Server(model_dir, extra=extra)
    try:
        made = s.api("POST", "/v1/sessions", {"id": "agent-restart"})
        assert made["id"] == "agent-restart"
        rng = random.Random()
        cap = s.api("POST", "/v1/capsules", {"prompt": [rng.randrange(1000, 20000) for _ in range(100)],
                                              "session_id": "agent-restart", "ttl_s": 3600})
        assert cap["session_id"] == "agent-restart" and cap["ttl_remaining_s"] > 3500
    finally:
        assert s.stop() == 0
    s = Server(model_dir, extra=extra)
    try:
        got = s.api("GET", "/v1/sessions/agent-restart")
        assert got["capsules"] == [cap["id"]]
        listed = s.api("GET", "/v1/sessions")
        assert "agent-restart" in [x["id"] for x in listed["data"]]
        again = s.api("GET", "/v1/capsules/" + cap["id"])
        assert 3000 < again["ttl_remaining_s"] <= 3600 and again["created"] > 0
    finally:
        s.stop()
