# End-to-end tests of the `frost` command-line forms that later checks call (issues 3, 4, 5): each
# test spawns the real binary ($FROST_BIN) on copies of the shared fixtures and compares what it
# prints or writes against config.json, the transformers goldens and the `tokenizers` package.
import json
import os
import random
import shutil
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

FROST_BIN = os.environ.get("FROST_BIN", "")
FIXTURES = Path(os.environ.get("FROST_FIXTURES_DIR", Path(__file__).resolve().parents[1] / "fixtures"))
TOKENIZER_DIR = FIXTURES / "tokenizer-qwen3"
MODEL_FIXTURES = ["qwen35-tiny-a", "qwen35-tiny-a-vl"]

RUN_TIMEOUT_S = 120          # one frost invocation on the tiny fixtures takes well under a second
LOGITS_REL_L2_TOL = 1e-3     # fixtures/README.md acceptance for an fp32 CPU path
GREEDY_TOKENS = 16           # enough to cover prefill + many decode steps, cheap on 2 cores
SAMPLED_TOKENS = 16
CAPSULE_PREFIX = 100         # not a multiple of the 64-token alignment: exercises the remainder
CAPSULE_SUFFIX = 7
# fresh random inputs each run; FROST_TEST_SEED=N replays a failing run (the seed is in messages)
SEED = int(os.environ.get("FROST_TEST_SEED", random.SystemRandom().randrange(1 << 30)))


# ---------------------------------------------------------------------------------------------
# helpers

def frost(*args, check=None, timeout=RUN_TIMEOUT_S, binary=False):
    """Runs frost with args; returns the CompletedProcess (text mode unless binary: text mode folds
    \r\n). A crash (death by signal) always fails."""
    assert FROST_BIN and Path(FROST_BIN).exists(), "set FROST_BIN to the built frost binary"
    text = {} if binary else {"text": True, "errors": "replace"}
    p = subprocess.run([FROST_BIN, *map(str, args)], capture_output=True, timeout=timeout, **text)
    line = " ".join(map(str, args))[:300]
    assert p.returncode >= 0, f"frost {line} died by signal {-p.returncode}:\n{p.stderr!r}"
    if check is not None:
        assert p.returncode == check, (f"frost {line}: exit {p.returncode}, want {check}\n"
                                       f"stdout:\n{p.stdout[-2000:]!r}\nstderr:\n{p.stderr[-2000:]!r}")
    return p


def frost_json(*args):
    p = frost(*args, check=0)
    return json.loads(p.stdout)


def refused(p):
    """A clean refusal: non-zero exit, no crash, and a message on stderr."""
    assert p.returncode > 0, f"expected a non-zero exit, got {p.returncode}\nstdout:\n{p.stdout[-2000:]}"
    assert p.stderr.strip(), "a refusal must say why on stderr"
    return p.stderr


def csv(ids):
    return ",".join(str(i) for i in ids)


def rel_l2(a, b):
    return float(np.linalg.norm(a.astype(np.float64) - b) / np.linalg.norm(b.astype(np.float64)))


def read_safetensors(path):
    """(header dict without __metadata__, metadata, data bytes) of a safetensors file."""
    raw = Path(path).read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", None)
    return header, meta, raw[8 + n:]


def write_safetensors(path, header, meta):
    """Writes tensors {name: (dtype, shape, bytes)} packed contiguously, as a valid file."""
    out, blob, offset = {}, bytearray(), 0
    if meta is not None:
        out["__metadata__"] = meta
    for name, (dtype, shape, payload) in header.items():
        out[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(payload)]}
        blob += payload
        offset += len(payload)
    text = json.dumps(out).encode()
    text += b" " * (-len(text) % 8)
    Path(path).write_bytes(struct.pack("<Q", len(text)) + text + bytes(blob))


def writable_copy(src, dst):
    """Copies a fixture folder without its (read-only) modes, so tests may damage the copy."""
    shutil.copytree(src, dst, copy_function=shutil.copyfile)
    for d in [dst, *[p for p in Path(dst).rglob("*") if p.is_dir()]]:
        os.chmod(d, 0o755)
    return Path(dst)


