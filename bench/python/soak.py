#!/usr/bin/env python3
"""Soak: `frost serve` under mixed API traffic, SIGKILLed at random moments and restarted on the
same capsule directory (design/reliability.md T35, blackbox style).

  python bench/python/soak.py --frost build/tools/frost/frost --model DIR --seconds 86400 --kill-every 600

Clients (threads, each owning its capsules) create capsules, change their policy (pin, priority),
delete them, restore them with a suffix and run plain chat turns, streamed or not. The memory
tiers are given no room, so every capsule lives on disk and is durable once acknowledged. At a
random moment (uniform in 0.3x..1.7x --kill-every) the server is SIGKILLed; a new one starts on
the same directory and, before traffic resumes, is checked against what the clients were told:
- every acknowledged capsule is listed, on disk, with its tokens and its policy; an acknowledged
  deletion stays deleted; an operation the kill interrupted is all-or-nothing;
- a capsule restored with the same suffix gives the same greedy text in every run (bit-exact
  replay across restarts);
- no temp file is left behind.
At the end the server is stopped with SIGTERM, checked once more, and the claim log of every run
must replay as one valid history (scripts/claimlog_check.py). The server's RSS is sampled in each
run: the report gives its growth from the run's first sample to its last. So is its memory as
/metrics reports it: the engine's own buffers (frost_buffer_bytes less the capsules held on the
tier of that space) must come back to the same floor in every run (a restore's staging buffers
come and go, a leak raises the floor), and on a GPU (--backend cuda) the device memory in use
(frost_device_memory_used_bytes, every process on the device) is reported and, with
--device-growth-mib N on a GPU nothing else uses, may not grow by more than N MiB within a run nor
between the runs' first samples (a SIGKILLed server's memory must return to the driver).

Exit status 0 when everything held, 1 with the violations listed otherwise. Only 127.0.0.1 is
contacted.
"""
import argparse
import http.client
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

from load_chaos import rss_kib

WORDS = "alpha build cache delta engine frost graph host index join kernel layer model node".split()
ALIGN = 64        # capsule lengths are multiples of the engine's alignment: stored exactly
SUFFIXES = 3      # restore suffixes per capsule, each with its recorded text
TIMEOUT_S = 120   # one request


class Down(Exception):
    """The server did not answer (killed, or not started yet)."""


class Server:
    def __init__(self, args, capsule_dir, keys):
        cmd = [args.frost, "serve", "--model", args.model, "--port", "0",
               "--sessions", str(args.sessions), "--max-seq-len", "1024", "--capsule-dir", capsule_dir,
               "--device-budget", "1", "--host-budget", "1", "--backend", args.backend] + args.serve_arg
        for k in keys:
            cmd += ["--api-key", k]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines = []
        self.port = None
        deadline = time.time() + 120
        while time.time() < deadline and not self.port:
            line = self.proc.stdout.readline()
            if not line:
                break
            self.lines.append(line)
            m = re.search(r"on http://127\.0\.0\.1:(\d+)", line)
            if m:
                self.port = int(m.group(1))
        if not self.port:
            self.proc.kill()
            raise RuntimeError("server did not start:\n" + "".join(self.lines))
        # Keep reading, so a chatty server never blocks on a full pipe.
        threading.Thread(target=lambda: [self.lines.append(x) for x in self.proc.stdout], daemon=True).start()

    def memory(self, key):
        """(the engine's own buffer bytes per space, the device memory in use or None) from /metrics,
        or None when the server does not answer."""
        try:
            c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=TIMEOUT_S)
            c.request("GET", "/metrics", headers={"Authorization": "Bearer " + key})
            text = c.getresponse().read().decode()
            c.close()
        except (OSError, http.client.HTTPException):
            return None
        v = {}
        for m in re.finditer(r"^(frost_(?:buffer|capsule)_bytes\{\w+=\"\w+\"\}|frost_device_memory_used_bytes) (\S+)$",
                             text, re.M):
            v[m.group(1)] = float(m.group(2))
        own = (v.get('frost_buffer_bytes{space="device"}', 0) - v.get('frost_capsule_bytes{tier="device"}', 0),
               v.get('frost_buffer_bytes{space="host_pinned"}', 0) - v.get('frost_capsule_bytes{tier="host"}', 0),
               v.get('frost_buffer_bytes{space="host"}', 0))
        return own, v.get("frost_device_memory_used_bytes")

    def call(self, key, method, path, body=None):
        """(status, parsed JSON body or None); Down when the connection fails."""
        try:
            c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=TIMEOUT_S)
            headers = {"Authorization": "Bearer " + key, "Content-Type": "application/json"}
            c.request(method, path, body=None if body is None else json.dumps(body), headers=headers)
            r = c.getresponse()
            data = r.read()
            c.close()
        except (OSError, http.client.HTTPException) as e:
            raise Down(repr(e)) from e
        try:
            return r.status, json.loads(data) if data else None
        except ValueError:
            if b"data:" in data:  # a stream: the chunks, parsed
                return r.status, [json.loads(x[5:]) for x in data.split(b"\n") if x.startswith(b"data: {")]
            return r.status, None

    def listing(self, key):
        status, body = self.call(key, "GET", "/v1/capsules")
        if status != 200:
            raise RuntimeError(f"GET /v1/capsules: {status} {body}")
        return {c["id"]: c for c in body["data"]}


