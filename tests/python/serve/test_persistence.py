"""Restart persistence of `frost serve` over the REAL CPU engine (reliability T16, T21, T22):
a chat turn freezes a capsule, SIGTERM flushes it to --capsule-dir, a new server on the same
directory re-indexes it and the next turn is a restore whose greedy output equals a capsule-free
server's; a corrupted capsule, an orphan file and a stray temp file found at start are
quarantined or removed and the server still serves; the claim log stays one valid history."""
import hashlib
import hmac
import json
import os
import re
import subprocess
import sys

import pytest
from serve_proc import FROST, SOURCE, ServeProcess

openai = pytest.importorskip("openai")

KEY = "sk-frost-persist"
SYSTEM = ("You are a careful coding agent. Read the repository before you change it. " * 10).strip()
TOOLS = [{"type": "function", "function": {"name": "run_shell", "description": "Run a shell command",
                                           "parameters": {"type": "object",
                                                          "properties": {"cmd": {"type": "string"}},
                                                          "required": ["cmd"]}}}]
TURN1 = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Which tests are failing?"}]
TURN2 = TURN1 + [{"role": "assistant", "content": "Let me run the test suite."},
                 {"role": "user", "content": "Run only the serve tests."}]

pytestmark = pytest.mark.skipif(not FROST or not os.path.exists(FROST), reason="FROST_BIN not set")


class Server(ServeProcess):
    def __init__(self, model, extra=()):
        super().__init__(model, extra, key=KEY, sessions=2)
        self.client = openai.OpenAI(base_url=self.base + "/v1", api_key=KEY, max_retries=0, timeout=120)

    def chat(self, messages):
        return self.client.chat.completions.create(model="frost", messages=messages, tools=TOOLS, max_tokens=6,
                                                   temperature=0)


def sign(side, caps, key):
    """What the server writes (src/serve/persistence.h SidecarAuth), computed independently:
    HMAC-SHA256 keyed by the dir's secret over the other fields (sorted, compact) + the key."""
    secret = bytes.fromhex((caps / ".sidecar-secret").read_text().strip())
    fields = {k: v for k, v in side.items() if k != "mac"}
    msg = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n" + key
    return dict(fields, mac=hmac.new(secret, msg.encode(), hashlib.sha256).hexdigest())


def frost_extra(r):
    return (r.model_extra or {}).get("frost", {})


def test_restart_restores_and_quarantines(model_dir, tmp_path):
    caps = tmp_path / "caps"
    first = Server(model_dir, ["--capsule-dir", str(caps)])
    try:
        first.chat(TURN1)
        made = first.api("GET", "/v1/capsules")["data"]
        assert made
        first.api("POST", "/v1/capsules/" + made[0]["id"], {"pinned": True, "priority": 3, "ttl_s": 3600})
    finally:
        assert first.stop() == 0
    assert "capsules persisted" in "".join(first.lines)
    pairs = sorted(f[:-len(".frostcap")] for f in os.listdir(caps) if f.endswith(".frostcap"))
    assert pairs, os.listdir(caps)
    for cid in pairs:
        side = json.loads((caps / (cid + ".json")).read_text())
        assert side["id"] == cid and side["owner"] == "key0"
    good = pairs[0]

    # What a crash or a bad disk leaves behind: a capsule with one flipped payload byte (its
    # sidecar intact), a capsule without a sidecar, a half-written temp file.
    data = bytearray((caps / (good + ".frostcap")).read_bytes())
    data[-1 - int.from_bytes(os.urandom(2), "little") % 512] ^= 0x5A
    (caps / "cap-corrupt.frostcap").write_bytes(bytes(data))
    side = json.loads((caps / (good + ".json")).read_text())
    assert sign(side, caps, KEY)["mac"] == side["mac"]  # the server's mac, recomputed here
    side["id"] = "cap-corrupt"
    (caps / "cap-corrupt.json").write_text(json.dumps(sign(side, caps, KEY)))
    # A valid capsule handed to a key this server does not have, and one moved by editing its
    # sidecar without the secret: both refused (the sidecars are authenticated).
    for cid, owner, signed in (("cap-stranger", "key5", True), ("cap-edited", "key0", False)):
        (caps / (cid + ".frostcap")).write_bytes((caps / (good + ".frostcap")).read_bytes())
        s2 = dict(side, id=cid, owner=owner)
        (caps / (cid + ".json")).write_text(json.dumps(sign(s2, caps, KEY) if signed else dict(s2, priority=9)))
    (caps / "cap-orphan.frostcap").write_bytes(os.urandom(4096))
    (caps / ("x.frostcap.frost-tmp." + str(os.getpid()))).write_bytes(os.urandom(100))

    second = Server(model_dir, ["--capsule-dir", str(caps)])
    try:
        banner = "".join(second.lines)
        # The engine's capsule manager sweeps temp files too; the banner counts every one removed.
        assert re.search(r"%d re-indexed, 7 quarantined, 1 temp removed" % len(pairs), banner), banner
        assert "checksum mismatch" in banner and "without a sidecar" in banner
        assert "unknown key 'key5'" in banner and "mac mismatch" in banner
        quarantined = sorted(os.listdir(caps / "quarantine"))
        assert quarantined == ["cap-corrupt.frostcap", "cap-corrupt.json", "cap-edited.frostcap", "cap-edited.json",
                               "cap-orphan.frostcap", "cap-stranger.frostcap", "cap-stranger.json"]
        assert not [f for f in os.listdir(caps) if ".frost-tmp." in f]
        kept = second.api("GET", "/v1/capsules/" + made[0]["id"])
        assert (kept["tier"], kept["pinned"], kept["priority"], kept["tokens"]) == ("disk", True, 3, made[0]["tokens"])
        assert 0 < kept["ttl_s"] <= 3600
        r2 = second.chat(TURN2)
        fx = frost_extra(r2)
        assert fx.get("plan") == "restore", fx
        assert fx.get("capsule_id") in pairs
        assert r2.usage.prompt_tokens_details.cached_tokens >= 64
    finally:
        assert second.stop() == 0

    cold = Server(model_dir, ["--no-capsules"])
    try:
        c2 = cold.chat(TURN2)
        assert frost_extra(c2).get("plan") == "rebuild"
    finally:
        assert cold.stop() == 0
    assert c2.choices[0].message.content == r2.choices[0].message.content
    assert c2.usage.completion_tokens == r2.usage.completion_tokens

    # Both runs appended to one claim log, which must replay as one ordered history.
    checker = os.path.join(SOURCE, "scripts", "claimlog_check.py")
    res = subprocess.run([sys.executable, checker, str(caps / "claims.jsonl")], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
