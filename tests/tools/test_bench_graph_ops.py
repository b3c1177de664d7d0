"""`frost bench graph-ops` on the CPU backend (tiny preset): one row per op label of the decode step,
op counts per label from config.json's layer pattern, label bytes that add up to the step's bytes as
`frost bench engine` counts them, probes that ran report consistent savings (paired with the full step
by default, against one timing of it with --unpaired), bad --only refused."""
import json
import os
import subprocess
from pathlib import Path

import pytest

FROST_BIN = os.environ.get("FROST_BIN", "")
RUN_TIMEOUT_S = 120
CONTEXT = 64


def frost(*args):
    assert FROST_BIN and Path(FROST_BIN).exists(), "set FROST_BIN to the built frost binary"
    return subprocess.run([FROST_BIN, *map(str, args)], capture_output=True, text=True, timeout=RUN_TIMEOUT_S)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    out = tmp_path_factory.mktemp("graph-ops")
    p = frost("bench", "graph-ops", "--preset", "tiny", "--backend", "cpu", "--context", CONTEXT, "--steps", 2,
              "--reps", 1, "--out-dir", out, "--json")
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout), out / "model-tiny", p.stderr


def text_config(model_dir):
    cfg = json.loads((model_dir / "config.json").read_text())
    return cfg.get("text_config", cfg)


def test_one_row_per_label_with_the_layer_pattern_counts(sweep):
    j, model_dir, _ = sweep
    t = text_config(model_dir)
    kinds = t["layer_types"]
    n_lin, n_full = kinds.count("linear_attention"), kinds.count("full_attention")
    rows = {r["label"]: r for r in j["labels"]}
    assert len(rows) == len(j["labels"]), "a label listed twice"
    assert rows["rmsnorm input"]["ops"] == len(kinds)
    assert rows["rmsnorm post_attention"]["ops"] == len(kinds)
    assert rows["gemm mlp down"]["ops"] == len(kinds)
    assert rows["conv1d+gdn_step+gated_rmsnorm"]["ops"] == n_lin
    assert rows["attn_decode"]["ops"] == n_full
    assert rows["gemm lm_head"]["ops"] == 1 and rows["sample"]["ops"] == 1
    # lm_head reads at least its weight (bf16 in the cost model)
    assert rows["gemm lm_head"]["bytes"] >= t["vocab_size"] * t["hidden_size"] * 2


def test_label_bytes_add_up_to_the_engine_benchs_decode_step(sweep):
    j, model_dir, _ = sweep
    p = frost("bench", "engine", "--model", model_dir, "--backend", "cpu", "--ttft", 64, "--decode", CONTEXT,
              "--decode-steps", 2, "--reps", 1, "--json")
    assert p.returncode == 0, p.stderr[-2000:]
    step = json.loads(p.stdout)["decode"][0]["floor_bytes"]
    assert sum(r["bytes"] for r in j["labels"]) == pytest.approx(step, rel=1e-9)


def test_probes_report_consistent_savings(sweep):
    j, _, table = sweep
    assert j["full_ms_per_token"] > 0 and j["copy_gbps"] > 0
    ran = [r for r in j["labels"] if "error" not in r and "skipped" not in r]
    assert {"gemm lm_head", "gemm mlp down", "rmsnorm input"} <= {r["label"] for r in ran}
    for r in ran:
        assert r["ms_per_token"] > 0 and r["full_ms_per_token"] > 0
        assert r["paired"] is True  # the tiny model's two engines fit: every probe is timed beside the full step
        # one repetition: the saving is that repetition's difference, and its range is that one value
        assert r["saved_ms"] == pytest.approx(r["full_ms_per_token"] - r["ms_per_token"], abs=1e-12)
        assert r["saved_ms_range"] == pytest.approx([r["saved_ms"], r["saved_ms"]], abs=1e-12)
        assert r["saved_per_op_us"] == pytest.approx(r["saved_ms"] * 1e3 / r["ops"], rel=1e-12)
        assert r["floor_ms"] == pytest.approx(r["bytes"] / (j["copy_gbps"] * 1e9) * 1e3, rel=1e-12)
    for r in j["labels"]:
        assert r["label"] in table  # every row printed, failed probes with their error
    for r in j["labels"]:
        if "error" in r:
            assert r["error"] and "failed: " + r["error"][:20] in table


