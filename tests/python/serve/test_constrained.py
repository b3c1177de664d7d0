"""Constrained decoding (issue 17 deliverable 1) end to end: `frost serve` over the REAL CPU
engine (a tiny synthetic checkpoint with random weights and the real Qwen3 vocabulary) through the
official `openai` client. A random model samples almost anything, so these hold only if the mask
is exact: every constrained output must parse (Python's json) and validate against its schema
(the `jsonschema` package), streamed or not, n > 1, chat and completions; forced tool calls'
arguments validate against the tool's parameters; bad schemas / grammars / regexes are a 400
naming the field. Schemas and seeds are drawn fresh each run."""
import json
import os
import random
import re

import pytest
from serve_proc import FROST, ServeProcess

openai = pytest.importorskip("openai")
jsonschema = pytest.importorskip("jsonschema")

KEY = "sk-frost-constrained"
pytestmark = pytest.mark.skipif(not FROST or not os.path.exists(FROST), reason="FROST_BIN not set")
MAX_TOKENS = 400


class Server(ServeProcess):
    def __init__(self, model):
        super().__init__(model, (), key=KEY, sessions=4, max_seq_len=2048)
        self.client = openai.OpenAI(base_url=self.base + "/v1", api_key=KEY, max_retries=0, timeout=300)


@pytest.fixture(scope="module")
def server(model_dir):
    s = Server(model_dir)
    yield s
    s.stop()


def random_schema(rng, depth=0):
    """A random schema in OpenAI's strict subset (strings bounded so random text can end)."""
    kinds = ["string", "integer", "number", "boolean", "enum", "nullable", "array", "const"]
    if depth < 2:
        kinds += ["object", "object", "anyOf"]
    k = rng.choice(kinds)
    if k == "string":
        return {"type": "string", "maxLength": rng.randint(0, 6)}
    if k in ("integer", "number", "boolean"):
        return {"type": k}
    if k == "enum":
        return {"enum": rng.sample(["red", "green", "blue", 1, 2.5, None, True, "é ü"], rng.randint(1, 4))}
    if k == "const":
        return {"const": rng.choice(["fixed", 7, False])}
    if k == "nullable":
        return {"type": [rng.choice(["integer", "boolean", "number"]), "null"]}
    if k == "array":
        lo = rng.randint(0, 2)
        return {"type": "array", "items": random_schema(rng, depth + 1), "minItems": lo, "maxItems": lo + rng.randint(0, 2)}
    if k == "anyOf":
        return {"anyOf": [random_schema(rng, depth + 1) for _ in range(rng.randint(2, 3))]}
    props = {f"p{i}_{rng.randrange(100)}": random_schema(rng, depth + 1) for i in range(rng.randint(1, 4))}
    names = list(props)
    return {"type": "object", "properties": props, "additionalProperties": False,
            "required": [n for n in names if rng.random() < 0.7]}


def chat(server, **kw):
    kw.setdefault("max_tokens", MAX_TOKENS)
    kw.setdefault("temperature", 1.0)
    kw.setdefault("messages", [{"role": "user", "content": "Answer in JSON."}])
    return server.client.chat.completions.create(model="frost", **kw)


def parse_valid(text, schema=None):
    value = json.loads(text)
    if schema is not None:
        jsonschema.validate(value, schema)
    return value


def test_json_object_always_parses(server):
    rng = random.Random()
    for _ in range(6):
        r = chat(server, response_format={"type": "json_object"}, seed=rng.randrange(1 << 40))
        c = r.choices[0]
        if c.finish_reason == "length":
            continue  # a random model may still be inside a string at max_tokens
        assert isinstance(parse_valid(c.message.content), dict), c.message.content


def test_json_schema_outputs_validate_many_seeds(server):
    rng = random.Random()
    finished = 0
    for _ in range(10):
        schema = {"type": "object", "properties": {"answer": random_schema(rng), "n": {"type": "integer"},
                                                   "ok": {"type": "boolean"}},
                  "required": ["answer", "n", "ok"], "additionalProperties": False,
                  "$defs": {"unused": {"type": "string"}}}
        r = chat(server, seed=rng.randrange(1 << 40),
                 response_format={"type": "json_schema", "json_schema": {"name": "t", "schema": schema, "strict": True}})
        c = r.choices[0]
        assert c.finish_reason in ("stop", "length")
        if c.finish_reason == "stop":
            parse_valid(c.message.content, schema)
            finished += 1
    assert finished >= 5, "too few constrained outputs finished within max_tokens"
