"""`frost quantize` on the transformers fixtures (dense, multimodal wrapper, MoE, Qwen3-Next), in every
format. The written checkpoint is decoded by the independent numpy reader of test_quant_reader.py
(the published format descriptions, not Frost's C++) and compared with the source weights: every
value within its format's rounding bound, scales from the published absmax rules, every linear
quantized except what the recipes keep (then byte-identical and named by the config), every other
tensor and file copied byte for byte, config.json changed only by quantization_config. Frost's own
loader reads the same values bit for bit, and the CPU engine runs the result. Sharded output, and
the refusals (an already quantized source, a folder that holds a checkpoint, an unknown format)."""
import json
import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

import test_quant_reader as qr

FROST_BIN = os.environ.get("FROST_BIN", "")
FIXTURES = Path(os.environ.get("FROST_FIXTURES_DIR", Path(__file__).resolve().parents[1] / "fixtures"))
SOURCES = ["qwen35-tiny-a", "qwen35-tiny-a-vl", "moe-tiny-a", "next-tiny-a"]
RUN_TIMEOUT_S = 120
KEPT_LEAVES = (".in_proj_a", ".in_proj_b", ".in_proj_ba", ".mlp.gate", ".mlp.shared_expert_gate")
WIDTH = {"fp8": 1, "fp8-dynamic": 1, "nvfp4": 16, "int4": 128, "int4-asym": 128}


def run(*args):
    assert FROST_BIN and Path(FROST_BIN).exists(), "set FROST_BIN to the built frost binary"
    return subprocess.run([FROST_BIN, *map(str, args)], capture_output=True, text=True, timeout=RUN_TIMEOUT_S)


def read_all(model_dir):
    """Every tensor of a (possibly sharded) checkpoint: name -> (dtype, array)."""
    d = Path(model_dir)
    index = d / "model.safetensors.index.json"
    files = sorted(set(json.loads(index.read_text())["weight_map"].values())) if index.exists() else ["model.safetensors"]
    out = {}
    for f in files:
        part = qr.read_safetensors(d / f)
        assert not set(part) & set(out), f"{f}: a tensor name repeats across shards"
        out.update(part)
    return out


def is_linear(name, a):
    leaf = name[: -len(".weight")].rsplit(".", 1)[-1]
    return name.endswith(".weight") and a.ndim == 2 and leaf != "embed_tokens" and not leaf.endswith("norm")


def expect_quantized(module, shape, fmt):
    kept = (module == "lm_head" or module.startswith(("mtp.", "model.visual.")) or module.endswith(KEPT_LEAVES))
    return not kept and shape[1] % WIDTH[fmt] == 0


def error_bound(fmt, w, t, m):
    """Largest |dequantized - source| the format's round-to-nearest allows, per element."""
    if fmt in ("fp8", "fp8-dynamic"):
        if fmt == "fp8":
            sdt, sc = t[m + ".weight_scale_inv"]
            scale = np.kron(qr.float_values(sdt, sc), np.ones((128, 128)))[: w.shape[0], : w.shape[1]]
        else:
            sdt, sc = t[m + ".weight_scale"]
            scale = qr.float_values(sdt, sc)
        # 3 mantissa bits: half a step is 2^-4 of the value; subnormals (below 2^-6) step by 2^-9
        return np.maximum(np.abs(w) * 2.0 ** -4, scale * 2.0 ** -10) * 1.0001
    if fmt == "nvfp4":
        gs = float(t[m + ".weight_global_scale"][1].reshape(-1)[0])
        scale = np.repeat(qr.E4M3[t[m + ".weight_scale"][1]] / gs, 16, axis=1)[:, : w.shape[1]]
        # e2m1 steps: 0.5 up to 2, 1 up to 4, 2 up to 6 (half a step: 1); values past 6 x scale clamp
        # (the scale's own e4m3 rounding lets |w| reach ~6.4 x scale)
        return np.maximum(scale * 1.0, np.abs(w) - 6 * scale) * 1.0001 + 1e-12
    sdt, sc = t[m + ".weight_scale"]
    scale = np.repeat(qr.float_values(sdt, sc), 128, axis=1)[:, : w.shape[1]]
    # half a step, or a whole one where the range's end clamps (q = 8 -> 7)
    return scale * 1.0001 + 1e-12


