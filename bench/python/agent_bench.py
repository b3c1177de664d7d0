#!/usr/bin/env python3
"""Multi-turn coding-agent benchmark against a real `frost serve` on loopback.

The workload is what a coding agent sends: a long shared system + tools prefix, several agent
sessions interleaved round-robin (more sessions than live slots, so a session's state must come
back from a capsule or be rebuilt), many turns each resending the whole history, one branch (a
second conversation forked from session 0's history) and one retry (a turn sent twice). It runs
once with capsules and once with --no-capsules and reports time-to-first-token (TTFT) p50/p90/p99
and the cached-token ratio, as JSON and an SVG plot (written by hand: no plotting dependency).

  python bench/python/agent_bench.py --frost build/tools/frost/frost --model /tmp/tiny \
      --out-json agent_bench.json --out-svg agent_bench.svg [--server-args="--backend cuda"]
"""
import argparse
import http.client
import json
import random
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

TOOL_NAMES = ["read_file", "write_file", "run_shell", "grep", "list_dir", "git_diff", "run_tests", "search_docs"]
WORDS = ("module function kernel buffer capsule restore session prefix token cache graph stream tensor layer "
         "attention state decode prefill scheduler planner store budget tier").split()


def tools_spec():
    return [{"type": "function", "function": {
        "name": n, "description": f"{n.replace('_', ' ')}: an agent tool of the benchmark workspace",
        "parameters": {"type": "object", "properties": {"arg": {"type": "string", "description": "argument"}},
                       "required": ["arg"]}}} for n in TOOL_NAMES]


def words(rng, n):
    return " ".join(rng.choice(WORDS) for _ in range(n))


def sse_events(resp):
    """The JSON events of an OpenAI-style SSE stream, up to [DONE]; an error event raises."""
    for raw in resp:
        line = raw.decode("utf-8", "replace").strip()
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            return
        ev = json.loads(data)
        if "error" in ev:
            raise RuntimeError(f"stream error: {ev['error']}")
        yield ev


class Server:
    def __init__(self, frost, model, extra, max_seq_len, slots):
        args = [frost, "serve", "--model", model, "--port", "0", "--max-seq-len", str(max_seq_len),
                "--sessions", str(slots)] + extra
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.time() + 300
        self.port = None
        lines = []
        while time.time() < deadline and self.port is None:
            line = self.proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            m = re.search(r"on http://127\.0\.0\.1:(\d+)", line)
            if m:
                self.port = int(m.group(1))
        if self.port is None:
            raise RuntimeError("frost serve did not start:\n" + "".join(lines))

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()

    def post_json(self, path, body):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
        conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        resp = conn.getresponse()
        data = resp.read()
        conn.close()
        if resp.status != 200:
            raise RuntimeError(f"POST {path}: HTTP {resp.status}: {data[:400]!r}")
        return json.loads(data)

    def stream_chat(self, messages, tools, max_tokens):
        """One streamed chat turn: (ttft seconds, text, usage, frost plan info)."""
        body = json.dumps({"model": "frost", "messages": messages, "tools": tools, "max_tokens": max_tokens,
                           "temperature": 0, "stream": True, "stream_options": {"include_usage": True}})
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
        t0 = time.perf_counter()
        conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        if resp.status != 200:
            raise RuntimeError(f"HTTP {resp.status}: {resp.read()[:400]!r}")
        ttft = None
        text, usage, frost = "", None, {}
        for ev in sse_events(resp):
            for c in ev.get("choices", []):
                d = c.get("delta", {})
                piece = (d.get("content") or "") + (d.get("reasoning_content") or "")
                if (piece or d.get("tool_calls") or c.get("finish_reason")) and ttft is None:
                    ttft = time.perf_counter() - t0
                text += d.get("content") or ""
            if ev.get("usage"):
                usage = ev["usage"]
            if ev.get("frost"):
                frost = ev["frost"]
        conn.close()
        if ttft is None:
            ttft = time.perf_counter() - t0
        return ttft, text, usage or {}, frost


def build_workload(rng, n_sessions, turns, prefix_words):
    system = ("You are Frost-Agent, a careful coding agent. Rules: " + words(rng, prefix_words) +
              ". Always read before you write; run the tests after each change.")
    tasks = [f"Task {s}: fix the failing {rng.choice(WORDS)} test and explain the cause." for s in range(n_sessions)]
    user_turns = [[words(rng, rng.randint(12, 40)) for _ in range(turns)] for _ in range(n_sessions)]
    return system, tasks, user_turns


