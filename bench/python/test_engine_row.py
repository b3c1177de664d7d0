"""pytest for engine_row.py: a `frost bench engine --json` file of random values (the shape the CLI
writes: frost_results rows, a decode row, the memory block) printed as the GPU scripts' table row.
Run: .venv/bin/python -m pytest bench/python/test_engine_row.py
"""
import json
import os
import random
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def run(path, *args):
    p = subprocess.run([sys.executable, os.path.join(HERE, "engine_row.py"), str(path), *args],
                       capture_output=True, text=True, check=True)
    return p.stdout.split()


def test_row_from_an_engine_json(tmp_path):
    r = random.Random()
    ttft = {n: r.uniform(1, 900) for n in (1024, 4096, 16384)}
    dec = {"context": 1024, "ms_per_token": r.uniform(1, 9), "floor_ms": r.uniform(0.5, 1)}
    dec["ms_over_floor"] = dec["ms_per_token"] / dec["floor_ms"]
    weights, peak = r.randrange(10**9, 10**11), r.randrange(10**9, 10**11)
    j = {"bench": "engine", "ttft": [{"tokens": n, "ms": ms, "reps": 3} for n, ms in ttft.items()],
         "decode": [dec, {"context": 32768, "ms_per_token": 99.0, "floor_ms": 1.0, "ms_over_floor": 99.0}],
         "memory": {"peak_bytes": peak, "cuda_engine_info": {"weight_bytes": weights}}}
    f = tmp_path / "e.json"
    f.write_text(json.dumps(j))
    row = run(f, "fp8", "--ttft", "1024,16384", "--peak")
    assert row[0] == "fp8"
    got = [float(v) for v in row[1:]]
    want = [weights / 1e9, dec["ms_per_token"], dec["floor_ms"], dec["ms_over_floor"], ttft[1024], ttft[16384],
            peak / 1e9]
    digits = [2, 3, 3, 2, 1, 1, 2]
    for g, w, d in zip(got, want, digits):
        assert abs(g - w) <= 0.51 * 10**-d, (got, want)
    assert len(got) == len(want)
    # A missing TTFT length and no memory block print zeros, not an error.
    del j["memory"]
    f.write_text(json.dumps(j))
    row = run(f, "bf16", "--ttft", "2048")
    assert [float(v) for v in row[1:]][0] == 0.0 and float(row[-1]) == 0.0