@pytest.fixture(scope="module", params=SOURCES)
def source(request):
    src = FIXTURES / request.param
    return src, read_all(src)


@pytest.mark.parametrize("fmt", qr.FORMATS)
def test_quantized_checkpoint_against_its_source(source, fmt, tmp_path):
    src, src_t = source
    out = tmp_path / "q"
    p = run("quantize", "--model", src, "--out", out, "--quant", fmt)
    assert p.returncode == 0, p.stderr[-3000:]
    assert re.search(r"\d+ linears quantized", p.stdout)

    # config.json: the source's, plus the format's quantization_config
    cfg_in, cfg_out = (json.loads((d / "config.json").read_text()) for d in (src, out))
    q = cfg_out.pop("quantization_config")
    assert cfg_out == cfg_in
    assert q["quant_method"] == ("fp8" if fmt == "fp8" else "compressed-tensors")
    # every other file copied unchanged
    others = sorted(f.name for f in src.iterdir() if f.is_file() and f.name != "config.json" and ".safetensors" not in f.name)
    for name in others:
        assert (out / name).read_bytes() == (src / name).read_bytes(), name

    out_t = read_all(out)
    ref = qr.reference_weights(out)  # the independent decode of every quantized module
    linears = {n[: -len(".weight")]: a for n, (dt, a) in src_t.items() if is_linear(n, a)}
    want = {m for m, a in linears.items() if expect_quantized(m, a.shape, fmt)}
    assert {n[: -len(".weight")] for n in ref} == want
    for m in want:
        w = qr.float_values(*src_t[m + ".weight"]).astype(np.float64)
        got = ref[m + ".weight"].astype(np.float64)
        assert got.shape == w.shape, m
        err, bound = np.abs(got - w), error_bound(fmt, w, out_t, m)
        bad = np.flatnonzero(err > bound)
        assert bad.size == 0, (f"{m} ({fmt}): {bad.size} of {w.size} values past the rounding bound, first "
                               f"source {w.flat[bad[0]]!r} decoded {got.flat[bad[0]]!r} bound {bound.flat[bad[0]]!r}")
        assert m + ".weight" not in out_t or fmt in ("fp8", "fp8-dynamic")  # the bf16 weight replaced
    # what stays as stored: byte-identical, and named by the config's list
    kept = set(linears) - want
    listed = q.get("modules_to_not_convert" if fmt == "fp8" else "ignore")
    for name, (dt, a) in src_t.items():
        module = name[: -len(".weight")] if name.endswith(".weight") else None
        if module in want:
            continue
        assert name in out_t and out_t[name][0] == dt and out_t[name][1].tobytes() == a.tobytes(), name
        if module in kept:
            if fmt == "fp8":  # transformers: an entry names the module or a dotted part of it
                assert any(e == module or f".{e}." in f".{module}." or module.endswith("." + e) for e in listed), module
            else:  # compressed-tensors: a name, or "re:" + a regex matched at the start
                assert any(e == module or (e.startswith("re:") and re.match(e[3:], module)) for e in listed), module

    # Frost's loader reads what the independent reader reads, bit for bit (one module per kind of
    # linear: attention, GDN, MLP or expert)
    sample = {}
    for m in sorted(want):
        sample.setdefault(re.sub(r"\.\d+\.", ".N.", m).rsplit(".", 1)[0], m)
    for m in sample.values():
        info = run("inspect", out, "--dump-tensor", m + ".weight", "--out", tmp_path / "w.f32")
        assert info.returncode == 0, info.stderr[-2000:]
        got = np.fromfile(tmp_path / "w.f32", dtype="<f4").reshape(ref[m + ".weight"].shape)
        assert np.array_equal(got.view(np.uint32), ref[m + ".weight"].astype(np.float32).view(np.uint32)), m


