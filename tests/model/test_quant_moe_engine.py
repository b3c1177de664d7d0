# Quantized MoE experts through the CPU engine, checked against an independent dequantization.
#
# `frost synth --preset moe-tiny --quant FMT` writes every linear (routed experts, shared expert,
# attention, GDN) quantized as the published tools do. This test decodes those tensors with the
# numpy reader of tests/tools/test_quant_reader.py (written from the format descriptions, not from
# Frost's C++), writes the result as an ordinary bf16 checkpoint, and requires `frost eval` to give
# bit-identical logits on the quantized checkpoint and on its independent bf16 dequantization.
#
# Why exact: before decoding, every scale that multiplies a code is rounded to a power of two
# (fp8 block `weight_scale_inv`, nvfp4 `weight_global_scale`, int4 `weight_scale`). The checkpoint
# stays a valid one of its format; its dequantized values (<= 6 significant bits times 2^e) are then
# exactly representable in bf16, so both checkpoints hand the fp32 engine the same weights and any
# difference in the logits is a difference in how Frost reads the format (a wrong nibble order,
# block orientation, zero point or expert binding moves the logits by ~1e-2 or more).
#
# It also checks that the deployment fingerprint (capsule binding) tells the bf16 and fp8 MoE
# checkpoints of one seed apart, and names the format.
import importlib.util
import json
import os
import random
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

FROST_BIN = os.environ.get("FROST_BIN", "")
SEED = int(os.environ.get("FROST_TEST_SEED", random.SystemRandom().randrange(1 << 30)))
READER_PATH = Path(__file__).resolve().parents[1] / "tools" / "test_quant_reader.py"
FORMATS = ["fp8", "nvfp4", "int4"]


