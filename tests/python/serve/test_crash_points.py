"""A crash at every write point, and a power cut at every write point (design/reliability.md T18,
T19), over `frost serve` on the REAL CPU engine.

The file-system shim (tests/serve/fs_shim.cpp, LD_PRELOAD) numbers every mutating call under the
capsule directory (open for writing, write, fsync, rename, link, unlink, mkdir) and SIGKILLs the
server in front of call N. For N = 1, 2, ... a fresh server on a fresh directory runs one script
of capsule work until it dies there: start-up (directory, sidecar key, claim log), a capsule
written straight to disk, three that push each other down the tiers until one is demoted to disk,
a policy change and a deletion of disk capsules, and a graceful stop that flushes the rest. The
sweep ends at the first N the script survives.

After each crash a new server (no shim) starts on the directory as the crash left it, and on
three copies of it to which powerloss.py applied a random power cut (unsynced data and directory
entries lost or damaged). Each time:
- every capsule acknowledged on disk before the crash is listed with its policy, and a request
  naming it restores it with output equal to a capsule-free server's (the reader checks every
  buffer's checksum on the way in);
- an acknowledged deletion stays deleted;
- the step in flight is all-or-nothing: its capsule, policy or deletion is there whole or not at
  all, never a half (a checksum failure is quarantined, never served);
- no temp file is left, and the claim log replays as one valid history. A power cut may take the
  log's unsynced tail (it is an audit trail, not fsynced per event): the server cuts it after its
  last valid record and records what the files hold that the log lost, so the check holds there
  too."""
import os
import random
import subprocess
import sys

import pytest
from powerloss import crash_point, power_cut
from serve_proc import FROST, SOURCE, ServeProcess

KEY = "sk-frost-crash-points"
ALIGN = 64  # the engine's capsule alignment unit: these prefixes are stored exactly
SHIM = os.environ.get("FROST_FS_SHIM", "")
CUTS_PER_POINT = 3  # random power cuts replayed per crash point (TH3 style)
MAX_POINTS = 400    # a bound on the sweep: far above the script's write points

pytestmark = pytest.mark.skipif(not FROST or not os.path.exists(FROST), reason="FROST_BIN not set")


class Server(ServeProcess):
    def __init__(self, model, caps, budget, env=None):
        super().__init__(model, ["--capsule-dir", caps, "--device-budget", budget, "--host-budget", budget],
                         key=KEY, sessions=1, env=env)

    def complete(self, ids, capsule_id=None):
        body = {"model": "frost", "prompt": ids, "max_tokens": 6, "temperature": 0}
        if capsule_id:
            body["capsule_id"] = capsule_id
        return self.api("POST", "/v1/completions", body)


def listing(server):
    return {c["id"]: {"tier": c["tier"], "pinned": c["pinned"], "priority": c["priority"],
                      "tokens": c["tokens"], "digest": c["digest"]}
            for c in server.api("GET", "/v1/capsules")["data"]}


class Script:
    """The capsule work, step by step. `acked` holds (step, listing after it) for every step
    whose response arrived; `inflight` is the step the server died in (None if it survived)."""

    def __init__(self, prompts):
        self.prompts = prompts
        self.ids = {}
        self.acked = []
        self.inflight = None

    def steps(self):
        big, p0, p1, p2 = self.prompts
        yield ("create", "big", big)        # fits no memory tier: written straight to disk
        yield ("create", "p0", p0)          # device
        yield ("create", "p1", p1)          # device; p0 to host
        yield ("create", "p2", p2)          # device; p1 to host, p0 demoted to disk
        yield ("update", "big", {"pinned": True, "priority": 7})
        yield ("delete", "p0", None)
        yield ("stop", None, None)          # SIGTERM: flushes p1 and p2 to disk

    def run(self, server):
        for step in self.steps():
            kind, name, arg = step
            self.inflight = step
            if kind == "create":
                self.ids[name] = server.api("POST", "/v1/capsules", {"prompt": arg})["id"]
            elif kind == "update":
                server.api("POST", "/v1/capsules/" + self.ids[name], arg)
            elif kind == "delete":
                server.api("DELETE", "/v1/capsules/" + self.ids[name])
            elif server.stop() != 0:
                raise ConnectionError("stop ended by a signal")
            self.acked.append((step, None if kind == "stop" else listing(server)))
        self.inflight = None

    def before(self):
        """The listing after the last acknowledged step (what a client may rely on)."""
        for step, seen in reversed(self.acked):
            if seen is not None:
                return seen
        return {}


