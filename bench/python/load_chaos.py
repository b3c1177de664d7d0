#!/usr/bin/env python3
"""Bounded chaos load against a `frost serve` on loopback (issue 13 C): for --seconds it drives
the server with concurrent streams, clients that disconnect mid-stream, slow readers, capsule
creates and bad inputs (malformed HTTP, bad fields, deep JSON), then prints what held: requests
by outcome, errors by kind, p50/p99 latency per request kind, the server's RSS growth, and
whether /health kept answering within --health-slo-ms the whole time.

  python bench/python/load_chaos.py --frost build/tools/frost/frost --model /tmp/tiny --seconds 60
  python bench/python/load_chaos.py --base http://127.0.0.1:8000 --pid 1234 --key sk-local

Only 127.0.0.1 is ever contacted. Exit status 1 when the server died, /health missed its SLO,
or a request got no answer at all (a reset or timeout that no fault explains).
"""
import argparse
import collections
import http.client
import json
import random
import re
import socket
import subprocess
import sys
import threading
import time

WORDS = "alpha build cache delta engine frost graph host index join kernel layer".split()


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.outcomes = collections.Counter()   # kind/status
        self.errors = collections.Counter()     # kind/error code or exception
        self.latency = collections.defaultdict(list)
        self.health_misses = 0
        self.unanswered = 0

    def add(self, kind, status, seconds, err=None):
        with self.lock:
            self.outcomes[f"{kind} {status}"] += 1
            if err:
                self.errors[f"{kind}: {err}"] += 1
            self.latency[kind].append(seconds)


def pct(values, p):
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


class Load:
    def __init__(self, port, key, stats, deadline, rng_seed):
        self.port, self.key, self.stats, self.deadline = port, key, stats, deadline
        self.rng = random.Random(rng_seed)

    def headers(self):
        h = {"Content-Type": "application/json"}
        if self.key:
            h["Authorization"] = "Bearer " + self.key
        return h

    def text(self, n):
        return " ".join(self.rng.choice(WORDS) for _ in range(n))

    def post(self, kind, path, body, timeout=120):
        t0 = time.time()
        try:
            c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
            c.request("POST", path, json.dumps(body), self.headers())
            r = c.getresponse()
            data = r.read()
            c.close()
            err = None
            if r.status >= 400:
                try:
                    err = json.loads(data)["error"].get("code") or str(r.status)
                except (ValueError, KeyError, TypeError):
                    err = str(r.status)
            self.stats.add(kind, r.status, time.time() - t0, err)
        except (OSError, http.client.HTTPException) as e:
            self.stats.add(kind, "no-answer", time.time() - t0, type(e).__name__)
            with self.stats.lock:
                self.stats.unanswered += 1

    def chat_body(self, **kw):
        b = {"model": "frost", "messages": [{"role": "user", "content": self.text(self.rng.randint(5, 60))}],
             "max_tokens": self.rng.randint(4, 48), "temperature": self.rng.choice([0, 0.8]), "seed": 1}
        b.update(kw)
        return b

    def stream(self, disconnect_after=None, slow=False):
        """A streamed chat; optionally drops the connection after N bytes or reads 1 byte at a time."""
        t0 = time.time()
        body = json.dumps(self.chat_body(stream=True, max_tokens=self.rng.randint(16, 96))).encode()
        kind = "stream-disconnect" if disconnect_after else "stream-slow" if slow else "stream"
        try:
            s = socket.create_connection(("127.0.0.1", self.port), timeout=60)
            head = "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            if self.key:
                head += f"Authorization: Bearer {self.key}\r\n"
            s.sendall((head + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body)
            got = b""
            while time.time() < self.deadline + 30:
                chunk = s.recv(1 if slow else 65536)
                if not chunk:
                    break
                got += chunk
                if slow:
                    time.sleep(0.002)
                if disconnect_after and len(got) >= disconnect_after:
                    break
            s.close()
            m = re.match(rb"HTTP/1\.1 (\d+)", got)
            status = int(m.group(1)) if m else "no-answer"
            done = b"data: [DONE]" in got
            err = None if (done or disconnect_after or status != 200) else "stream cut"
            if status == "no-answer":
                with self.stats.lock:
                    self.stats.unanswered += 1
            self.stats.add(kind, status, time.time() - t0, err if status == 200 else str(status))
        except OSError as e:
            self.stats.add(kind, "no-answer", time.time() - t0, type(e).__name__)

    def bad(self):
        """Bad inputs: each must get a 4xx, never a crash or a hang."""
        t0 = time.time()
        choice = self.rng.randrange(6)
        if choice == 0:
            return self.post("bad-field", "/v1/chat/completions", self.chat_body(top_p=1e-46))
        if choice == 1:
            return self.post("bad-field", "/v1/chat/completions", self.chat_body(n=99))
        if choice == 2:
            deep = "{\"a\":" * 5000 + "1" + "}" * 5000
            msgs = [{"role": "user", "content": "q"},
                    {"role": "assistant", "content": None,
                     "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": deep}}]},
                    {"role": "tool", "tool_call_id": "c", "content": "r"}]
            return self.post("bad-deep", "/v1/chat/completions", self.chat_body(messages=msgs))
        raw = [b"GET /health HTTP/1.1\nHost: x\n\n", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
               b"POST /v1/completions HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{} "][choice - 3]
        try:
            s = socket.create_connection(("127.0.0.1", self.port), timeout=10)
            s.sendall(raw)
            got = s.recv(4096)
            s.close()
            m = re.match(rb"HTTP/1\.1 (\d+)", got)
            self.stats.add("bad-http", int(m.group(1)) if m else "no-answer", time.time() - t0,
                           None if m else "silent close")
        except OSError as e:
            self.stats.add("bad-http", "no-answer", time.time() - t0, type(e).__name__)

    def capsule(self):
        self.post("capsule-create", "/v1/capsules", {"prompt": self.text(self.rng.randint(40, 200))})

    def worker(self):
        while time.time() < self.deadline:
            r = self.rng.random()
            if r < 0.30:
                self.post("chat", "/v1/chat/completions", self.chat_body())
            elif r < 0.50:
                self.stream()
            elif r < 0.62:
                self.stream(disconnect_after=self.rng.randint(50, 400))
            elif r < 0.68:
                self.stream(slow=True)
            elif r < 0.80:
                self.capsule()
            else:
                self.bad()


