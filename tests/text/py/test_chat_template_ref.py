"""frost's C++ chat templates must render byte-identically to transformers' apply_chat_template.
Qwen3: the fixture tokenizer's own chat_template. Qwen3.5 / 3.6: the checkpoint's
chat_template.jinja named by FROST_QWEN35_TEMPLATE / FROST_QWEN36_TEMPLATE (not committed here;
skipped when absent — tests/text/test_chat_template.cpp holds goldens rendered from them)."""
import json
import os
import random
import subprocess
import sys

import pytest

STRINGS = ["Hello", "  padded  ", "\nnewlines\n\n", "你好，世界", "emoji 👩‍💻", "tabs\tand \"quotes\" \\ back",
           "<tool_response>\nfake\n</tool_response>", "x</think>y", "", " ", "line1\nline2", "\u00a0nbsp\u2028",
           "ctrl \x01\x1f end", "math: 1 < 2 > 0 & ok"]
VALUES = [1, -7, 0, 2**40, 1.5, 0.1, 1e-7, 2.0, 1e22, True, False, None, "text", "数字", "",
          [1, "a", None], {"nested": {"k": [1, 2]}, "z": 1, "a": 2}, [], {}]


def rand_text(rng):
    return "".join(rng.choice(STRINGS) for _ in range(rng.randint(1, 3)))


def rand_args(rng):
    return {f"p{i}_{rng.choice(['x', '名', 'Q'])}": rng.choice(VALUES) for i in range(rng.randint(0, 4))}


def rand_tool(rng, i):
    props = {f"p{k}": {"type": rng.choice(["string", "integer", "number", "boolean", "object", "array"]),
                       "description": rand_text(rng)} for k in range(rng.randint(0, 3))}
    return {"type": "function", "function": {"name": f"tool_{i}", "description": rand_text(rng),
                                             "parameters": {"type": "object", "properties": props,
                                                            "required": list(props)[:1]}}}


def rand_tool_call(rng, kind):
    fn = {"name": f"tool_{rng.randint(0, 3)}",
          "arguments": rand_args(rng) if kind != "qwen3" or rng.random() < 0.7 else json.dumps(rand_args(rng))}
    return {"id": "call_x", "type": "function", "function": fn} if rng.random() < 0.8 else fn


def rand_assistant(rng, kind):
    m = {"role": "assistant"}
    r = rng.random()
    if r < 0.3:
        m["content"] = rand_text(rng)
    elif r < 0.6:
        m["content"] = rng.choice(["", "\n", "<think>"]) + rand_text(rng) + "</think>" + rand_text(rng)
    else:
        m["content"] = rand_text(rng)
        m["reasoning_content"] = rand_text(rng)
    if rng.random() < 0.4:
        m["tool_calls"] = [rand_tool_call(rng, kind) for _ in range(rng.randint(1, 3))]
        if kind != "qwen3" and rng.random() < 0.3:
            m["content"] = None
    return m


def rand_conversation(rng, kind):
    msgs = []
    if rng.random() < 0.6:
        msgs.append({"role": "system", "content": rand_text(rng)})
    for _ in range(rng.randint(1, 4)):
        msgs.append({"role": "user", "content": rand_text(rng)})
        for _ in range(rng.randint(0, 2)):
            msgs.append(rand_assistant(rng, kind))
            if rng.random() < 0.5:
                for _ in range(rng.randint(1, 3)):
                    msgs.append({"role": "tool", "content": rand_text(rng)})
    if kind != "qwen3" and rng.random() < 0.15:  # multimodal parts
        msgs[-1 if msgs[-1]["role"] == "user" else 0]["content"] = [
            {"type": "text", "text": rand_text(rng)}, {"type": "image", "image": "x.png"},
            {"type": "video", "video": "v.mp4"}, {"type": "text", "text": "after"}]
    req = {"kind": kind, "messages": msgs, "add_generation_prompt": rng.random() < 0.6}
    if rng.random() < 0.5:
        req["tools"] = [rand_tool(rng, i) for i in range(rng.randint(1, 3))]
    t = rng.random()
    if t < 0.33:
        req["enable_thinking"] = False
    elif t < 0.66:
        req["enable_thinking"] = True
    if kind == "qwen36" and rng.random() < 0.5:
        req["preserve_thinking"] = True
    return req


ERROR_CASES = [
    [{"role": "user", "content": "a"}, {"role": "system", "content": "late"}],
    [{"role": "user", "content": "a"}, {"role": "narrator", "content": "?"}],
    [{"role": "assistant", "content": "no user"}],
    [{"role": "user", "content": "<tool_response>x</tool_response>"}],
]


@pytest.fixture(scope="module")
def hf_tokenizer(tokenizer_dir):
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(str(tokenizer_dir))


def reference(tok, req, template):
    kwargs = {k: req[k] for k in ("enable_thinking", "preserve_thinking") if k in req}
    try:
        return True, tok.apply_chat_template(req["messages"], tools=req.get("tools"), tokenize=False,
                                             add_generation_prompt=req["add_generation_prompt"],
                                             chat_template=template, **kwargs)
    except Exception as e:  # the template raised: frost must refuse too
        return False, str(e)


def run_frost(reqs, tmp_path):
    exe = os.environ.get("FROST_CHAT_RENDER")
    if not exe or not os.path.exists(exe):
        pytest.fail("FROST_CHAT_RENDER must name the text_chat_render helper (ctest sets it)")
    path = tmp_path / "chat.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in reqs), encoding="utf-8")
    out = subprocess.run([exe, str(path)], capture_output=True, check=True).stdout.decode("utf-8")
    return [json.loads(l) for l in out.split("\n") if l]


def check_kind(kind, template, tok, tmp_path, n=300):
    seed = random.randrange(1 << 30)
    print(f"chat corpus seed {seed}", file=sys.stderr)
    rng = random.Random(seed)
    reqs = [rand_conversation(rng, kind) for _ in range(n)]
    reqs += [{"kind": kind, "messages": m, "add_generation_prompt": True} for m in ERROR_CASES]
    got = run_frost(reqs, tmp_path)
    assert len(got) == len(reqs)
    bad, rendered = [], 0
    for req, g in zip(reqs, got):
        ok, want = reference(tok, req, template)
        if ok:
            rendered += 1
            if not g["ok"] or g["text"] != want:
                bad.append((req, g, want))
        elif g["ok"] and kind != "qwen3":  # Qwen3's template raises nowhere we refuse
            bad.append((req, g, want))
    assert rendered > n // 2
    assert not bad, f"seed {seed}: {len(bad)} mismatches; first:\n{json.dumps(bad[0], ensure_ascii=False, indent=1)}"


def test_qwen3_matches_transformers(hf_tokenizer, tmp_path):
    check_kind("qwen3", None, hf_tokenizer, tmp_path)


@pytest.mark.parametrize("kind,env", [("qwen35", "FROST_QWEN35_TEMPLATE"), ("qwen36", "FROST_QWEN36_TEMPLATE")])
def test_qwen35_matches_transformers(kind, env, hf_tokenizer, tmp_path):
    path = os.environ.get(env)
    if not path or not os.path.exists(path):
        pytest.skip(f"{env} does not name a chat_template.jinja")
    with open(path, encoding="utf-8") as f:
        check_kind(kind, f.read(), hf_tokenizer, tmp_path)
