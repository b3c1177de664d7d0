#!/usr/bin/env python3
"""Final comparison table: each Frost number next to its floor and to the same-run baseline.

Reads the JSON the GPU benches write into one folder (default $OUT, else ./gpu-out):
  baseline.json            bench/python/baseline_hf.py (transformers + ceilings)
  bench_cuda_kernels.json  bench/bench_cuda_kernels.cpp (ceilings, whole-forward CUDA graphs)
  capsule_bench.json       `frost bench capsule` (cold vs capsule TTFT and restore GB/s per tier; the
                           shape is read from the model path: "9b" or "0.8b" in it, else not tabled)
  any *.json holding "frost_results": [{"model": "9b"|"0.8b", "metric": M, "value": V, ...}], the
    generic form for Frost's own benches, with M one of
      ttft_ms (+ "tokens"), decode_ms (+ "context"), peak_gpu_bytes, capsule_ttft_ms (+ "prefix",
      "suffix", "tier"), restore_GBps (+ "tier": device|host|disk), cold_start_s; "source" optional.
  llamacpp_bench_<shape>.json scripts/gpu/bench_llamacpp.sh ("bench": "llamacpp"): Frost vs llama.cpp on
    the same checkpoint, printed last by peer_report.print_table.
  engine_bench_<shape>.json `frost bench engine` ("bench": "engine"): its frost_results as above, plus
    "cold_start" (phases_s, total_s, floor_s) and "memory" (peak_bytes over the pre-engine baseline,
    floor_bytes = weights + KV(max_seq_len) + recurrent/conv state, engine_bytes by role), printed
    under the shape's table as the cold-start breakdown and peak memory against that floor.
Floors (design/performance.md): decode = fewest bytes a step moves / read bandwidth (2 x the D2D
bytes-copied rate); prefill = max(FLOPs / bf16 GEMM rate, bytes / read bandwidth); restore = the
copy ceiling of its tier; capsule TTFT = capsule bytes at that ceiling + the suffix forward's floor.
A capsule TTFT's baseline is the baseline's cold TTFT at the prefix length (what re-prefilling costs
without capsules) when it measured that length. Each ceiling is the best measured in the run.
Missing files print "n/a".
"""
import glob
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from qwen35_shapes import SHAPES, Costs  # noqa: E402
import peer_report  # noqa: E402

SHAPE_ORDER = ["9b", "0.8b"]
TTFT_SIZES = [1024, 4096, 16384, 32768]
DECODE_CTX = [1024, 32768]
NA = "n/a"
ROW = "  %-26s %10s %10s %9s %10s %9s %10s  %s"


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        print("report: cannot read %s (%s)" % (path, e))
        return None


def collect(paths):
    """Sort the JSON files into baseline, kernel bench and generic Frost rows."""
    files = []
    for p in paths:
        files += sorted(glob.glob(os.path.join(p, "*.json"))) if os.path.isdir(p) else [p]
    data = {"baseline": None, "kernels": None, "capsule": [], "engine": {}, "frost": [], "peer": [], "graph_ops": [],
            "ignored": []}
    for path in files:
        if not os.path.exists(path):
            continue
        j = load(path)
        if not isinstance(j, dict):
            continue
        known = True
        if j.get("kind") == "frost_baseline_hf":
            data["baseline"] = j
        elif "forward_graphs" in j or "kernels" in j:
            data["kernels"] = j
        elif j.get("bench") == "capsule" and isinstance(j.get("rows"), list):
            data["capsule"].append(j)
        elif j.get("bench") == "engine" and j.get("leave_out"):
            pass  # a timing probe (--leave-out): its numbers are not the model's
        elif j.get("bench") == "engine" and isinstance(j.get("frost_results"), list):
            data["engine"][str(j.get("model", ""))] = j
        elif j.get("bench") == "graph-ops" and isinstance(j.get("labels"), list):
            data["graph_ops"].append(dict(j, file=os.path.basename(path)))
        elif j.get("bench") == "llamacpp":
            data["peer"].append(j)
        else:
            known = False
        if isinstance(j.get("frost_results"), list):
            for r in j["frost_results"]:
                if isinstance(r, dict) and "metric" in r and "value" in r:
                    data["frost"].append(dict(r, source=r.get("source", os.path.basename(path))))
        elif not known:
            data["ignored"].append(os.path.basename(path))
    return data


