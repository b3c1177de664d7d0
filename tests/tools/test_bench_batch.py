# `frost bench batch` on the CPU backend (tiny synthetic preset): a row per batch size with positive
# timings, and a batched step's bytes floor that reads the weights ONCE but every member's state and
# KV: at least the independent count from config.json (bench/python/qwen35_shapes.py) of weights +
# B x (KV + state read and written), and below B solo steps. --admit reports latencies.
import json
import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench" / "python"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from qwen35_shapes import Costs  # noqa: E402
from test_bench_engine import frost, shape_config  # noqa: E402

SIZES = [1, 2, 3, 4, 8]
CONTEXT = 128
STEPS = 6
FP32_OVER_BF16 = 2  # the CPU engine keeps weights, KV and conv state in fp32; the cost model counts bf16


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    out = tmp_path_factory.mktemp("batch-bench")
    p = frost("bench", "batch", "--preset", "tiny", "--backend", "cpu", "--sizes", ",".join(map(str, SIZES)),
              "--context", CONTEXT, "--steps", STEPS, "--admit", 256, "--admit-step", 64, "--out-dir", out, "--json")
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout), out / "model-tiny"


def test_rows_per_size(bench):
    j, _ = bench
    assert j["bench"] == "batch" and j["backend"] == "cpu" and j["context"] == CONTEXT
    assert [r["B"] for r in j["rows"]] == SIZES
    for r in j["rows"]:
        assert r["step_ms"] > 0 and r["aggregate_tokens_per_s"] > 0 and r["floor_bytes"] > 0, r
        assert r["aggregate_tokens_per_s"] == pytest.approx(1e3 * r["B"] / r["step_ms"], rel=1e-9)
        assert r["batched_graph"], "the CPU engine captured no batched graph"
    a = j["admission"]
    assert a["prompt_tokens"] == 256 and a["unloaded_p99_ms"] > 0 and a["admitting_p99_ms"] > 0


def test_floor_reads_weights_once_and_every_members_state(bench):
    j, model = bench
    c = Costs(shape_config(model))
    ctx = CONTEXT + STEPS // 2  # the bench costs the step at the middle of its run
    per_member = (c.kv_bytes(ctx) + c.n_lin * c.Hv * c.dk * c.dv * 4 * 2 / FP32_OVER_BF16 +
                  c.n_lin * c.conv_ch * (c.K - 1) * 2 * 2) * FP32_OVER_BF16
    weights = (c.layer_params + c.head_params) * 2 * FP32_OVER_BF16
    floors = {r["B"]: r["floor_bytes"] for r in j["rows"]}
    for b, f in floors.items():
        assert f >= weights + b * per_member, (b, f, weights, per_member)
        if b > 1:
            assert f < b * floors[1], "a batched step must not count the weights once per member"
            assert f > floors[1]


def test_max_seq_sizes_every_session(bench, tmp_path):
    """--max-seq gives each session the capacity `frost serve` would (the model's context); the
    rows still run, and a value below what the run needs is raised to it."""
    _, model = bench
    for asked, want in ((2048, 2048), (1, 64 + 2 + 64)):
        p = frost("bench", "batch", "--model", model, "--backend", "cpu", "--sizes", "1,2", "--context", 64,
                  "--steps", 2, "--max-seq", asked, "--json")
        assert p.returncode == 0, p.stderr[-2000:]
        j = json.loads(p.stdout)
        assert j["max_seq_len"] == want
        assert [r["B"] for r in j["rows"]] == [1, 2] and all(r["step_ms"] > 0 for r in j["rows"])
    p = frost("bench", "batch", "--model", model, "--backend", "cpu", "--max-seq", 0)
    assert p.returncode == 2 and "--max-seq" in p.stderr