class Cap:
    def __init__(self, cid, prompt, pinned, priority):
        self.id, self.prompt, self.pinned, self.priority = cid, prompt, pinned, priority
        self.texts = {}  # suffix index -> the greedy text first seen


class Soak:
    def __init__(self, args):
        self.args = args
        self.up = threading.Event()
        self.stop = False
        self.server = None
        self.lock = threading.Lock()
        self.violations = []
        self.counts = {}

    def count(self, what):
        with self.lock:
            self.counts[what] = self.counts.get(what, 0) + 1

    def violation(self, what):
        with self.lock:
            self.violations.append(what)
        print("VIOLATION:", what, flush=True)


class Client(threading.Thread):
    def __init__(self, soak, idx, seed):
        super().__init__(daemon=True)
        self.soak, self.idx, self.rng = soak, idx, random.Random(seed)
        # Its own key: the server scopes capsules per key, so its listing holds its capsules only.
        # Chat turns use another key (they leave capsules of their own).
        self.key, self.chat_key = f"{soak.args.key}-{idx}", f"{soak.args.key}-chat"
        self.caps = {}          # id -> Cap: acknowledged, live
        self.deleted = set()    # acknowledged deletions
        self.pending = None     # the operation the kill interrupted
        self.idle = threading.Event()
        self.suffixes = [[self.rng.randrange(200, 60000) for _ in range(3 + k)] for k in range(SUFFIXES)]

    def run(self):
        while not self.soak.stop:
            if not self.soak.up.is_set():
                self.idle.set()
                self.soak.up.wait(1.0)
                continue
            self.idle.clear()
            try:
                self.one()
            except Down as e:
                self.soak.count("interrupted by a kill")
                self.idle.set()
                waited = time.time()
                while self.soak.up.is_set() and not self.soak.stop:
                    time.sleep(0.01)  # the driver is killing the server: wait for it
                    if time.time() - waited > 10 and self.soak.server.proc.poll() is None:
                        self.soak.violation(f"client {self.idx}: no answer from a live server ({e})")
                        waited = float("inf")
        self.idle.set()

    def one(self):
        s, rng = self.soak.server, self.rng
        roll = rng.random()
        if roll < 0.2 or not self.caps:
            prompt = [rng.randrange(200, 60000) for _ in range(ALIGN * rng.choice((1, 2)))]
            # Unpinned: a pin is a promise about the tier asked for (device), which has no room;
            # policy changes pin capsules where they are.
            self.pending = ("create", prompt)
            status, body = s.call(self.key, "POST", "/v1/capsules", {"prompt": prompt})
            self.pending = None
            if status == 200:
                self.caps[body["id"]] = Cap(body["id"], prompt, body["pinned"], body["priority"])
                if body["tier"] != "disk":
                    self.soak.violation(f"capsule {body['id']} acknowledged on {body['tier']}, not disk")
            self.soak.count(f"create {status}")
            if status != 200:
                self.soak.violation(f"create: {status} {body}")
        elif roll < 0.3:
            cap = self.caps[rng.choice(sorted(self.caps))]
            new = {"pinned": rng.random() < 0.5, "priority": rng.randrange(-5, 6)}
            self.pending = ("update", cap.id, new)
            status, body = s.call(self.key, "POST", "/v1/capsules/" + cap.id, new)
            self.pending = None
            if status == 200:
                cap.pinned, cap.priority = new["pinned"], new["priority"]
            else:
                self.soak.violation(f"policy change of {cap.id}: {status} {body}")
            self.soak.count(f"update {status}")
        elif roll < 0.4:
            cap = self.caps[rng.choice(sorted(self.caps))]
            self.pending = ("delete", cap.id)
            status, body = s.call(self.key, "DELETE", "/v1/capsules/" + cap.id + ("?force=true" if cap.pinned else ""))
            self.pending = None
            if status == 200:
                del self.caps[cap.id]
                self.deleted.add(cap.id)
            else:
                self.soak.violation(f"delete of {cap.id}: {status} {body}")
            self.soak.count(f"delete {status}")
        elif roll < 0.75:
            cap = self.caps[rng.choice(sorted(self.caps))]
            k = rng.randrange(SUFFIXES)
            body = {"model": "frost", "prompt": cap.prompt + self.suffixes[k], "max_tokens": 6, "temperature": 0,
                    "capsule_id": cap.id}
            status, out = s.call(self.key, "POST", "/v1/completions", body)
            self.soak.count(f"restore {status}")
            if status in (429, 503):
                return  # load shedding: allowed
            if status != 200 or out["frost"]["plan"] != "restore":
                self.soak.violation(f"restore of {cap.id}: {status} {out if status != 200 else out['frost']}")
                return
            text = out["choices"][0]["text"]
            if cap.texts.setdefault(k, text) != text:
                self.soak.violation(f"restore of {cap.id} + suffix {k}: {text!r}, earlier {cap.texts[k]!r}")
        else:
            stream = rng.random() < 0.5
            words = " ".join(rng.choice(WORDS) for _ in range(rng.randrange(4, 40)))
            body = {"model": "frost", "messages": [{"role": "user", "content": words}],
                    "max_tokens": rng.randrange(1, 12), "stream": stream}
            status, _ = s.call(self.chat_key, "POST", "/v1/chat/completions", body)
            self.soak.count(f"chat{' stream' if stream else ''} {status}")
            if status not in (200, 429, 503):
                self.soak.violation(f"chat turn: {status}")


