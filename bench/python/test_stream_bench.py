"""The concurrent-streams bench (stream_bench.py) over the real CPU engine: it runs end to end
through `frost serve`, and every stream's greedy text under batching equals its solo text (B = 3
also exercises a padded batch). No timing is asserted: the numbers are the bench's output."""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
FROST = os.environ.get("FROST_BIN", "")
FIXTURES = os.environ.get("FROST_FIXTURES_DIR", "")


def test_concurrent_streams_equal_their_solo_runs(tmp_path):
    assert FROST and os.path.exists(FROST), "FROST_BIN must name the frost binary (set by ctest)"
    assert os.path.isdir(os.path.join(FIXTURES, "tokenizer-qwen3")), "FROST_FIXTURES_DIR must hold tokenizer-qwen3"
    model = tmp_path / "model"
    subprocess.run([FROST, "synth", "--out", str(model), "--preset", "tiny", "--tokenizer",
                    os.path.join(FIXTURES, "tokenizer-qwen3")], check=True, capture_output=True)
    out = tmp_path / "streams.json"
    run = subprocess.run([sys.executable, os.path.join(HERE, "stream_bench.py"), "--frost", FROST, "--model", str(model),
                          "--sizes", "1,2,3", "--context", "48", "--tokens", "12", "--admit", "600",
                          "--admit-tokens", "40", "--out-json", str(out)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    r = json.loads(out.read_text())
    assert [row["B"] for row in r["sizes"]] == [1, 2, 3]
    for row in r["sizes"]:
        assert row["same_as_solo"] is True, row
        assert len(row["completion_tokens"]) == row["B"] and all(n >= 1 for n in row["completion_tokens"]), row
    ad = r["admission"]
    assert ad["admit_tokens"] == 600 and ad["admit_ttft_ms"] > 0 and ad["gaps_before"] > 0, ad
    assert "concurrent streams" in run.stdout


def test_external_server_mode_measures_a_running_server(tmp_path):
    """--port: the bench measures a server it did not start (how llama-server is measured); here
    that server is a `frost serve` started by the test, so the texts must still equal solo runs."""
    assert FROST and os.path.exists(FROST), "FROST_BIN must name the frost binary (set by ctest)"
    sys.path.insert(0, HERE)
    from agent_bench import Server
    model = tmp_path / "model"
    subprocess.run([FROST, "synth", "--out", str(model), "--preset", "tiny", "--tokenizer",
                    os.path.join(FIXTURES, "tokenizer-qwen3")], check=True, capture_output=True)
    server = Server(FROST, str(model), ["--no-capsules"], 256, 2)
    try:
        out = tmp_path / "ext.json"
        run = subprocess.run([sys.executable, os.path.join(HERE, "stream_bench.py"), "--port", str(server.port),
                              "--vocab", "5000", "--label", "external", "--sizes", "1,2", "--context", "40",
                              "--tokens", "10", "--out-json", str(out)], capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, run.stdout + run.stderr
        r = json.loads(out.read_text())
        assert r["server"] == "external" and [row["B"] for row in r["sizes"]] == [1, 2], r
        assert all(row["same_as_solo"] is True for row in r["sizes"]), r
        assert "external, concurrent streams" in run.stdout
        bad = subprocess.run([sys.executable, os.path.join(HERE, "stream_bench.py"), "--port", str(server.port)],
                             capture_output=True, text=True, timeout=60)
        assert bad.returncode != 0 and "--vocab" in bad.stderr, bad.stderr
    finally:
        server.stop()