def test_paired_savings_are_the_median_of_the_repetitions(sweep):
    """Three repetitions: the saving is the median of three paired differences, so it lies in their
    range, and the probe's and the full step's times are each the median of their own runs."""
    _, model_dir, table = sweep
    p = frost("bench", "graph-ops", "--model", model_dir, "--backend", "cpu", "--context", CONTEXT, "--steps", 1,
              "--reps", 3, "--only", "gemm lm_head,rmsnorm input", "--json")
    assert p.returncode == 0, p.stderr[-2000:]
    rows = json.loads(p.stdout)["labels"]
    assert [r["label"] for r in rows] == ["rmsnorm input", "gemm lm_head"]  # in the step's order
    for r in rows:
        lo, hi = r["saved_ms_range"]
        assert r["paired"] is True and lo <= r["saved_ms"] <= hi
        assert r["saved_per_op_us"] == pytest.approx(r["saved_ms"] * 1e3 / r["ops"], rel=1e-12)
    assert "saved range (ms)" in p.stderr and "unpaired" not in p.stderr


def test_unpaired_times_the_full_step_once(sweep):
    _, model_dir, _ = sweep
    p = frost("bench", "graph-ops", "--model", model_dir, "--backend", "cpu", "--context", CONTEXT, "--steps", 1,
              "--reps", 2, "--only", "gemm lm_head", "--unpaired", "--json")
    assert p.returncode == 0, p.stderr[-2000:]
    j = json.loads(p.stdout)
    (r,) = j["labels"]
    assert r["paired"] is False and r["full_ms_per_token"] == j["full_ms_per_token"]
    assert r["saved_ms"] == pytest.approx(j["full_ms_per_token"] - r["ms_per_token"], abs=1e-12)
    assert r["saved_ms_range"] == pytest.approx([r["saved_ms"], r["saved_ms"]], abs=1e-12)
    assert "unpaired" in p.stderr


def test_cursor_ops_are_kept_not_probed(sweep):
    """The cursor ops hold the step's position: a step without them ran past the KV cache on the GPU
    (an illegal address that poisoned every later probe), so the sweep lists them as kept."""
    j, _, table = sweep
    cursor = [r for r in j["labels"] if r["label"].startswith("cursor ")]
    assert {r["label"] for r in cursor} == {"cursor decode_begin", "cursor advance"}
    for r in cursor:
        assert "cursor op" in r["skipped"] and "ms_per_token" not in r and "error" not in r
        assert f"{r['label']}" in table and "kept: " + r["skipped"] in table
    assert all("skipped" not in r for r in j["labels"] if not r["label"].startswith("cursor "))


def test_only_picks_labels_and_refuses_unknown_ones(sweep):
    _, model_dir, _ = sweep
    p = frost("bench", "graph-ops", "--model", model_dir, "--backend", "cpu", "--context", CONTEXT, "--steps", 1,
              "--reps", 1, "--only", "gemm lm_head", "--json")
    assert p.returncode == 0, p.stderr[-2000:]
    assert [r["label"] for r in json.loads(p.stdout)["labels"]] == ["gemm lm_head"]
    p = frost("bench", "graph-ops", "--model", model_dir, "--backend", "cpu", "--only", "lm_head")
    assert p.returncode == 2 and "--only lm_head is no op label" in p.stderr
    p = frost("bench", "graph-ops", "--model", model_dir, "--backend", "cpu", "--steps", 0)
    assert p.returncode == 2
