"""End-to-end tests of `frost serve` over the REAL CPU engine with the official `openai` client:
a synthetic tiny Qwen3.5 checkpoint whose vocabulary matches the real Qwen3 tokenizer
(`frost synth --tokenizer tests/fixtures/tokenizer-qwen3`), served on 127.0.0.1.
Covers chat/completions streamed and not, usage.cached_tokens, a multi-turn agent conversation
whose later turn is a capsule restore and equals a cold (capsule-free) server, bad inputs, auth,
and SIGTERM (in-flight streams end, new work is refused while draining, exit 0 within 25 s)."""
import json
import os
import signal
import threading
import time
import urllib.error
import urllib.request

import pytest
from serve_proc import FROST, ServeProcess

openai = pytest.importorskip("openai")

KEY = "sk-frost-test"
SYSTEM = ("You are a careful coding agent working in a large repository. " * 12).strip()
TOOLS = [{"type": "function", "function": {"name": "run_shell", "description": "Run a shell command",
                                           "parameters": {"type": "object",
                                                          "properties": {"cmd": {"type": "string"}},
                                                          "required": ["cmd"]}}}]

pytestmark = pytest.mark.skipif(not FROST or not os.path.exists(FROST), reason="FROST_BIN not set")


class Server(ServeProcess):
    def __init__(self, model, extra=(), key=KEY):
        super().__init__(model, extra, key=key, sessions=2)
        self.client = openai.OpenAI(base_url=self.base + "/v1", api_key=key or "none", max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def warm(model_dir):
    s = Server(model_dir)
    yield s
    s.stop()


def chat(server, messages, **kw):
    kw.setdefault("max_tokens", 6)
    kw.setdefault("temperature", 0)
    return server.client.chat.completions.create(model="frost", messages=messages, **kw)


def test_models_and_health(warm):
    assert [m.id for m in warm.client.models.list().data] == ["frost"]
    with urllib.request.urlopen(warm.base + "/health", timeout=10) as r:
        assert json.load(r)["status"] == "ok"


def test_chat_non_stream_and_stream_agree(warm):
    msgs = [{"role": "user", "content": "Write a haiku about capsules."}]
    r = chat(warm, msgs, max_tokens=8)
    assert r.choices[0].finish_reason in ("length", "stop")
    assert r.usage.completion_tokens >= 1
    assert r.usage.prompt_tokens_details.cached_tokens >= 0
    text = ""
    finish = None
    usage = None
    for chunk in chat(warm, msgs, max_tokens=8, stream=True, stream_options={"include_usage": True}):
        if chunk.usage:
            usage = chunk.usage
        for c in chunk.choices:
            text += c.delta.content or ""
            finish = c.finish_reason or finish
    assert text == r.choices[0].message.content  # greedy: same tokens either way
    assert finish == r.choices[0].finish_reason
    assert usage.completion_tokens == r.usage.completion_tokens


def test_completions_text_and_ids(warm):
    r = warm.client.completions.create(model="frost", prompt="def fib(n):", max_tokens=5, temperature=0)
    assert len(r.choices[0].text) > 0
    r2 = warm.client.completions.create(model="frost", prompt=[1, 2, 3, 4], max_tokens=3, temperature=0)
    assert r2.usage.prompt_tokens == 4


def test_multi_turn_agent_restores_and_matches_cold(model_dir, warm):
    turn1 = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "List the files in src/."}]
    r1 = chat(warm, turn1, tools=TOOLS)
    turn2 = turn1 + [{"role": "assistant", "content": "I will run ls."},
                     {"role": "user", "content": "Now grep for TODO."}]
    r2 = chat(warm, turn2, tools=TOOLS)
    extra = r2.model_extra or {}
    assert extra.get("frost", {}).get("plan") == "restore", extra
    assert r2.usage.prompt_tokens_details.cached_tokens >= 64
    cold = Server(model_dir, extra=["--no-capsules"])
    try:
        c2 = chat(cold, turn2, tools=TOOLS)
        assert (c2.model_extra or {}).get("frost", {}).get("plan") == "rebuild"
        assert c2.choices[0].message.content == r2.choices[0].message.content
        assert c2.usage.completion_tokens == r2.usage.completion_tokens
    finally:
        assert cold.stop() == 0
    assert r1.usage.prompt_tokens < r2.usage.prompt_tokens


