# `frost inspect --json` on the MoE fixtures: total parameters equal the element count of every
# language-model tensor in the safetensors header (model.visual.* left out), and active
# parameters equal that minus the idle routed experts counted from config.json alone
# (layers x (num_experts - num_experts_per_tok) x 3 x hidden x moe_intermediate_size).
import json
import os
import struct
import subprocess
from math import prod
from pathlib import Path

import pytest

FROST_BIN = os.environ.get("FROST_BIN", "")
FIXTURES = Path(os.environ.get("FROST_FIXTURES_DIR", Path(__file__).resolve().parents[1] / "fixtures"))


def header_numel(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        h = json.loads(f.read(n))
    return sum(prod(v["shape"]) for k, v in h.items()
               if k != "__metadata__" and not k.startswith("model.visual."))


def inspect(d):
    assert FROST_BIN and Path(FROST_BIN).exists(), "set FROST_BIN to the built frost binary"
    p = subprocess.run([FROST_BIN, "inspect", str(d), "--json"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


@pytest.mark.parametrize("name", ["moe-tiny-a", "moe-tiny-a-vl", "qwen35-tiny-a"])
def test_inspect_total_and_active_params(name, tmp_path):
    d = FIXTURES / name
    assert (d / "config.json").exists(), f"missing fixture {d}"
    # a copy: inspect caches the fingerprint next to the model, fixtures are never written
    for f in ["config.json", "model.safetensors"]:
        (tmp_path / f).write_bytes((d / f).read_bytes())
    j = inspect(tmp_path)
    cfg = json.loads((d / "config.json").read_text())
    t = cfg.get("text_config", cfg)
    total = header_numel(d / "model.safetensors")
    idle = 0
    if t.get("num_experts", 0):
        idle = (t["num_hidden_layers"] * (t["num_experts"] - t["num_experts_per_tok"])
                * 3 * t["hidden_size"] * t["moe_intermediate_size"])
    assert j["params"] == {"total": total, "active": total - idle}
    assert j["config"]["num_experts"] == t.get("num_experts", 0)
    if idle:
        assert j["config"]["moe_layers"] == t["num_hidden_layers"]
        assert j["unsupported_features"] == []
    text = subprocess.run([FROST_BIN, "inspect", str(tmp_path)], capture_output=True, text=True, timeout=120).stdout
    assert f"({total} / {total - idle})" in text
