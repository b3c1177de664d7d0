# `frost bench engine` end to end on the CPU backend (tiny synthetic preset): the JSON that
# scripts/gpu/bench_engine.sh writes and bench/python/report.py reads has every metric with a
# positive value, cold-start phases that add up to at most the total, and floors that agree with an
# independent count from the written config.json (bench/python/qwen35_shapes.py's cost model).
import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench" / "python"))
from qwen35_shapes import Costs  # noqa: E402

FROST_BIN = os.environ.get("FROST_BIN", "")
RUN_TIMEOUT_S = 120
TTFT = [128, 256]
DECODE = [128]
STEPS = 4
FP32_OVER_BF16 = 2   # the CPU engine stores weights and KV in fp32, the cost model counts bf16
SEQ_SLACK = 64       # cmd_bench_engine.cpp: max_seq_len = longest run + decode steps + 64
CHUNK = 256          # --chunk: the prefill chunk


def frost(*args):
    assert FROST_BIN and Path(FROST_BIN).exists(), "set FROST_BIN to the built frost binary"
    return subprocess.run([FROST_BIN, *map(str, args)], capture_output=True, text=True, timeout=RUN_TIMEOUT_S)


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    out = tmp_path_factory.mktemp("engine-bench")
    p = frost("bench", "engine", "--preset", "tiny", "--backend", "cpu", "--ttft", ",".join(map(str, TTFT)),
              "--decode", ",".join(map(str, DECODE)), "--decode-steps", STEPS, "--chunk", CHUNK, "--reps", 2,
              "--out-dir", out, "--json")
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout), out / "model-tiny", p.stderr


def shape_config(model_dir):
    """config.json (text_config) in the key names of qwen35_shapes.SHAPES."""
    cfg = json.loads((model_dir / "config.json").read_text())
    t = cfg.get("text_config", cfg)
    kinds = t["layer_types"]
    interval = len(kinds) // kinds.count("full_attention")
    assert all((k == "full_attention") == ((i + 1) % interval == 0) for i, k in enumerate(kinds))
    keys = ["hidden_size", "num_hidden_layers", "intermediate_size", "num_attention_heads", "num_key_value_heads",
            "linear_num_key_heads", "linear_num_value_heads", "vocab_size", "head_dim", "linear_key_head_dim",
            "linear_value_head_dim", "linear_conv_kernel_dim"]
    shape = {k: t[k] for k in keys}
    shape["full_attention_interval"] = interval
    shape["tie_word_embeddings"] = cfg.get("tie_word_embeddings", t.get("tie_word_embeddings", False))
    return shape


def tensor_bytes(model_dir):
    total = 0
    for f in model_dir.glob("*.safetensors"):
        with open(f, "rb") as fh:
            n = struct.unpack("<Q", fh.read(8))[0]
            header = json.loads(fh.read(n))
        total += sum(v["data_offsets"][1] - v["data_offsets"][0] for k, v in header.items() if k != "__metadata__")
    return total


def test_every_metric_positive(bench):
    j, _, table = bench
    assert j["bench"] == "engine" and j["backend"] == "cpu" and j["model"] == "tiny"
    rows = j["frost_results"]
    assert all(r["model"] == "tiny" and r["source"] == "frost bench engine (cpu)" for r in rows)
    got = {(r["metric"], r.get("tokens", r.get("context"))): r["value"] for r in rows}
    want = [("ttft_ms", t) for t in TTFT] + [("decode_ms", c) for c in DECODE] + \
           [("peak_host_bytes", None), ("cold_start_s", None), ("ceiling_copy_GBps", None),
            ("ceiling_gemm_TFLOPs", None)]
    for key in want:
        assert key in got, "missing %s in %s" % (key, sorted(map(str, got)))
        assert got[key] > 0, "%s = %s" % (key, got[key])
    assert [r["tokens"] for r in j["ttft"]] == TTFT and [r["context"] for r in j["decode"]] == DECODE
    assert all(r["steps"] == STEPS and r["floor_ms"] > 0 for r in j["decode"])
    assert "cold start" in table and "decode @" in table


