#!/usr/bin/env python3
"""Concurrent streams through the HTTP API of a real `frost serve` on loopback (issue 16).

For each B in --sizes, B clients stream /v1/completions at the same time (token-id prompts of
--context tokens, greedy, --tokens new tokens each). The steady window runs from the moment the
last of them got its first token to the moment the first of them finished: inside it all B decode
together, so its token count over its length is the aggregate rate and each stream's gaps are its
inter-token latency. With --admit N, three streams decode while a fourth request brings an
N-token prompt (max_tokens 1): the three streams' inter-token latency p50/p99 while it is
admitted is compared with theirs before it arrived. Gaps are between text chunks: a token whose
bytes complete no character (byte-level BPE pieces of a multi-byte character) sends no text, so its
time joins the next chunk's gap, for every server alike. Each stream's text must equal its solo (B = 1)
text: batching must not change a greedy stream (checked, reported as `same_as_solo`).

--port N measures a server that is already running on 127.0.0.1:N instead (the peer: llama.cpp's
llama-server started with -np B on the same checkpoint converted to GGUF); --vocab then bounds the
random prompt ids, --ignore-eos asks the server to run every stream to --tokens, and same_as_solo is
reported for it too (a server that is not batch-invariant may differ, which is not an error here).

  python bench/python/stream_bench.py --frost build/tools/frost/frost --model DIR \
      [--server-args="--backend cuda"] [--sizes 1,2,4,8] [--context 1024] [--tokens 64] \
      [--admit 16384] [--out-json stream_bench.json]
  python bench/python/stream_bench.py --port 8080 --vocab 151000 --label llama-server --ignore-eos ...
"""
import argparse
import http.client
import json
import os
import random
import shlex
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agent_bench import Server, pct, sse_events  # noqa: E402  (same folder: one server wrapper, one SSE reader)


EXTRA_BODY = {}  # request fields the measured server needs beyond the OpenAI ones (--ignore-eos)


def stream_completion(port, prompt_ids, max_tokens, out, start_barrier=None):
    """Streams one completion; out gets the arrival time of every text chunk, the text and usage."""
    body = json.dumps({"model": "frost", "prompt": prompt_ids, "max_tokens": max_tokens, "temperature": 0,
                       "stream": True, "stream_options": {"include_usage": True}, **EXTRA_BODY})
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1200)
    if start_barrier is not None:
        start_barrier.wait()
    out["t_send"] = time.perf_counter()
    conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        out["error"] = f"HTTP {resp.status}: {resp.read()[:300]!r}"
        return
    times, text, usage = [], "", {}
    out["times"] = times  # filled live: the admission run watches it
    try:
        for ev in sse_events(resp):
            for c in ev.get("choices", []):
                if c.get("text"):
                    times.append(time.perf_counter())
                    text += c["text"]
            if ev.get("usage"):
                usage = ev["usage"]
    except RuntimeError as e:
        out["error"] = str(e)
    conn.close()
    out.update(text=text, usage=usage, t_end=time.perf_counter())


