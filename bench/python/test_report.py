"""pytest for report.py and qwen35_shapes.py (no torch needed): the cost model against numbers derived
by hand in design/performance.md, and the table's ratios on JSON files written here with random values.
Run: .venv/bin/python -m pytest bench/python/test_report.py
"""
import json
import os
import random
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report  # noqa: E402
from qwen35_shapes import SHAPES, Costs  # noqa: E402


def test_param_counts_match_performance_md():
    # performance.md: the 9B-style model has 8.95e9 parameters, 17.9 GB of bf16 weights.
    c = Costs(SHAPES["9b"])
    assert abs(c.params - 8.95e9) / 8.95e9 < 0.002
    assert abs(c.weight_bytes() - 17.9e9) / 17.9e9 < 0.002
    # 16k prefix: KV 512 MiB, recurrent state ~49 MiB (performance.md, capsule sizes).
    assert c.kv_bytes(16384) == 512 << 20
    rec = c.n_lin * c.Hv * c.dk * c.dv * 4
    assert abs(rec / 2**20 - 48) < 1e-9 and c.state_bytes() > rec


def test_layer_params_by_hand():
    # Independent count from the tensor table of model-qwen35.md section 3 (9B column).
    lin = 8192 * 4096 + 4096 * 4096 + 2 * 32 * 4096 + 4096 * 4096 + 8192 * 4
    full = 8192 * 4096 + 2 * 1024 * 4096 + 4096 * 4096
    mlp = 3 * 4096 * 12288
    assert Costs(SHAPES["9b"]).layer_params == 24 * (lin + mlp) + 8 * (full + mlp)
    tied = Costs(SHAPES["0.8b"])
    assert tied.params == tied.layer_params + 248320 * 1024


def write(d, name, obj):
    with open(os.path.join(d, name), "w") as f:
        json.dump(obj, f)


def row(text, label):
    line = next(l for l in text.splitlines() if l.strip().startswith(label))
    return line.split()


