"""Hard-case corpus for the tokenizer comparison: fixed cases for every rule of the Qwen
pre-tokenizer regex, NFC, added tokens and UTF-8 repair, plus random strings drawn from pools of
tricky code points (fresh each run; the seed is printed so a failure can be replayed)."""
import random
import sys
import unicodedata

SPECIALS = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<tool_call>", "</tool_call>", "<think>",
            "</think>", "<tool_response>", "<|fim_prefix|>", "<|vision_pad|>", "<x>", " <x> ", "<|end|>"]

FIXED = [
    "", " ", "  ", "\n", "\r\n", "\r\n\r\n", " \n ", "\t\t", "a", "Hello world", "Hello  world  ",
    "it's I'M we'RE you've she'll he'D 'S 'st 'Ll", "don't DON'T Don'T", "'s's's", "ſ'ſ 'ſ",  # long s
    "x'ſ", "1234567890", "３２１", "٠١٢٣", "Ⅻ ½ ²", "3.14159e-10", "$100", "#hashtag @user",
    "  leading", "trailing   ", "mid   spaces", "tabs\tand\tnewlines\n\nend", "a\n\n\nb", "a \n b",
    "\u00a0nbsp\u00a0", "\u3000ideographic\u3000space", "line\u2028sep\u2029par", "\x1c\x1d\x1e\x1f",
    "\x85next line", "\x0b\x0c", "\x00nul\x00", "\x7fdel",
    "e\u0301 é", "cafe\u0301", "A\u030a Å", "\u1100\u1161\u11a8 각", "\u0041\u0328\u0301",
    "q\u0307\u0323", "\u0958\u0959", "ﬁ ﬂ", "Ω Ω", "\u212b",
    "你好，世界！", "日本語のテキスト", "한국어 텍스트", "ไทย ภาษา", "עברית", "العربية", "हिन्दी भाषा",
    "👩‍👩‍👧‍👦 👍🏽 🏳️‍🌈 ❤️ 1️⃣ 🇺🇸", "emoji😀text", "😀😀😀", "\U0001F600 \U0001F9D1\u200D\U0001F4BB",
    "mixed中文english123数字", "x = f(y) + g[z] -> {a: b}", "def f(x):\n    return x**2\n",
    "<html><body>hi</body></html>", "C:\\path\\to\\file.txt", "https://example.com/a?b=c&d=e",
    "....!!!???", " ...", " !", "!!\n\n", "a!\r\nb", "...\n", "--- \n---",
    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
    "text<|im_end|>more", " <|im_end|> ", "<|im_end|><|im_end|>", "<|im_end", "<|im_start|im_end|>",
    "<think>\nreason\n</think>\n\nanswer", "<tool_call>\n{\"name\": \"f\"}\n</tool_call>",
    "a <x> b", "a<x>b", "_<x>_", "é<x>", "the  <x>  the <x>the", "<x><x>", " <|end|> ",
    "\ufffd", "\ufeffBOM", "\u200b\u200c\u200d", "a\u0300\u0300\u0300\u0300", "\u0300start mark",
    " \u0300", "x\u20dd", "\U00010000\U0010fffd", "\ue000 private",
]


def pools():
    marks = [c for c in range(0x300, 0x370)] + [0x0951, 0x093C, 0x05B0, 0x064B, 0x20DD, 0x1AB0, 0xFE0F]
    return [
        [ord(c) for c in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"],
        [ord(c) for c in "0123456789"],
        [ord(c) for c in " \t\n\r'.,;:!?()[]{}<>\"-_=+*/\\|@#$%^&~`"],
        [ord(c) for c in "sStTrReEvVmMlLdD'ſ"],
        list(range(0xA0, 0x250)),
        marks,
        list(range(0x4E00, 0x4E80)) + list(range(0x3040, 0x30A0)),
        list(range(0xAC00, 0xAC40)) + list(range(0x1100, 0x1113)) + list(range(0x1161, 0x1176)) + list(range(0x11A8, 0x11C3)),
        [0x1F600, 0x1F44D, 0x1F3FD, 0x200D, 0xFE0F, 0x2764, 0x1F468, 0x1F469, 0x1F467, 0x1F1FA, 0x1F1F8, 0x20E3],
        [0x20, 0x20, 0xA0, 0x3000, 0x2028, 0x2029, 0x85, 0x1C, 0x0B, 0x2009, 0x202F, 0x205F, 0x1680],
        [0x660, 0x6F1, 0x966, 0xFF10, 0x2160, 0xBD, 0xB2, 0x1D7CE],
        [0x0E01, 0x0E31, 0x0E48, 0x0915, 0x094D, 0x0937, 0x0627, 0x0644, 0x05D0, 0x05B8],
    ]


def random_string(rng, pool_list, max_len):
    out = []
    for _ in range(rng.randint(1, max_len)):
        r = rng.random()
        if r < 0.04:
            out.append(rng.choice(SPECIALS))
        elif r < 0.10:
            cp = rng.randint(0x20, 0x10FFFF)
            if 0xD800 <= cp <= 0xDFFF:
                cp = 0xFFFD
            out.append(chr(cp))
        else:
            out.append(chr(rng.choice(rng.choice(pool_list))))
    return "".join(out)


def build(seed=None, n_random=600, max_len=40):
    if seed is None:
        seed = random.randrange(1 << 30)
    print(f"tokenizer corpus seed {seed}", file=sys.stderr)
    rng = random.Random(seed)
    cases = list(FIXED)
    cases += [unicodedata.normalize(f, s) for s in FIXED[40:70] for f in ("NFD", "NFKD")]
    pl = pools()
    cases += [random_string(rng, pl, max_len) for _ in range(n_random)]
    # Long inputs: a long word, long whitespace runs, a long digit run, long mixed text.
    cases += ["a" * 5000, " " * 3000 + "x", "\n" * 2000, "9" * 1000, "ab " * 2000,
              random_string(rng, pl, 20000), "的" * 3000, "!" * 4000, "\u0301" * 500]
    return seed, cases
