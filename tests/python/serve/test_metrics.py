"""GET /metrics: the exposition parses (a small reader of the Prometheus text format written
here: HELP/TYPE per family, histograms with cumulative buckets ending in +Inf == _count), and the
latency histograms move as they should: time to first token counts from the request's ARRIVAL
(a request queued behind another on a one-slot server reports the wait), inter-token latency
once per token after the first, end-to-end once per request and within the client's wall time."""
import json
import math
import os
import re
import threading
import time

import pytest
from api_common import KEY, ApiServer, fresh_rng, random_text
from serve_proc import BACKEND, FROST

pytestmark = pytest.mark.skipif(not FROST or not os.path.exists(FROST), reason="FROST_BIN not set")
# Long enough for B to wait well behind A: the tiny model decodes ~2 ms a token on the CPU engine
# (0.8 s), and ~10x faster on CUDA.
A_TOKENS = 400 if BACKEND == "cpu" else 3000
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*(,|$)')


def parse_exposition(text):
    """{family: {"type": t, "samples": [(name, {labels}, value)]}}; asserts the format's rules."""
    fams, current = {}, None
    for line in text.splitlines():
        if not line.strip():
            continue
        if line.startswith("# HELP "):
            name = line.split()[2]
            assert name not in fams, "family twice: " + name
            fams[name] = {"type": None, "samples": []}
            current = name
        elif line.startswith("# TYPE "):
            _, _, name, typ = line.split(None, 3)
            assert name == current and typ in ("counter", "gauge", "histogram", "summary", "untyped"), line
            fams[name]["type"] = typ
        else:
            m = SAMPLE.match(line)
            assert m, "bad sample line: " + line
            name, labels_text, value = m.group(1), m.group(3) or "", float(m.group(4))
            labels, pos = {}, 0
            while pos < len(labels_text):
                lm = LABEL.match(labels_text, pos)
                assert lm, "bad labels: " + line
                labels[lm.group(1)] = lm.group(2)
                pos = lm.end()
            base = current
            ok = name == base or (fams[base]["type"] == "histogram" and name in (base + "_bucket", base + "_sum", base + "_count"))
            assert ok, f"sample {name} outside its family {base}"
            fams[base]["samples"].append((name, labels, value))
    for name, f in fams.items():
        if f["type"] != "histogram":
            continue
        series = {}
        for sname, labels, value in f["samples"]:
            key = tuple(sorted((k, v) for k, v in labels.items() if k != "le"))
            series.setdefault(key, {"buckets": [], "sum": None, "count": None})
            if sname.endswith("_bucket"):
                series[key]["buckets"].append((float(labels["le"]), value))
            elif sname.endswith("_sum"):
                series[key]["sum"] = value
            else:
                series[key]["count"] = value
        for key, s in series.items():
            les = [le for le, _ in s["buckets"]]
            counts = [c for _, c in s["buckets"]]
            assert les == sorted(les) and les[-1] == math.inf, (name, les)
            assert counts == sorted(counts), (name, counts)
            assert counts[-1] == s["count"] and s["sum"] >= 0, (name, s)
        f["series"] = series
    return fams


def histogram(fams, name):
    s = fams[name]["series"][()]
    return s["count"], s["sum"]


@pytest.fixture(scope="module")
def server(model_dir):
    s = ApiServer(model_dir, sessions=1, max_seq_len=4096)
    yield s
    s.stop()


def scrape(server):
    status, h, body = server.raw("GET", "/metrics", None, {"Authorization": "Bearer " + KEY})
    assert status == 200 and h["content-type"].startswith("text/plain")
    return parse_exposition(body.decode())


def test_exposition_parses_and_latency_histograms_move(server):
    rng = fresh_rng()
    before = scrape(server)
    for fam in ("frost_ttft_seconds", "frost_inter_token_latency_seconds", "frost_e2e_request_latency_seconds"):
        assert before[fam]["type"] == "histogram", fam
    ttft0, itl0, e2e0 = (histogram(before, f) for f in
                         ("frost_ttft_seconds", "frost_inter_token_latency_seconds", "frost_e2e_request_latency_seconds"))

    # A occupies the only slot; B arrives while A decodes and waits in the queue. A is not
    # streamed: its whole answer arrives at once, so the client's clock sees A end when the
    # server ends it. (A stream of 3000 chunks through the openai client lagged the CUDA engine
    # by a third of a second, which the wait below would have counted.)
    results = {}

    def run_a():
        t0 = time.monotonic()
        r = server.openai.chat.completions.create(model="frost", messages=[{"role": "user", "content": random_text(rng)}],
                                                  max_tokens=A_TOKENS, temperature=0)
        results["a"] = (t0, time.monotonic(), r.usage.completion_tokens)

    ta = threading.Thread(target=run_a)
    ta.start()
    deadline = time.monotonic() + 120
    while scrape(server)["frost_active_requests"]["samples"][0][2] < 1 and "a" not in results:
        assert time.monotonic() < deadline, "A never held the slot"
        time.sleep(0.002)
    tb = time.monotonic()
    rb = server.openai.chat.completions.create(model="frost", messages=[{"role": "user", "content": random_text(rng)}],
                                              max_tokens=4, temperature=0)
    tb_end = time.monotonic()
    ta.join()
    a_start, a_end, a_tokens = results["a"]

    after = scrape(server)
    ttft1, itl1, e2e1 = (histogram(after, f) for f in
                         ("frost_ttft_seconds", "frost_inter_token_latency_seconds", "frost_e2e_request_latency_seconds"))
    assert ttft1[0] - ttft0[0] == 2 and e2e1[0] - e2e0[0] == 2
    # B's first token came after A finished: counted from B's arrival, its TTFT holds that wait.
    waited = a_end - tb
    assert waited > 0.2, "A ended too soon to show a queue wait; lengthen it"
    assert ttft1[1] - ttft0[1] >= 0.8 * waited, (ttft1[1] - ttft0[1], waited)
    # One inter-token gap per token after each choice's first.
    assert itl1[0] - itl0[0] == (a_tokens - 1) + (rb.usage.completion_tokens - 1)
    assert 0 < itl1[1] - itl0[1] <= (a_end - a_start) + (tb_end - tb)
    # End to end: within the clients' wall times, and at least the wait.
    assert waited * 0.8 <= e2e1[1] - e2e0[1] <= (a_end - a_start) + (tb_end - tb) + 0.05