def health_watch(port, stats, deadline, slo_ms):
    worst = 0.0
    while time.time() < deadline:
        t0 = time.time()
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=slo_ms / 1000 * 4)
            c.request("GET", "/health")
            ok = c.getresponse().status == 200
            c.close()
        except (OSError, http.client.HTTPException):
            ok = False
        ms = (time.time() - t0) * 1000
        worst = max(worst, ms)
        if not ok or ms > slo_ms:
            with stats.lock:
                stats.health_misses += 1
        time.sleep(0.2)
    return worst


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--frost", help="frost binary: start a server for the run")
    ap.add_argument("--model", help="model dir for --frost")
    ap.add_argument("--server-args", default="", help="extra frost serve arguments")
    ap.add_argument("--base", help="an already running server, http://127.0.0.1:PORT")
    ap.add_argument("--pid", type=int, help="its pid (for RSS)")
    ap.add_argument("--key", default="sk-load")
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--health-slo-ms", type=float, default=1000)
    ap.add_argument("--seed", type=int, default=None)
    a = ap.parse_args()
    proc = None
    if a.base:
        m = re.match(r"http://127\.0\.0\.1:(\d+)/?$", a.base)
        if not m:
            sys.exit("--base must be http://127.0.0.1:PORT (loopback only)")
        port, pid = int(m.group(1)), a.pid
    else:
        if not (a.frost and a.model):
            sys.exit("give --frost and --model, or --base")
        cmd = [a.frost, "serve", "--model", a.model, "--port", "0", "--api-key", a.key] + a.server_args.split()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        port = None
        t_end = time.time() + 120
        while time.time() < t_end:
            line = proc.stdout.readline()
            if not line:
                break
            m = re.search(r"on http://127\.0\.0\.1:(\d+)", line)
            if m:
                port = int(m.group(1))
                break
        if not port:
            proc.kill()
            sys.exit("server did not start")
        threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()
        pid = proc.pid
    seed = a.seed if a.seed is not None else random.randrange(1 << 30)
    stats = Stats()
    rss0 = rss_kib(pid) if pid else None
    deadline = time.time() + a.seconds
    workers = [threading.Thread(target=Load(port, a.key, stats, deadline, seed + i).worker) for i in range(a.clients)]
    for w in workers:
        w.start()
    worst_health = health_watch(port, stats, deadline, a.health_slo_ms)
    for w in workers:
        w.join(timeout=a.seconds + 180)
    time.sleep(1.0)  # let cancelled work leave before measuring
    rss1 = rss_kib(pid) if pid else None
    alive = proc.poll() is None if proc else (rss1 is not None or pid is None)

    total = sum(stats.outcomes.values())
    print(f"load_chaos: {a.seconds:.0f} s, {a.clients} clients, seed {seed}, {total} requests")
    print("outcomes:")
    for k, v in sorted(stats.outcomes.items()):
        print(f"  {k:32s} {v}")
    print("errors by kind:")
    for k, v in sorted(stats.errors.items()):
        print(f"  {k:48s} {v}")
    print("latency (s):        p50      p99      n")
    for k, v in sorted(stats.latency.items()):
        print(f"  {k:18s} {pct(v, 50):7.3f}  {pct(v, 99):7.3f}  {len(v)}")
    if rss0 and rss1:
        print(f"RSS: {rss0 / 1024:.1f} MiB -> {rss1 / 1024:.1f} MiB ({(rss1 - rss0) / 1024:+.1f} MiB)")
    print(f"/health: worst {worst_health:.0f} ms, {stats.health_misses} misses over the {a.health_slo_ms:.0f} ms SLO")
    print(f"server alive: {alive}; requests with no answer: {stats.unanswered}")
    bad_5xx = sum(v for k, v in stats.outcomes.items() if k.startswith("bad") and k.split()[-1].startswith("5"))
    ok = alive and stats.health_misses == 0 and stats.unanswered == 0 and bad_5xx == 0
    if proc:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
    print("HELD" if ok else "NOT HELD")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