# ---------------------------------------------------------------------------------------------
# fixtures: private copies, so tests that damage a model never touch tests/fixtures

@pytest.fixture(scope="session")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    out = {}
    for name in MODEL_FIXTURES:
        out[name] = writable_copy(FIXTURES / name, root / name)
    return out


@pytest.fixture(scope="session")
def golden(models):
    out = {}
    for name, d in models.items():
        g = json.loads((d / "golden.json").read_text())
        vocab = g["vocab_size"]
        g["logits_prompt"] = np.fromfile(d / "logits_prompt.f32", dtype="<f4").reshape(-1, vocab)
        out[name] = g
    return out


@pytest.fixture(scope="session")
def synth_tiny(tmp_path_factory):
    d = tmp_path_factory.mktemp("synth") / "tiny"
    frost("synth", "--out", d, "--preset", "tiny", "--seed", 3, check=0)
    return d


@pytest.fixture(scope="session")
def synth_tok(tmp_path_factory):
    d = tmp_path_factory.mktemp("synth_tok") / "tiny"
    frost("synth", "--out", d, "--preset", "tiny", "--tokenizer", TOKENIZER_DIR, check=0)
    return d


def command_names():
    """The commands `frost help` lists (two-space indented name, then the summary)."""
    p = frost("help", check=0)
    names = []
    in_list = False
    for line in p.stdout.splitlines():
        if line.startswith("commands:"):
            in_list = True
            continue
        if in_list:
            if not line.startswith("  "):
                break
            names.append(line.split()[0])
    return names


# ---------------------------------------------------------------------------------------------
# version, help, dispatch

def test_version():
    p = frost("--version", check=0)
    assert p.stdout.startswith("frost "), p.stdout
    assert "cpu" in p.stdout


def test_help_lists_the_issue_commands_and_each_has_usage():
    names = command_names()
    for required in ["inspect", "tokenize", "detokenize", "generate", "eval", "synth"]:
        assert required in names, f"`frost help` does not list {required}: {names}"
    for name in names:
        if name == "help":
            continue
        p = frost("help", name, check=0)
        assert "usage" in p.stdout.lower(), f"`frost help {name}` prints no usage:\n{p.stdout}"
        assert name in p.stdout


def test_dispatch_exit_codes():
    assert frost().returncode == 2  # no command: the list, exit 2
    p = frost("inspect", "--help", check=0)
    assert "usage: frost inspect" in p.stdout


def test_unknown_command_exits_2():
    p = frost("no-such-command")
    assert p.returncode == 2
    assert "no-such-command" in p.stderr
    assert frost("help", "no-such-command").returncode == 2


# Reliability case T37: `frost serve` without --api-key refuses any non-loopback address before it
# loads anything (the model folder here does not even exist), and says how to fix it.
@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.1.2.3", "example.com"])
def test_serve_refuses_a_public_bind_without_a_key(tmp_path, host):
    p = frost("serve", "--model", tmp_path / "no-model", "--host", host, "--port", "0", timeout=30)
    assert p.returncode == 2, p.stderr
    assert "without --api-key" in p.stderr and host in p.stderr, p.stderr


# ---------------------------------------------------------------------------------------------
# inspect