def test_ttft_counts_from_arrival(server):
    """The histogram's TTFT is the response's own server-side TTFT (every timings_ms phase up to the
    first token: parse, template and tokenize on the I/O thread included), not the engine's part
    from the queue on. A long prompt makes the I/O-thread part (~1 ms) far above the tolerance."""
    rng = fresh_rng()
    text = " ".join(rng.choice(["river", "stone", "agent", "kernel"]) + str(rng.randrange(1000)) for _ in range(800))
    before = histogram(scrape(server), "frost_ttft_seconds")
    r = server.openai.chat.completions.create(model="frost", messages=[{"role": "user", "content": text}],
                                             max_tokens=1, temperature=0)
    after = histogram(scrape(server), "frost_ttft_seconds")
    t = r.model_extra["frost"]["timings_ms"]
    server_side = sum(v for k, v in t.items() if k not in ("emit", "after_first_token"))
    io_part = t["parse"] + t["template"] + t["tokenize"]
    tolerance_ms = 0.05
    assert io_part > 4 * tolerance_ms, ("prompt too short to tell arrival from admission", t)
    assert after[0] - before[0] == 1
    assert abs((after[1] - before[1]) * 1000 - server_side) < tolerance_ms, ((after[1] - before[1]) * 1000, t)


def gauge(fams, name, **labels):
    vals = [v for _, lab, v in fams[name]["samples"] if all(lab.get(k) == x for k, x in labels.items())]
    assert len(vals) == 1, (name, labels, fams[name]["samples"])
    return vals[0]


def test_memory_gauges_show_the_engine_buffers_and_the_device(server):
    """The engine's memory: its buffers per space, live buffers and graphs (gauges), and on a GPU
    (FROST_SERVE_BACKEND=cuda) the driver's used / total bytes, which cover the engine's device
    buffers; on the CPU engine no device gauges. A turn that freezes capsules raises the buffers of
    the capsule's tier by exactly the bytes the store reports, so the engine's own (weights, state,
    scratch) stay put, and deleting them gives the bytes back."""
    rng = fresh_rng()
    server.openai.chat.completions.create(model="frost", messages=[{"role": "user", "content": random_text(rng)}],
                                          max_tokens=2, temperature=0)
    fams = scrape(server)
    spaces = {lab["space"]: v for _, lab, v in fams["frost_buffer_bytes"]["samples"]}
    assert set(spaces) == {"device", "host_pinned", "host"} and spaces["device"] > 0, spaces
    assert fams["frost_buffer_bytes"]["type"] == "gauge"
    assert gauge(fams, "frost_live_buffers") > 0 and gauge(fams, "frost_live_graphs") >= 1
    if BACKEND == "cuda":
        used, total = gauge(fams, "frost_device_memory_used_bytes"), gauge(fams, "frost_device_memory_total_bytes")
        assert spaces["device"] <= used < total, (spaces, used, total)
    else:
        assert "frost_device_memory_used_bytes" not in fams and "frost_device_memory_total_bytes" not in fams

    def own(f):  # the engine's device bytes beside the device-tier capsules
        return gauge(f, "frost_buffer_bytes", space="device") - gauge(f, "frost_capsule_bytes", tier="device")

    base = own(fams)
    for _ in range(3):
        sys_text = random_text(rng) + " " + random_text(rng)  # a system turn freezes a capsule
        server.openai.chat.completions.create(
            model="frost", max_tokens=2, temperature=0,
            messages=[{"role": "system", "content": sys_text}, {"role": "user", "content": random_text(rng)}])
    fams = scrape(server)
    assert gauge(fams, "frost_capsule_bytes", tier="device") > 0
    assert own(fams) == base, (own(fams), base)
    auth = {"Authorization": "Bearer " + KEY}
    status, _, body = server.raw("GET", "/v1/capsules", None, auth)
    assert status == 200
    for c in json.loads(body)["data"]:
        status, _, body = server.raw("DELETE", "/v1/capsules/" + c["id"] + "?force=true", None, auth)
        assert status == 200, body
    fams = scrape(server)
    assert gauge(fams, "frost_capsule_bytes", tier="device") == 0
    assert gauge(fams, "frost_buffer_bytes", space="device") == base
