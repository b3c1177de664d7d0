"""A short run of bench/python/soak.py (design/reliability.md T35, blackbox style) over the
REAL CPU engine: mixed traffic from four clients (capsule create, pin/priority, delete, restore with a
suffix, chat turns streamed or not) while the server is SIGKILLed every ~8 s and restarted on
the same capsule directory. The script checks after every restart that each acknowledged capsule
is back with its policy, that deletions stay deleted, that a restore with the same suffix gives
the same greedy text in every run, and that the claim log of all runs replays as one history.
The 24-hour form is the same script with --seconds 86400 --kill-every 600."""
import os
import re
import subprocess
import sys

import pytest
from serve_proc import BACKEND, FROST, SERVE_FLAGS, SOURCE

pytestmark = pytest.mark.skipif(not FROST or not os.path.exists(FROST), reason="FROST_BIN not set")


def test_short_soak_with_random_sigkills_holds(model_dir, tmp_path):
    seed = int.from_bytes(os.urandom(4), "little") % (1 << 30)
    cmd = [sys.executable, os.path.join(SOURCE, "bench", "python", "soak.py"), "--frost", FROST, "--model", model_dir,
           "--seconds", "45", "--kill-every", "8", "--clients", "4", "--capsule-dir", str(tmp_path / "caps"),
           "--seed", str(seed), "--backend", BACKEND] + ["--serve-arg=" + f for f in SERVE_FLAGS]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out
    m = re.search(r"soak: (\d+) runs, (\d+) SIGKILLs, (\d+) capsule checks", out)
    assert m, out
    runs, kills, checks = map(int, m.groups())
    assert kills >= 2 and runs == kills + 1, out
    assert checks > 0, out  # capsules were acknowledged before a kill and checked after it
    for op in ("create 200", "update 200", "delete 200", "restore 200", "chat 200", "chat stream 200"):
        assert re.search(rf"^  {op} +\d+$", out, re.M), f"no '{op}' in the run:\n{out}"
    # The memory checks ran (the engine's buffers' floor in every run; on a GPU the device memory).
    assert re.search(r"^engine buffers .* in \d+ runs$", out, re.M), out
    if BACKEND == "cuda":
        assert "device memory in use (MiB)" in out, out
    assert "violations: 0" in out, out