def test_cold_start_phases(bench):
    cold = bench[0]["cold_start"]
    phases = cold["phases_s"]
    for name in ("process_start_to_bench", "weight_load", "engine_create", "warmup"):
        assert name in phases, sorted(phases)
    assert all(v >= 0 for v in phases.values())
    assert phases["weight_load"] > 0 and phases["engine_create"] > 0 and phases["warmup"] > 0
    assert sum(phases.values()) <= cold["total_s"] * (1 + 1e-9)
    assert cold["total_s"] > 0 and cold["floor_s"] > 0 and cold["excluded_s"]["synth"] >= 0


def test_floors_match_independent_count(bench):
    j, model_dir, _ = bench
    mem = j["memory"]
    c = Costs(shape_config(model_dir))
    max_seq = max(TTFT + DECODE) + STEPS + SEQ_SLACK
    assert mem["max_seq_len"] == max_seq
    # The floor is the engine's weight bytes (its weight table): the matrices the cost model counts
    # plus the fp32 norm and per-head GDN vectors it does not.
    vectors = 4 * (c.L * 2 * c.H + c.H + c.n_lin * (2 * c.Hv + c.dv) + c.n_full * 2 * c.d)
    assert mem["floor"]["weights"] == pytest.approx(c.weight_bytes() * FP32_OVER_BF16 + vectors, rel=1e-9)
    assert mem["floor"]["kv_max_seq"] == pytest.approx(c.kv_bytes(max_seq) * FP32_OVER_BF16, rel=1e-9)
    rec = c.n_lin * c.Hv * c.dk * c.dv * 4
    assert mem["floor"]["recurrent_conv_state"] == pytest.approx(rec + c.n_lin * c.conv_ch * (c.K - 1) * 4, rel=1e-9)
    # The floor is a lower bound on what the engine really allocated for each part.
    assert mem["engine_bytes"]["weights"] >= mem["floor"]["weights"]
    assert mem["engine_bytes"]["state"] >= mem["floor"]["kv_max_seq"] + mem["floor"]["recurrent_conv_state"]
    assert mem["peak_bytes"] > 0
    assert j["cold_start"]["checkpoint_bytes"] == tensor_bytes(model_dir)


def test_ttft_floor_is_the_larger_of_the_flop_and_bandwidth_floors(bench):
    # The GEMM ceiling is measured in the same run (op_gemm, f32 on the CPU backend); each TTFT row's
    # floor is the larger of its FLOPs at that rate and its bytes at the copy rate, as report.py's.
    j, model_dir, table = bench
    g = j["ceiling_gemm"]
    assert g["tflops"] > 0 and g["n"] == 512 and g["dtype"] == "f32"
    got = {r["metric"]: r["value"] for r in j["frost_results"] if r["metric"] == "ceiling_gemm_TFLOPs"}
    assert got["ceiling_gemm_TFLOPs"] == g["tflops"]
    c = Costs(shape_config(model_dir))
    for r in j["ttft"]:
        # The engine's FLOP count against the independent cost model (they differ in the small
        # elementwise terms each counts), both with the prefill tail in each chunk (--chunk).
        assert r["flops"] == pytest.approx(c.prefill_flops(r["tokens"], tail_chunk=CHUNK), rel=0.03)
        assert r["flops"] < 0.97 * c.prefill_flops(r["tokens"])  # the tail leaves work out
        flop_floor = r["flops"] / (g["tflops"] * 1e12) * 1e3
        assert r["flop_floor_ms"] == pytest.approx(flop_floor, rel=1e-9)
        assert r["floor_ms"] == pytest.approx(max(flop_floor, r["bandwidth_floor_ms"]), rel=1e-9)
        assert r["ms_over_floor"] == pytest.approx(r["ms"] / r["floor_ms"], rel=1e-9)
        assert r["fraction_of_gemm_ceiling"] == pytest.approx(r["achieved_tflops"] / g["tflops"], rel=1e-9)
        # The same against the sustained rate (the products back to back; see kCeilingSustainS*).
        sus_floor = r["flops"] / (g["sustained_tflops"] * 1e12) * 1e3
        assert r["flop_floor_sustained_ms"] == pytest.approx(sus_floor, rel=1e-9)
        assert r["ms_over_sustained_floor"] == pytest.approx(
            r["ms"] / max(sus_floor, r["bandwidth_floor_ms"]), rel=1e-9)
        assert r["fraction_of_sustained_gemm_ceiling"] == pytest.approx(
            r["achieved_tflops"] / g["sustained_tflops"], rel=1e-9)
    assert "GEMM 512^3" in table and "x floor" in table and "sustained" in table