def load_reader():
    spec = importlib.util.spec_from_file_location("quant_reader", READER_PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


reader = load_reader()


def frost(*args):
    assert FROST_BIN and Path(FROST_BIN).exists(), "set FROST_BIN to the built frost binary"
    p = subprocess.run([FROST_BIN, *map(str, args)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, f"frost {' '.join(map(str, args))} failed ({p.returncode}):\n{p.stderr}"
    return p.stdout


# --- safetensors as raw (dtype, shape, bytes) records, so untouched tensors copy bit for bit

def read_raw(path):
    raw = Path(path).read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", None)
    out = {}
    for name, e in header.items():
        b, end = e["data_offsets"]
        out[name] = [e["dtype"], list(e["shape"]), raw[8 + n + b:8 + n + end]]
    return out, meta


def write_raw(path, tensors, meta=None):
    header, blobs, off = {}, [], 0
    if meta:
        header["__metadata__"] = meta
    for name in sorted(tensors):
        dtype, shape, data = tensors[name]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    Path(path).write_bytes(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def pow2(values):
    """Nearest power of two (in log scale) of positive finite scales, same sign."""
    v = np.asarray(values, dtype=np.float64)
    assert np.all(np.isfinite(v)) and np.all(v != 0), "scale with a zero or non-finite entry"
    return np.sign(v) * np.exp2(np.round(np.log2(np.abs(v))))


def f32_to_bf16_exact(a, name):
    bits = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    assert np.all(bits & 0xFFFF == 0), f"{name}: dequantized value not exact in bf16 (scales not powers of two?)"
    return (bits >> 16).astype("<u2")


def power_of_two_scales(model_dir):
    """Rewrites the scales that multiply codes to powers of two, in place (see the header)."""
    path = Path(model_dir) / "model.safetensors"
    t, meta = read_raw(path)
    changed = 0
    for name, rec in t.items():
        dtype, shape, data = rec
        if name.endswith((".weight_scale_inv", ".weight_global_scale")) and dtype == "F32":
            rec[2] = pow2(np.frombuffer(data, "<f4")).astype("<f4").tobytes()
        elif name.endswith(".weight_scale") and dtype == "BF16":  # int4 group scales
            f = (np.frombuffer(data, "<u2").astype(np.uint32) << 16).view(np.float32)
            rec[2] = f32_to_bf16_exact(pow2(f).astype(np.float32), name).tobytes()
        else:
            continue
        changed += 1
    write_raw(path, t, meta)
    return changed


def independent_bf16_checkpoint(qdir, out):
    """qdir's quantized linears decoded by the independent reader, everything else copied, as bf16."""
    ref = reader.reference_weights(qdir)
    t, meta = read_raw(Path(qdir) / "model.safetensors")
    modules = {w[: -len(".weight")] for w in ref}
    keep = {n: r for n, r in t.items() if not any(n.startswith(m + ".") for m in modules)}
    for w, values in ref.items():
        keep[w] = ["BF16", list(values.shape), f32_to_bf16_exact(values, w).tobytes()]
    out.mkdir()
    write_raw(out / "model.safetensors", keep, meta)
    cfg = json.loads((Path(qdir) / "config.json").read_text())
    cfg.pop("quantization_config")
    (out / "config.json").write_text(json.dumps(cfg, indent=2))
    return ref


def eval_logits(model_dir, ids, out):
    frost("eval", "--model", model_dir, "--prompt-ids", ",".join(map(str, ids)), "--dump-logits", out)
    return np.fromfile(out, dtype="<f4").reshape(len(ids), -1)


def moe_layers(text):
    """Indices of the MoE layers (Qwen3-Next: decoder_sparse_step and mlp_only_layers; else all)."""
    step = text.get("decoder_sparse_step", 1)
    dense = set(text.get("mlp_only_layers", []))
    return [l for l in range(text["num_hidden_layers"]) if l not in dense and (l + 1) % step == 0]


# moe-tiny: the Qwen3.5-MoE wrapper layout. next-moe-tiny: Qwen3-Next's flat layout, whose GDN
# input projections are fused and grouped by key head (in_proj_qkvz, quantized as Qwen's FP8
# releases quantize it; in_proj_ba left in bf16), so this also checks that the engine regroups the
# rows of a dequantized projection as it regroups bf16 ones.
@pytest.mark.parametrize("preset", ["moe-tiny", "next-moe-tiny"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_quantized_moe_logits_equal_independent_dequantization(fmt, preset, tmp_path):
    qdir = tmp_path / fmt
    frost("synth", "--out", qdir, "--preset", preset, "--quant", fmt, "--seed", SEED)
    assert power_of_two_scales(qdir) > 0, f"{fmt}: no scale found to rewrite"
    ref = independent_bf16_checkpoint(qdir, tmp_path / "dequantized")
    cfg = json.loads((qdir / "config.json").read_text())
    text = cfg.get("text_config", cfg)
    experts = [w for w in ref if ".mlp.experts." in w]
    # every routed expert of every MoE layer is quantized and went through the independent reader
    assert len(experts) == 3 * text["num_experts"] * len(moe_layers(text)), (fmt, len(experts))
    assert any(".mlp.shared_expert." in w for w in ref), fmt
    fused = [w for w in ref if w.endswith(".in_proj_qkvz.weight")]
    interval = text.get("full_attention_interval", 4)  # Qwen3-Next declares the interval, not layer_types
    linear = [l for l in range(text["num_hidden_layers"]) if (l + 1) % interval != 0]
    assert len(fused) == (len(linear) if preset.startswith("next") else 0), (preset, fused)
    # the recipes leave the router, the shared expert's gate and the GDN gates in bf16
    assert not [w for w in ref if w.endswith((".mlp.gate.weight", ".shared_expert_gate.weight", ".in_proj_ba.weight",
                                              ".in_proj_a.weight", ".in_proj_b.weight"))], fmt

    rng = np.random.default_rng(SEED)
    ids = rng.integers(0, text["vocab_size"], size=48).tolist()
    got = eval_logits(qdir, ids, tmp_path / "q.f32")
    want = eval_logits(tmp_path / "dequantized", ids, tmp_path / "bf16.f32")
    assert np.all(np.isfinite(got)) and np.abs(got).max() > 0, f"{fmt}: degenerate logits"
    diff = np.flatnonzero(got.view(np.uint32) != want.view(np.uint32))
    assert diff.size == 0, (f"{fmt} seed {SEED}: {diff.size} of {got.size} logits differ, first at row "
                            f"{diff[0] // got.shape[1]}: quantized {got.flat[diff[0]]!r} vs dequantized "
                            f"{want.flat[diff[0]]!r}")


def test_fingerprint_tells_bf16_and_fp8_moe_apart(tmp_path):
    prints = {}
    for fmt in ("", "fp8"):
        d = tmp_path / (fmt or "bf16")
        frost("synth", "--out", d, "--preset", "moe-tiny", "--seed", SEED, *(["--quant", fmt] if fmt else []))
        info = json.loads(frost("inspect", d, "--json"))
        prints[fmt or "bf16"] = info["fingerprint"]
        if fmt:
            assert "fp8" in json.dumps(info["quantization"]).lower(), info["quantization"]
    assert len(prints["bf16"]) == 64 and len(prints["fp8"]) == 64, prints
    assert prints["bf16"] != prints["fp8"], prints