@pytest.mark.parametrize("name", MODEL_FIXTURES)
def test_inspect_fixture_matches_config(models, name):
    d = models[name]
    cfg = json.loads((d / "config.json").read_text())
    text_cfg = cfg.get("text_config", cfg)
    j = frost_json("inspect", d, "--json")
    c = j["config"]
    assert j["ok"] is True
    assert c["hidden_size"] == text_cfg["hidden_size"]
    assert c["num_layers"] == text_cfg["num_hidden_layers"]
    kinds = "".join("L" if t == "linear_attention" else "F" for t in text_cfg["layer_types"])
    assert c["layer_kinds"] == kinds
    assert c["linear_layers"] == kinds.count("L") and c["full_layers"] == kinds.count("F")
    assert c["vocab_size"] == text_cfg["vocab_size"]
    assert c["num_heads"] == text_cfg["num_attention_heads"]
    assert c["num_kv_heads"] == text_cfg["num_key_value_heads"]
    assert c["head_dim"] == text_cfg["head_dim"]
    assert c["intermediate_size"] == text_cfg["intermediate_size"]
    assert j["tied_embeddings"] == cfg.get("tie_word_embeddings", text_cfg.get("tie_word_embeddings"))
    assert c["multimodal_wrapper"] == ("text_config" in cfg)
    header, _, _ = read_safetensors(d / "model.safetensors")
    assert j["inventory"]["tensors"] == len(header)
    visual = sum(1 for k in header if k.startswith("model.visual."))
    assert j["inventory"]["visual_tensors_skipped"] == visual
    if "text_config" in cfg:
        assert visual > 0
    assert len(j["fingerprint"]) >= 16
    # the fingerprint is cached in the user's cache folder (never beside the model) and read back
    assert j["fingerprint_cached"] is True
    assert not [p.name for p in Path(d).iterdir() if p.name.startswith(".")]
    again = frost_json("inspect", d, "--json")
    assert again["fingerprint"] == j["fingerprint"]
    # plain-text form too
    p = frost("inspect", d, check=0)
    assert f"vocab={text_cfg['vocab_size']}" in p.stdout


def broken_copy(models, tmp_path, name, tag):
    return writable_copy(models[name], tmp_path / tag)


