#!/usr/bin/env python3
"""Writes the seed corpus of fuzz/fuzz_tokenizer.cpp into fuzz/corpus/tokenizer/: a tiny valid
byte-level BPE tokenizer.json in several spellings (string / array merges, Qwen2 / Qwen3.5
regex, added tokens with strip flags) and near-miss malformed variants (T08 shapes)."""
import copy
import json
import pathlib

QWEN2 = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
         "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")
QWEN35 = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|"
          "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")


def byte_chars():
    printable = set(range(0x21, 0x7F)) | set(range(0xA1, 0xAD)) | set(range(0xAE, 0x100))
    out, n = [], 0
    for b in range(256):
        if b in printable:
            out.append(chr(b))
        else:
            out.append(chr(0x100 + n))
            n += 1
    return out


def tiny(regex=QWEN2, array_merges=False):
    vocab = {c: i for i, c in enumerate(byte_chars())}
    extra = ["he", "ll", "hell", "hello", "\u0120w", "in", "\u0120t", "\u0120th", "\u0120the"]
    for t in extra:
        vocab[t] = len(vocab)
    merges = ["h e", "l l", "he ll", "hell o", "\u0120 w", "i n", "\u0120 t", "\u0120t h", "\u0120th e"]
    if array_merges:
        merges = [m.split(" ") for m in merges]
    bl = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    added = [{"id": len(vocab), "content": "<|end|>", "special": True, "lstrip": False, "rstrip": False,
              "normalized": False, "single_word": False},
             {"id": len(vocab) + 1, "content": "<x>", "special": False, "lstrip": True, "rstrip": True,
              "normalized": True, "single_word": True}]
    return {"version": "1.0", "added_tokens": added, "normalizer": {"type": "NFC"},
            "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": False}, bl]},
            "post_processor": bl, "decoder": bl,
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "byte_fallback": False,
                      "ignore_merges": False, "vocab": vocab, "merges": merges}}


def main():
    out = pathlib.Path(__file__).resolve().parents[1] / "fuzz" / "corpus" / "tokenizer"
    out.mkdir(parents=True, exist_ok=True)
    seeds = {"valid_string_merges": tiny(), "valid_array_merges": tiny(array_merges=True),
             "valid_qwen35_regex": tiny(QWEN35)}
    bad = tiny()
    bad["model"]["vocab"]["zz"] = 3
    seeds["dup_id"] = bad
    bad = tiny()
    bad["model"]["merges"].append("q zz")
    seeds["merge_unknown"] = bad
    bad = tiny()
    bad["model"]["byte_fallback"] = True
    bad["model"]["vocab"]["<0xZZ>"] = 900
    seeds["byte_fallback"] = bad
    bad = tiny()
    bad["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(a+)+$"
    seeds["backtracking_regex"] = bad
    bad = copy.deepcopy(tiny())
    bad["added_tokens"][0]["id"] = 1 << 40
    seeds["added_out_of_range"] = bad
    for name, doc in seeds.items():
        (out / f"{name}.json").write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    (out / "deep_nesting.json").write_text('{"model": ' + "[" * 200 + "]" * 200 + "}", encoding="utf-8")
    print(f"wrote {len(seeds) + 1} seeds to {out}")


if __name__ == "__main__":
    main()