def run_streams(port, prompts, max_tokens):
    outs = [{} for _ in prompts]
    barrier = threading.Barrier(len(prompts))
    threads = [threading.Thread(target=stream_completion, args=(port, p, max_tokens, o, barrier))
               for p, o in zip(prompts, outs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for o in outs:
        if "error" in o:
            raise RuntimeError("stream failed: " + o["error"])
    return outs


def steady_window(outs):
    """(start, end) where every stream is decoding: last first-token to first last-token."""
    starts = [o["times"][0] for o in outs if o["times"]]
    ends = [o["times"][-1] for o in outs if o["times"]]
    if len(starts) < len(outs):
        return None
    return max(starts), min(ends)


def gaps_in(times, lo, hi):
    return [(b - a) * 1e3 for a, b in zip(times, times[1:]) if a >= lo and b <= hi]


def measure_size(port, prompts, max_tokens):
    outs = run_streams(port, prompts, max_tokens)
    win = steady_window(outs)
    row = {"B": len(prompts), "completion_tokens": [o["usage"].get("completion_tokens", len(o["times"])) for o in outs]}
    if win is None or win[1] <= win[0]:
        row["note"] = "no steady window (a stream ended before the last one started)"
        return row, outs
    lo, hi = win
    chunks = sum(sum(1 for t in o["times"] if lo < t <= hi) for o in outs)
    gaps = [g for o in outs for g in gaps_in(o["times"], lo, hi)]
    row.update(window_ms=(hi - lo) * 1e3, chunks=chunks, agg_tok_s=chunks / (hi - lo),
               itl_p50_ms=pct(gaps, 50), itl_p99_ms=pct(gaps, 99),
               ms_per_token=(hi - lo) * 1e3 * len(outs) / chunks if chunks else None)
    return row, outs


def measure_admission(port, rng, vocab, context, admit, tokens):
    """Three streams decode; a fourth request admits an `admit`-token prompt in the middle."""
    prompts = [[rng.randrange(vocab) for _ in range(context)] for _ in range(3)]
    outs = [{} for _ in prompts]
    threads = [threading.Thread(target=stream_completion, args=(port, p, tokens, o)) for p, o in zip(prompts, outs)]
    for t in threads:
        t.start()
    # Wait until all three decode, let them run unloaded a while, then send the long prompt.
    deadline = time.time() + 600
    while time.time() < deadline and not all(len(o.get("times", [])) >= 1 for o in outs):
        time.sleep(0.002)
        if any("error" in o for o in outs):
            break
    # Unloaded gaps: at least 40 text chunks per stream (p99 of ~120 gaps, not the maximum of a few),
    # at most 3 s.
    deadline = time.time() + 3
    while time.time() < deadline and min(len(o.get("times", [])) for o in outs) < 41:
        time.sleep(0.005)
    big = {}
    t_admit = time.perf_counter()
    stream_completion(port, [rng.randrange(vocab) for _ in range(admit)], 1, big)
    # Its first text chunk; a one-token answer whose text is empty (a special token) ends at [DONE].
    t_done = big["times"][0] if big.get("times") else big.get("t_end", time.perf_counter())
    for t in threads:
        t.join()
    for o in outs + [big]:
        if "error" in o:
            raise RuntimeError("admission run failed: " + o["error"])
    starts = max(o["times"][0] for o in outs)
    before = [g for o in outs for g in gaps_in(o["times"], starts, t_admit)]
    during = [g for o in outs for g in gaps_in(o["times"], t_admit, t_done)]
    row = {"admit_tokens": admit, "admit_ttft_ms": (t_done - t_admit) * 1e3,
           "before_p50_ms": pct(before, 50), "before_p99_ms": pct(before, 99),
           "during_p50_ms": pct(during, 50), "during_p99_ms": pct(during, 99),
           "gaps_before": len(before), "gaps_during": len(during)}
    if before and during:
        row["p99_ratio"] = row["during_p99_ms"] / row["before_p99_ms"]
    return row


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--frost", help="frost binary: the bench starts `frost serve --model MODEL`")
    ap.add_argument("--model", help="checkpoint folder (its config.json gives the vocabulary)")
    ap.add_argument("--port", type=int, default=0, help="measure the server already on 127.0.0.1:PORT instead")
    ap.add_argument("--vocab", type=int, default=0, help="prompt ids below this (default: the model's vocabulary)")
    ap.add_argument("--label", default="frost serve", help="the server's name in the printed table")
    ap.add_argument("--ignore-eos", action="store_true", help="send ignore_eos: every stream runs to --tokens")
    ap.add_argument("--server-args", default="")
    ap.add_argument("--sizes", default="1,2,4,8")
    ap.add_argument("--context", type=int, default=1024)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--admit", type=int, default=0, help="admission run: prompt tokens (0: skip)")
    ap.add_argument("--admit-tokens", type=int, default=0, help="tokens of the 3 streams in the admission run")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--out-json", default="")
    a = ap.parse_args(argv)
    sizes = [int(s) for s in a.sizes.split(",")]
    seed = a.seed if a.seed is not None else random.SystemRandom().randrange(1 << 30)
    rng = random.Random(seed)
    if not a.port and not (a.frost and a.model):
        ap.error("give --frost and --model (start frost serve), or --port (a running server)")
    if a.vocab:
        vocab = a.vocab
    elif a.model:
        with open(os.path.join(a.model, "config.json")) as f:
            cfg = json.load(f)
        vocab = (cfg.get("text_config") or cfg)["vocab_size"]
    else:
        ap.error("--port needs --vocab or --model")
    vocab = min(vocab, 100000)  # ids the tokenizer decodes to text (synthetic vocabularies are padded)
    if a.ignore_eos:
        EXTRA_BODY["ignore_eos"] = True
    admit_tokens = a.admit_tokens or 4 * a.tokens
    max_seq = max(a.context + max(a.tokens, admit_tokens), a.admit) + 64
    slots = max(max(sizes), 4 if a.admit else 1)
    server = None if a.port else Server(a.frost, a.model, shlex.split(a.server_args) + ["--no-capsules"], max_seq, slots)
    port = a.port or server.port
    result = {"seed": seed, "context": a.context, "tokens": a.tokens, "sizes": [], "server": a.label,
              "server_args": a.server_args}
    try:
        prompts = [[rng.randrange(vocab) for _ in range(a.context)] for _ in range(max(sizes))]
        run_streams(port, prompts[:1], 4)  # warm-up
        texts = {}
        for B in sizes:
            row, outs = measure_size(port, prompts[:B], a.tokens)
            texts[B] = [o["text"] for o in outs]
            result["sizes"].append(row)
        # Every stream alone, after the batched runs (greedy: the texts must be the same).
        solo = [run_streams(port, [p], a.tokens)[0]["text"] for p in prompts]
        for row in result["sizes"]:
            row["same_as_solo"] = texts[row["B"]] == solo[:row["B"]]
        if a.admit:
            result["admission"] = measure_admission(port, rng, vocab, a.context, a.admit, admit_tokens)
    finally:
        if server:
            server.stop()
    base = next((r for r in result["sizes"] if r["B"] == 1 and r.get("agg_tok_s")), None)
    print(f"{a.label}, concurrent streams: context {a.context}, {a.tokens} tokens each, seed {seed}")
    print(f"{'B':>3} {'ms/token':>9} {'agg tok/s':>10} {'agg/B1':>7} {'ms/B1':>6} {'ITL p50':>8} {'ITL p99':>8}  same as solo")
    for r in result["sizes"]:
        if not r.get("agg_tok_s"):
            print(f"{r['B']:>3}  {r.get('note', '')}")
            continue
        agg = r["agg_tok_s"] / base["agg_tok_s"] if base else float("nan")
        per = r["ms_per_token"] / base["ms_per_token"] if base else float("nan")
        r["agg_vs_b1"], r["ms_vs_b1"] = agg, per
        print(f"{r['B']:>3} {r['ms_per_token']:>9.2f} {r['agg_tok_s']:>10.1f} {agg:>7.2f} {per:>6.2f} "
              f"{r['itl_p50_ms']:>8.2f} {r['itl_p99_ms']:>8.2f}  {r['same_as_solo']}")
    if "admission" in result:
        ad = result["admission"]
        f = lambda v: "n/a" if v is None else f"{v:.2f}"  # noqa: E731  (no gap in a window: too short)
        print(f"admission of a {ad['admit_tokens']}-token prompt beside 3 streams: TTFT {ad['admit_ttft_ms']:.1f} ms; "
              f"their ITL p50 {f(ad['before_p50_ms'])} -> {f(ad['during_p50_ms'])} ms, "
              f"p99 {f(ad['before_p99_ms'])} -> {f(ad['during_p99_ms'])} ms (x{f(ad.get('p99_ratio'))}; "
              f"{ad['gaps_before']} / {ad['gaps_during']} gaps)")
    if a.out_json:
        with open(a.out_json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
