"""Sustained overload (design/reliability.md T29, at CI scale) over the REAL CPU engine: 24
streaming clients on three API keys against a server that runs 2 streams and queues 4 (about 4x
its capacity) for 30 s.

What must hold the whole time:
- every request is either served to the end (200, an SSE stream ending in `data: [DONE]`) or
  refused before any SSE byte: 503 (queue full) or 429 (the per-key limit), JSON, with
  Retry-After;
- the queue never holds more than its bound (/metrics frost_queue_depth, sampled);
- the server's RSS does not keep growing (a bound on growth after warm-up), nor do the engine's
  own buffers (/metrics frost_buffer_bytes less the capsules' frost_capsule_bytes, per space: the
  same bytes at every sample); on a GPU (FROST_SERVE_BACKEND=cuda) the device memory in use
  (frost_device_memory_used_bytes) is printed: it counts every process on the device, and the
  GPU script runs the suites side by side;
and after it: the queue is empty, the server still answers, and the counters of refusals agree
with what the clients saw. Latency is reported, not asserted (tests never assert on time)."""
import http.client
import json
import os
import random
import re
import threading
import time

import pytest
from serve_proc import BACKEND, FROST, ServeProcess, read_chat_stream, rss_kib

pytestmark = pytest.mark.skipif(not FROST or not os.path.exists(FROST), reason="FROST_BIN not set")

KEYS = ["sk-over-0", "sk-over-1", "sk-over-2"]
SESSIONS, QUEUE, PER_KEY = 2, 4, 2
CLIENTS = 24
SECONDS = 30
RSS_GROWTH_KIB = 64 * 1024  # after warm-up: far above noise, far below a per-request leak
WORDS = "alpha build cache delta engine frost graph host index join kernel layer model node".split()


def metrics_text(port):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("GET", "/metrics", headers={"Authorization": "Bearer " + KEYS[0]})
    text = c.getresponse().read().decode()
    c.close()
    return text


def metric(port, name, text=None):
    """A sample's value; `name` may carry its labels, as in frost_buffer_bytes{space="device"}."""
    text = metrics_text(port) if text is None else text
    m = re.search(rf"^{re.escape(name)} ([0-9.e+]+)$", text, re.M)
    assert m, f"no {name} in /metrics"
    return float(m.group(1))


def memory_sample(port):
    """(the engine's own buffer bytes per space, i.e. frost_buffer_bytes less the capsules on the
    tier that space holds; the device memory in use, or None without a device)."""
    text = metrics_text(port)
    caps = {t: metric(port, f'frost_capsule_bytes{{tier="{t}"}}', text) for t in ("device", "host")}
    own = (metric(port, 'frost_buffer_bytes{space="device"}', text) - caps["device"],
           metric(port, 'frost_buffer_bytes{space="host_pinned"}', text) - caps["host"],
           metric(port, 'frost_buffer_bytes{space="host"}', text))
    used = metric(port, "frost_device_memory_used_bytes", text) if "frost_device_memory_used_bytes" in text else None
    return own, used


class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.counts = {}
        self.ttft = []
        self.failures = []

    def add(self, what, ttft=None):
        with self.lock:
            self.counts[what] = self.counts.get(what, 0) + 1
            if ttft is not None:
                self.ttft.append(ttft)

    def fail(self, what):
        with self.lock:
            self.failures.append(what)


