#!/usr/bin/env python3
"""Before/after table for scripts/gpu/compare_builds.sh: every engine and capsule metric of the
current build divided by the same metric of the reference build, measured in the same run.

  usage: compare_builds.py OUT_DIR PRESET...
Reads OUT_DIR/cmp_engine_{ref,cur}_<preset>.json (`frost bench engine --json`) and
OUT_DIR/cmp_capsule_{ref,cur}_<preset>.json (`frost bench capsule --json`). A ratio above 1.03 on a
time (or below 0.97 on a rate) is flagged REGRESSION: issue 12's bound is 3 %.
"""
import json
import os
import sys


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def engine_metrics(j):
    out = {}
    for r in (j or {}).get("frost_results", []):
        m = r.get("metric")
        if m == "ttft_ms":
            out[f"cold TTFT {r['tokens']} (ms)"] = (r["value"], "time")
        elif m == "decode_ms":
            out[f"decode @{r['context']} (ms/token)"] = (r["value"], "time")
        elif m in ("peak_gpu_bytes", "peak_host_bytes"):
            out["peak memory (GB)"] = (r["value"] / 1e9, "time")
    return out


def capsule_metrics(j):
    out = {}
    for row in (j or {}).get("rows", []):
        L = row.get("prefix_tokens")
        for tier in ("device", "host", "disk"):
            if f"capsule_ttft_ms_{tier}" in row:
                out[f"capsule TTFT {L}+64 {tier} (ms)"] = (row[f"capsule_ttft_ms_{tier}"], "time")
            if f"restore_gbps_{tier}" in row:
                out[f"restore {L} {tier} (GB/s)"] = (row[f"restore_gbps_{tier}"], "rate")
    return out


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out_dir, presets = sys.argv[1], sys.argv[2:]
    worst = 0
    for p in presets:
        ref, cur = {}, {}
        for kind, fn in (("engine", engine_metrics), ("capsule", capsule_metrics)):
            ref.update(fn(load(os.path.join(out_dir, f"cmp_{kind}_ref_{p}.json"))))
            cur.update(fn(load(os.path.join(out_dir, f"cmp_{kind}_cur_{p}.json"))))
        print(f"\n{p}-style: current / reference (same run)")
        print("  %-34s %12s %12s %8s" % ("metric", "reference", "current", "ratio"))
        for name in ref:
            if name not in cur:
                print("  %-34s %12.3f %12s" % (name, ref[name][0], "n/a"))
                continue
            r, c, kind = ref[name][0], cur[name][0], ref[name][1]
            ratio = c / r if r else float("nan")
            bad = ratio > 1.03 if kind == "time" else ratio < 0.97
            worst += bad
            print("  %-34s %12.3f %12.3f %8.3f %s" % (name, r, c, ratio, "REGRESSION" if bad else ""))
    print(f"\n{worst} metric(s) outside the 3 % bound")


if __name__ == "__main__":
    main()