def graph_ops_lines(j, top=8):
    """`frost bench graph-ops`: the labels whose absence saves the most of a decode step."""
    print("\ngraph-ops %s (%s, decode @%s): full step %.3f ms/token; in-graph cost by op label:" % (
        j["file"], j.get("backend"), j.get("context"), j.get("full_ms_per_token", 0)))
    ran = sorted((r for r in j["labels"] if "saved_ms" in r), key=lambda r: -r["saved_ms"])
    for r in ran[:top]:
        # paired probes (timed in alternation with the full step) carry the range of their differences
        rng = r.get("saved_ms_range")
        print("  %-34s %4d ops  saved %7.3f ms/token  %7.2f us/op  %6.2fx its bytes' floor%s" % (
            r["label"], r["ops"], r["saved_ms"], r["saved_per_op_us"], r["saved_over_floor"],
            "  (paired: %.3f..%.3f)" % (rng[0], rng[1]) if rng and r.get("paired") else ""))
    failed = [r["label"] for r in j["labels"] if "error" in r]
    if failed:
        print("  probes that could not run: %s" % ", ".join(failed))


def ceilings(data):
    """Best copy / GEMM / pinned-H2D rate measured in this run, with where it came from."""
    ce = {}

    def offer(key, value, src):
        if isinstance(value, (int, float)) and value > 0 and (key not in ce or value > ce[key][0]):
            ce[key] = (float(value), src)

    b = (data["baseline"] or {}).get("ceilings", {})
    offer("copy_GBps", b.get("d2d_copy_GBps"), "torch copy_")
    offer("gemm_TFLOPs", b.get("gemm_bf16_TFLOPs"), b.get("gemm_label", "torch.matmul"))
    offer("h2d_GBps", b.get("h2d_pinned_GBps"), "torch pinned copy_")
    k = (data["kernels"] or {}).get("ceilings", {})
    offer("copy_GBps", k.get("d2d_copy_GBps"), "cudaMemcpy D2D (bench_cuda_kernels)")
    offer("gemm_TFLOPs", k.get("gemm_bf16_TFLOPs"), "cuBLASLt bf16 8192^3 (bench_cuda_kernels)")
    offer("h2d_GBps", k.get("h2d_pinned_GBps"), "bench_cuda_kernels")
    offer("disk_GBps", k.get("disk_read_GBps"), "bench_cuda_kernels")
    for cap in data["capsule"]:
        cg = cap.get("ceilings_gbps") or {}
        offer("copy_GBps", cg.get("d2d"), "frost bench capsule D2D")
        offer("h2d_GBps", cg.get("h2d"), "frost bench capsule H2D")
        offer("disk_GBps", cg.get("disk_read"), "frost bench capsule file read")
    for r in data["frost"]:
        if r["metric"].startswith("ceiling_"):
            offer(r["metric"][len("ceiling_"):], r["value"], r["source"])
    return ce


def frost_numbers(data):
    """{(shape, metric, key): (value, source)} from the kernel bench graphs and the generic rows."""
    out = {}
    for g in (data["kernels"] or {}).get("forward_graphs", []):
        name, ms = g.get("name", ""), g.get("ms")
        words = name.split()
        if ms is None or len(words) < 3:
            continue
        src = "bench_cuda_kernels graph"
        if words[0] == "prefill" and words[1].isdigit():
            out[("9b", "ttft_ms", int(words[1]))] = (ms, src)
        elif words[0] == "decode" and words[-1].isdigit():
            out[("9b", "decode_ms", int(words[-1]))] = (ms, src)
    for cap in data["capsule"]:
        model = os.path.basename(str(cap.get("model", ""))).lower()
        shape = next((s for s in SHAPE_ORDER if s in model.replace("08b", "0.8b")), None)
        if shape is None:
            continue
        src = "frost bench capsule (%s)" % cap.get("backend", "?")
        for r in cap["rows"]:
            L, S = r.get("prefix_tokens"), r.get("suffix_tokens")
            if L + S in TTFT_SIZES and "cold_ttft_ms" in r:
                out[(shape, "ttft_ms", L + S)] = (r["cold_ttft_ms"], src)
            for tier in ("device", "host", "disk"):
                if "capsule_ttft_ms_" + tier in r:
                    out[(shape, "capsule_ttft_ms", (tier, L, S))] = (r["capsule_ttft_ms_" + tier], src)
                    out[(shape, "capsule_bytes", (tier, L, S))] = (r.get("capsule_bytes"), src)
                if "restore_gbps_" + tier in r:
                    out[(shape, "restore_GBps", (tier, L))] = (r["restore_gbps_" + tier], src)
    for r in data["frost"]:
        key = r.get("tokens", r.get("context", r.get("prefix")))
        if r["metric"] in ("capsule_ttft_ms", "capsule_bytes"):
            key = (r.get("tier", "device"), r.get("prefix"), r.get("suffix"))
        elif r["metric"] == "restore_GBps":
            key = (r.get("tier", "device"), r.get("prefix"))
        out[(r.get("model", "9b"), r["metric"], key)] = (r["value"], r["source"])
    return out


