"""Host allocation failures (design/reliability.md T33) against the REAL CPU engine.

`frost serve` runs under an LD_PRELOAD heap shim (tests/serve/alloc_shim.cpp, test-only) that can
make malloc refuse, as an exhausted heap or an address-space limit does; operator new then throws
std::bad_alloc wherever the server happens to be: parsing a body, rendering the chat template,
tokenizing, inside a CPU kernel's worker thread, snapshotting a capsule, writing a reply.

First every request of the test is run with the heap working, for its expected answer. Then, in
two regimes (many refusals of 4 KiB and more; most refusals of 128 KiB and more), clients on
several threads chat (streamed and not), create capsules, restore the pinned one, list capsules
and tokenize, for a few seconds each. What must hold:
- the server never dies;
- every answer is either the expected one (the same greedy text, the same ids) or a JSON error
  503 (insufficient_memory, or a refusal the load causes) / 507 - never a 400 that blames the
  request, never a 500, never other text; a stream either ends in [DONE] with the expected text,
  carries an error event, or (when nothing at all could be allocated for the error) ends early;
- the injection really hit the server (the shim refused, /metrics counted insufficient memory);
and after it, with the heap working again: every request gives its expected answer again, the
pinned capsule restores exactly, once the capsules made under the load are deleted the capsule
bytes of every tier are back where they started, nothing is queued or running, RSS has not grown
by more than a bound, and SIGTERM exits 0.

Not covered, by construction (docs/reliability.md T33): nlohmann::json allocates when it destroys
an array or object (16 bytes per element), inside a destructor, so a refusal there ends the
process; the traffic here keeps its JSON values far below 4 KiB / 16 = 256 elements."""
import http.client
import json
import mmap
import os
import random
import re
import struct
import subprocess
import sys
import tempfile
import threading
import time

import pytest
from serve_proc import FROST, SOURCE, ServeProcess, rss_kib, synth_model_dir

SHIM = os.environ.get("FROST_ALLOC_SHIM", "")
pytestmark = pytest.mark.skipif(not FROST or not os.path.exists(FROST) or not SHIM or not os.path.exists(SHIM),
                                reason="FROST_BIN / FROST_ALLOC_SHIM not set")

KEY = "sk-oom"
CLIENTS = 6
SECONDS = 8  # per regime
REGIMES = [(4096, 100), (128 << 10, 500)]  # (smallest refused request in bytes, refusals per mille)
RSS_GROWTH_KIB = 96 * 1024
WORDS = "alpha build cache delta engine frost graph host index join kernel layer model node".split()


class Shim:
    """The shim's control page (see alloc_shim.cpp): mode, permille, min_bytes; then its counters."""

    def __init__(self, path):
        with open(path, "wb") as f:
            f.write(b"\0" * 64)
        self.file = open(path, "r+b")
        self.page = mmap.mmap(self.file.fileno(), 64)

    def refuse(self, min_bytes, permille):
        self.page[4:16] = struct.pack("<IQ", permille, min_bytes)
        self.page[0:4] = struct.pack("<I", 1)

    def off(self):
        self.page[0:4] = struct.pack("<I", 0)

    def counters(self):
        return struct.unpack("<QQ", self.page[16:32])  # considered, refused


def call(port, method, path, body=None, timeout=120):
    """(status, parsed JSON or raw text); ('conn', repr) when the connection failed."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        headers = {"Authorization": "Bearer " + KEY}
        data = None
        if body is not None:
            data = json.dumps(body)
            headers["Content-Type"] = "application/json"
        c.request(method, path, data, headers)
        r = c.getresponse()
        raw = r.read().decode("utf-8", "replace")
        try:
            return r.status, json.loads(raw)
        except ValueError:
            return r.status, raw
    except (OSError, http.client.HTTPException) as e:
        return "conn", repr(e)
    finally:
        c.close()


def stream_chat(port, body, timeout=120):
    """('done', text) | ('error_event', err) | (status, json) refused before the stream | ('cut', text)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    text = ""
    try:
        c.request("POST", "/v1/chat/completions", json.dumps(dict(body, stream=True)),
                  {"Authorization": "Bearer " + KEY, "Content-Type": "application/json"})
        r = c.getresponse()
        if r.status != 200:
            raw = r.read().decode("utf-8", "replace")
            try:
                return r.status, json.loads(raw)
            except ValueError:
                return r.status, raw
        for line in r:
            line = line.decode("utf-8", "replace").strip()
            if not line.startswith("data: "):
                continue
            data = line[6:]
            if data == "[DONE]":
                return "done", text
            ev = json.loads(data)
            if "error" in ev:
                return "error_event", ev["error"]
            for ch in ev.get("choices", []):
                text += (ch.get("delta") or {}).get("content") or ""
        return "cut", text
    except (OSError, http.client.HTTPException, ValueError):
        return "cut", text
    finally:
        c.close()