def check_recovered(soak, c, where, stopped):
    """Client c's listing on the new server against what c was told; then c adopts it.
    Returns how many of its capsules were checked."""
    got = soak.server.listing(c.key)
    kind = c.pending[0] if c.pending else None
    target = c.pending[1] if kind in ("update", "delete") else None
    for cid, cap in list(c.caps.items()):
        g = got.get(cid)
        if g is None:
            if not (kind == "delete" and cid == target):  # else the interrupted delete happened
                soak.violation(f"{where}: client {c.idx}'s acknowledged capsule {cid} lost")
            del c.caps[cid]
            continue
        if g["tier"] != "disk" or g["tokens"] != len(cap.prompt):
            soak.violation(f"{where}: {cid} came back as {g}")
        policy = (g["pinned"], g["priority"])
        allowed = {(cap.pinned, cap.priority)}
        if kind == "update" and cid == target:
            allowed.add((c.pending[2]["pinned"], c.pending[2]["priority"]))
        if policy not in allowed:
            soak.violation(f"{where}: {cid} has policy {policy}, allowed {allowed}")
        cap.pinned, cap.priority = policy
    for cid in c.deleted & set(got):
        soak.violation(f"{where}: deleted capsule {cid} came back")
    for cid, g in got.items():
        if cid in c.caps or cid in c.deleted:
            continue
        if stopped or kind != "create" or g["tokens"] != len(c.pending[1]):
            soak.violation(f"{where}: client {c.idx} has an unexpected capsule {cid} {g}")
        # A create whose answer the kill swallowed: nobody holds its id, so it goes.
        status, _ = soak.server.call(c.key, "DELETE", f"/v1/capsules/{cid}?force=true")
        if status != 200:
            soak.violation(f"{where}: cannot delete the orphan {cid}: {status}")
    c.pending = None
    return len(c.caps)


