#!/usr/bin/env python3
"""Quantized checkpoints written by `frost synth --quant` read by the real loaders (issue 15).

For each format (fp8 = Qwen/transformers FineGrainedFP8; fp8-dynamic, nvfp4, int4, int4-asym =
compressed-tensors), writes a tiny checkpoint with frost, flattens it to the text-only layout
(`model.*` keys, Qwen3_5ForCausalLM), loads it with transformers' own quantizers asked to
dequantize (FineGrainedFP8Config(dequantize=True) / CompressedTensorsConfig(run_compressed=False),
the compressed-tensors package doing the unpacking), and compares every quantized linear's bf16
weight with Frost's fp32 dequantization (`frost inspect --dump-tensor`) rounded to bf16 (nearest
even), bit for bit. Also runs on the transformers-written fixture tests/fixtures/fp8-tiny-a.
Prints one line per format; exit 1 when any weight differs or a loader refuses a checkpoint.

Needs (pip): torch, transformers>=5.17, compressed-tensors>=0.12, accelerate, safetensors, numpy.
usage: quant_reader_check.py [--frost build/tools/frost/frost] [--formats fp8,nvfp4,...] [--device cuda]
"""
import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
FORMATS = ["fp8", "fp8-dynamic", "nvfp4", "int4", "int4-asym"]
WRAPPER_PREFIX = "model.language_model."


def run(cmd):
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed:\n{p.stderr}")
    return p.stdout


def flatten(src: Path, dst: Path):
    """Multimodal-wrapper synth folder -> flat Qwen3_5ForCausalLM folder (same tensors, renamed)."""
    from safetensors.torch import load_file, save_file

    dst.mkdir(parents=True, exist_ok=True)
    cfg = json.loads((src / "config.json").read_text())
    text = dict(cfg["text_config"])
    text["architectures"] = ["Qwen3_5ForCausalLM"]
    text["quantization_config"] = cfg["quantization_config"]
    text["tie_word_embeddings"] = cfg.get("tie_word_embeddings", text.get("tie_word_embeddings", False))
    (dst / "config.json").write_text(json.dumps(text, indent=2))
    tensors = load_file(str(src / "model.safetensors"))
    flat = {("model." + k[len(WRAPPER_PREFIX):] if k.startswith(WRAPPER_PREFIX) else k): v for k, v in tensors.items()}
    save_file(flat, str(dst / "model.safetensors"), metadata={"format": "pt"})


def load_transformers(model_dir: Path, device: str):
    from transformers import Qwen3_5ForCausalLM

    q = json.loads((model_dir / "config.json").read_text())["quantization_config"]
    if q["quant_method"] == "fp8":
        from transformers import FineGrainedFP8Config
        qc = FineGrainedFP8Config(weight_block_size=tuple(q["weight_block_size"]), dequantize=True)
    else:
        from transformers.utils.quantization_config import CompressedTensorsConfig
        qc = CompressedTensorsConfig(run_compressed=False)
    return Qwen3_5ForCausalLM.from_pretrained(str(model_dir), dtype=torch.bfloat16, quantization_config=qc,
                                              device_map=device).eval()


def compare(frost: Path, model_dir: Path, device: str, tmp: Path):
    info = json.loads(run([frost, "inspect", model_dir, "--json"]))
    modules = sorted(info["quantization"]["quantized_modules"])
    model = load_transformers(model_dir, device)
    worst, differing, total = 0.0, 0, 0
    for m in modules:
        out = tmp / "w.f32"
        dump = json.loads(run([frost, "inspect", model_dir, "--dump-tensor", m + ".weight", "--out", out]))
        ours = torch.from_numpy(np.fromfile(out, dtype="<f4").reshape(dump["shape"])).to(torch.bfloat16)
        theirs = model.get_submodule(m).weight.detach().to("cpu", torch.bfloat16)
        if theirs.shape != ours.shape:
            raise RuntimeError(f"{m}: transformers shape {tuple(theirs.shape)} vs frost {tuple(ours.shape)}")
        bad = (ours.view(torch.int16) != theirs.view(torch.int16))
        differing += int(bad.sum())
        total += ours.numel()
        worst = max(worst, float((ours.float() - theirs.float()).abs().max()))
    del model
    return len(modules), differing, total, worst


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--frost", default=str(ROOT / "build/tools/frost/frost"))
    ap.add_argument("--formats", default=",".join(FORMATS))
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    frost = Path(a.frost)
    ok = True
    with tempfile.TemporaryDirectory(prefix="frost-quant-check-") as t:
        tmp = Path(t)
        cases = []
        for fmt in a.formats.split(","):
            wrap, flat = tmp / f"{fmt}-wrap", tmp / fmt
            run([frost, "synth", "--out", wrap, "--preset", "tiny", "--quant", fmt, "--seed", a.seed])
            flatten(wrap, flat)
            shutil.rmtree(wrap)
            cases.append((fmt, flat))
        fixture = tmp / "fp8-tiny-a"  # a copy: frost caches the fingerprint beside the weights
        fixture.mkdir()
        for f in ("config.json", "model.safetensors"):
            shutil.copy(ROOT / "tests/fixtures/fp8-tiny-a" / f, fixture / f)
        cases.append(("fixture fp8-tiny-a", fixture))
        for name, d in cases:
            try:
                n, differing, total, worst = compare(frost, d, a.device, tmp)
            except Exception as e:  # a loader refusing the checkpoint is a failure of the format
                print(f"{name:22s} FAIL  {type(e).__name__}: {e}")
                ok = False
                continue
            status = "ok" if differing == 0 else "DIFF"
            ok = ok and differing == 0
            print(f"{name:22s} {status:4s}  {n} linears, {total} weights, {differing} bf16 values differ, "
                  f"max |diff| {worst:.3g}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