def baseline_numbers(data):
    out = {}
    for shape, e in ((data["baseline"] or {}).get("models") or {}).items():
        for r in e.get("ttft", []):
            v = r.get("ttft_ms")
            if v is None and (r.get("sdpa") or {}).get("ttft_ms") is not None:
                # Eager attention ran out of memory at this length; the baseline is then SDPA's.
                v = r["sdpa"]["ttft_ms"]
                out[(shape, "ttft_note", r["tokens"])] = "baseline: sdpa (eager oom)"
            out[(shape, "ttft_ms", r["tokens"])] = v
        for r in e.get("decode", []):
            out[(shape, "decode_ms", r["context"])] = r.get("ms_per_token")
        for r in e.get("ttft", []) + e.get("decode", []):
            if not str(r.get("status", "ok")).startswith("ok"):
                key = r.get("tokens", r.get("context"))
                out.setdefault((shape, "ttft_note" if "tokens" in r else "decode_note", key), "baseline: " + r["status"])
        if e.get("peak_gpu_bytes"):
            out[(shape, "peak_gpu_bytes", None)] = e["peak_gpu_bytes"]
    return out


def engine_lines(j):
    """The cold-start breakdown and peak memory against its floor from one `frost bench engine` run."""
    if not j:
        return
    cold, mem = j.get("cold_start") or {}, j.get("memory") or {}
    phases = cold.get("phases_s") or {}
    total, floor = cold.get("total_s"), cold.get("floor_s")
    if total is not None:
        parts = ", ".join("%s %.3f" % (k, v) for k, v in phases.items() if isinstance(v, (int, float)))
        print("  cold start %.3f s (floor %s s = %s, %s): %s" % (
            total, fmt(floor), cold.get("floor", "n/a"), fmt(ratio(total, floor), "x"), parts))
    peak, mfloor = mem.get("peak_bytes"), mem.get("floor_bytes")
    if peak is not None:
        fl = mem.get("floor") or {}
        eng = mem.get("engine_bytes") or {}
        print("  peak %s memory %s over baseline vs floor %s at max_seq %s (%s): floor = weights %s + KV %s + "
              "state %s; engine buffers: weights %s, scratch %s, state %s" % (
                  "GPU" if j.get("backend") == "cuda" else "host", gb(peak), gb(mfloor),
                  mem.get("max_seq_len", NA), fmt(ratio(peak, mfloor), "x"), gb(fl.get("weights")),
                  gb(fl.get("kv_max_seq")), gb(fl.get("recurrent_conv_state")),
                  gb(eng.get("weights")), gb(eng.get("scratch")), gb(eng.get("state"))))


