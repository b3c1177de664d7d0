#!/usr/bin/env python3
"""Same-run baseline: transformers' Qwen3_5ForCausalLM on the GPU machine, plus the hardware ceilings.

Builds the 9B-style and 0.8B-style synthetic Qwen3.5 models (random bf16 weights made on the GPU, eager
attention), times cold TTFT (prefill + first greedy token) and decode ms/token with CUDA events after
warm-up (median of repeats), records peak GPU memory and which gated-delta-rule path transformers ran,
and measures the ceilings (D2D copy, torch/cuBLAS bf16 GEMM, pinned H2D/D2H) in the same process.
Prints a table and writes JSON (--out). --smoke runs a tiny config (CPU works) to check the logic.
"""
import argparse
import gc
import importlib.util
import json
import os
import platform
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from qwen35_shapes import SHAPES  # noqa: E402

GIB = 1 << 30
# Ceiling sizes: buffers well past the 50-60 MB L2 so the copy measures HBM, not cache.
COPY_BYTES = 2 * GIB
H2D_BYTES = 1 * GIB
GEMM_N = 8192
CEILING_REPEATS = 20


def log(msg):
    print(msg, flush=True)


class Timer:
    """Median wall time of a GPU region with CUDA events (perf_counter on CPU, for --smoke)."""

    def __init__(self, device):
        self.cuda = device.type == "cuda"

    def start(self):
        if self.cuda:
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            return ev
        return time.perf_counter()

    def stop(self, begin):
        """Milliseconds since begin; synchronises."""
        if self.cuda:
            end = torch.cuda.Event(enable_timing=True)
            end.record()
            end.synchronize()
            return begin.elapsed_time(end)
        return (time.perf_counter() - begin) * 1e3

    def median_ms(self, fn, warmup, repeats):
        for _ in range(warmup):
            fn()
        times = []
        for _ in range(repeats):
            t0 = self.start()
            fn()
            times.append(self.stop(t0))
        return statistics.median(times), times


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def free_memory(device):
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def measure_ceilings(device, timer, smoke):
    """Copy bandwidth (bytes copied), bf16 GEMM rate through torch.matmul, pinned host<->device."""
    copy_bytes = (16 << 20) if smoke else COPY_BYTES
    h2d_bytes = (16 << 20) if smoke else H2D_BYTES
    n = 256 if smoke else GEMM_N
    reps = 3 if smoke else CEILING_REPEATS
    out = {}
    src = torch.randint(0, 255, (copy_bytes,), dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    ms, _ = timer.median_ms(lambda: dst.copy_(src), 3, reps)
    out["d2d_copy_GBps"] = copy_bytes / (ms * 1e-3) / 1e9
    out["d2d_rw_GBps"] = 2 * out["d2d_copy_GBps"]
    out["d2d_copy_bytes"] = copy_bytes
    del src, dst

    a = torch.randn(n, n, dtype=torch.bfloat16, device=device)
    b = torch.randn(n, n, dtype=torch.bfloat16, device=device)
    c = torch.empty(n, n, dtype=torch.bfloat16, device=device)
    ms, _ = timer.median_ms(lambda: torch.matmul(a, b, out=c), 3, reps)
    out["gemm_bf16_TFLOPs"] = 2.0 * n ** 3 / (ms * 1e-3) / 1e12
    out["gemm_n"] = n
    out["gemm_label"] = "torch.matmul (cuBLAS) bf16 %d^3, random data" % n
    del a, b, c

    if device.type == "cuda":
        host = torch.empty(h2d_bytes, dtype=torch.uint8).pin_memory()
        host.random_(0, 255)
        dev = torch.empty(h2d_bytes, dtype=torch.uint8, device=device)
        ms, _ = timer.median_ms(lambda: dev.copy_(host, non_blocking=True), 2, max(3, reps // 2))
        out["h2d_pinned_GBps"] = h2d_bytes / (ms * 1e-3) / 1e9
        ms, _ = timer.median_ms(lambda: host.copy_(dev, non_blocking=True), 2, max(3, reps // 2))
        out["d2h_pinned_GBps"] = h2d_bytes / (ms * 1e-3) / 1e9
        out["h2d_bytes"] = h2d_bytes
        del host, dev
    free_memory(device)
    return out


def resolve_implementation(fn):
    """The function a transformers hub-kernel wrapper really calls.

    transformers 5.x wraps torch_chunk_gated_delta_rule & co. in use_kernel_func_from_hub_with_fallback,
    which picks the original package (fla, causal_conv1d) if it imports, else the torch reference, and
    keeps the choice in its closure as `implementation` (functools.wraps' __wrapped__ always names the
    torch function, so it cannot tell)."""
    for _ in range(4):
        code = getattr(fn, "__code__", None)
        cells = dict(zip(code.co_freevars, fn.__closure__ or ())) if code is not None else {}
        if "implementation" in cells:
            return cells["implementation"].cell_contents
        inner = getattr(fn, "__wrapped__", None)
        if inner is None:
            return fn
        fn = inner
    return fn


def describe_linear_attention_path(model):
    """Which gated-delta-rule / conv1d implementations the model's GDN layers call."""
    import transformers.models.qwen3_5.modeling_qwen3_5 as mq

    layer = next((m for m in model.modules() if type(m).__name__.endswith("GatedDeltaNet")), None)
    found = {}
    for name in ["torch_chunk_gated_delta_rule", "torch_recurrent_gated_delta_rule", "causal_conv1d_fn",
                 "causal_conv1d_update"]:
        # Older releases bound the choice on the layer (self.chunk_gated_delta_rule ...).
        fn = getattr(layer, name.replace("torch_", ""), None) or getattr(mq, name, None)
        if fn is None or not callable(fn):
            continue
        impl = resolve_implementation(fn)
        found[name] = "%s.%s" % (getattr(impl, "__module__", "?"), getattr(impl, "__qualname__", "?"))
    chunk = found.get("torch_chunk_gated_delta_rule", "")
    uses_fla = chunk.split(".")[0] == "fla"
    summary = ("flash-linear-attention Triton kernels (%s)" % chunk if uses_fla
               else "transformers torch reference fallback (%s)" % chunk)
    return {"summary": summary, "uses_fla": uses_fla,
            "fla_installed": importlib.util.find_spec("fla") is not None,
            "causal_conv1d_installed": importlib.util.find_spec("causal_conv1d") is not None,
            "functions": found}


def build_model(shape, device, attn):
    from transformers import Qwen3_5TextConfig, Qwen3_5ForCausalLM

    cfg = Qwen3_5TextConfig(**SHAPES[shape])
    cfg._attn_implementation = attn
    prev = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        # Parameters are created and initialised directly on the device in bf16 (no fp32 CPU copy).
        with torch.device(device):
            model = Qwen3_5ForCausalLM(cfg)
    finally:
        torch.set_default_dtype(prev)
    model.eval()
    layer_types = list(getattr(cfg, "layer_types", []))
    n_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    return model, cfg, {"weights_bytes": n_bytes, "params": sum(p.numel() for p in model.parameters()),
                        "layer_types": {t: layer_types.count(t) for t in sorted(set(layer_types))},
                        "attn_implementation": attn}


def forward_prefill(model, ids):
    """One cold prefill with the model's own fresh cache; returns (first token, cache)."""
    try:
        out = model(input_ids=ids, use_cache=True, logits_to_keep=1)
    except TypeError:
        out = model(input_ids=ids, use_cache=True)
    tok = out.logits[:, -1].argmax(-1, keepdim=True)
    return tok, out.past_key_values


def set_attn(model, attn):
    if hasattr(model, "set_attn_implementation"):
        model.set_attn_implementation(attn)
    else:
        model.config._attn_implementation = attn


class Budget:
    def __init__(self, seconds):
        self.t0 = time.monotonic()
        self.seconds = seconds

    def left(self):
        return self.seconds - (time.monotonic() - self.t0)


def time_ttft(model, cfg, tokens, device, timer, repeats, cap_s, budget, gen):
    """Cold TTFT at one prompt length: warm-up once, then the median of `repeats` fresh prefills."""
    res = {"tokens": tokens, "status": "ok"}
    if budget.left() <= 0:
        return dict(res, status="skipped (script time budget)")
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    oom = False
    try:
        with torch.inference_mode():
            ids = torch.randint(0, cfg.vocab_size, (1, tokens), generator=gen, device="cpu").to(device)
            t0 = timer.start()
            tok, cache = forward_prefill(model, ids)
            warm_ms = timer.stop(t0)
            del tok, cache
            res["warmup_ms"] = warm_ms
            if warm_ms / 1e3 > cap_s or budget.left() < (repeats * warm_ms / 1e3):
                res["status"] = "ok (single unwarmed run: over the time cap)"
                res["ttft_ms"] = warm_ms
                res["ttft_ms_all"] = [warm_ms]
            else:
                times = []
                for _ in range(repeats):
                    ids = torch.randint(0, cfg.vocab_size, (1, tokens), generator=gen, device="cpu").to(device)
                    sync(device)
                    t0 = timer.start()
                    tok, cache = forward_prefill(model, ids)
                    times.append(timer.stop(t0))
                    del tok, cache
                res["ttft_ms"] = statistics.median(times)
                res["ttft_ms_all"] = times
    except torch.cuda.OutOfMemoryError:
        oom = True
    if oom:
        res = {"tokens": tokens, "status": "oom"}
    if device.type == "cuda":
        res["peak_gpu_bytes"] = torch.cuda.max_memory_allocated()
    free_memory(device)
    return res


def time_decode(model, cfg, context, device, timer, steps, warmup, budget, gen, attn):
    """Decode ms/token after a `context`-token prompt, through the model's own cache (greedy)."""
    res = {"context": context, "status": "ok"}
    if budget.left() <= 0:
        return dict(res, status="skipped (script time budget)")
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    oom = False
    prefill_attn = attn
    try:
        with torch.inference_mode():
            ids = torch.randint(0, cfg.vocab_size, (1, context), generator=gen, device="cpu").to(device)
            try:
                tok, cache = forward_prefill(model, ids)
            except torch.cuda.OutOfMemoryError:
                tok = cache = None
            if cache is None:
                # The eager attention matrix of a long prompt does not fit: build the same cache
                # (same KV length, same state shapes) with SDPA, then decode with `attn` again.
                free_memory(device)
                if device.type == "cuda":
                    torch.cuda.reset_peak_memory_stats()  # the peak of the failed attempt is the card's
                prefill_attn = "sdpa"
                set_attn(model, "sdpa")
                try:
                    tok, cache = forward_prefill(model, ids)
                finally:
                    set_attn(model, attn)
            res["prefill_attn"] = prefill_attn
            del ids
            times = []
            for i in range(warmup + steps):
                t0 = timer.start()
                out = model(input_ids=tok, past_key_values=cache, use_cache=True)
                tok = out.logits[:, -1].argmax(-1, keepdim=True)
                cache = out.past_key_values
                ms = timer.stop(t0)
                del out
                if i >= warmup:
                    times.append(ms)
            res["ms_per_token"] = statistics.median(times)
            res["ms_all"] = times
            res["tokens_per_s"] = 1e3 / res["ms_per_token"]
            del tok, cache
    except torch.cuda.OutOfMemoryError:
        oom = True
    if oom:
        res = {"context": context, "status": "oom", "prefill_attn": prefill_attn}
        set_attn(model, attn)
    if device.type == "cuda":
        res["peak_gpu_bytes"] = torch.cuda.max_memory_allocated()
    free_memory(device)
    return res


def repeats_for(tokens, smoke):
    if smoke:
        return 2
    if tokens <= 1024:
        return 10
    if tokens <= 4096:
        return 5
    if tokens <= 16384:
        return 3
    return 2


def bench_model(shape, args, device, timer, budget, results, write):
    gen = torch.Generator().manual_seed(args.seed)
    entry = {"shape": shape, "config": {k: v for k, v in SHAPES[shape].items()}}
    results["models"][shape] = entry
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    t0 = time.monotonic()
    try:
        model, cfg, info = build_model(shape, device, args.attn)
    except torch.cuda.OutOfMemoryError:
        entry["status"] = "oom while building"
        free_memory(device)
        return
    sync(device)
    entry.update(info)
    entry["build_s"] = time.monotonic() - t0
    entry["linear_attention_path"] = describe_linear_attention_path(model)
    log("[%s] %.2f B params, %.2f GB bf16 weights, built in %.1f s; layers %s; attention %s" % (
        shape, info["params"] / 1e9, info["weights_bytes"] / 1e9, entry["build_s"], info["layer_types"], args.attn))
    log("[%s] linear-attention path: %s (fla installed: %s)" % (
        shape, entry["linear_attention_path"]["summary"], entry["linear_attention_path"]["fla_installed"]))
    write()
    # One untimed 256-token prefill first: fla's Triton kernels compile on their first call (about a
    # minute), which is a one-time cost of the process, not of a prompt; without it the first size's
    # warm-up run exceeds the time cap and is reported unwarmed (1k tokens read 61 s on 2026-11-24).
    t0 = time.monotonic()
    with torch.inference_mode():
        ids = torch.randint(0, cfg.vocab_size, (1, 256), generator=gen, device="cpu").to(device)
        tok, cache = forward_prefill(model, ids)
        del tok, cache
    sync(device)
    entry["kernel_warmup_s"] = time.monotonic() - t0
    log("[%s] kernel warm-up (256-token prefill, untimed): %.1f s" % (shape, entry["kernel_warmup_s"]))
    free_memory(device)
    entry["ttft"] = []
    for n in args.sizes:
        r = time_ttft(model, cfg, n, device, timer, repeats_for(n, args.smoke), args.cap_s, budget, gen)
        log("[%s] cold TTFT %6d tokens: %s" % (shape, n, fmt_ms(r.get("ttft_ms"), r["status"])))
        if r["status"] == "oom" and args.attn != "sdpa":
            # Eager attention materialises [Hq, T, T] scores; say what SDPA does at that length instead.
            set_attn(model, "sdpa")
            r["sdpa"] = time_ttft(model, cfg, n, device, timer, repeats_for(n, args.smoke), args.cap_s, budget, gen)
            set_attn(model, args.attn)
            log("[%s] cold TTFT %6d tokens with sdpa: %s" % (shape, n, fmt_ms(r["sdpa"].get("ttft_ms"), r["sdpa"]["status"])))
        entry["ttft"].append(r)
        write()
    entry["decode"] = []
    for ctx in args.decode_ctx:
        steps = 8 if args.smoke else (16 if ctx > 8192 else 32)
        r = time_decode(model, cfg, ctx, device, timer, steps, 2 if args.smoke else 4, budget, gen, args.attn)
        entry["decode"].append(r)
        log("[%s] decode after %6d: %s" % (shape, ctx, fmt_ms(r.get("ms_per_token"), r["status"])))
        write()
    if device.type == "cuda":
        runs = entry["ttft"] + [r["sdpa"] for r in entry["ttft"] if "sdpa" in r] + entry["decode"]
        # Over the runs that completed (an out-of-memory run's peak is the card, not the model).
        entry["peak_gpu_bytes"] = max([r.get("peak_gpu_bytes", 0) for r in runs if r["status"].startswith("ok")] + [0])
    entry["status"] = "ok"
    del model
    free_memory(device)
    write()


def fmt_ms(v, status):
    return ("%9.1f ms" % v) if v is not None else status


def print_table(results):
    ce = results.get("ceilings", {})
    log("")
    log("== baseline: transformers %s, torch %s, %s, %s" % (
        results["versions"].get("transformers"), results["versions"].get("torch"), results["device"], results["date"]))
    if ce:
        log("ceilings: D2D copy %.0f GB/s copied (%.0f read+write); %s: %.0f TFLOP/s; pinned H2D %s GB/s, D2H %s GB/s" % (
            ce["d2d_copy_GBps"], ce["d2d_rw_GBps"], ce["gemm_label"], ce["gemm_bf16_TFLOPs"],
            "%.1f" % ce["h2d_pinned_GBps"] if "h2d_pinned_GBps" in ce else "n/a",
            "%.1f" % ce["d2h_pinned_GBps"] if "d2h_pinned_GBps" in ce else "n/a"))
    for shape, e in results["models"].items():
        if "ttft" not in e:
            log("%s: %s" % (shape, e.get("status", "not run")))
            continue
        log("%s (%.2f GB weights, attention %s; linear attention: %s)" % (
            shape, e["weights_bytes"] / 1e9, e["attn_implementation"], e["linear_attention_path"]["summary"]))
        log("  %-26s %12s %14s" % ("metric", "median", "peak GPU GB"))
        for r in e["ttft"]:
            log("  %-26s %12s %14s" % ("cold TTFT %d tokens" % r["tokens"], fmt_ms(r.get("ttft_ms"), r["status"]),
                                      "%.1f" % (r["peak_gpu_bytes"] / 1e9) if "peak_gpu_bytes" in r else "n/a"))
            if "sdpa" in r:
                q = r["sdpa"]
                log("  %-26s %12s %14s" % ("  same with sdpa", fmt_ms(q.get("ttft_ms"), q["status"]),
                                          "%.1f" % (q["peak_gpu_bytes"] / 1e9) if "peak_gpu_bytes" in q else "n/a"))
        for r in e.get("decode", []):
            extra = " (cache via sdpa)" if r.get("prefill_attn") == "sdpa" and r.get("prefill_attn") != e["attn_implementation"] else ""
            log("  %-26s %12s %14s%s" % ("decode ms/token @%d" % r["context"], fmt_ms(r.get("ms_per_token"), r["status"]),
                                        "%.1f" % (r["peak_gpu_bytes"] / 1e9) if "peak_gpu_bytes" in r else "n/a", extra))


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="baseline.json", help="JSON output path")
    p.add_argument("--models", default="9b,0.8b", help="comma list of shapes: 9b, 0.8b")
    p.add_argument("--sizes", default="1024,4096,16384,32768", help="cold-TTFT prompt lengths")
    p.add_argument("--decode-ctx", default="1024,32768", help="contexts to decode after")
    p.add_argument("--attn", default="eager", help="attention implementation (eager | sdpa)")
    p.add_argument("--cap-s", type=float, default=30.0, help="a prefill slower than this is run once only")
    p.add_argument("--budget-s", type=float, default=330.0, help="stop starting measurements after this")
    p.add_argument("--seed", type=int, default=None, help="prompt-id seed (default: fresh)")
    p.add_argument("--smoke", action="store_true", help="tiny config, small sizes; runs on CPU")
    p.add_argument("--device", default=None, help="cuda (default when available) or cpu")
    a = p.parse_args(argv)
    if a.smoke:
        a.models = "smoke"
        if a.sizes == p.get_default("sizes"):
            a.sizes = "32,96"
        if a.decode_ctx == p.get_default("decode_ctx"):
            a.decode_ctx = "32,96"
    a.models = [m.strip() for m in a.models.split(",") if m.strip()]
    a.sizes = [int(s) for s in a.sizes.split(",") if s]
    a.decode_ctx = [int(s) for s in a.decode_ctx.split(",") if s]
    if a.seed is None:
        a.seed = int.from_bytes(os.urandom(4), "little")
    for m in a.models:
        if m not in SHAPES:
            p.error("unknown shape %s" % m)
    return a


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    import transformers

    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    timer = Timer(device)
    budget = Budget(args.budget_s)
    results = {
        "kind": "frost_baseline_hf",
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu",
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "python": platform.python_version(), "cuda": torch.version.cuda},
        "settings": {"attn_implementation": args.attn, "dtype": "bfloat16", "batch": 1, "seed": args.seed,
                     "ttft": "prefill with the model's own fresh cache, logits_to_keep=1, + greedy argmax",
                     "decode": "greedy steps through the model's own cache, CUDA events per step, median",
                     "smoke": args.smoke},
        "models": {},
    }

    def write():
        tmp = args.out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(results, f, indent=1)
        os.replace(tmp, args.out)

    log("baseline_hf: %s, torch %s, transformers %s" % (results["device"], torch.__version__, transformers.__version__))
    results["ceilings"] = measure_ceilings(device, timer, args.smoke)
    ce = results["ceilings"]
    log("ceilings: D2D copy %.0f GB/s, %s %.0f TFLOP/s, pinned H2D %s GB/s" % (
        ce["d2d_copy_GBps"], ce["gemm_label"], ce["gemm_bf16_TFLOPs"],
        "%.1f" % ce["h2d_pinned_GBps"] if "h2d_pinned_GBps" in ce else "n/a"))
    write()
    for shape in args.models:
        bench_model(shape, args, device, timer, budget, results, write)
    results["elapsed_s"] = time.monotonic() - budget.t0
    write()
    print_table(results)
    log("wrote %s (%.0f s)" % (args.out, results["elapsed_s"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
