# GPTQ and AWQ 4-bit checkpoints through the CPU engine, checked against an independent decoding.
#
# This test writes the checkpoints itself, with numpy, from the published descriptions of the two
# formats (not from Frost's C++): a bf16 `frost synth --preset tiny` model whose linears are
# replaced by random 4-bit codes, zero points and power-of-two scales, packed
#   GPTQ (AutoGPTQ / GPTQModel): qweight int32 [in/8, out], input 8k+j of a word at bits 4j;
#        qzeros int32 [groups, out/8], output 8c+j at bits 4j, stored as zero - 1 in the v1
#        ("gptq") format and as the zero in "gptq_v2"; scales f16 [groups, out]; g_idx int32 [in]
#        (the group of each input: i // group_size, or any assignment with desc_act);
#   AWQ (AutoAWQ, GEMM): qweight int32 [in, out/8] and qzeros [groups, out/8], where nibble p of a
#        word holds output 8c + [0, 2, 4, 6, 1, 3, 5, 7][p]; scales f16 [groups, out];
# both meaning w[o, i] = (q[i, o] - zero[g, o]) * scale[g, o]. The same weights are written as an
# ordinary bf16 checkpoint (exact: small integers times powers of two), and `frost eval` must give
# bit-identical logits on both. `frost inspect --dump-tensor` must give each decoded weight.
import importlib.util
import json
import os
import random
import subprocess
import zlib
from pathlib import Path

import numpy as np
import pytest

FROST_BIN = os.environ.get("FROST_BIN", "")
SEED = int(os.environ.get("FROST_TEST_SEED", random.SystemRandom().randrange(1 << 30)))
GROUP = 128
AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]  # nibble p holds column AWQ_ORDER[p] of its group of eight
# the linears the tools quantize (the recipes leave the GDN gates in_proj_a / in_proj_b in bf16)
TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "in_proj_qkv", "in_proj_z", "out_proj", "gate_proj", "up_proj",
           "down_proj")


def frost(*args, check=True):
    assert FROST_BIN and Path(FROST_BIN).exists(), "set FROST_BIN to the built frost binary"
    p = subprocess.run([FROST_BIN, *map(str, args)], capture_output=True, text=True, timeout=120)
    if check:
        assert p.returncode == 0, f"frost {' '.join(map(str, args))} failed ({p.returncode}):\n{p.stderr}"
    return p


def load_sibling(name):
    spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parent / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# safetensors as raw (dtype, shape, bytes) records: test_quant_moe_engine.py's reader and writer
_raw = load_sibling("test_quant_moe_engine")


def read_raw(path):
    return _raw.read_raw(path)[0]


def write_raw(path, tensors):
    _raw.write_raw(path, tensors)


def pack_words(nibbles):
    """[..., 8] values 0..15 -> [...] uint32, value j at bits 4j."""
    nib = nibbles.astype(np.uint32)
    return sum(nib[..., j] << np.uint32(4 * j) for j in range(8)).astype(np.uint32)