def test_table_ratios(tmp_path, capsys):
    rng = random.Random()
    copy, gemm = rng.uniform(1000, 2000), rng.uniform(500, 900)
    base_dec, frost_dec = rng.uniform(30, 80), rng.uniform(5, 20)
    base_ttft = rng.uniform(100, 300)
    write(tmp_path, "baseline.json", {
        "kind": "frost_baseline_hf", "device": "TestGPU", "date": "d", "versions": {"transformers": "x"},
        "ceilings": {"d2d_copy_GBps": copy, "gemm_bf16_TFLOPs": gemm, "gemm_label": "torch"},
        "models": {"9b": {"config": SHAPES["9b"], "attn_implementation": "eager",
                          "ttft": [{"tokens": 4096, "status": "ok", "ttft_ms": base_ttft},
                                   {"tokens": 32768, "status": "oom", "sdpa": {"status": "ok", "ttft_ms": 5000.0}}],
                          "decode": [{"context": 1024, "status": "ok", "ms_per_token": base_dec}],
                          "peak_gpu_bytes": 30e9}}})
    # The kernel bench measured a slower copy: the best ceiling must win.
    write(tmp_path, "bench_cuda_kernels.json", {
        "ceilings": {"d2d_copy_GBps": copy / 2, "gemm_bf16_TFLOPs": gemm / 2},
        "forward_graphs": [{"name": "decode at position 1024", "ms": frost_dec}]})
    write(tmp_path, "e2e.json", {"frost_results": [
        {"model": "0.8b", "metric": "restore_GBps", "tier": "device", "prefix": 2048, "value": copy * 0.9}]})
    cap_ttft, cap_bytes = rng.uniform(8, 20), rng.randint(100, 600) << 20
    write(tmp_path, "capsule_bench.json", {
        "bench": "capsule", "model": "/x/model-9b", "backend": "cuda", "ceilings_gbps": {"d2d": copy / 3},
        "rows": [{"prefix_tokens": 4032, "suffix_tokens": 64, "cold_ttft_ms": 999.0, "capsule_bytes": cap_bytes,
                  "capsule_ttft_ms_device": cap_ttft, "restore_gbps_device": copy / 2},
                 {"prefix_tokens": 4096, "suffix_tokens": 64, "cold_ttft_ms": 1.0, "capsule_bytes": cap_bytes,
                  "capsule_ttft_ms_device": cap_ttft, "restore_gbps_device": copy / 2}]})
    write(tmp_path, "other.json", {"something": 1})
    assert report.main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    c9 = Costs(SHAPES["9b"])
    floor = c9.decode_bytes(1024) / (2 * copy * 1e9) * 1e3
    cells = row(out, "decode/token @1k")
    assert float(cells[2]) == float("%.2f" % floor)
    assert cells[4] == "%.2fx" % (base_dec / floor)
    assert cells[6] == "%.2fx" % (frost_dec / floor)
    assert cells[7] == "%.2fx" % (frost_dec / base_dec)
    t4 = row(out, "cold TTFT 4k")
    fl4 = max(c9.prefill_flops(4096) / (gemm * 1e12), c9.prefill_bytes(4096) / (2 * copy * 1e9)) * 1e3
    assert t4[5] == "%.2fx" % (base_ttft / fl4)  # 3 words in the label
    assert "sdpa (eager oom)" in " ".join(row(out, "cold TTFT 32k"))
    assert "0.90x" in " ".join(row(out, "restore GB/s device @2048"))
    # Capsule rows: prefix 4032 + 64 = 4096 is also a cold-TTFT point of the main table.
    assert row(out, "cold TTFT 4k")[6] == "999.0"
    cap = row(out, "capsule TTFT device 4096+64")
    fwd = max(c9.extend_flops(4096, 64) / (gemm * 1e12), c9.extend_bytes(4096, 64) / (2 * copy * 1e9))
    cap_floor = (cap_bytes / (copy * 1e9) + fwd) * 1e3
    assert cap[4] == "%.2f" % cap_floor or cap[4] == "%.1f" % cap_floor
    assert cap[5] == "%.1f" % base_ttft and cap[9] == "%.2fx" % (cap_ttft / base_ttft)
    assert "0.50x" in " ".join(row(out, "restore GB/s device @4096"))
    assert re.search(r"not understood.*other\.json", out)


def test_missing_files_print_na(tmp_path, capsys):
    assert report.main([str(tmp_path / "absent")]) == 0
    out = capsys.readouterr().out
    assert row(out, "decode/token @32k")[2:] == ["n/a"] * 6