@pytest.mark.parametrize("fmt", ["fp8", "int4"])
def test_the_cpu_engine_runs_the_result(fmt, tmp_path):
    src = FIXTURES / "qwen35-tiny-a"
    out = tmp_path / "q"
    assert run("quantize", "--model", src, "--out", out, "--quant", fmt).returncode == 0
    p = run("bench", "accuracy", "--model", out, "--reference", src, "--prompt-len", 32, "--gen", 8, "--json")
    assert p.returncode == 0, p.stderr[-2000:]
    j = json.loads(p.stdout)
    assert j["prompt"]["rows"] == 32 and j["prompt"]["nonfinite_rows"] == 0
    assert 0 < j["prompt"]["rel_l2_mean"] < 1.5  # quantized, so not equal; finite and of the logits' scale


def test_sharded_output_holds_the_same_tensors(tmp_path):
    src = FIXTURES / "moe-tiny-a"
    one, many = tmp_path / "one", tmp_path / "many"
    assert run("quantize", "--model", src, "--out", one, "--quant", "nvfp4").returncode == 0
    p = run("quantize", "--model", src, "--out", many, "--quant", "nvfp4", "--shard-gb", 0.0005)
    assert p.returncode == 0, p.stderr[-2000:]
    index = json.loads((many / "model.safetensors.index.json").read_text())
    shards = sorted(set(index["weight_map"].values()))
    assert len(shards) > 1 and not (many / "model.safetensors").exists()
    a, b = read_all(one), read_all(many)
    assert sorted(a) == sorted(b) == sorted(index["weight_map"])
    for n in a:
        assert a[n][0] == b[n][0] and a[n][1].tobytes() == b[n][1].tobytes(), n
    # a module's tensors share a shard (a reader may open one shard per module)
    by_module = {}
    for n, f in index["weight_map"].items():
        by_module.setdefault(n.rsplit(".", 1)[0], set()).add(f)
    assert all(len(fs) == 1 for fs in by_module.values())
    info = run("inspect", many)
    assert info.returncode == 0 and "nvfp4" in info.stdout


def test_refusals_leave_the_output_alone(tmp_path):
    # an already quantized source
    out = tmp_path / "a"
    p = run("quantize", "--model", FIXTURES / "fp8-tiny-a", "--out", out, "--quant", "int4")
    assert p.returncode == 1 and "already quantized (quant_method 'fp8')" in p.stderr and not out.exists()
    # a folder that already holds a checkpoint is not overwritten
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "config.json").write_text("{}")
    p = run("quantize", "--model", FIXTURES / "qwen35-tiny-a", "--out", busy, "--quant", "fp8")
    assert p.returncode == 1 and "already holds a checkpoint" in p.stderr
    assert sorted(f.name for f in busy.iterdir()) == ["config.json"] and (busy / "config.json").read_text() == "{}"
    # an unknown format, a missing source, missing options
    p = run("quantize", "--model", FIXTURES / "qwen35-tiny-a", "--out", tmp_path / "c", "--quant", "int3")
    assert p.returncode == 1 and "unknown format 'int3'" in p.stderr and not (tmp_path / "c").exists()
    p = run("quantize", "--model", tmp_path / "nothing", "--out", tmp_path / "d", "--quant", "fp8")
    assert p.returncode == 1 and "is not a model folder" in p.stderr
    assert run("quantize", "--model", FIXTURES / "qwen35-tiny-a", "--quant", "fp8").returncode == 2
    for bad in ("0", "-1", "100000", "x"):
        p = run("quantize", "--model", FIXTURES / "qwen35-tiny-a", "--out", tmp_path / "e", "--quant", "fp8", "--threads", bad)
        assert p.returncode == 2 and not (tmp_path / "e").exists(), bad
