"""A scripted checkpoint for the API tests: the tiny synthetic model with every mixer's and MLP's
output projection zeroed (each layer adds nothing, so the last hidden state is the last token's
embedding, RMS-normalised) and the final norm the identity (zero weight: Qwen3.5's 1 + w). The
embeddings (tied with the LM head) make the greedy next token depend only on the last one:

- chain[k] -> chain[k+1]: chain[k] lies at angle k * 30 degrees in the plane of axes 0 and 2 with
  length 0.25 * 1.4^k, so after chain[k] the logits are 16 * |e_j| * cos((j - k) * 30 deg):
  1.212 * r_k for the next, r_k for itself, 0.98 * r_k two ahead, <= 0 three to nine ahead
  (hence at most 10 links);
- every other token lies along axis 1 (2^-10): after one of them every other token ties and the
  lowest id wins (id 0, "!"), and no chain token is ever chosen.

So a prompt ending with chain[0] is answered with exactly chain[1:] (the last being an end token)."""
import json
import os

import numpy as np


def bf16(values):
    """float32 values as bf16 bit patterns (truncated), as uint16."""
    f = np.asarray(values, dtype=np.float32)
    return (f.view(np.uint32) >> 16).astype(np.uint16)


def edit_checkpoint(base, out, edit_embeddings, copy=(".json", ".jinja")):
    """Writes to `out` the checkpoint of `base` with every mixer's and MLP's output projection
    zeroed and the final norm the identity (the last hidden state is the last token's embedding,
    RMS-normalised), the embedding table (tied with the LM head) rewritten in place by
    edit_embeddings(view) (uint16 bf16 bits, [vocab, hidden]), and base's files ending in `copy`
    (config, tokenizer, template) copied as they are."""
    os.makedirs(out, exist_ok=True)
    for name in os.listdir(base):
        if name.endswith(tuple(copy)):
            with open(os.path.join(base, name), "rb") as src, open(os.path.join(out, name), "wb") as dst:
                dst.write(src.read())
    with open(os.path.join(base, "model.safetensors"), "rb") as f:
        blob = bytearray(f.read())
    n = int.from_bytes(blob[:8], "little")
    header = json.loads(blob[8:8 + n])
    data = 8 + n
    for name, t in header.items():
        if name == "__metadata__":
            continue
        assert t["dtype"] == "BF16", name
        a, b = t["data_offsets"]
        view = np.frombuffer(memoryview(blob)[data + a:data + b], dtype=np.uint16).reshape(t["shape"])
        if name.endswith(("out_proj.weight", "o_proj.weight", "down_proj.weight", "language_model.norm.weight")):
            view[...] = 0
        elif name.endswith("embed_tokens.weight"):
            edit_embeddings(view)
    with open(os.path.join(out, "model.safetensors"), "wb") as f:
        f.write(blob)


def chain_model(base, out, chain):
    assert 2 <= len(chain) <= 10 and len(set(chain)) == len(chain), chain

    def embed(view):
        view[...] = 0
        view[:, 1] = bf16(2.0 ** -10)
        for k, tok in enumerate(chain):
            r, ang = 0.25 * 1.4 ** k, np.deg2rad(30.0 * k)
            view[tok, :] = 0
            view[tok, 0] = bf16(r * np.cos(ang))
            view[tok, 2] = bf16(r * np.sin(ang))
    edit_checkpoint(base, out, embed)


def weather_call_chain(tokenizer):
    """The ids that continue the forced Qwen3 prefix `... "arguments": ` (which ends in a space
    token) with `{"city": "Paris"}}\\n</tool_call>` and then <|im_end|>."""
    pre = '<tool_call>\n{"name": "get_weather", "arguments": '
    full = pre + '{"city": "Paris"}}\n</tool_call><|im_end|>'
    a = tokenizer.encode(pre, add_special_tokens=False).ids
    b = tokenizer.encode(full, add_special_tokens=False).ids
    assert b[:len(a) - 1] == a[:-1], (a, b)
    return [a[-1]] + b[len(a) - 1:]


def thinking_chain(tokenizer):
    """After the generation prompt's last token ("\\n"): `<think>Let me think</think>\\n\\nHi there`
    and <|im_end|> (the Qwen3 template leaves the think block to the model)."""
    enc = lambda s: tokenizer.encode(s, add_special_tokens=False).ids
    ids = enc("\n") + enc("<think>") + enc("Let me think") + enc("</think>") + enc("\n\nHi there") + enc("<|im_end|>")
    assert enc("<|im_start|>assistant\n")[-1] == ids[0], "the generation prompt must end with the chain's first token"
    return ids
