"""One table row from a `frost bench engine --json` file, for the GPU bench scripts
(scripts/gpu/bench_quant.sh, bench_moe_quant.sh): the label, device weight GB, decode ms/token at
the first decode context with its floor and ratio, cold TTFT (ms) at the requested prompt lengths
and, with --peak, the peak GPU memory over the baseline (GB). Missing values print as 0.

    python3 bench/python/engine_row.py FILE LABEL --ttft 1024,4096,16384 [--peak]
"""
import argparse
import json


def find(o, key):
    """The first dict holding `key`, depth first."""
    if isinstance(o, dict):
        if key in o:
            return o
        for v in o.values():
            r = find(v, key)
            if r is not None:
                return r
    if isinstance(o, list):
        for v in o:
            r = find(v, key)
            if r is not None:
                return r
    return None


def ttfts(o, out):
    """Every {"tokens", "ms"} row (the cold TTFT rows) into out[tokens] = ms."""
    if isinstance(o, dict):
        if "tokens" in o and "ms" in o:
            out[o["tokens"]] = o["ms"]
        for v in o.values():
            ttfts(v, out)
    elif isinstance(o, list):
        for v in o:
            ttfts(v, out)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("label")
    ap.add_argument("--ttft", default="1024,4096,16384")
    ap.add_argument("--peak", action="store_true")
    a = ap.parse_args()
    d = json.load(open(a.file))
    dec = find(d, "ms_per_token") or {}
    t = ttfts(d, {})
    w = ((find(d, "cuda_engine_info") or {}).get("cuda_engine_info") or {}).get("weight_bytes", 0)
    row = "%-9s %11.2f %14.3f %10.3f %7.2f" % (a.label, w / 1e9, dec.get("ms_per_token", 0), dec.get("floor_ms", 0),
                                             dec.get("ms_over_floor", 0))
    for n in a.ttft.split(","):
        row += " %11.1f" % t.get(int(n), 0)
    if a.peak:
        row += " %12.2f" % ((find(d, "peak_bytes") or {}).get("peak_bytes", 0) / 1e9)
    print(row)


if __name__ == "__main__":
    main()