def run_mode(args, capsules, workload, tools):
    system, tasks, user_turns = workload
    extra = []
    tmp = None
    if capsules:
        tmp = tempfile.mkdtemp(prefix="frost-agent-bench-")
        extra = ["--capsule-dir", tmp]
    else:
        extra = ["--no-capsules"]
    srv = Server(args.frost, args.model, extra + shlex.split(args.server_args), args.max_seq_len, args.slots)
    records = []
    records_meta = {}
    histories = [[{"role": "system", "content": system}] for _ in tasks]

    def turn(kind, sid, t, messages):
        ttft, text, usage, frost = srv.stream_chat(messages, tools, args.max_tokens)
        prompt = usage.get("prompt_tokens", 0)
        cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
        records.append({"kind": kind, "session": sid, "turn": t, "ttft_s": ttft, "prompt_tokens": prompt,
                        "cached_tokens": cached, "plan": frost.get("plan", ""),
                        "timings_ms": frost.get("timings_ms", {}),
                        "deferred_store_ms": frost.get("deferred_store_ms", 0.0),
                        "prefill_calls": frost.get("prefill_calls", 0)})
        return text

    try:
        if capsules and not args.no_pin_prefix:
            # The agent's shared system + tools prefix, frozen and pinned once up front
            # (POST /v1/capsules): every session's first turn restores it instead of rebuilding.
            t0 = time.perf_counter()
            made = srv.post_json("/v1/capsules", {"messages": histories[0][:1], "tools": tools, "pinned": True})
            records_meta["prefix_capsule"] = {"id": made["id"], "tokens": made["tokens"],
                                              "create_s": time.perf_counter() - t0}
        branch = None
        for t in range(args.turns):
            for sid in range(len(tasks)):
                h = histories[sid]
                h.append({"role": "user", "content": (tasks[sid] + " " if t == 0 else "Tool output: ") + user_turns[sid][t]})
                text = turn("turn", sid, t, h)
                if sid == 1 and t == args.retry_turn:
                    turn("retry", sid, t, h)  # the client timed out and sends the same turn again
                h.append({"role": "assistant", "content": text or "(no output)"})
                if sid == 0 and t == args.branch_turn:
                    # A second line of work forked from session 0's history here.
                    branch = [dict(m) for m in h]
            if branch is not None and t > args.branch_turn:
                branch.append({"role": "user", "content": "Alternative approach: " + words(rng_branch, 20)})
                text = turn("branch", -1, t, branch)
                branch.append({"role": "assistant", "content": text or "(no output)"})
    finally:
        srv.stop()
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    return records, records_meta