def client(port, key, seed, deadline, tally):
    rng = random.Random(seed)
    while time.time() < deadline:
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randrange(4, 30)))
        body = json.dumps({"model": "frost", "messages": [{"role": "user", "content": words}],
                           "max_tokens": rng.randrange(2, 10), "stream": True})
        t0 = time.time()
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        try:
            c.request("POST", "/v1/chat/completions", body=body,
                      headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"})
            r = c.getresponse()
            if r.status in (429, 503):
                data = r.read()
                ctype = r.getheader("Content-Type", "")
                if not r.getheader("Retry-After") or "json" not in ctype or b"data:" in data:
                    tally.fail(f"{r.status} without Retry-After or not a JSON error: {ctype} {data[:200]!r}")
                json.loads(data)
                tally.add(str(r.status))
                time.sleep(rng.uniform(0, 0.2))  # an impatient client: retries well before Retry-After
                continue
            if r.status != 200:
                tally.fail(f"status {r.status}: {r.read()[:200]!r}")
                continue
            first, last = read_chat_stream(r, t0)
            if last != b"data: [DONE]":
                tally.fail(f"a stream ended without [DONE]: {last[:200]!r}")
            tally.add("200", first)
        except (OSError, http.client.HTTPException, ValueError) as e:
            tally.fail(f"{type(e).__name__}: {e}")
        finally:
            c.close()


def test_four_times_capacity_sheds_cleanly_and_bounds_the_queue(model_dir):
    server = ServeProcess(model_dir, ["--queue", str(QUEUE), "--max-per-key", str(PER_KEY)] +
                          [a for k in KEYS[1:] for a in ("--api-key", k)], key=KEYS[0], sessions=SESSIONS)
    try:
        # Drain the server's output in the background: a full pipe would stall it.
        threading.Thread(target=lambda: [None for _ in server.proc.stdout], daemon=True).start()
        tally = Tally()
        deadline = time.time() + SECONDS
        seed = int.from_bytes(os.urandom(4), "little")
        threads = [threading.Thread(target=client, args=(server.port, KEYS[i % len(KEYS)], seed + i, deadline, tally))
                   for i in range(CLIENTS)]
        for t in threads:
            t.start()
        depth_max, rss, own, device = 0.0, [], [], []
        while time.time() < deadline:
            depth_max = max(depth_max, metric(server.port, "frost_queue_depth"))
            rss.append(rss_kib(server.proc.pid))
            o, d = memory_sample(server.port)
            own.append(o)
            device.append(d)
            time.sleep(0.2)
        for t in threads:
            t.join(timeout=180)
        assert not any(t.is_alive() for t in threads)

        assert not tally.failures, tally.failures[:10]
        served, full, limited = (tally.counts.get(k, 0) for k in ("200", "503", "429"))
        assert served > 0 and full + limited > 0, tally.counts  # it was overloaded, and it served
        assert depth_max <= QUEUE, depth_max
        assert metric(server.port, "frost_queue_depth") == 0
        assert metric(server.port, "frost_rejected_queue_full_total") >= full
        warm = rss[len(rss) // 5:]
        assert warm[-1] - warm[0] <= RSS_GROWTH_KIB, (warm[0], warm[-1])
        own.append(memory_sample(server.port)[0])
        assert len(set(own)) == 1, sorted(set(own))  # static engine buffers: no sample differs
        warm_dev = device[len(device) // 5:]
        assert (warm_dev[0] is None) == (BACKEND == "cpu"), warm_dev[0]
        dev_note = ""
        if warm_dev[0] is not None:
            dev_note = f", device memory {warm_dev[0] / 2**20:.0f} -> {warm_dev[-1] / 2**20:.0f} MiB (max {max(warm_dev) / 2**20:.0f})"
        ttft = sorted(x for x in tally.ttft if x is not None)
        print(f"overload: {served} served, {full} x 503, {limited} x 429, queue max {depth_max:.0f}, "
              f"TTFT p50 {ttft[len(ttft) // 2] * 1000:.0f} ms p99 {ttft[int(len(ttft) * 0.99)] * 1000:.0f} ms, "
              f"RSS {warm[0] / 1024:.0f} -> {warm[-1] / 1024:.0f} MiB, engine buffers {own[0]}{dev_note}")
        # Still serving once the storm is over.
        assert server.api("POST", "/v1/chat/completions",
                          {"model": "frost", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2})["choices"]
    finally:
        assert server.stop() == 0