def chat_body(prompt, capsule_id=None):
    b = {"model": "frost", "messages": [{"role": "user", "content": prompt}], "max_tokens": 6, "temperature": 0}
    if capsule_id:
        b["capsule_id"] = capsule_id
    return b


def content(reply):
    return reply["choices"][0]["message"]["content"]


def metric(port, name):
    status, text = call(port, "GET", "/metrics")
    assert status == 200, (status, text)
    m = re.search(rf"^{re.escape(name)} ([0-9.e+]+)$", text, re.M)
    assert m, f"no {name} in /metrics"
    return float(m.group(1))


def capsule_bytes(port):
    status, text = call(port, "GET", "/metrics")
    assert status == 200, (status, text)
    return sorted(re.findall(r"^frost_capsule_bytes\{[^}]*\} [0-9.e+]+$", text, re.M))


class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.counts = {}
        self.failures = []

    def add(self, what):
        with self.lock:
            self.counts[what] = self.counts.get(what, 0) + 1

    def fail(self, what):
        with self.lock:
            self.failures.append(what)


def refusal_ok(status, body):
    """A JSON error the heap's refusal (or the load) may cause: 503 / 507 with an error object."""
    return status in (503, 507) and isinstance(body, dict) and "error" in body


def test_host_allocation_failures():
    model = synth_model_dir()
    if model is None:
        pytest.skip("no tokenizer fixture")
    work = tempfile.mkdtemp(prefix="frost_oom_")
    shim = Shim(os.path.join(work, "shim.ctl"))
    env = dict(os.environ, LD_PRELOAD=SHIM, FROST_ALLOC_SHIM_CTL=os.path.join(work, "shim.ctl"))
    srv = ServeProcess(model, key=KEY, sessions=2, env=env,
                       extra=["--capsule-dir", os.path.join(work, "caps"), "--queue", "8", "--max-per-key", "0"])
    # The server logs to the pipe; a reader keeps it from ever blocking on a full one.
    log = []
    threading.Thread(target=lambda: log.extend(srv.proc.stdout), daemon=True).start()
    port = srv.port
    rng = random.Random(int(os.environ.get("FROST_HOST_OOM_SEED", random.randrange(1 << 30))))
    try:
        # --- the expected answers, with the heap working
        prompts = [" ".join(rng.choice(WORDS) for _ in range(rng.randrange(4, 120))) for _ in range(8)]
        expected = {}
        for p in prompts:
            status, r = call(port, "POST", "/v1/chat/completions", chat_body(p))
            assert status == 200, (status, r)
            expected[p] = content(r)
        ids = {}
        for p in prompts[:4]:
            status, r = call(port, "POST", "/tokenize", {"model": "frost", "prompt": p})
            assert status == 200, (status, r)
            ids[p] = r["tokens"]
        prefix = "You are a careful assistant. " + " ".join(rng.choice(WORDS) for _ in range(60))
        status, cap = call(port, "POST", "/v1/capsules", {"prompt": prefix, "pinned": True})
        assert status == 200, (status, cap)
        pinned_id = cap["id"]
        restore_prompt = prefix + " and then?"
        status, r = call(port, "POST", "/v1/completions",
                         {"model": "frost", "prompt": restore_prompt, "max_tokens": 6, "temperature": 0,
                          "capsule_id": pinned_id})
        assert status == 200, (status, r)
        expected_restore = r["choices"][0]["text"]
        base_bytes = capsule_bytes(port)
        status, listing = call(port, "GET", "/v1/capsules")
        assert status == 200, (status, listing)
        base_ids = {c["id"] for c in listing["data"]}
        rss_before = rss_kib(srv.proc.pid)

        # --- the heap refusing, in each regime
        tally = Tally()

        def judge(what, status, body, wrong):
            """One plain request's outcome: served (then `wrong(body)` names a wrong answer, or
            None), refused with a JSON 503/507, or its connection dropped; anything else fails."""
            if status == 200:
                tally.add(f"{what} ok")
                why = wrong(body)
                if why:
                    tally.fail(f"{what} answered {why}")
            elif refusal_ok(status, body):
                tally.add(f"{what} {status} {body['error'].get('code')}")
            elif status == "conn":
                tally.add(f"{what} connection dropped")
            else:
                tally.fail(f"{what}: {status} {str(body)[:300]}")

        def other(got, want):
            return None if got == want else f"other text: {got!r} != {want!r}"

        def client(seed, stop_at):
            r = random.Random(seed)
            while time.time() < stop_at and srv.proc.poll() is None:
                op = r.random()
                p = r.choice(prompts)
                if op < 0.3:
                    status, body = call(port, "POST", "/v1/chat/completions", chat_body(p))
                    judge("chat", status, body, lambda b: other(content(b), expected[p]))
                elif op < 0.55:
                    kind, got = stream_chat(port, chat_body(p))
                    if kind == "done":
                        tally.add("stream ok")
                        if got != expected[p]:
                            tally.fail(f"stream answered other text: {got!r} != {expected[p]!r}")
                    elif kind == "error_event":
                        tally.add("stream error event")
                        if got.get("code") not in ("insufficient_memory", "capsule_restore_failed"):
                            tally.fail(f"stream error event: {got}")
                    elif kind == "cut":
                        tally.add("stream cut")
                        if not expected[p].startswith(got):
                            tally.fail(f"cut stream carried other text: {got!r}")
                    else:
                        judge("stream", kind, got, lambda b: "200 without a stream")
                elif op < 0.7:
                    status, body = call(port, "POST", "/v1/completions",
                                        {"model": "frost", "prompt": restore_prompt, "max_tokens": 6,
                                         "temperature": 0, "capsule_id": pinned_id})
                    judge("restore", status, body, lambda b: other(b["choices"][0]["text"], expected_restore))
                elif op < 0.8:
                    # long enough to freeze (a prompt below the engine's alignment unit gets 409)
                    status, body = call(port, "POST", "/v1/capsules", {"prompt": prefix + " " + p})
                    judge("capsule", status, body, lambda b: None if b.get("id") else f"no capsule id: {b}")
                elif op < 0.9:
                    q = r.choice(prompts[:4])
                    status, body = call(port, "POST", "/tokenize", {"model": "frost", "prompt": q})
                    judge("tokenize", status, body, lambda b: None if b["tokens"] == ids[q] else "other ids")
                else:
                    status, body = call(port, "GET", "/v1/capsules")
                    judge("list", status, body, lambda b: None if pinned_id in {c["id"] for c in b["data"]}
                          else "a listing without the pinned capsule")

        for min_bytes, permille in REGIMES:
            shim.refuse(min_bytes, permille)
            stop_at = time.time() + SECONDS
            threads = [threading.Thread(target=client, args=(rng.randrange(1 << 30), stop_at)) for _ in range(CLIENTS)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=SECONDS + 300)
            shim.off()
            assert srv.proc.poll() is None, "the server died under refusals of >= %d bytes:\n%s" % (
                min_bytes, "".join(log[-30:]))
        considered, refused = shim.counters()
        print(f"\nhost OOM: the shim refused {refused} of {considered} eligible requests; outcomes:")
        for k in sorted(tally.counts):
            print(f"  {k}: {tally.counts[k]}")
        assert not tally.failures, "\n".join(tally.failures[:20])
        assert refused > 0, "the shim refused nothing: the test did not test"
        assert metric(port, "frost_out_of_memory_total") > 0, "no request saw the refusal"
        assert any(k.startswith("chat ok") for k in tally.counts), "nothing was served under the refusals"
        assert metric(port, "frost_exceptions_total") == 0, "an exception other than bad_alloc was caught"

        # --- the heap working again: exact, and back to the baseline
        deadline = time.time() + 60
        while time.time() < deadline and (metric(port, "frost_active_requests") or metric(port, "frost_queue_depth")):
            time.sleep(0.1)
        assert metric(port, "frost_active_requests") == 0 and metric(port, "frost_queue_depth") == 0
        for p in prompts:
            status, r = call(port, "POST", "/v1/chat/completions", chat_body(p))
            assert status == 200 and content(r) == expected[p], (status, r)
            kind, got = stream_chat(port, chat_body(p))
            assert (kind, got) == ("done", expected[p])
        status, r = call(port, "POST", "/v1/completions",
                         {"model": "frost", "prompt": restore_prompt, "max_tokens": 6, "temperature": 0,
                          "capsule_id": pinned_id})
        assert status == 200 and r["choices"][0]["text"] == expected_restore, (status, r)
        status, listing = call(port, "GET", "/v1/capsules")
        assert status == 200, (status, listing)
        made = [c["id"] for c in listing["data"] if c["id"] not in base_ids]
        for cid in made:
            status, body = call(port, "DELETE", f"/v1/capsules/{cid}?force=true")
            assert status == 200, (status, body)
        status, listing = call(port, "GET", "/v1/capsules")
        assert {c["id"] for c in listing["data"]} == base_ids
        assert capsule_bytes(port) == base_bytes
        growth = rss_kib(srv.proc.pid) - rss_before
        print(f"  RSS growth over the test: {growth / 1024:.1f} MiB; capsules made under the load: {len(made)}")
        assert growth < RSS_GROWTH_KIB, f"RSS grew {growth} KiB"
    finally:
        code = srv.stop()
    assert code == 0, "".join(log[-30:])
    # The claim log of the whole run replays as one valid history: the restores the heap refused
    # failed closed (restoration_failed + refused naming the claim) and their capsules stayed
    # (`retained`), the pinned one included.
    claims = os.path.join(work, "caps", "claims.jsonl")
    res = subprocess.run([sys.executable, os.path.join(SOURCE, "scripts", "claimlog_check.py"), claims],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    with open(claims) as f:
        events = [json.loads(line) for line in f]
    kept = [e for e in events if e["event"] == "refused" and e.get("retained")]
    print(f"  claim log: {res.stdout.strip()}; {len(kept)} refused restores kept their capsule")
