"""The frost tokenizer must agree id-for-id with the `tokenizers` package (the Rust
implementation transformers uses) on the hard-case corpus, and its decode must agree too."""
import random

import pytest
from tokenizers import Tokenizer

import corpus
from conftest import run_jsonl


@pytest.fixture(scope="module")
def ref(tokenizer_dir):
    return Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))


def first_mismatch(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def test_encode_matches_reference(frost_bin, tokenizer_dir, ref, tmp_path):
    seed, cases = corpus.build()
    got = run_jsonl(frost_bin, ["tokenize", "--tokenizer", str(tokenizer_dir)], cases, tmp_path, "in.jsonl")
    assert len(got) == len(cases)
    bad = []
    for text, ids in zip(cases, got):
        want = ref.encode(text, add_special_tokens=True).ids
        if ids != want:
            i = first_mismatch(ids, want)
            bad.append(f"{text[:60]!r}: at {i} frost {ids[i:i+4]} ref {want[i:i+4]}")
    assert not bad, f"seed {seed}: {len(bad)} mismatches:\n" + "\n".join(bad[:20])


def test_invalid_utf8_is_encoded_as_replacement(frost_bin, tokenizer_dir, ref, tmp_path):
    # Bytes that are not UTF-8 cannot reach the Rust tokenizer; frost repairs each maximal
    # ill-formed subpart to U+FFFD, exactly Python's decode(errors="replace").
    samples = [b"\xff", b"a\x80b", b"\xe2\x82", b"\xe2\x82A", b"\xf0\x9f\x98", b"\xed\xa0\x80x",
               b"\xc0\xaf", b"ok\xf4\x90\x80\x80", b"\xe4\xbd\xa0\xe5"]
    rng = random.Random()
    samples += [bytes(rng.randrange(256) for _ in range(rng.randint(1, 30))) for _ in range(50)]
    for raw in samples:
        path = tmp_path / "raw.bin"
        path.write_bytes(raw)
        import subprocess
        out = subprocess.run([frost_bin, "tokenize", "--tokenizer", str(tokenizer_dir), "--file", str(path)],
                             capture_output=True, check=True).stdout.decode().strip()
        ids = [int(x) for x in out.split(",")] if out else []
        assert ids == ref.encode(raw.decode("utf-8", "replace")).ids, raw


def test_decode_matches_reference(frost_bin, tokenizer_dir, ref, tmp_path):
    seed, cases = corpus.build(n_random=200)
    id_lists = [ref.encode(t).ids for t in cases]
    rng = random.Random(seed)
    vocab = ref.get_vocab_size(with_added_tokens=True)
    # Random id sequences: arbitrary byte tokens give ill-formed UTF-8 to repair.
    id_lists += [[rng.randrange(vocab) for _ in range(rng.randint(1, 30))] for _ in range(300)]
    id_lists += [[rng.randrange(256) for _ in range(rng.randint(1, 12))] for _ in range(300)]
    for skip in (False, True):
        args = ["detokenize", "--tokenizer", str(tokenizer_dir)] + (["--skip-special"] if skip else [])
        got = run_jsonl(frost_bin, args, id_lists, tmp_path, f"ids{skip}.jsonl")
        bad = [(ids, g, ref.decode(ids, skip_special_tokens=skip)) for ids, g in zip(id_lists, got)
               if g != ref.decode(ids, skip_special_tokens=skip)]
        assert not bad, f"seed {seed} skip={skip}: {len(bad)} mismatches, first {bad[0]!r}"