@pytest.mark.parametrize("name", MODEL_FIXTURES)
def test_inspect_refuses_truncated_file(models, tmp_path, name):
    d = broken_copy(models, tmp_path, name, "truncated")
    f = d / "model.safetensors"
    raw = f.read_bytes()
    f.write_bytes(raw[: len(raw) * 2 // 3])
    err = refused(frost("inspect", d))
    assert "model.safetensors" in err
    p = frost("inspect", d, "--json")
    assert "model.safetensors" in refused(p)
    report = json.loads(p.stdout)
    assert report["ok"] is False and "model.safetensors" in report["error"]


@pytest.mark.parametrize("name", MODEL_FIXTURES)
def test_inspect_refuses_corrupted_header(models, tmp_path, name):
    d = broken_copy(models, tmp_path, name, "badjson")
    f = d / "model.safetensors"
    raw = bytearray(f.read_bytes())
    raw[8] = ord("[")  # the JSON header must open with '{'
    f.write_bytes(raw)
    assert "model.safetensors" in refused(frost("inspect", d))

    d2 = broken_copy(models, tmp_path, name, "badlen")
    f2 = d2 / "model.safetensors"
    raw2 = bytearray(f2.read_bytes())
    raw2[:8] = struct.pack("<Q", 1 << 62)  # header length far past the file and the 100 MB cap
    f2.write_bytes(raw2)
    assert "model.safetensors" in refused(frost("inspect", d2))


@pytest.mark.parametrize("name", MODEL_FIXTURES)
def test_inspect_refuses_missing_tensor(models, tmp_path, name):
    d = broken_copy(models, tmp_path, name, "missing")
    f = d / "model.safetensors"
    header, meta, data = read_safetensors(f)
    victims = sorted(k for k in header if ".layers.0." in k and k.endswith("down_proj.weight"))
    assert victims, sorted(header)[:10]
    victim = victims[0]
    tensors = {}
    for k, v in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        if k == victim:
            continue
        b, e = v["data_offsets"]
        tensors[k] = (v["dtype"], v["shape"], data[b:e])
    write_safetensors(f, tensors, meta)
    err = refused(frost("inspect", d))
    assert "down_proj" in err and "layers.0" in err, err


# ---------------------------------------------------------------------------------------------
# eval

def check_dumped_logits(path, g):
    vocab = g["vocab_size"]
    T = len(g["prompt_ids"])
    raw = Path(path).read_bytes()
    assert len(raw) == T * vocab * 4, f"dump is {len(raw)} bytes, want [T={T}, vocab={vocab}] float32"
    ours = np.frombuffer(raw, dtype="<f4").reshape(T, vocab)
    assert np.isfinite(ours).all()
    positions = g["prompt_logit_positions"]
    assert g["logits_prompt"].shape[0] == len(positions)
    worst = max(rel_l2(ours[p], g["logits_prompt"][i]) for i, p in enumerate(positions))
    assert worst <= LOGITS_REL_L2_TOL, f"worst per-position rel L2 {worst:.3e}"


@pytest.mark.parametrize("name", MODEL_FIXTURES)
def test_eval_dumps_golden_logits(models, golden, tmp_path, name):
    g = golden[name]
    out = tmp_path / "logits.f32"
    out.write_bytes(b"\xff" * 16)  # poison: a stale file must be replaced, not appended to
    frost("eval", "--model", models[name], "--prompt-ids", csv(g["prompt_ids"]), "--dump-logits", out, check=0)
    check_dumped_logits(out, g)


def test_eval_prompt_ids_from_file(models, golden, tmp_path):
    name = MODEL_FIXTURES[0]
    g = golden[name]
    ids_file = tmp_path / "ids.txt"
    ids_file.write_text(csv(g["prompt_ids"]) + "\n")
    out = tmp_path / "logits.f32"
    frost("eval", "--model", models[name], "--prompt-ids", f"@{ids_file}", "--dump-logits", out, check=0)
    check_dumped_logits(out, g)


# ---------------------------------------------------------------------------------------------
# generate

def generate(model, ids, *extra):
    return frost_json("generate", "--model", model, "--prompt-ids", ids, *map(str, extra), "--json")


@pytest.mark.parametrize("name", MODEL_FIXTURES)
def test_generate_greedy_matches_golden(models, golden, name):
    g = golden[name]
    n = min(GREEDY_TOKENS, len(g["greedy_ids"]))
    j = generate(models[name], csv(g["prompt_ids"]), "--max-new-tokens", n, "--temperature", 0)
    for key in ["ids", "ttft_ms", "ms_per_token", "fingerprint"]:
        assert key in j, f"generate --json lacks {key}: {sorted(j)}"
    assert j["ids"] == g["greedy_ids"][:n]
    assert j["ttft_ms"] >= 0 and j["ms_per_token"] >= 0
    assert isinstance(j["fingerprint"], str) and j["fingerprint"]
    again = generate(models[name], csv(g["prompt_ids"]), "--max-new-tokens", n, "--temperature", 0)
    assert again["ids"] == j["ids"]
    assert again["fingerprint"] == j["fingerprint"]


def test_generate_fingerprint_depends_on_logits(models, golden):
    name = MODEL_FIXTURES[0]
    g = golden[name]
    a = generate(models[name], csv(g["prompt_ids"]), "--max-new-tokens", 4, "--temperature", 0)
    b = generate(models[name], csv(g["prompt_ids"][:-1]), "--max-new-tokens", 4, "--temperature", 0)
    assert a["fingerprint"] != b["fingerprint"]


def test_generate_prompt_ids_from_file(models, golden, tmp_path):
    name = MODEL_FIXTURES[1]
    g = golden[name]
    ids_file = tmp_path / "ids.csv"
    ids_file.write_text(", ".join(map(str, g["prompt_ids"])) + "\n")
    j = generate(models[name], f"@{ids_file}", "--max-new-tokens", 3, "--temperature", 0, "--backend", "cpu")
    assert j["ids"] == g["greedy_ids"][:3]
    assert j["prompt_tokens"] == len(g["prompt_ids"])


def test_generate_seeded_sampling_is_reproducible(models, golden):
    name = MODEL_FIXTURES[0]
    g = golden[name]
    prompt = csv(g["prompt_ids"][:32])
    sample = ["--max-new-tokens", SAMPLED_TOKENS, "--temperature", 0.8, "--top-k", 20]
    first = generate(models[name], prompt, *sample, "--seed", 5)
    second = generate(models[name], prompt, *sample, "--seed", 5)
    assert len(first["ids"]) == SAMPLED_TOKENS
    assert first["ids"] == second["ids"]
    assert first["fingerprint"] == second["fingerprint"]
    others = [generate(models[name], prompt, *sample, "--seed", s)["ids"] for s in (6, 7, 1234)]
    assert any(o != first["ids"] for o in others), "every seed sampled the same tokens (vocab 2048)"
    assert all(0 <= t < g["vocab_size"] for o in others for t in o)
    nucleus = ["--max-new-tokens", SAMPLED_TOKENS, "--temperature", 1.0, "--top-p", 0.9]
    a = generate(models[name], prompt, *nucleus, "--seed", 9)
    b = generate(models[name], prompt, *nucleus, "--seed", 9)
    assert a["ids"] == b["ids"] and len(a["ids"]) == SAMPLED_TOKENS


def test_generate_plain_output(models, golden):
    name = MODEL_FIXTURES[0]
    g = golden[name]
    p = frost("generate", "--model", models[name], "--prompt-ids", csv(g["prompt_ids"]), "--max-new-tokens", 4,
              check=0)
    lines = p.stdout.splitlines()
    assert lines[0] == csv(g["greedy_ids"][:4])  # --temperature defaults to greedy
    assert lines[1].startswith("fingerprint ")


# ---------------------------------------------------------------------------------------------
# synth

def test_synth_inspect_generate(synth_tiny):
    j = frost_json("inspect", synth_tiny, "--json")
    assert j["ok"] is True
    assert j["config"]["multimodal_wrapper"] is True  # the released layout
    vocab = j["config"]["vocab_size"]
    rng = random.Random(SEED)
    prompt = [rng.randrange(vocab) for _ in range(12)]
    g = generate(synth_tiny, csv(prompt), "--max-new-tokens", 6, "--temperature", 0)
    assert len(g["ids"]) == 6 and all(0 <= t < vocab for t in g["ids"])


def test_synth_is_deterministic(synth_tiny, tmp_path):
    d = tmp_path / "again"
    frost("synth", "--out", d, "--preset", "tiny", "--seed", 3, check=0)
    for f in sorted(synth_tiny.glob("*.safetensors")):
        assert (d / f.name).read_bytes() == f.read_bytes(), f.name


def test_synth_vocab_and_seed(synth_tiny, tmp_path):
    d = tmp_path / "v"
    frost("synth", "--out", d, "--preset", "tiny", "--vocab", 3000, "--seed", 4, check=0)
    j = frost_json("inspect", d, "--json")
    assert j["config"]["vocab_size"] == 3000
    other = frost_json("inspect", synth_tiny, "--json")
    assert j["fingerprint"] != other["fingerprint"]


def test_synth_with_tokenizer_generates_text(synth_tok):
    for f in ["tokenizer.json", "tokenizer_config.json"]:
        assert (synth_tok / f).read_bytes() == (TOKENIZER_DIR / f).read_bytes(), f"{f} not copied"
    j = frost_json("inspect", synth_tok, "--json")
    import tokenizers
    tok = tokenizers.Tokenizer.from_file(str(TOKENIZER_DIR / "tokenizer.json"))
    assert j["config"]["vocab_size"] >= tok.get_vocab_size()
    g = frost_json("generate", "--model", synth_tok, "--prompt", "Hello", "--max-new-tokens", 8,
                   "--temperature", 0, "--json")
    assert isinstance(g.get("text"), str), f"generate with a tokenizer gives no text: {g}"
    assert len(g["ids"]) == 8
    assert g["text"] == tok.decode(g["ids"], skip_special_tokens=False)
    assert g["prompt_tokens"] == len(tok.encode("Hello", add_special_tokens=False).ids)
    chat = frost_json("generate", "--model", synth_tok, "--prompt", "Hello", "--chat", "--max-new-tokens", 2,
                      "--temperature", 0, "--json")
    turn = "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n"
    assert chat["prompt_tokens"] == len(tok.encode(turn, add_special_tokens=False).ids)


# ---------------------------------------------------------------------------------------------
# tokenize / detokenize

TOKENIZER_CORPUS = [
    "Hello, world!",
    "",
    "   leading and trailing spaces   ",
    "line one\r\nline two\n\n\nthree\ttabs\t\t",
    "I'm you're HE'S they'LL we'D can't WON'T",
    "numbers 1234567890 3.14159 1,000,000 007",
    "中文字符和日本語のテキスト、한국어 텍스트",
    "emoji 👍🏽 👨‍👩‍👧‍👦 🇯🇵 ❤️",
    "combining: e\u0301 a\u0308 n\u0303 (decomposed) vs é ä ñ",
    "Ελληνικά кириллица עברית العربية हिन्दी ไทย",
    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
    "code: def f(x):\n    return x**2  # comment\n",
    "symbols ~!@#$%^&*()_+{}|:\"<>?`-=[]\\;',./ ‰ € ∑ √",
    "a" * 500 + " " + "ab " * 200,
    "\u00a0nbsp\u2003em-space\u3000ideographic",
]


def test_tokenize_jsonl_matches_tokenizers_package(tmp_path):
    import tokenizers
    tok = tokenizers.Tokenizer.from_file(str(TOKENIZER_DIR / "tokenizer.json"))
    rng = random.Random(SEED)
    corpus = list(TOKENIZER_CORPUS)
    pool = "".join(TOKENIZER_CORPUS[:13])
    corpus += ["".join(rng.choice(pool) for _ in range(rng.randrange(1, 80))) for _ in range(20)]
    corpus = [s for s in corpus if s]  # empty lines are skipped by the jsonl reader; checked below
    f = tmp_path / "in.jsonl"
    f.write_text("".join(json.dumps(s) + "\n" for s in corpus), encoding="utf-8")
    p = frost("tokenize", "--tokenizer", TOKENIZER_DIR, "--jsonl", f, check=0)
    lines = p.stdout.splitlines()
    assert len(lines) == len(corpus)
    for s, line in zip(corpus, lines):
        assert json.loads(line) == tok.encode(s, add_special_tokens=False).ids, f"{s!r} (seed {SEED})"
    # --file: raw bytes, CRLF kept; default output is comma-separated
    raw = tmp_path / "raw.txt"
    text = "\r\n".join(TOKENIZER_CORPUS)
    raw.write_bytes(text.encode("utf-8"))
    p = frost("tokenize", "--tokenizer", TOKENIZER_DIR, "--file", raw, check=0)
    assert p.stdout.strip() == csv(tok.encode(text, add_special_tokens=False).ids)
    # the empty string encodes to nothing
    p = frost("tokenize", "--tokenizer", TOKENIZER_DIR, "--text", "", "--json", check=0)
    assert json.loads(p.stdout) == []


def test_detokenize_round_trips(tmp_path):
    import tokenizers
    tok = tokenizers.Tokenizer.from_file(str(TOKENIZER_DIR / "tokenizer.json"))
    corpus = [s for s in TOKENIZER_CORPUS if s]
    id_lists = [tok.encode(s, add_special_tokens=False).ids for s in corpus]
    # --ids on the hardest line, compared byte for byte (binary mode: keep \r\n as written)
    hard = "\n".join(corpus)
    ids = tok.encode(hard, add_special_tokens=False).ids
    p = frost("detokenize", "--tokenizer", TOKENIZER_DIR, "--ids", csv(ids), check=0, binary=True)
    assert p.stdout.decode("utf-8") == tok.decode(ids, skip_special_tokens=False)
    assert p.stdout.decode("utf-8") == tok.normalizer.normalize_str(hard)
    # --jsonl: every line of the corpus
    f = tmp_path / "ids.jsonl"
    f.write_text("".join(json.dumps(i) + "\n" for i in id_lists))
    p = frost("detokenize", "--tokenizer", TOKENIZER_DIR, "--jsonl", f, check=0, binary=True)
    lines = p.stdout.decode("utf-8").split("\n")
    assert lines[-1] == "" and len(lines) == len(corpus) + 1
    for s, i, line in zip(corpus, id_lists, lines):
        assert json.loads(line) == tok.decode(i, skip_special_tokens=False) == tok.normalizer.normalize_str(s), repr(s)


# ---------------------------------------------------------------------------------------------
# capsule

@pytest.fixture(scope="session")
def capsule_available():
    if "capsule" not in command_names():
        pytest.skip("`frost capsule` is not in this build (issue 5 not merged yet)")


@pytest.fixture(scope="session")
def capsule_file(models, golden, capsule_available, tmp_path_factory):
    name = MODEL_FIXTURES[0]
    ids = golden[name]["prompt_ids"][:CAPSULE_PREFIX]
    f = tmp_path_factory.mktemp("capsule") / "prefix.capsule"
    j = frost_json("capsule", "snapshot", "--model", models[name], "--prompt-ids", csv(ids), "--out", f, "--json")
    return f, ids, j


def test_capsule_snapshot_inspect_verify(models, capsule_file):
    f, ids, snap = capsule_file
    assert f.exists() and f.stat().st_size > 0
    assert snap["tokens"] == len(ids)
    info = frost_json("capsule", "inspect", f, "--json")
    assert info["tokens"] == len(ids)
    assert info["checksums_ok"] is True
    assert info["requested_boundary"] == len(ids)
    assert info["stored_boundary"] <= len(ids)
    assert info["stored_boundary"] % 64 == 0
    assert info["bytes"]["total"] > 0
    v = frost_json("capsule", "verify", f, "--model", models[MODEL_FIXTURES[0]], "--json")
    assert v["ok"] is True and v["requested_boundary"] == len(ids)
    assert v["next_token"] == snap["next_token"]


def test_capsule_verify_refuses_flipped_bytes(models, capsule_file, tmp_path):
    f, _, _ = capsule_file
    raw = f.read_bytes()
    rng = random.Random(SEED)
    where = [16, len(raw) // 2, len(raw) - 1] + [rng.randrange(len(raw)) for _ in range(2)]
    for pos in where:
        bad = tmp_path / f"flip{pos}.capsule"
        b = bytearray(raw)
        b[pos] ^= 0x40
        bad.write_bytes(b)
        p = frost("capsule", "verify", bad, "--model", models[MODEL_FIXTURES[0]])
        assert p.returncode > 0 and p.stderr.strip(), f"flip at byte {pos} of {len(raw)} accepted (seed {SEED})"
    # `capsule inspect` checks the payload checksums too
    b = bytearray(raw)
    b[len(raw) // 2] ^= 0x01
    bad = tmp_path / "inspect.capsule"
    bad.write_bytes(b)
    p = frost("capsule", "inspect", bad, "--json")
    assert p.returncode > 0
    report = json.loads(p.stdout)
    assert report["checksums_ok"] is False and report["error"], report
    trunc = tmp_path / "trunc.capsule"
    trunc.write_bytes(raw[: len(raw) // 2])
    refused(frost("capsule", "verify", trunc, "--model", models[MODEL_FIXTURES[0]]))


def test_capsule_verify_refuses_another_model(models, capsule_file):
    f, _, _ = capsule_file
    refused(frost("capsule", "verify", f, "--model", models[MODEL_FIXTURES[1]]))


def test_generate_from_capsule_equals_cold(models, golden, capsule_file):
    f, prefix, _ = capsule_file
    name = MODEL_FIXTURES[0]
    suffix = golden[name]["prompt_ids"][CAPSULE_PREFIX:CAPSULE_PREFIX + CAPSULE_SUFFIX]
    n = 10
    warm = frost_json("generate", "--model", models[name], "--capsule", f, "--prompt-ids", csv(suffix),
                      "--max-new-tokens", n, "--temperature", 0, "--json")
    cold = generate(models[name], csv(prefix + suffix), "--max-new-tokens", n, "--temperature", 0)
    assert warm["ids"] == cold["ids"]
    assert warm["fingerprint"] == cold["fingerprint"]


# ---------------------------------------------------------------------------------------------
# bad input: a clean refusal, never a crash

@pytest.mark.parametrize("ids", ["1,x,3", "1,,2", "-5", "abc", "1;2"])
def test_generate_refuses_non_numeric_ids(models, ids):
    refused(frost("generate", "--model", models[MODEL_FIXTURES[0]], "--prompt-ids", ids, "--max-new-tokens", 2))


def test_generate_and_eval_refuse_id_past_vocab(models, golden, tmp_path):
    name = MODEL_FIXTURES[0]
    vocab = golden[name]["vocab_size"]
    for bad in [vocab, vocab + 1, 2**31 - 1, 2**40]:
        err = refused(frost("generate", "--model", models[name], "--prompt-ids", f"1,{bad},2",
                            "--max-new-tokens", 2))
        if bad < 10**9:  # longer numbers are refused by the id parser before the vocabulary check
            assert str(bad) in err, err
        refused(frost("eval", "--model", models[name], "--prompt-ids", f"{bad}", "--dump-logits",
                      tmp_path / "x.f32"))


@pytest.mark.parametrize("n", ["-1", "0", "abc"])
def test_generate_refuses_bad_max_new_tokens(models, n):
    refused(frost("generate", "--model", models[MODEL_FIXTURES[0]], "--prompt-ids", "1,2,3",
                  "--max-new-tokens", n))


@pytest.mark.parametrize("flag", ["--fp8-prefill", "--fp8-decode"])
def test_generate_refuses_bad_fp8_mode(models, flag):
    err = refused(frost("generate", "--model", models[MODEL_FIXTURES[0]], "--prompt-ids", "1,2,3", flag, "w4a4"))
    assert flag in err and "w4a4" in err, err
    # Either mode is accepted on a bf16 checkpoint, where it changes nothing: the same tokens.
    want = frost_json("generate", "--model", models[MODEL_FIXTURES[0]], "--prompt-ids", "1,2,3",
                      "--max-new-tokens", 3, "--json")
    got = frost_json("generate", "--model", models[MODEL_FIXTURES[0]], "--prompt-ids", "1,2,3",
                     "--max-new-tokens", 3, "--json", flag, "w8a8")
    assert got["ids"] == want["ids"] and got["fingerprint"] == want["fingerprint"]


def test_missing_model_dir(tmp_path):
    missing = tmp_path / "no-such-model"
    err = refused(frost("generate", "--model", missing, "--prompt-ids", "1,2", "--max-new-tokens", 2))
    assert "no-such-model" in err, err
    refused(frost("eval", "--model", missing, "--prompt-ids", "1,2", "--dump-logits", tmp_path / "x.f32"))
    refused(frost("inspect", missing))


def test_missing_prompt_ids_file(models, tmp_path):
    refused(frost("generate", "--model", models[MODEL_FIXTURES[0]], "--prompt-ids", f"@{tmp_path}/none.txt"))


def test_generate_from_capsule_without_suffix_equals_cold(models, capsule_file):
    f, prefix, snap = capsule_file
    name = MODEL_FIXTURES[0]
    warm = frost_json("generate", "--model", models[name], "--capsule", f, "--max-new-tokens", 5,
                      "--temperature", 0, "--json")
    cold = generate(models[name], csv(prefix), "--max-new-tokens", 5, "--temperature", 0)
    assert warm["ids"] == cold["ids"]
    assert warm["ids"][0] == snap["next_token"]


def test_fixtures_untouched():
    """Runs last (file order): nothing above may have written into the repository's fixture folders."""
    for name in [*MODEL_FIXTURES, TOKENIZER_DIR.name]:
        extra = sorted(p.name for p in (FIXTURES / name).iterdir() if p.name.startswith("."))
        assert not extra, f"files written into tests/fixtures/{name}: {extra}"