def quantize_module(rng, out, inn, fmt, sym, desc_act, group):
    """Random codes, zeros, scales and g_idx of one linear, packed as `fmt`; and its exact weight."""
    groups = -(-inn // group)
    q = rng.integers(0, 16, size=(out, inn))
    lo = 1 if fmt == "gptq" else 0  # v1 stores zero - 1: a zero of 0 would wrap
    zero = np.full((groups, out), 8) if sym else rng.integers(lo, 16, size=(groups, out))
    scale = np.exp2(rng.integers(-9, -4, size=(groups, out))).astype(np.float16)
    g_idx = rng.integers(0, groups, size=inn) if desc_act else np.arange(inn) // group
    w = (q - zero[g_idx, :].T) * scale[g_idx, :].T.astype(np.float32)
    t = {}
    if fmt == "awq":
        qt = q.T.reshape(inn, out // 8, 8)[:, :, AWQ_ORDER]  # [in, out/8, nibble]
        t["qweight"] = qt
        t["qzeros"] = zero.reshape(groups, out // 8, 8)[:, :, AWQ_ORDER]
    else:
        t["qweight"] = q.T.reshape(inn // 8, 8, out).transpose(0, 2, 1)  # [in/8, out, j]
        stored = (zero - 1) & 0xF if fmt == "gptq" else zero
        t["qzeros"] = stored.reshape(groups, out // 8, 8)
        t["g_idx"] = g_idx.astype("<i4")
    rec = {}
    for k in ("qweight", "qzeros"):
        words = pack_words(t[k]).view("<i4")
        rec[k] = ["I32", list(words.shape), words.tobytes()]
    rec["scales"] = ["F16", [groups, out], scale.astype("<f2").tobytes()]
    if "g_idx" in t:
        rec["g_idx"] = ["I32", [inn], t["g_idx"].tobytes()]
    return rec, w


def bf16_bytes(w):
    bits = np.ascontiguousarray(w, dtype=np.float32).view(np.uint32)
    assert np.all(bits & 0xFFFF == 0), "weight not exact in bf16"
    return (bits >> 16).astype("<u2").tobytes()


def make_pair(tmp_path, fmt, sym=False, desc_act=False, group=GROUP, preset="tiny"):
    """(quantized dir, bf16 reference dir, {weight name: float32 weight})."""
    base = tmp_path / "base"
    if not base.exists():
        frost("synth", "--out", base, "--preset", preset, "--seed", SEED)
    cfg = json.loads((base / "config.json").read_text())
    tensors = read_raw(base / "model.safetensors")
    rng = np.random.default_rng([SEED, zlib.crc32(repr((fmt, sym, desc_act, group)).encode())])
    quant, ref, weights = dict(tensors), dict(tensors), {}
    for name, (dtype, shape, _) in tensors.items():
        module = name[: -len(".weight")]
        if not name.endswith(".weight") or module.rsplit(".", 1)[-1] not in TARGETS:
            continue
        out, inn = shape
        rec, w = quantize_module(rng, out, inn, fmt, sym, desc_act, group if group > 0 else inn)
        del quant[name]
        for k, v in rec.items():
            quant[f"{module}.{k}"] = v
        ref[name] = ["BF16", shape, bf16_bytes(w)]
        weights[name] = w
    qdir, rdir = tmp_path / f"{fmt}-q", tmp_path / f"{fmt}-ref"
    for d, ts in ((qdir, quant), (rdir, ref)):
        d.mkdir()
        write_raw(d / "model.safetensors", ts)
    (rdir / "config.json").write_text(json.dumps(cfg))
    if fmt == "awq":
        qc = {"quant_method": "awq", "bits": 4, "group_size": group, "zero_point": True, "version": "gemm",
              "modules_to_not_convert": ["in_proj_a", "in_proj_b"]}
    else:
        qc = {"quant_method": "gptq", "bits": 4, "group_size": group, "desc_act": desc_act, "sym": sym,
              "checkpoint_format": fmt, "damp_percent": 0.01, "true_sequential": True, "static_groups": False,
              "quantizer": ["gptqmodel:4.0.0"], "meta": {"damp_auto_increment": 0.0025}}
    cfg["quantization_config"] = qc
    (qdir / "config.json").write_text(json.dumps(cfg))
    return qdir, rdir, weights


def eval_logits(model_dir, ids, out):
    frost("eval", "--model", model_dir, "--prompt-ids", ",".join(map(str, ids)), "--dump-logits", out)
    return np.fromfile(out, dtype="<f4").reshape(len(ids), -1)


CASES = [  # (format, symmetric, desc_act, group size, preset)
    ("gptq", True, False, GROUP, "tiny"),
    ("gptq", False, False, GROUP, "tiny"),
    ("gptq_v2", False, False, GROUP, "tiny"),
    ("gptq_v2", False, True, GROUP, "tiny"),
    ("gptq", False, False, -1, "tiny"),
    ("awq", False, False, GROUP, "tiny"),
    # per-expert MoE linears (routed and shared experts; the router stays bf16), as the GPTQ / AWQ
    # releases of Qwen3.5 / 3.6 MoE store them
    ("gptq_v2", False, False, GROUP, "moe-tiny"),
    ("awq", False, False, GROUP, "moe-tiny"),
]


@pytest.mark.parametrize("fmt,sym,desc_act,group,preset", CASES)
def test_logits_equal_independent_decoding(fmt, sym, desc_act, group, preset, tmp_path):
    qdir, rdir, weights = make_pair(tmp_path, fmt, sym, desc_act, group, preset)
    info = json.loads(frost("inspect", qdir, "--json").stdout)["quantization"]
    assert len(info["quantized_modules"]) == len(weights), (fmt, len(info["quantized_modules"]), len(weights))
    assert len(weights) == (25 if preset == "tiny" else 4 * (3 * 8 + 3) + 3 * 3 + 4), (preset, len(weights))
    assert all(v["format"] == "int4" for v in info["quantized_modules"].values()), info
    layouts = {v["layout"] for v in info["quantized_modules"].values()}
    assert all(("symmetric" in l) == sym for l in layouts), layouts
    # act-order keeps g_idx where it is not i // group_size (a one-group module's never is)
    assert any("g_idx" in l for l in layouts) == desc_act, layouts
    # two decoded weights through the CLI: what Frost reads, bit for bit
    for name in sorted(weights)[:2]:
        out = tmp_path / "w.f32"
        frost("inspect", qdir, "--dump-tensor", name, "--out", out)
        got = np.fromfile(out, dtype="<f4").reshape(weights[name].shape)
        assert np.array_equal(got.view(np.uint32), weights[name].astype(np.float32).view(np.uint32)), name
    rng = np.random.default_rng(SEED)
    vocab = json.loads((rdir / "config.json").read_text()).get("text_config", {}).get("vocab_size", 4096)
    ids = rng.integers(0, vocab, size=40).tolist()
    got = eval_logits(qdir, ids, tmp_path / "q.f32")
    want = eval_logits(rdir, ids, tmp_path / "r.f32")
    assert np.all(np.isfinite(got)) and np.abs(got).max() > 0, "degenerate logits"
    diff = np.flatnonzero(got.view(np.uint32) != want.view(np.uint32))
    assert diff.size == 0, f"{fmt} seed {SEED}: {diff.size} of {got.size} logits differ"


def test_config_problems_listed(tmp_path):
    qdir, _, _ = make_pair(tmp_path, "gptq")
    cfg = json.loads((qdir / "config.json").read_text())
    cfg["quantization_config"].update({"bits": 8, "checkpoint_format": "marlin", "dynamic": {"-:.*o_proj": {}}})
    (qdir / "config.json").write_text(json.dumps(cfg))
    p = frost("inspect", qdir, "--json", check=False)
    assert p.returncode != 0
    for what in ("bits: only 4-bit", "checkpoint_format: only", "dynamic: per-module overrides"):
        assert what in p.stderr, p.stderr


def test_gptq_v1_wrapped_zero_refused(tmp_path):
    qdir, _, _ = make_pair(tmp_path, "gptq")
    t = read_raw(qdir / "model.safetensors")
    name = sorted(n for n in t if n.endswith(".qzeros"))[0]
    words = np.frombuffer(t[name][2], dtype="<u4").copy()
    words[0] |= 0xF  # output 0 of group 0 stored as 15: a zero of 0, wrapped by the v1 format
    t[name][2] = words.tobytes()
    write_raw(qdir / "model.safetensors", t)
    p = frost("eval", "--model", qdir, "--prompt-ids", "1,2,3", "--dump-logits", tmp_path / "l.f32", check=False)
    assert p.returncode != 0 and "gptq_v2" in p.stderr and name in p.stderr, p.stderr


def test_malformed_modules_listed_in_one_error(tmp_path):
    qdir, _, _ = make_pair(tmp_path, "gptq_v2", desc_act=True)
    t = read_raw(qdir / "model.safetensors")
    mods = sorted({n[: -len(".qweight")] for n in t if n.endswith(".qweight")})
    del t[mods[0] + ".qzeros"]                                   # missing zero points
    sc = t[mods[1] + ".scales"]
    sc[0], sc[1] = "I32", [sc[1][0], sc[1][1] // 2]              # scales of the wrong dtype (same bytes)
    g = np.frombuffer(t[mods[2] + ".g_idx"][2], dtype="<i4").copy()
    g[3] = 99                                                    # a group that does not exist
    t[mods[2] + ".g_idx"][2] = g.tobytes()
    t[mods[3] + ".qweight"][1] = [t[mods[3] + ".qweight"][1][0] // 2, t[mods[3] + ".qweight"][1][1] * 2]  # reshaped
    write_raw(qdir / "model.safetensors", t)
    p = frost("inspect", qdir, "--json", check=False)
    assert p.returncode != 0, p.stdout[-500:]
    for what in (f"missing: {mods[0]}.qzeros", f"wrong dtype: {mods[1]}.scales is I32",
                 f"bad value: {mods[2]}.g_idx[3] = 99", f"{mods[3]}.qzeros is"):
        assert what in p.stderr, (what, p.stderr)
