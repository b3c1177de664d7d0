"""Concurrent streams through `frost serve` (real CPU engine, official `openai` client) decode in
ONE batched engine step per round (issue 16): each stream's text equals the same request run
alone (greedy and seeded sampling), the server's counters show the streams were batched, and a
stream cancelled mid-way (client disconnect) leaves the others' text intact."""
import os
import re
import threading
import urllib.request

import pytest
from serve_proc import FROST, ServeProcess

openai = pytest.importorskip("openai")

KEY = "sk-frost-batch"
PROMPTS = ["def quicksort(items):", "The capital of France is", "Once upon a time, in a small village,",
           "SELECT name FROM users WHERE"]
MAX_TOKENS = 24

pytestmark = pytest.mark.skipif(not FROST or not os.path.exists(FROST), reason="FROST_BIN not set")


class Server(ServeProcess):
    def __init__(self, model):
        super().__init__(model, key=KEY, sessions=4)
        self.client = openai.OpenAI(base_url=self.base + "/v1", api_key=KEY, max_retries=0, timeout=120)

    def counters(self):
        req = urllib.request.Request(self.base + "/metrics", headers={"Authorization": "Bearer " + KEY})
        with urllib.request.urlopen(req, timeout=10) as r:
            text = r.read().decode()
        get = lambda name: float(re.search(r"^" + name + r" ([0-9.e+]+)$", text, re.M).group(1))
        return get("frost_decode_steps_total"), get("frost_decode_rows_total")


@pytest.fixture(scope="module")
def server(model_dir):
    s = Server(model_dir)
    yield s
    s.stop()


def stream_text(server, prompt, sampling, stop_after=None, started=None):
    """Streams one completion; with stop_after, disconnects after that many chunks."""
    text, chunks = "", 0
    stream = server.client.completions.create(model="frost", prompt=prompt, max_tokens=MAX_TOKENS, stream=True,
                                              **sampling)
    for chunk in stream:
        if started is not None:
            started.set()
        for c in chunk.choices:
            text += c.text or ""
        chunks += 1
        if stop_after is not None and chunks >= stop_after:
            stream.response.close()
            break
    return text


def concurrent(server, jobs):
    """jobs: (prompt, sampling, stop_after) each; all start together; returns their texts."""
    out = [None] * len(jobs)
    barrier = threading.Barrier(len(jobs))

    def run(i, prompt, sampling, stop_after):
        barrier.wait()
        out[i] = stream_text(server, prompt, sampling, stop_after)

    threads = [threading.Thread(target=run, args=(i, *j)) for i, j in enumerate(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    return out


def sampling_for(i, seeded):
    return {"temperature": 0.8, "top_p": 0.9, "seed": 1000 + i} if seeded else {"temperature": 0}


@pytest.mark.parametrize("seeded", [False, True], ids=["greedy", "seeded"])
def test_concurrent_streams_equal_solo(server, seeded):
    solo = [stream_text(server, p, sampling_for(i, seeded)) for i, p in enumerate(PROMPTS)]
    assert all(len(t) > 0 for t in solo)
    steps0, rows0 = server.counters()
    together = concurrent(server, [(p, sampling_for(i, seeded), None) for i, p in enumerate(PROMPTS)])
    steps1, rows1 = server.counters()
    assert together == solo
    # Batched: the 4 streams' tokens took fewer engine steps than tokens (solo: one step each).
    assert rows1 - rows0 > 1.5 * (steps1 - steps0), (steps1 - steps0, rows1 - rows0)


def test_cancelled_stream_leaves_the_others_intact(server):
    solo = [stream_text(server, p, sampling_for(i, True)) for i, p in enumerate(PROMPTS[:3])]
    jobs = [(p, sampling_for(i, True), 2 if i == 1 else None) for i, p in enumerate(PROMPTS[:3])]
    got = concurrent(server, jobs)
    assert got[0] == solo[0] and got[2] == solo[2]
    assert solo[1].startswith(got[1])
    # The server is still healthy and serves the cancelled prompt in full afterwards.
    assert stream_text(server, PROMPTS[1], sampling_for(1, True)) == solo[1]