def check_restart(soak, clients, where, stopped):
    checked = sum(check_recovered(soak, c, where, stopped) for c in clients)
    temps = [f for f in os.listdir(soak.args.capsule_dir) if ".frost-tmp." in f]
    if temps:
        soak.violation(f"{where}: temp files left {temps}")
    return checked


def check_memory(soak, args, run, mem, memory):
    """The run's /metrics memory samples against the earlier runs' (see the module doc)."""
    if len(mem) < 2:
        return
    own = [m[0] for m in mem]
    floor = tuple(min(o[i] for o in own) for i in range(3))
    half = own[len(own) // 2:]
    late = tuple(min(o[i] for o in half) for i in range(3))
    if late != floor:
        soak.violation(f"run {run}: the engine's buffers' floor rose within the run: {floor} -> {late}")
    if memory["floors"] and floor != memory["floors"][0]:
        soak.violation(f"run {run}: the engine's buffers' floor {floor} differs from run 1's {memory['floors'][0]}")
    memory["floors"].append(floor)
    dev = [m[1] for m in mem if m[1] is not None]
    if (len(dev) > 0) != (args.backend == "cuda"):
        soak.violation(f"run {run}: device memory gauges {'present' if dev else 'absent'} on backend {args.backend}")
    if len(dev) >= 2:
        limit = args.device_growth_mib * 2**20 if args.device_growth_mib > 0 else float("inf")
        memory["device_growth"].append(max(dev) - dev[0])
        if max(dev) - dev[0] > limit:
            soak.violation(f"run {run}: device memory grew {(max(dev) - dev[0]) / 2**20:.0f} MiB within the run")
        memory["device_first"].append(dev[0])
        if dev[0] - min(memory["device_first"]) > limit:
            soak.violation(f"run {run}: device memory at its start {dev[0] / 2**20:.0f} MiB, run minimum "
                           f"{min(memory['device_first']) / 2**20:.0f} MiB: a killed server's memory stayed taken")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--frost", required=True, help="the frost binary")
    ap.add_argument("--model", required=True, help="model dir")
    ap.add_argument("--seconds", type=float, default=120, help="how long (default 120; T35 asks 86400)")
    ap.add_argument("--kill-every", type=float, default=15, help="mean seconds between SIGKILLs (T35: 600)")
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--sessions", type=int, default=2)
    ap.add_argument("--capsule-dir", default=None, help="default: a fresh temporary folder")
    ap.add_argument("--key", default="sk-soak")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--backend", default="cpu", choices=["cpu", "cuda"], help="the engine backend (default cpu)")
    ap.add_argument("--device-growth-mib", type=float, default=0,
                    help="bound on the device memory's growth within a run and between runs (cuda; default 0: "
                         "report only, since the figure counts every process on the device)")
    ap.add_argument("--serve-arg", action="append", default=[], help="an extra `frost serve` argument (repeatable)")
    args = ap.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    if not args.capsule_dir:
        args.capsule_dir = tempfile.mkdtemp(prefix="frost-soak-")
    print(f"soak: {args.seconds:.0f} s, a SIGKILL every ~{args.kill_every:.0f} s, {args.clients} clients, "
          f"seed {seed}, capsule dir {args.capsule_dir}", flush=True)

    soak = Soak(args)
    clients = [Client(soak, i, seed * 1000 + i) for i in range(args.clients)]
    keys = [c.key for c in clients] + [clients[0].chat_key]
    for c in clients:
        c.start()
    end = time.time() + args.seconds
    runs, kills, growth, verified = 0, 0, [], 0
    memory = {"floors": [], "device_first": [], "device_growth": []}
    while True:
        soak.server = Server(args, args.capsule_dir, keys)
        runs += 1
        if runs > 1:
            verified += check_restart(soak, clients, f"run {runs} (after kill {kills})", False)
        soak.up.set()
        last = min(end, time.time() + rng.uniform(0.3, 1.7) * args.kill_every)
        samples, mem = [], []
        while time.time() < last:
            time.sleep(min(1.0, max(0.0, last - time.time())))
            r = rss_kib(soak.server.proc.pid)
            if r:
                samples.append(r)
            m = soak.server.memory(keys[0])
            if m:
                mem.append(m)
            if soak.server.proc.poll() is not None:
                soak.violation(f"run {runs}: the server died by itself (exit {soak.server.proc.returncode})")
                break
        if len(samples) >= 2:
            growth.append((samples[-1] - samples[0]) / 1024)
        check_memory(soak, args, runs, mem, memory)
        final = time.time() >= end
        if final:
            soak.up.clear()
            for c in clients:
                c.idle.wait(TIMEOUT_S)
            soak.server.proc.send_signal(signal.SIGTERM)
            rc = soak.server.proc.wait(timeout=60)
            if rc != 0:
                soak.violation(f"SIGTERM: exit {rc}")
        else:
            soak.server.proc.send_signal(signal.SIGKILL)
            soak.server.proc.wait(timeout=60)
            soak.up.clear()
            kills += 1
            for c in clients:
                if not c.idle.wait(TIMEOUT_S):
                    soak.violation(f"client {c.idx} did not come back after kill {kills}")
        if final:
            break

    soak.server = Server(args, args.capsule_dir, keys)
    verified += check_restart(soak, clients, "after the graceful stop", True)
    soak.stop = True
    soak.server.proc.send_signal(signal.SIGTERM)
    soak.server.proc.wait(timeout=60)
    log = os.path.join(args.capsule_dir, "claims.jsonl")
    checker = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "claimlog_check.py")
    res = subprocess.run([sys.executable, checker,
                          log], capture_output=True, text=True)
    if res.returncode != 0:
        soak.violation("claim log: " + res.stdout.strip() + res.stderr.strip())

    print(f"soak: {runs} runs, {kills} SIGKILLs, {verified} capsule checks after restarts, seed {seed}")
    for k, v in sorted(soak.counts.items()):
        print(f"  {k:28s} {v}")
    if growth:
        print(f"RSS growth within a run (MiB): max {max(growth):+.1f}, mean {sum(growth) / len(growth):+.1f}")
    if memory["floors"]:
        print(f"engine buffers (device, host pinned, host bytes): floor {memory['floors'][0]} in "
              f"{len(memory['floors'])} runs")
    if memory["device_first"]:
        first = memory["device_first"]
        print(f"device memory in use (MiB): first sample of each run {min(first) / 2**20:.0f}..{max(first) / 2**20:.0f}, "
              f"growth within a run max {max(memory['device_growth']) / 2**20:+.0f}")
    print(f"claim log: {res.stdout.strip()}")
    print(f"violations: {len(soak.violations)}")
    for v in soak.violations[:50]:
        print("  " + v)
    return 1 if soak.violations else 0


if __name__ == "__main__":
    sys.exit(main())
