# `frost inspect --json`, `frost eval` and `frost generate` on the MoE fixtures: total parameters equal the element count of every
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


def copy_fixture(name, dst):
    for f in ["config.json", "model.safetensors", "generation_config.json"]:
        if (FIXTURES / name / f).exists():
            (dst / f).write_bytes((FIXTURES / name / f).read_bytes())
    return dst


@pytest.mark.parametrize("name", ["moe-tiny-a", "moe-tiny-a-vl"])
def test_eval_and_generate_match_the_moe_golden(name, tmp_path):
    """The CLI on an MoE checkpoint: `frost eval` logits within 1e-3 of the transformers golden at
    every stored prompt position, `frost generate` greedy ids equal to the golden's."""
    import numpy as np
    d = copy_fixture(name, tmp_path)
    g = json.loads((FIXTURES / name / "golden.json").read_text())
    V = g["vocab_size"]
    ref = np.fromfile(FIXTURES / name / "logits_prompt.f32", dtype="<f4").reshape(-1, V)
    out = tmp_path / "logits.f32"
    ids = ",".join(map(str, g["prompt_ids"]))
    p = subprocess.run([FROST_BIN, "eval", "--model", str(d), "--prompt-ids", ids, "--dump-logits", str(out)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    ours = np.fromfile(out, dtype="<f4").reshape(len(g["prompt_ids"]), V)
    for i, pos in enumerate(g["prompt_logit_positions"]):
        rel = np.linalg.norm(ours[pos] - ref[i]) / np.linalg.norm(ref[i])
        assert rel <= 1e-3, f"{name} prompt position {pos}: rel L2 {rel:.3e}"
    n = 16
    p = subprocess.run([FROST_BIN, "generate", "--model", str(d), "--prompt-ids", ids, "--max-new-tokens", str(n),
                        "--temperature", "0", "--json"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["ids"] == g["greedy_ids"][:n]


# `inspect`'s device estimate (cuda_weights: the CUDA weight table's decisions, nothing allocated)
# on a quantized MoE checkpoint: every fp8 projection stays fp8, the routed and shared experts too
# (decode runs quantized expert GEMVs), nothing is dequantized, and the bytes agree with a count
# from the safetensors header. A router stored quantized (not what the published recipes do) is the
# one MoE matrix dequantized, with its reason.
def test_inspect_cuda_weights_of_a_quantized_moe(tmp_path):
    d = tmp_path / "moe-fp8"
    p = subprocess.run([FROST_BIN, "synth", "--out", str(d), "--preset", "moe-tiny", "--quant", "fp8"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    j = inspect(d)
    t = json.loads((d / "config.json").read_text())["text_config"]
    cw = j["cuda_weights"]
    L = t["num_hidden_layers"]
    linear = sum(1 for k in t["layer_types"] if k == "linear_attention")
    assert cw["matrices_dequantized"] == 0
    assert cw["dequantized_bytes"] == 0
    # kept: each mixer's in_proj ([qkv; z] when split) and out_proj, each MoE layer's experts
    # gate_up and down and shared expert gate_up and down: the stored bytes of their fp8 tensors
    assert cw["matrices_kept_quantized"] == 6 * L
    with open(d / "model.safetensors", "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        h = json.loads(f.read(n))
    kept_names = ("in_proj_qkv.", "in_proj_z.", "out_proj.", "q_proj.", "k_proj.", "v_proj.", "o_proj.", "experts.",
                  "shared_expert.")
    kept = sum(v["data_offsets"][1] - v["data_offsets"][0] for k, v in h.items()
               if k != "__metadata__" and any(s in k for s in kept_names) and v["dtype"] != "BF16")
    assert cw["kept_bytes"] == kept
    # bf16: the embedding, each split in_proj's [b; a] tail, the routers and the shared experts' gates
    assert cw["matrices_bf16"] == 1 + linear + 2 * L
    text = subprocess.run([FROST_BIN, "inspect", str(d)], capture_output=True, text=True, timeout=120).stdout
    assert "dequantized to bf16" not in text, text