def engine_table(model, j, gemm, rw):
    """A shape only `frost bench engine` ran (e.g. 35b-a3b, FROST_BENCH_MOE=1): its TTFT and decode
    rows against floors from the engine's own cost model (bytes and FLOPs it reports per row; for a
    mixture-of-experts model the active experts only), with this run's ceilings."""
    print("\n%s (frost bench engine only; floors from the engine's cost model, MoE: active experts; "
          "ms unless noted)" % model)
    print(ROW % ("metric", "floor", "baseline", "base/flr", "Frost", "Frost/flr", "Frost/base", "Frost source"))
    src = "frost bench engine (%s)" % j.get("backend", "?")
    for r in j.get("ttft") or []:
        t, ms, fb, fl_ops = r.get("tokens"), r.get("ms"), r.get("floor_bytes"), r.get("flops")
        if not t or ms is None:
            continue
        fl = max(fl_ops / gemm, fb / rw) * 1e3 if gemm and rw and fb is not None and fl_ops is not None else None
        name = "cold TTFT %dk" % (t // 1024) if t % 1024 == 0 else "cold TTFT %d" % t
        print(ROW % (name, fmt(fl), NA, NA, fmt(ms), fmt(ratio(ms, fl), "x"), NA, src))
    for r in j.get("decode") or []:
        ctx, ms, fb = r.get("context"), r.get("ms_per_token"), r.get("floor_bytes")
        if ctx is None or ms is None:
            continue
        fl = fb / rw * 1e3 if rw and fb is not None else None
        name = "decode/token @%dk" % (ctx // 1024) if ctx % 1024 == 0 else "decode/token @%d" % ctx
        print(ROW % (name, fmt(fl), NA, NA, fmt(ms), fmt(ratio(ms, fl), "x"), NA, src))
    engine_lines(j)


def fmt(v, unit=""):
    if v is None:
        return NA
    if unit == "x":
        return "%.2fx" % v
    if unit == "GB":
        return "%.1f GB" % (v / 1e9)
    return ("%.1f" % v) if v >= 10 else ("%.2f" % v)


def gb(v):
    return NA if v is None else "%.2f GB" % (v / 1e9)


def ratio(a, b):
    return a / b if a is not None and b else None


def main(argv):
    paths = argv or [os.environ.get("OUT") or "gpu-out"]
    data = collect(paths)
    ce = ceilings(data)
    rw = 2 * ce["copy_GBps"][0] * 1e9 if "copy_GBps" in ce else None
    gemm = ce["gemm_TFLOPs"][0] * 1e12 if "gemm_TFLOPs" in ce else None
    base = baseline_numbers(data)
    frost = frost_numbers(data)
    b = data["baseline"] or {}
    print("== Frost vs floor vs baseline (%s, %s)" % (b.get("device", NA), b.get("date", NA)))
    for key, label in [("copy_GBps", "D2D copy GB/s (bytes copied)"), ("gemm_TFLOPs", "bf16 GEMM TFLOP/s"),
                       ("gemm_sustained_TFLOPs", "bf16 GEMM TFLOP/s, back to back"),
                       ("gemm_fp8_TFLOPs", "FP8 W8A8 GEMM TFLOP/s"),
                       ("gemm_fp8_sustained_TFLOPs", "FP8 W8A8 GEMM, back to back"),
                       ("h2d_GBps", "pinned H2D GB/s"), ("disk_GBps", "sequential disk read GB/s")]:
        print("  ceiling %-30s %s" % (label, "%.1f  [%s]" % ce[key] if key in ce else NA))
    if b:
        for shape, e in (b.get("models") or {}).items():
            p = e.get("linear_attention_path", {}).get("summary", NA)
            print("  baseline %s: transformers %s, attention %s, linear attention: %s" % (
                shape, b.get("versions", {}).get("transformers", NA), e.get("attn_implementation", NA), p))
    else:
        print("  baseline: n/a (no baseline.json)")

    head = ROW % (
        "metric", "floor", "baseline", "base/flr", "Frost", "Frost/flr", "Frost/base", "Frost source")
    for shape in SHAPE_ORDER:
        cfg = ((b.get("models") or {}).get(shape) or {}).get("config") or SHAPES[shape]
        c = Costs(cfg)
        print("\n%s (%.2f B params, %.1f GB bf16; ms unless noted)" % (shape, c.params / 1e9, c.weight_bytes() / 1e9))
        print(head)
        rows = []
        for t in TTFT_SIZES:
            fl = max(c.prefill_flops(t) / gemm, c.prefill_bytes(t) / rw) * 1e3 if gemm and rw else None
            rows.append(("cold TTFT %dk" % (t // 1024), fl, base.get((shape, "ttft_ms", t)),
                         frost.get((shape, "ttft_ms", t)), base.get((shape, "ttft_note", t), "")))
        for ctx in DECODE_CTX:
            fl = c.decode_bytes(ctx) / rw * 1e3 if rw else None
            rows.append(("decode/token @%dk" % (ctx // 1024), fl, base.get((shape, "decode_ms", ctx)),
                         frost.get((shape, "decode_ms", ctx)), base.get((shape, "decode_note", ctx), "")))
        mem_floor = c.weight_bytes() + c.kv_bytes(max(TTFT_SIZES + DECODE_CTX)) + c.state_bytes()
        rows.append(("peak GPU memory", mem_floor, base.get((shape, "peak_gpu_bytes", None)),
                     frost.get((shape, "peak_gpu_bytes", None)), "GB"))
        for name, fl, bv, fv, note in rows:
            unit = "GB" if note == "GB" else ""
            fval, fsrc = fv if fv else (None, "")
            fsrc = "; ".join(x for x in (fsrc, note if note != "GB" else "") if x)
            print(ROW % (name, fmt(fl, unit), fmt(bv, unit), fmt(ratio(bv, fl), "x"), fmt(fval, unit),
                         fmt(ratio(fval, fl), "x"), fmt(ratio(fval, bv), "x"), fsrc))
        tier_ceiling = {"device": "copy_GBps", "host": "h2d_GBps", "disk": "disk_GBps"}
        for (s_, metric, key), (val, src) in sorted(frost.items(), key=lambda kv: str(kv[0])):
            if s_ != shape or metric not in ("capsule_ttft_ms", "restore_GBps", "cold_start_s"):
                continue
            fl, bv = None, None
            if metric == "restore_GBps":
                tier, prefix = key
                ck = tier_ceiling.get(tier)
                fl = ce[ck][0] if ck in ce else None
                name = "restore GB/s %s @%s" % (tier, prefix)
                # Bandwidth: the ratio to the ceiling is the fraction reached (<= 1).
                print(ROW % (name, fmt(fl), NA, NA, fmt(val), fmt(ratio(val, fl), "x"), NA, src))
                continue
            if metric == "capsule_ttft_ms":
                tier, prefix, suffix = key
                nbytes = (frost.get((shape, "capsule_bytes", key)) or (None,))[0]
                ck = tier_ceiling.get(tier)
                if nbytes and ck in ce and gemm and rw and prefix is not None and suffix:
                    fwd = max(c.extend_flops(prefix, suffix) / gemm, c.extend_bytes(prefix, suffix) / rw)
                    fl = (nbytes / (ce[ck][0] * 1e9) + fwd) * 1e3
                bv = base.get((shape, "ttft_ms", prefix))
                name = "capsule TTFT %s %s+%s" % (tier, prefix, suffix)
            elif metric == "cold_start_s":
                fl = (data["engine"].get(shape) or {}).get("cold_start", {}).get("floor_s") or None
                name = "cold start (s)"
            else:
                name = "%s %s" % (metric, key)
            print(ROW % (name, fmt(fl), fmt(bv), fmt(ratio(bv, fl), "x"), fmt(val), fmt(ratio(val, fl), "x"),
                         fmt(ratio(val, bv), "x"), src))
            if metric == "capsule_ttft_ms":
                # performance.md's capsule target: TTFT <= 1.25 x (restore at the tier's copy ceiling +
                # one measured suffix-sized forward), when the engine bench measured that forward.
                fwd_ms = (frost.get((shape, "ttft_ms", suffix)) or (None,))[0]
                if fwd_ms and nbytes and ck in ce:
                    ref = nbytes / (ce[ck][0] * 1e9) * 1e3 + fwd_ms
                    print("    vs restore at ceiling + measured %d-token forward (%.2f ms): %.2fx" % (suffix, ref, val / ref))
        engine_lines(data["engine"].get(shape))
    for model, j in sorted(data["engine"].items()):
        if model not in SHAPE_ORDER:
            engine_table(model, j, gemm, rw)
    for j in data["peer"]:
        peer_report.print_table(j)
    for j in data["graph_ops"]:
        graph_ops_lines(j)
    if data["ignored"]:
        print("\nnot understood (no frost_results): %s" % ", ".join(data["ignored"]))
    print("\nfloors: decode = (weights multiplied + KV read + state r/w) / (2 x copy GB/s); "
          "TTFT = max(FLOPs / GEMM, bytes / (2 x copy)); memory = weights + KV(32k) + state. "
          "Ratios: x/flr >= 1 (1 = at the floor); Frost/base < 1 = Frost faster.")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