def test_engine_bench_rows(tmp_path, capsys):
    # `frost bench engine` output (the shape cmd_bench_engine.cpp writes): its rows replace the kernel
    # bench's graph rows, and its cold-start breakdown and memory-vs-floor lines are printed.
    rng = random.Random()
    copy = rng.uniform(1000, 2000)
    graph_ttft, eng_ttft, eng_dec = rng.uniform(50, 90), rng.uniform(100, 200), rng.uniform(5, 9)
    write(tmp_path, "bench_cuda_kernels.json", {
        "ceilings": {"d2d_copy_GBps": copy / 2},
        "forward_graphs": [{"name": "prefill 4096 tokens", "ms": graph_ttft}]})
    phases = {"process_start_to_bench": 0.02, "device_init": rng.uniform(0.1, 0.4), "weight_load": 0.001,
              "weight_upload": rng.uniform(2, 9), "graph_capture": rng.uniform(0.2, 2), "engine_other": 0.3,
              "warmup": 0.05}
    total = sum(phases.values())
    cold_floor = rng.uniform(0.5, 1.5)
    peak, floor = rng.randint(18, 25) * 10**9, 19.1e9
    src = "frost bench engine (cuda)"
    write(tmp_path, "engine_bench_9b.json", {
        "bench": "engine", "model": "9b", "backend": "cuda",
        "frost_results": [
            {"model": "9b", "metric": "ttft_ms", "tokens": 4096, "value": eng_ttft, "source": src},
            {"model": "9b", "metric": "decode_ms", "context": 32768, "value": eng_dec, "source": src},
            {"model": "9b", "metric": "peak_gpu_bytes", "value": peak, "source": src},
            {"model": "9b", "metric": "cold_start_s", "value": total, "source": src},
            {"model": "9b", "metric": "ceiling_copy_GBps", "value": copy, "source": src}],
        "cold_start": {"phases_s": phases, "total_s": total, "floor_s": cold_floor, "floor": "h2d"},
        "memory": {"peak_bytes": peak, "floor_bytes": floor, "max_seq_len": 32960,
                   "floor": {"weights": 17.9e9, "kv_max_seq": 1.1e9, "recurrent_conv_state": 0.1e9},
                   "engine_bytes": {"weights": 18.0e9, "scratch": 0.9e9, "state": 1.2e9}}})
    assert report.main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "not understood" not in out
    t4 = row(out, "cold TTFT 4k")
    assert t4[6] == "%.1f" % eng_ttft and t4[-1] == "(cuda)"  # the engine row wins over the graph
    c9 = Costs(SHAPES["9b"])
    d32 = row(out, "decode/token @32k")
    assert d32[2] == "%.2f" % (c9.decode_bytes(32768) / (2 * copy * 1e9) * 1e3)  # the engine's ceiling
    assert d32[5] == "%.2f" % eng_dec
    pk = row(out, "peak GPU memory")  # GB cells are two words
    assert pk[7:9] == ["%.1f" % (peak / 1e9), "GB"] and pk[-1] == "(cuda)"
    cs = row(out, "cold start (s)")
    # The report prints values >= 10 with one decimal, smaller ones with two (the random phases can
    # add up past 10 s: this assertion used to fail then).
    two_or_one = lambda v: ("%.1f" if v >= 10 else "%.2f") % v
    assert cs[3] == two_or_one(cold_floor) and cs[6] == two_or_one(total) and cs[7] == "%.2fx" % (total / cold_floor)
    line = " ".join(row(out, "cold start %.3f s" % total))
    assert "(floor %.2f s" % cold_floor in line and "%.2fx" % (total / cold_floor) in line
    for name, v in phases.items():
        assert "%s %.3f" % (name, v) in line
    mem = " ".join(row(out, "peak GPU memory %.2f GB" % (peak / 1e9)))
    assert "vs floor 19.10 GB at max_seq 32960 (%.2fx)" % (peak / floor) in mem
    assert "weights 17.90 GB + KV 1.10 GB + state 0.10 GB" in mem and "scratch 0.90 GB" in mem


def test_engine_only_shape_uses_its_own_floors(tmp_path, capsys):
    # A shape only the engine bench ran (35b-a3b, FROST_BENCH_MOE=1) gets its own table, floors from
    # the floor_bytes / flops the engine's cost model reported (active experts for MoE).
    rng = random.Random()
    copy, gemm = rng.uniform(1000, 2000), rng.uniform(500, 900)
    fb_dec, fb_ttft, flops = rng.uniform(3e9, 6e9), rng.uniform(6e9, 9e9), rng.uniform(1e13, 9e13)
    dec_ms, ttft_ms = rng.uniform(3, 9), rng.uniform(100, 900)
    write(tmp_path, "bench_cuda_kernels.json", {"ceilings": {"d2d_copy_GBps": copy, "gemm_bf16_TFLOPs": gemm},
                                                "forward_graphs": []})
    src = "frost bench engine (cuda)"
    write(tmp_path, "engine_bench_35b-a3b.json", {
        "bench": "engine", "model": "35b-a3b", "backend": "cuda",
        "frost_results": [{"model": "35b-a3b", "metric": "decode_ms", "context": 1024, "value": dec_ms,
                           "source": src}],
        "ttft": [{"tokens": 16384, "ms": ttft_ms, "floor_bytes": fb_ttft, "flops": flops}],
        "decode": [{"context": 1024, "ms_per_token": dec_ms, "floor_bytes": fb_dec}]})
    assert report.main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "35b-a3b (frost bench engine only" in out
    rw = 2 * copy * 1e9
    # The 9b / 0.8b tables come first (n/a); the last match is the 35b-a3b table's.
    d = [ln.split() for ln in out.splitlines() if ln.strip().startswith("decode/token @1k")][-1]
    assert d[2] == report.fmt(fb_dec / rw * 1e3) and d[5] == report.fmt(dec_ms)
    t = [ln.split() for ln in out.splitlines() if ln.strip().startswith("cold TTFT 16k")][-1]
    assert t[3] == report.fmt(max(flops / (gemm * 1e12), fb_ttft / rw) * 1e3) and t[6] == report.fmt(ttft_ms)


