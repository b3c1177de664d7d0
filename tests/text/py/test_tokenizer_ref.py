r"""The frost tokenizer must agree id-for-id with the `tokenizers` package (the Rust
implementation transformers uses) on the hard-case corpus, and its decode must agree too.
Variants: the Qwen3 fixture; the same vocabulary with the Qwen3.5 split regex (\p{M} rules);
and, when scripts/fetch_tokenizer.sh has run, the real Qwen3.5/3.6 tokenizer in .frost/tokenizer."""
import json
import pathlib
import random
import subprocess

import pytest
from tokenizers import Tokenizer

import corpus
from conftest import run_jsonl

QWEN35_REGEX = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}|"
                " ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")
FETCHED = pathlib.Path(__file__).resolve().parents[3] / ".frost" / "tokenizer"


TINY_SEED = pathlib.Path(__file__).resolve().parents[3] / "fuzz" / "corpus" / "tokenizer" / "valid_string_merges.json"


@pytest.fixture(scope="module", params=["qwen3", "qwen3-vocab-qwen35-regex", "qwen35-fetched", "tiny-added-flags"])
def variant(request, tokenizer_dir, tmp_path_factory):
    if request.param == "qwen3":
        return tokenizer_dir
    if request.param == "tiny-added-flags":  # added tokens with lstrip/rstrip/single_word/normalized
        out = tmp_path_factory.mktemp("tiny")
        (out / "tokenizer.json").write_bytes(TINY_SEED.read_bytes())
        return out
    if request.param == "qwen35-fetched":
        if not (FETCHED / "tokenizer.json").exists():
            pytest.fail("no Qwen3.5 tokenizer in .frost/tokenizer: scripts/setup.sh fetches it")
        return FETCHED
    doc = json.loads((tokenizer_dir / "tokenizer.json").read_text(encoding="utf-8"))
    doc["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = QWEN35_REGEX
    out = tmp_path_factory.mktemp("qwen35regex")
    (out / "tokenizer.json").write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    return out


@pytest.fixture(scope="module")
def ref(variant):
    return Tokenizer.from_file(str(variant / "tokenizer.json"))


def first_mismatch(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def test_encode_matches_reference(frost_bin, variant, ref, tmp_path):
    seed, cases = corpus.build()
    got = run_jsonl(frost_bin, ["tokenize", "--tokenizer", str(variant)], cases, tmp_path, "in.jsonl")
    assert len(got) == len(cases)
    bad = []
    for text, ids in zip(cases, got):
        want = ref.encode(text, add_special_tokens=True).ids
        if ids != want:
            i = first_mismatch(ids, want)
            bad.append(f"{text[:60]!r}: at {i} frost {ids[i:i+4]} ref {want[i:i+4]}")
    assert not bad, f"seed {seed}: {len(bad)} mismatches:\n" + "\n".join(bad[:20])


def test_invalid_utf8_is_encoded_as_replacement(frost_bin, variant, ref, tmp_path):
    # Bytes that are not UTF-8 cannot reach the Rust tokenizer; frost repairs each maximal
    # ill-formed subpart to U+FFFD, exactly Python's decode(errors="replace"). One file holds all
    # samples (one frost start); separators keep them apart.
    samples = [b"\xff", b"a\x80b", b"\xe2\x82", b"\xe2\x82A", b"\xf0\x9f\x98", b"\xed\xa0\x80x",
               b"\xc0\xaf", b"ok\xf4\x90\x80\x80", b"\xe4\xbd\xa0\xe5", b"\xef\xbf\xbd\xef\xbf"]
    rng = random.Random()
    samples += [bytes(rng.randrange(256) for _ in range(rng.randint(1, 30))) for _ in range(200)]
    raw = b" | ".join(samples)
    path = tmp_path / "raw.bin"
    path.write_bytes(raw)
    out = subprocess.run([frost_bin, "tokenize", "--tokenizer", str(variant), "--file", str(path)],
                         capture_output=True, check=True).stdout.decode().strip()
    ids = [int(x) for x in out.split(",")] if out else []
    want = ref.encode(raw.decode("utf-8", "replace")).ids
    assert ids == want, f"first difference at {first_mismatch(ids, want)}"


def test_decode_matches_reference(frost_bin, variant, ref, tmp_path):
    seed, cases = corpus.build(n_random=200)
    id_lists = [ref.encode(t).ids for t in cases]
    rng = random.Random(seed)
    vocab = ref.get_vocab_size(with_added_tokens=True)
    # Random id sequences: arbitrary byte tokens give ill-formed UTF-8 to repair.
    id_lists += [[rng.randrange(vocab) for _ in range(rng.randint(1, 30))] for _ in range(300)]
    id_lists += [[rng.randrange(256) for _ in range(rng.randint(1, 12))] for _ in range(300)]
    for skip in (False, True):
        args = ["detokenize", "--tokenizer", str(variant)] + (["--skip-special"] if skip else [])
        got = run_jsonl(frost_bin, args, id_lists, tmp_path, f"ids{skip}.jsonl")
        bad = [(ids, g, ref.decode(ids, skip_special_tokens=skip)) for ids, g in zip(id_lists, got)
               if g != ref.decode(ids, skip_special_tokens=skip)]
        assert not bad, f"seed {seed} skip={skip}: {len(bad)} mismatches, first {bad[0]!r}"


def test_nfc_marks_follow_the_reference(frost_bin, tokenizer_dir, tmp_path):
    """Every combining mark of Unicode 16 (frost's tables; `unicodedata2` 16.0.0, since the Python
    standard library may be older: Python 3.11's is Unicode 14, which missed the Unicode 15-16
    marks) next to the lowest- and highest-class marks, encoded with the Qwen3 tokenizer (NFC
    normaliser): frost's ids equal the `tokenizers` package's, so its canonical ordering matches the
    reference's. The Rust tables there treat marks added in Unicode 10-16 as starters; the random
    corpus found two such pairs (U+034C U+08D2; U+1E4EF U+094D) only rarely."""
    import unicodedata2 as unicodedata
    assert unicodedata.unidata_version == "16.0.0", unicodedata.unidata_version
    ref_tok = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
    cases = []
    for c in range(0x300, 0x110000):
        ch = chr(c)
        k = unicodedata.combining(ch)
        if not k:
            continue
        if k > 1:
            cases.append("a" + ch + "\u0334")
        if k < 240:
            cases.append("a\u0345" + ch)
    got = run_jsonl(frost_bin, ["tokenize", "--tokenizer", str(tokenizer_dir)], cases, tmp_path, "marks.jsonl")
    assert len(got) == len(cases)
    bad = [f"{[hex(ord(x)) for x in t]}: frost {g} ref {ref_tok.encode(t).ids}"
           for t, g in zip(cases, got) if g != ref_tok.encode(t).ids]
    assert not bad, f"{len(bad)} of {len(cases)} differ:\n" + "\n".join(bad[:20])