def test_sustained_gemm_ceiling_ran_for_its_time(bench):
    j, _, _ = bench
    g = j["ceiling_gemm"]
    # The CPU backend keeps products going for 0.2 s (the CUDA one for 1 s); the rate is the median
    # over the windows after the first quarter, so it is a positive rate of the same product.
    assert g["sustained_s"] >= 0.2 and g["sustained_tflops"] > 0
    got = {r["metric"]: r["value"] for r in j["frost_results"]}
    assert got["ceiling_gemm_sustained_TFLOPs"] == g["sustained_tflops"]


def test_bad_lengths_refused(tmp_path):
    p = frost("bench", "engine", "--preset", "tiny", "--ttft", "0,128", "--out-dir", tmp_path)
    assert p.returncode == 2 and "--ttft" in p.stderr


def test_chunk_reported_is_the_engines(bench, tmp_path):
    j, model_dir, _ = bench
    assert j["prefill_chunk"] == 256  # the explicit --chunk
    # Without --chunk the engine picks (auto_prefill_chunk: 256 rows on the CPU, never above the
    # context rounded up to a 64-row unit) and the bench reports what it picked.
    p = frost("bench", "engine", "--model", model_dir, "--backend", "cpu", "--ttft", 64, "--decode", 64,
              "--decode-steps", 2, "--reps", 1, "--json")
    assert p.returncode == 0, p.stderr[-2000:]
    context = 64 + 2 + SEQ_SLACK
    assert json.loads(p.stdout)["prefill_chunk"] == min(256, -(-context // 64) * 64)
    p = frost("bench", "engine", "--preset", "tiny", "--chunk", 100, "--out-dir", tmp_path)
    assert p.returncode == 2 and "--chunk" in p.stderr


def test_leave_out_is_a_labelled_probe(bench):
    """--leave-out records every op but launches none whose label contains a given part: the run
    says so, lists the parts in its JSON and gives report.py no frost_results to compare."""
    _, model_dir, _ = bench
    p = frost("bench", "engine", "--model", model_dir, "--backend", "cpu", "--ttft", 64, "--decode", 64,
              "--decode-steps", 2, "--reps", 1, "--leave-out", "rmsnorm,gemm lm_head", "--json")
    assert p.returncode == 0, p.stderr[-2000:]
    j = json.loads(p.stdout)
    assert j["leave_out"] == ["rmsnorm", "gemm lm_head"]
    assert j["frost_results"] == []
    assert j["ttft"] and j["decode"]  # the rows are still timed
    assert 'timing probe: ops whose label contains "rmsnorm", "gemm lm_head"' in p.stderr


def test_leave_out_refuses_a_part_matching_no_op(bench):
    _, model_dir, _ = bench
    p = frost("bench", "engine", "--model", model_dir, "--backend", "cpu", "--ttft", 64, "--decode", 64,
              "--decode-steps", 2, "--reps", 1, "--leave-out", "gemm lm_head,no such op")
    assert p.returncode != 0
    assert '"no such op" matches no op' in p.stderr and "gemm lm_head" in p.stderr
    p = frost("bench", "engine", "--model", model_dir, "--backend", "cpu", "--leave-out", ",")
    assert p.returncode == 2 and "--leave-out" in p.stderr
    p = frost("bench", "engine", "--model", model_dir, "--backend", "cpu", "--ttft", 64, "--decode", 64,
              "--decode-steps", 2, "--reps", 1, "--leave-out", "cursor advance")
    assert p.returncode != 0 and '"cursor advance" matches "cursor advance", a cursor op' in p.stderr


def test_max_seq_sizes_the_session(bench, tmp_path):
    """--max-seq sizes the session as `frost serve` does (to the model's context): the KV floor and
    the reported capacity follow it; below what the runs need it is raised to that."""
    _, model_dir, _ = bench
    c = Costs(shape_config(model_dir))
    need = 64 + 2 + SEQ_SLACK
    for asked, want in ((4096, 4096), (10, need)):
        p = frost("bench", "engine", "--model", model_dir, "--backend", "cpu", "--ttft", 64, "--decode", 64,
                  "--decode-steps", 2, "--reps", 1, "--max-seq", asked, "--json")
        assert p.returncode == 0, p.stderr[-2000:]
        mem = json.loads(p.stdout)["memory"]
        assert mem["max_seq_len"] == want
        assert mem["floor"]["kv_max_seq"] == pytest.approx(c.kv_bytes(want) * FP32_OVER_BF16, rel=1e-9)
        assert "max_seq %d" % want in p.stderr
    p = frost("bench", "engine", "--preset", "tiny", "--max-seq", -5, "--out-dir", tmp_path)
    assert p.returncode == 2 and "--max-seq" in p.stderr


def test_sample_sets_the_decode_steps_sampling(bench, tmp_path):
    """--sample T[,TOP_K[,TOP_P]] decodes with random sampling (the rows say which); bad values are
    refused before anything runs."""
    _, model_dir, _ = bench
    p = frost("bench", "engine", "--model", model_dir, "--backend", "cpu", "--ttft", 64, "--decode", 64,
              "--decode-steps", 3, "--reps", 1, "--sample", "0.8,20,0.9", "--json")
    assert p.returncode == 0, p.stderr[-2000:]
    row = json.loads(p.stdout)["decode"][0]
    assert row["temperature"] == pytest.approx(0.8) and row["top_k"] == 20 and row["top_p"] == pytest.approx(0.9)
    assert row["steps"] == 3 and row["ms_per_token"] > 0
    for bad in ("1,2,3,4", "x", "-1", "1,-3", "1,5,0", "1,5,1.5"):
        p = frost("bench", "engine", "--preset", "tiny", "--sample", bad, "--out-dir", tmp_path)
        assert p.returncode == 2, (bad, p.stderr[-500:])
        assert "--sample" in p.stderr or "bad numeric value" in p.stderr, (bad, p.stderr[-500:])


def test_fp8_floor_only_where_fp8_gemms_run(tmp_path):
    """With --fp8-prefill w8a8 each TTFT row counts the FLOPs W8A8 puts on FP8 tensor cores
    (flops_fp8), and the FP8 GEMM ceiling is measured only where some row has them. The CPU engine
    dequantizes every weight and multiplies exact, so an FP8 checkpoint there has none: no FP8
    ceiling, no FP8-aware floor, the same FLOPs as without the option."""
    model = tmp_path / "fp8"
    p = frost("synth", "--out", model, "--preset", "tiny", "--quant", "fp8")
    assert p.returncode == 0, p.stderr[-2000:]
    runs = {}
    for mode in ("w8a8", "exact"):
        p = frost("bench", "engine", "--model", model, "--backend", "cpu", "--ttft", "64,128", "--decode", 64,
                  "--decode-steps", 2, "--reps", 1, "--fp8-prefill", mode, "--json")
        assert p.returncode == 0, p.stderr[-2000:]
        runs[mode] = json.loads(p.stdout)
        assert "FP8" not in p.stderr, p.stderr
    for mode, j in runs.items():
        assert j["ceiling_gemm_fp8"] is None, mode
        assert all(r["flops_fp8"] == 0 and "ms_over_fp8_floor" not in r for r in j["ttft"]), mode
        assert not any(r["metric"].startswith("ceiling_gemm_fp8") for r in j["frost_results"]), mode
    assert [r["flops"] for r in runs["w8a8"]["ttft"]] == [r["flops"] for r in runs["exact"]["ttft"]]
