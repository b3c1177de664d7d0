"""Crash durability of `frost serve` over the REAL CPU engine (reliability T18, T21, T22): small
--device-budget / --host-budget push capsules to the disk tier (by demotion and by direct
creation); each is durable the moment it is acknowledged, so after SIGKILL (no graceful flush) a
new server on the same --capsule-dir lists them with their policy, and a request naming one
restores it with greedy output equal to a capsule-free server's. A server killed during its
start-up recovery, then restarted, recovers the same state (idempotent re-index)."""
import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest
from serve_proc import FROST, SOURCE, ServeProcess, serve_args

KEY = "sk-frost-crash"
ALIGN = 64  # the engine's capsule alignment unit: these prefixes are stored exactly

pytestmark = pytest.mark.skipif(not FROST or not os.path.exists(FROST), reason="FROST_BIN not set")


class Server(ServeProcess):
    def __init__(self, model, extra=()):
        super().__init__(model, extra, key=KEY, sessions=1)

    def complete(self, ids, capsule_id=None):
        body = {"model": "frost", "prompt": ids, "max_tokens": 8, "temperature": 0}
        if capsule_id:
            body["capsule_id"] = capsule_id
        return self.api("POST", "/v1/completions", body)


def listing(server):
    return {c["id"]: (c["tier"], c["pinned"], c["priority"], c["tokens"], c["digest"])
            for c in server.api("GET", "/v1/capsules")["data"]}


def test_sigkill_keeps_every_disk_capsule(model_dir, tmp_path):
    rng = random.Random(int.from_bytes(os.urandom(4), "little"))
    prefixes = [[rng.randrange(200, 60000) for _ in range(2 * ALIGN)] for _ in range(4)]

    # The size of one 128-token capsule, to give the device and host tiers room for one each, and
    # what each further token adds (a capsule is the fixed recurrent state plus the KV rows, in a
    # ratio that depends on the model's shape), to size a prompt whose capsule fits no tier.
    probe = Server(model_dir)
    try:
        one = probe.api("POST", "/v1/capsules", {"prompt": prefixes[0]})["bytes"]
        longer = [rng.randrange(200, 60000) for _ in range(4 * ALIGN)]
        per_token = (probe.api("POST", "/v1/capsules", {"prompt": longer})["bytes"] - one) / (2 * ALIGN)
    finally:
        assert probe.stop() == 0
    assert per_token > 0
    budget = str(one * 3 // 2)
    big_tokens = (2 * ALIGN + int(one / 2 / per_token) // ALIGN * ALIGN + 2 * ALIGN)  # past the budget by >= ALIGN tokens
    assert big_tokens < 1024 - ALIGN, ("the server's 1024-token sessions hold no capsule past the budget", one, per_token)
    big = [rng.randrange(200, 60000) for _ in range(big_tokens)]
    caps = tmp_path / "caps"
    extra = ["--capsule-dir", str(caps), "--device-budget", budget, "--host-budget", budget]

    first = Server(model_dir, extra)
    try:
        made = [first.api("POST", "/v1/capsules", {"prompt": p})["id"] for p in prefixes]
        direct = first.api("POST", "/v1/capsules", {"prompt": big})  # fits no memory tier
        assert direct["tier"] == "disk", direct
        before = listing(first)
        tiers = [before[c][0] for c in made]
        assert tiers == ["disk", "disk", "host", "device"], before
        # Policy changes and deletion of a disk capsule reach its sidecar at once.
        first.api("POST", "/v1/capsules/" + made[0], {"pinned": True, "priority": 7, "ttl_s": 3600})
        first.api("DELETE", "/v1/capsules/" + made[1])
        before = listing(first)
    finally:
        first.kill()  # no graceful flush
    assert not (caps / (made[1] + ".frostcap")).exists()
    assert not [f for f in os.listdir(caps) if ".frost-tmp." in f]

    durable = {c: v for c, v in before.items() if v[0] == "disk"}
    assert set(durable) == {made[0], direct["id"]}
    second = Server(model_dir, extra)
    try:
        banner = "".join(second.lines)
        assert "2 re-indexed, 0 quarantined" in banner and "2 claims lost" in banner, banner
        after = listing(second)
        assert after == durable  # same ids, tier, pin, priority, length and digest
        assert 0 < second.api("GET", "/v1/capsules/" + made[0])["ttl_s"] <= 3600
        # A request naming a recovered capsule restores it (verified on the way in).
        suffix = [rng.randrange(200, 60000) for _ in range(9)]
        r1 = second.complete(prefixes[0] + suffix, made[0])
        assert r1["frost"]["plan"] == "restore" and r1["frost"]["capsule_id"] == made[0], r1["frost"]
        assert r1["usage"]["prompt_tokens_details"]["cached_tokens"] == len(prefixes[0])
        r2 = second.complete(big + suffix, direct["id"])
        assert r2["frost"]["plan"] == "restore", r2["frost"]
        state = listing(second)
    finally:
        second.kill()

    cold = Server(model_dir, ["--no-capsules"])
    try:
        c1 = cold.complete(prefixes[0] + suffix)
        c2 = cold.complete(big + suffix)
    finally:
        assert cold.stop() == 0
    assert r1["choices"][0]["text"] == c1["choices"][0]["text"]
    assert r2["choices"][0]["text"] == c2["choices"][0]["text"]

    # T21: plant work for the recovery (a corrupt copy, a temp file), kill a server while it
    # starts, then start again: the recovered state equals the one before the kills.
    good = caps / (made[0] + ".frostcap")
    data = bytearray(good.read_bytes())
    data[len(data) // 2] ^= 0x41
    (caps / "cap-bad.frostcap").write_bytes(bytes(data))
    side = json.loads((caps / (made[0] + ".json")).read_text())
    side["id"] = "cap-bad"
    (caps / "cap-bad.json").write_text(json.dumps(side))
    (caps / ("y.frostcap.frost-tmp." + str(os.getpid()))).write_bytes(os.urandom(64))
    for delay in (0.05, 0.3):
        p = subprocess.Popen(serve_args(model_dir, extra, KEY, 1), stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        time.sleep(delay)
        p.send_signal(signal.SIGKILL)
        p.communicate(timeout=30)
    third = Server(model_dir, extra)
    try:
        assert {k: v[1:] for k, v in listing(third).items()} == {k: v[1:] for k, v in state.items()}
        assert not [f for f in os.listdir(caps) if ".frost-tmp." in f]
        assert not (caps / "cap-bad.frostcap").exists()
        assert "cap-bad.frostcap" in os.listdir(caps / "quarantine")
    finally:
        assert third.stop() == 0

    # Every run appended to one claim log; the claims a crash lost were ended at the next start,
    # so the whole file replays as one valid history.
    res = subprocess.run([sys.executable, os.path.join(SOURCE, "scripts", "claimlog_check.py"),
                          str(caps / "claims.jsonl")], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    lost = [json.loads(x) for x in (caps / "claims.jsonl").read_text().splitlines()]
    lost = {e["claim_id"] for e in lost if "lost at restart" in (e.get("reason") or "")}
    assert set(made[2:]) <= lost  # the host- and device-tier capsules of the killed first server