def test_n_choices_are_a_batched_fork_of_the_real_state(warm):
    # Two slots are free, so n=2 prefills once and copies the live state (KV, recurrent, conv,
    # cursor) into the second slot: greedy, both choices equal a single request's output.
    msgs = [{"role": "user", "content": "Name three prime numbers and explain why they are prime."}]
    one = chat(warm, msgs, max_tokens=8)
    two = chat(warm, msgs, max_tokens=8, n=2)
    assert len(two.choices) == 2
    assert [c.message.content for c in two.choices] == [one.choices[0].message.content] * 2
    assert two.usage.completion_tokens == 2 * one.usage.completion_tokens


def test_bad_inputs_are_400(warm):
    msgs = [{"role": "user", "content": "x"}]
    for kw in ({"n": 100}, {"temperature": 5}, {"top_p": 0}, {"max_tokens": 0}, {"max_tokens": 10 ** 9}):
        with pytest.raises(openai.BadRequestError):
            chat(warm, msgs, **kw)
    with pytest.raises(openai.BadRequestError) as e:
        chat(warm, [{"role": "user", "content": "word " * 2000}])
    assert e.value.code == "context_length_exceeded"
    assert "1024" in str(e.value) and "2009" in str(e.value)


def test_wrong_key_is_401(warm):
    bad = openai.OpenAI(base_url=warm.base + "/v1", api_key="sk-wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        bad.models.list()


def test_sigterm_ends_stream_and_exits_zero(model_dir):
    s = Server(model_dir, extra=["--drain-timeout", "0"])
    stream = chat(s, [{"role": "user", "content": "Count to a thousand."}], max_tokens=900, stream=True)
    it = iter(stream)
    next(it)
    s.proc.send_signal(signal.SIGTERM)
    ended_with_error = False
    try:
        for _ in it:
            pass
    except openai.APIError:
        ended_with_error = True
    code = s.proc.wait(timeout=30)  # bounded wait; --drain-timeout 0 ends streams at once
    assert code == 0
    assert ended_with_error


def test_sigterm_with_many_streams_refuses_new_work_and_exits_in_time(model_dir):
    """Reliability case T23: SIGTERM with 64 streams in flight (2 running, 62 queued). While it drains,
    /health says so and new work gets 503 with Retry-After; every stream ends (finished, a final
    error event, or refused if it never started), none hangs, and the process exits 0 within 25 s."""
    streams = 64
    s = Server(model_dir, extra=["--drain-timeout", "20", "--queue", str(streams)])
    outcomes = [None] * streams
    first = threading.Event()

    def run(i):
        try:
            stream = chat(s, [{"role": "user", "content": f"Count to a thousand, list {i}."}], max_tokens=400,
                          stream=True)
            for _ in stream:
                first.set()
            outcomes[i] = "finished"
        except openai.APIStatusError as e:
            outcomes[i] = f"status {e.status_code}"
        except openai.APIError:
            outcomes[i] = "error event"
        except Exception as e:  # anything else is a defect the assertion below names
            outcomes[i] = f"other {type(e).__name__}: {e}"

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(streams)]
    for t in threads:
        t.start()
    assert first.wait(60), "no stream started"
    t0 = time.time()
    s.proc.send_signal(signal.SIGTERM)
    draining = False
    while not draining and time.time() - t0 < 10:
        try:
            urllib.request.urlopen(s.base + "/health", timeout=5).close()
            time.sleep(0.02)
        except urllib.error.HTTPError as e:
            draining = e.code == 503
    if draining:  # the two running streams keep it draining: new work now must be refused
        req = urllib.request.Request(s.base + "/v1/chat/completions", method="POST",
                                     data=json.dumps({"model": "frost", "max_tokens": 4,
                                                      "messages": [{"role": "user", "content": "late"}]}).encode(),
                                     headers={"Authorization": "Bearer " + KEY, "Content-Type": "application/json"})
        try:
            urllib.request.urlopen(req, timeout=10).close()
            late = 200
        except urllib.error.HTTPError as e:
            late = e.code
            assert e.headers.get("Retry-After"), "503 without Retry-After"
        assert late == 503, late
    code = s.proc.wait(timeout=30)
    elapsed = time.time() - t0
    for t in threads:
        t.join(timeout=30)
        assert not t.is_alive(), "a stream never ended"
    assert code == 0
    assert elapsed <= 25, elapsed
    assert draining or all(o == "finished" for o in outcomes), outcomes  # seen draining unless all ended first
    assert all(o is not None and not o.startswith("other") for o in outcomes), outcomes
    print("T23 outcomes:", {o: outcomes.count(o) for o in set(outcomes)})