def pct(values, p):
    if not values:
        return None
    v = sorted(values)
    k = (len(v) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def summarize(records):
    def block(rs):
        ttft = [r["ttft_s"] for r in rs]
        prompt = sum(r["prompt_tokens"] for r in rs)
        cached = sum(r["cached_tokens"] for r in rs)
        plans = {}
        for r in rs:
            plans[r["plan"]] = plans.get(r["plan"], 0) + 1
        return {"requests": len(rs), "ttft_p50_ms": 1e3 * pct(ttft, 50), "ttft_p90_ms": 1e3 * pct(ttft, 90),
                "ttft_p99_ms": 1e3 * pct(ttft, 99), "prompt_tokens": prompt, "cached_tokens": cached,
                "cached_ratio": cached / prompt if prompt else 0.0, "plans": plans}
    later = [r for r in records if r["turn"] > 0]
    return {"all": block(records), "after_first_turn": block(later)}


# Server phases up to the first token, in timeline order (timings_ms of the "frost" extension).
TTFT_PHASES = ["parse", "template", "tokenize", "queue", "plan", "restore", "prefill", "snapshot", "store",
               "engine_other", "emit"]


def phase_breakdown(records):
    """Per plan: median of each server phase (ms) and of the client-seen TTFT."""
    out = {}
    for plan in sorted({r["plan"] for r in records}):
        rs = [r for r in records if r["plan"] == plan and r.get("timings_ms")]
        if not rs:
            continue
        row = {ph: pct([r["timings_ms"].get(ph, 0.0) for r in rs], 50) for ph in TTFT_PHASES}
        row["server_ttft"] = pct([sum(r["timings_ms"].get(ph, 0.0) for ph in TTFT_PHASES) for r in rs], 50)
        row["client_ttft"] = pct([1e3 * r["ttft_s"] for r in rs], 50)
        row["deferred_store"] = pct([r.get("deferred_store_ms", 0.0) for r in rs], 50)
        row["prefill_calls"] = pct([r.get("prefill_calls", 0) for r in rs], 50)
        row["requests"] = len(rs)
        out[plan] = row
    return out


def print_breakdown(results):
    cols = TTFT_PHASES + ["server_ttft", "client_ttft", "deferred_store", "prefill_calls"]
    short = {"engine_other": "eng_oth", "server_ttft": "srv_ttft", "client_ttft": "cli_ttft",
             "deferred_store": "deferred", "prefill_calls": "calls", "template": "templ", "tokenize": "tokens", "snapshot": "snap"}
    print("median ms per phase (server timings_ms) by plan")
    print(f"{'mode':<12} {'plan':<8} {'n':>3} " + " ".join(f"{short.get(c, c):>8}" for c in cols))
    for mode, res in results.items():
        for plan, row in res.get("phases", {}).items():
            print(f"{mode:<12} {plan:<8} {row['requests']:>3} " + " ".join(f"{row[c]:>8.2f}" for c in cols))


def write_svg(path, results):
    """TTFT per request (log scale), one series per mode."""
    W, H, L, R, T, B = 900, 420, 70, 20, 40, 50
    colors = {"capsules": "#1f77b4", "no_capsules": "#d62728"}
    series = {m: [1e3 * r["ttft_s"] for r in res["records"]] for m, res in results.items()}
    allv = [v for s in series.values() for v in s if v > 0]
    if not allv:
        return
    import math
    lo, hi = math.log10(min(allv)) - 0.1, math.log10(max(allv)) + 0.1
    n = max(len(s) for s in series.values())
    x = lambda i: L + (W - L - R) * (i / max(n - 1, 1))
    y = lambda v: T + (H - T - B) * (1 - (math.log10(max(v, 1e-3)) - lo) / (hi - lo))
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{W / 2}" y="22" text-anchor="middle" font-size="15">frost serve: coding-agent TTFT per request '
           f'(capsules vs --no-capsules)</text>',
           f'<line x1="{L}" y1="{H - B}" x2="{W - R}" y2="{H - B}" stroke="black"/>',
           f'<line x1="{L}" y1="{T}" x2="{L}" y2="{H - B}" stroke="black"/>',
           f'<text x="{W / 2}" y="{H - 12}" text-anchor="middle">request (in send order)</text>',
           f'<text x="18" y="{H / 2}" text-anchor="middle" transform="rotate(-90 18 {H / 2})">TTFT (ms, log)</text>']
    for e in range(int(math.floor(lo)), int(math.ceil(hi)) + 1):
        for m in (1, 2, 5):
            v = m * 10 ** e
            if lo <= math.log10(v) <= hi:
                out.append(f'<line x1="{L}" y1="{y(v):.1f}" x2="{W - R}" y2="{y(v):.1f}" stroke="#ddd"/>')
                out.append(f'<text x="{L - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
    for k, (mode, vals) in enumerate(series.items()):
        c = colors.get(mode, "black")
        pts = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(vals))
        out.append(f'<polyline points="{pts}" fill="none" stroke="{c}" stroke-width="1.5"/>')
        for i, v in enumerate(vals):
            out.append(f'<circle cx="{x(i):.1f}" cy="{y(v):.1f}" r="2.5" fill="{c}"/>')
        s = results[mode]["summary"]["all"]
        out.append(f'<text x="{L + 10}" y="{T + 16 + 16 * k}" fill="{c}">{mode}: p50 {s["ttft_p50_ms"]:.1f} ms, '
                   f'p90 {s["ttft_p90_ms"]:.1f} ms, cached {100 * s["cached_ratio"]:.0f}%</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--frost", required=True, help="the frost binary")
    ap.add_argument("--model", required=True, help="model folder (e.g. from `frost synth --preset tiny`)")
    ap.add_argument("--sessions", type=int, default=4, help="agent sessions, interleaved round-robin")
    ap.add_argument("--slots", type=int, default=2, help="live engine sessions (--sessions of frost serve)")
    ap.add_argument("--turns", type=int, default=6)
    ap.add_argument("--max-tokens", type=int, default=8)
    ap.add_argument("--prefix-words", type=int, default=600, help="size of the shared system prompt")
    ap.add_argument("--max-seq-len", type=int, default=8192)
    ap.add_argument("--branch-turn", type=int, default=2)
    ap.add_argument("--retry-turn", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--no-pin-prefix", action="store_true",
                    help="do not pre-create the pinned system+tools capsule in the capsules run")
    ap.add_argument("--server-args", default="",
                    help='extra `frost serve` arguments for both runs, one string: --server-args="--backend cuda"')
    ap.add_argument("--out-json", default="agent_bench.json")
    ap.add_argument("--out-svg", default="agent_bench.svg")
    args = ap.parse_args(argv)
    if args.sessions < 2:
        ap.error("--sessions must be >= 2 (session 1 carries the retry)")
    global rng_branch
    results = {}
    tools = tools_spec()
    for mode, caps in (("capsules", True), ("no_capsules", False)):
        rng = random.Random(args.seed)
        rng_branch = random.Random(args.seed + 1)
        workload = build_workload(rng, args.sessions, args.turns, args.prefix_words)
        recs, extra = run_mode(args, caps, workload, tools)
        results[mode] = {"records": recs, "summary": summarize(recs), "phases": phase_breakdown(recs), **extra}
    meta = {k: getattr(args, k) for k in ("model", "sessions", "slots", "turns", "max_tokens", "prefix_words",
                                           "branch_turn", "retry_turn", "seed", "server_args")}
    with open(args.out_json, "w") as f:
        json.dump({"config": meta, "results": results}, f, indent=1)
    write_svg(args.out_svg, results)
    print(f"{'mode':<12} {'scope':<17} {'reqs':>4} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} {'cached':>7}  plans")
    for mode, res in results.items():
        for scope, s in res["summary"].items():
            print(f"{mode:<12} {scope:<17} {s['requests']:>4} {s['ttft_p50_ms']:>8.1f} {s['ttft_p90_ms']:>8.1f} "
                  f"{s['ttft_p99_ms']:>8.1f} {100 * s['cached_ratio']:>6.1f}%  {s['plans']}")
    print_breakdown(results)
    print(f"wrote {args.out_json} and {args.out_svg}")
    return 0


rng_branch = random.Random(0)

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
