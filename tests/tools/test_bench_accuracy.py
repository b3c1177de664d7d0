# `frost bench accuracy` (issue 15: a quantized checkpoint's logits against its bf16 original) on
# the CPU backend. The command's numbers are recomputed here from logits that `frost eval` dumps
# (a separate prefill of each model, teacher-forced rows included, compared with numpy); the
# reference's greedy tokens must be the argmax of its own rows; a model against itself must show no
# error at all; bad input is refused with a message naming the problem.
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

FROST_BIN = os.environ.get("FROST_BIN", "")
FIXTURES = Path(os.environ.get("FROST_FIXTURES_DIR", Path(__file__).resolve().parents[1] / "fixtures"))
RUN_TIMEOUT_S = 120
PROMPT = 40
GEN = 12
QUANTS = ["fp8", "int4", "nvfp4"]


def frost(*args):
    assert FROST_BIN and Path(FROST_BIN).exists(), "set FROST_BIN to the built frost binary"
    return subprocess.run([FROST_BIN, *map(str, args)], capture_output=True, text=True, timeout=RUN_TIMEOUT_S)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("accuracy")
    out = {"bf16": root / "bf16"}
    p = frost("synth", "--out", out["bf16"], "--preset", "tiny")
    assert p.returncode == 0, p.stderr
    for q in QUANTS:  # the same bf16 values, quantized as the published tools write them
        out[q] = root / q
        p = frost("synth", "--out", out[q], "--preset", "tiny", "--quant", q)
        assert p.returncode == 0, p.stderr
    return out


@pytest.fixture(scope="module")
def prompt():
    rng = np.random.default_rng()  # fresh ids every run
    return [int(x) for x in rng.integers(0, 4096, size=PROMPT)]


def accuracy(model, reference, ids):
    p = frost("bench", "accuracy", "--model", model, "--reference", reference, "--backend", "cpu",
              "--prompt-ids", ",".join(map(str, ids)), "--gen", GEN, "--json")
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout)


def eval_logits(model, ids, tmp_path, name):
    dump = tmp_path / f"{name}.f32"
    p = frost("eval", "--model", model, "--prompt-ids", ",".join(map(str, ids)), "--dump-logits", dump)
    assert p.returncode == 0, p.stderr
    return np.fromfile(dump, dtype=np.float32).reshape(len(ids), -1).astype(np.float64)


def row_stats(cand, ref):
    rel = np.linalg.norm(cand - ref, axis=1) / np.linalg.norm(ref, axis=1)
    agree = np.argmax(cand, axis=1) == np.argmax(ref, axis=1)  # numpy: the first index of the maximum
    top2 = np.sort(ref, axis=1)[:, -2:]
    gap = top2[:, 1] - top2[:, 0]
    return rel, agree, gap


def check_section(got, cand, ref):
    rel, agree, gap = row_stats(cand, ref)
    assert got["rows"] == len(rel)
    assert got["nonfinite_rows"] == 0
    assert got["rel_l2_mean"] == pytest.approx(rel.mean(), rel=1e-3, abs=1e-6)
    assert got["rel_l2_max"] == pytest.approx(rel.max(), rel=1e-3, abs=1e-6)
    # Separate runs (eval's prefill against the bench's decode steps) may differ in the last bits, so a
    # row whose reference top-2 gap is within that noise may flip: allow one such row.
    assert abs(got["top1_agree"] - int(agree.sum())) <= 1
    assert got["ref_top2_gap_median"] == pytest.approx(np.sort(gap)[len(gap) // 2], rel=1e-3, abs=1e-5)
    if not agree.all():
        assert got["flip_ref_gap_max"] == pytest.approx(gap[~agree].max(), rel=1e-3, abs=1e-5)


@pytest.mark.parametrize("quant", QUANTS)
def test_numbers_match_an_independent_recount(models, prompt, quant, tmp_path):
    got = accuracy(models[quant], models["bf16"], prompt)
    assert got["prompt_tokens"] == PROMPT and got["gen"] == GEN
    tokens = got["reference_tokens"]
    assert len(tokens) == GEN
    # Rows of one prefill over prompt + the reference's tokens: row P - 1 + k holds the logits after
    # the reference's token k - 1, which the teacher-forced step k compares.
    seq = prompt + tokens[:-1]
    ref = eval_logits(models["bf16"], seq, tmp_path, "ref")
    cand = eval_logits(models[quant], seq, tmp_path, "cand")
    # The reference's greedy tokens are the argmax of its own rows (the run is self-consistent).
    assert [int(t) for t in np.argmax(ref[PROMPT - 1:], axis=1)] == tokens
    check_section(got["prompt"], cand[:PROMPT], ref[:PROMPT])
    check_section(got["teacher_forced"], cand[PROMPT:], ref[PROMPT:])
    # Free-running: the candidate's first greedy token is the argmax of its last prompt row.
    same = got["free_running"]["same_prefix"]
    assert 0 <= same <= GEN
    first_equal = int(np.argmax(cand[PROMPT - 1])) == tokens[0]
    assert (same > 0) == first_equal
    # Quantization moves the logits (an unchanged model would mean the candidate was not used).
    assert got["prompt"]["rel_l2_mean"] > 0


def test_error_grows_with_coarser_weights(models, prompt):
    err = {q: accuracy(models[q], models["bf16"], prompt)["prompt"]["rel_l2_mean"] for q in ["fp8", "int4"]}
    assert err["fp8"] < err["int4"], err  # 8-bit weights (block 128) are closer than 4-bit (group 128)


def test_a_model_against_itself_is_exact(models, prompt):
    got = accuracy(models["bf16"], models["bf16"], prompt)
    for section in ["prompt", "teacher_forced"]:
        assert got[section]["rel_l2_max"] == 0
        assert got[section]["top1_agree"] == got[section]["rows"]
    assert got["free_running"]["same_prefix"] == GEN


def test_random_prompt_and_text_report(models):
    p = frost("bench", "accuracy", "--model", models["fp8"], "--reference", models["bf16"], "--prompt-len", 24,
              "--gen", 4, "--seed", 7)
    assert p.returncode == 0, p.stderr
    assert "24 prompt tokens, 4 greedy steps" in p.stdout
    assert "teacher-forced" in p.stdout and "free-running" in p.stdout


def test_bad_input_is_refused(models):
    p = frost("bench", "accuracy", "--model", models["fp8"])
    assert p.returncode == 2 and "--reference" in p.stderr
    p = frost("bench", "accuracy", "--model", models["fp8"], "--reference", models["bf16"], "--gen", 0)
    assert p.returncode == 2 and "--gen" in p.stderr
    p = frost("bench", "accuracy", "--model", models["fp8"], "--reference", models["bf16"], "--prompt-len", "x")
    assert p.returncode == 2 and "number" in p.stderr
    # A different model: the vocabularies differ, so no row compares.
    p = frost("bench", "accuracy", "--model", FIXTURES / "qwen35-tiny-a", "--reference", models["bf16"],
              "--prompt-len", 8, "--gen", 2)
    assert p.returncode == 2 and "vocab_size" in p.stderr