def check_recovered(script, got, where):
    """`got` (the recovered listing) against what the script had acknowledged."""
    before = script.before()
    kind, name, arg = script.inflight or (None, None, None)
    target = script.ids.get(name)
    stopped = bool(script.acked) and script.acked[-1][0][0] == "stop"
    for cid, c in before.items():
        # A memory-tier capsule dies with the process unless a finished stop flushed it.
        must = (c["tier"] == "disk" or stopped) and not (kind == "delete" and cid == target)
        assert cid in got or not must, f"{where}: acknowledged capsule {cid} ({c}) lost; recovered {got}"
    deleted = {script.ids[s[1]] for s, _ in script.acked if s[0] == "delete"}
    for cid, g in got.items():
        assert cid not in deleted, f"{where}: {cid} was deleted (acknowledged) and came back"
        assert g["tier"] == "disk", (where, cid, g)
        if cid not in before:
            # Only the create in flight may add a capsule, and only whole (restored below).
            assert kind == "create" and g["tokens"] == len(arg), f"{where}: unexpected capsule {cid} {g}"
            continue
        c = before[cid]
        assert g["tokens"] == c["tokens"] and g["digest"] == c["digest"], (where, cid, g, c)
        allowed = {(c["pinned"], c["priority"])}
        if kind == "update" and cid == target:
            allowed.add((arg["pinned"], arg["priority"]))
        assert (g["pinned"], g["priority"]) in allowed, f"{where}: {cid} has policy {g}, allowed {allowed}"


def check_server(model, caps, budget, script, cold, where):
    server = Server(model, caps, budget)
    try:
        got = listing(server)
        check_recovered(script, got, where)
        for cid in got:
            # A capsule the script has no id for is the create in flight's (check_recovered).
            name = next((n for n, i in script.ids.items() if i == cid), None) or script.inflight[1]
            r = server.complete(cold[name][0], cid)
            assert r["frost"]["plan"] == "restore" and r["frost"]["capsule_id"] == cid, (where, r["frost"])
            assert r["choices"][0]["text"] == cold[name][1], f"{where}: {cid} restored to other output"
        temps = [f for f in os.listdir(caps) if ".frost-tmp." in f]
        assert not temps, f"{where}: temp files left {temps}"
    finally:
        assert server.stop() == 0, where
    res = subprocess.run([sys.executable, os.path.join(SOURCE, "scripts", "claimlog_check.py"),
                          os.path.join(caps, "claims.jsonl")], capture_output=True, text=True)
    assert res.returncode == 0, f"{where}: " + res.stdout + res.stderr


def test_every_write_point_crash_and_power_cut(model_dir, tmp_path):
    assert SHIM and os.path.exists(SHIM), "FROST_FS_SHIM (the LD_PRELOAD shim ctest passes) is missing"
    seed = int(os.environ.get("FROST_CRASH_POINTS_SEED") or int.from_bytes(os.urandom(4), "little"))
    rng = random.Random(seed)
    print(f"FROST_CRASH_POINTS_SEED={seed}")
    big = [rng.randrange(200, 60000) for _ in range(6 * ALIGN)]
    smalls = [[rng.randrange(200, 60000) for _ in range(2 * ALIGN)] for _ in range(3)]
    suffix = [rng.randrange(200, 60000) for _ in range(5)]

    cold_server = ServeProcess(model_dir, ["--no-capsules"], key=KEY, sessions=1)
    try:
        cold = {}
        for name, p in zip(("big", "p0", "p1", "p2"), [big] + smalls):
            r = cold_server.api("POST", "/v1/completions",
                                {"model": "frost", "prompt": p + suffix, "max_tokens": 6, "temperature": 0})
            cold[name] = (p + suffix, r["choices"][0]["text"])
    finally:
        assert cold_server.stop() == 0
    # Room for one 128-token capsule in each memory tier.
    sizer = ServeProcess(model_dir, [], key=KEY, sessions=1)
    try:
        budget = str(sizer.api("POST", "/v1/capsules", {"prompt": smalls[0]})["bytes"] * 3 // 2)
    finally:
        assert sizer.stop() == 0

    points = 0
    for n in range(1, MAX_POINTS + 1):
        run = tmp_path / f"n{n}"
        caps, save, journal = run / "caps", run / "save", run / "journal"
        save.mkdir(parents=True)
        env = dict(os.environ, LD_PRELOAD=SHIM, FROST_FS_SHIM_ROOT=str(caps), FROST_FS_SHIM_SAVE=str(save),
                   FROST_FS_SHIM_LOG=str(journal), FROST_FS_SHIM_CRASH_AT=str(n))
        script = Script([big] + smalls)
        server = None
        try:
            server = Server(model_dir, str(caps), budget, env=env)
            script.run(server)
        except (AssertionError, OSError) as e:
            if server is not None:
                try:
                    server.proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    server.kill()  # alive: the failure was not the shim's crash (asserted next)
            hit = crash_point(journal) if journal.exists() else None
            assert hit and hit[0] == n, f"point {n}: the server failed without the shim's crash: {e!r}"
        else:
            assert crash_point(journal) is None
            check_server(model_dir, str(caps), budget, script, cold, f"after the whole script (n={n})")
            points = n - 1
            break
        where = f"crash at point {n} ({hit[1]} {os.path.basename(hit[2])}) in {(script.inflight or ('start-up',))[:2]}"
        for cut in range(CUTS_PER_POINT):
            out = run / f"cut{cut}"
            root, said = power_cut(str(caps), str(save), str(journal), str(out), rng)
            check_server(model_dir, root, budget, script, cold, f"{where}, power cut: {said}")
        check_server(model_dir, str(caps), budget, script, cold, where)
    assert points > 20, f"the sweep ended after {points} write points"
    print(f"{points} write points, each crashed and power-cut {CUTS_PER_POINT} times")