def test_probes_never_replace_the_models_numbers(tmp_path, capsys):
    # A `frost bench engine --leave-out` run (a timing probe: wrong outputs) lies beside the real one:
    # the report keeps the real run's engine lines, and prints a graph-ops file's labels by time saved.
    rng = random.Random()
    real_dec, probe_dec = rng.uniform(4, 6), rng.uniform(1, 3)
    src = "frost bench engine (cuda)"
    real = {"bench": "engine", "model": "9b", "backend": "cuda",
            "frost_results": [{"model": "9b", "metric": "decode_ms", "context": 32768, "value": real_dec, "source": src}]}
    probe = {"bench": "engine", "model": "9b", "backend": "cuda", "leave_out": ["rmsnorm"], "frost_results": [],
             "decode": [{"context": 32768, "ms_per_token": probe_dec}]}
    write(tmp_path, "a_engine_bench_9b.json", real)
    write(tmp_path, "b_engine_probe_9b.json", probe)  # read after the real one
    full = rng.uniform(2, 3)
    saved = sorted((rng.uniform(0.01, 0.9) for _ in range(3)), reverse=True)
    labels = [{"label": "gemv mlp gate_up+swiglu", "ops": 32, "bytes": 1.6e9, "floor_ms": 0.4, "ms_per_token": full - saved[0],
               "saved_ms": saved[0], "saved_per_op_us": saved[0] * 1e3 / 32, "saved_over_floor": saved[0] / 0.4},
              {"label": "rmsnorm input", "ops": 32, "bytes": 1e6, "floor_ms": 0.001, "ms_per_token": full - saved[2],
               "saved_ms": saved[2], "saved_per_op_us": saved[2] * 1e3 / 32, "saved_over_floor": saved[2] / 0.001},
              {"label": "gemm lm_head", "ops": 1, "bytes": 2e9, "floor_ms": 0.5, "ms_per_token": full - saved[1],
               "saved_ms": saved[1], "saved_per_op_us": saved[1] * 1e3, "saved_over_floor": saved[1] / 0.5,
               "paired": True, "saved_ms_range": [saved[1] - 0.004, saved[1] + 0.002]},
              {"label": "cursor decode_begin", "ops": 1, "bytes": 0, "floor_ms": 0, "error": "kernel rejected its inputs"}]
    write(tmp_path, "graph_ops_9b.json", {"bench": "graph-ops", "backend": "cuda", "context": 1024,
                                          "full_ms_per_token": full, "labels": labels})
    data = report.collect([str(tmp_path)])
    assert data["engine"]["9b"] is not None and data["engine"]["9b"].get("leave_out") is None
    assert [r["value"] for r in data["frost"] if r["metric"] == "decode_ms"] == [real_dec]
    assert report.main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "not understood" not in out  # every file above is one the report reads
    lines = [l for l in out.splitlines() if "ops  saved" in l]
    assert [l.split()[0] for l in lines] == ["gemv", "gemm", "rmsnorm"]  # by time saved
    # a paired probe shows the range of its differences; the unpaired rows (no range) show none
    assert "(paired: %.3f..%.3f)" % (saved[1] - 0.004, saved[1] + 0.002) in lines[1]
    assert "paired" not in lines[0] and "paired" not in lines[2]
    assert "probes that could not run: cursor decode_begin" in out
