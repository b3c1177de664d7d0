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
from api_common import OpenAIServer
from serve_proc import FROST

openai = pytest.importorskip("openai")
jsonschema = pytest.importorskip("jsonschema")

KEY = "sk-frost-constrained"
pytestmark = pytest.mark.skipif(not FROST or not os.path.exists(FROST), reason="FROST_BIN not set")
MAX_TOKENS = 400


class Server(OpenAIServer):
    def __init__(self, model):
        super().__init__(model, KEY, sessions=4, max_seq_len=2048)


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


# The tokens that close JSON strings and containers, boosted: a random model inside a string
# otherwise picks a closing token about once in a thousand steps (most of the vocabulary is
# allowed there). The bias changes which allowed token is likely, never what is allowed: the
# mask must still be exact for every output to parse.
CLOSERS = None


def closers():
    global CLOSERS
    if CLOSERS is None:
        from tokenizers import Tokenizer
        fixtures = os.environ.get("FROST_FIXTURES_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "fixtures"))
        tok = Tokenizer.from_file(os.path.join(fixtures, "tokenizer-qwen3", "tokenizer.json"))
        ids = [tok.token_to_id(s) for s in ['"', '"}', "}", '",', '":', '"]', "]", '":"', '"},', ".", ")"]]
        CLOSERS = {str(i): 8 for i in ids if i is not None}
    return CLOSERS


def test_json_object_always_parses(server):
    rng = random.Random()
    finished = 0
    for _ in range(6):
        r = chat(server, response_format={"type": "json_object"}, seed=rng.randrange(1 << 40), logit_bias=closers())
        c = r.choices[0]
        if c.finish_reason == "length":
            continue
        assert isinstance(parse_valid(c.message.content), dict), c.message.content
        finished += 1
    assert finished >= 3, "too few outputs finished within max_tokens"


def test_json_schema_outputs_validate_many_seeds(server):
    rng = random.Random()
    finished = 0
    for _ in range(8):
        schema = {"type": "object", "properties": {"answer": random_schema(rng), "n": {"type": "integer"},
                                                   "ok": {"type": "boolean"}},
                  "required": ["answer", "n", "ok"], "additionalProperties": False,
                  "$defs": {"unused": {"type": "string"}}}
        r = chat(server, seed=rng.randrange(1 << 40), logit_bias=closers() if rng.random() < 0.5 else None,
                 response_format={"type": "json_schema", "json_schema": {"name": "t", "schema": schema, "strict": True}})
        c = r.choices[0]
        assert c.finish_reason in ("stop", "length")
        if c.finish_reason == "stop":
            parse_valid(c.message.content, schema)
            finished += 1
    assert finished >= 4, "too few constrained outputs finished within max_tokens"


def test_recursive_ref_schema_streamed_and_n3(server):
    rng = random.Random()
    schema = {"$defs": {"node": {"type": "object", "additionalProperties": False, "required": ["v", "kids"],
                                 "properties": {"v": {"type": "integer"},
                                                "kids": {"type": "array", "items": {"$ref": "#/$defs/node"},
                                                         "maxItems": 2}}}},
              "$ref": "#/$defs/node"}
    stream = chat(server, n=3, stream=True, seed=rng.randrange(1 << 40), logit_bias=closers(),
                  response_format={"type": "json_schema", "json_schema": {"name": "tree", "schema": schema}})
    texts, finish = {}, {}
    for ev in stream:
        for ch in ev.choices:
            texts[ch.index] = texts.get(ch.index, "") + (ch.delta.content or "")
            if ch.finish_reason:
                finish[ch.index] = ch.finish_reason
    assert sorted(finish) == [0, 1, 2]
    done = [i for i in finish if finish[i] == "stop"]
    assert done, finish
    for i in done:
        parse_valid(texts[i], schema)


def test_regex_on_completions(server):
    rng = random.Random()
    words = ["".join(rng.choice("abcdefgh") for _ in range(rng.randint(1, 4))) for _ in range(3)]
    pattern = "(%s), [0-9]{1,%d}( [a-h]{1,3}){0,2}\\." % ("|".join(words), rng.randint(1, 4))
    for _ in range(3):
        r = server.client.completions.create(model="frost", prompt="The answer:", max_tokens=40, temperature=1.0,
                                             seed=rng.randrange(1 << 40), extra_body={"regex": pattern})
        c = r.choices[0]
        assert c.finish_reason == "stop", (c.finish_reason, c.text)
        assert re.fullmatch(pattern, c.text), (pattern, c.text)


def test_gbnf_grammar_on_chat_and_completions(server):
    rng = random.Random()
    grammar = r"""
root ::= "(" item ( "," ws item ){0,3} ")"
item ::= word | num
word ::= [a-c] [a-c]? [a-c]?
num  ::= "-"? [0-9] [0-9]?
ws   ::= " "?
"""
    ref = re.compile(r"\((?:[a-c]{1,3}|-?[0-9]{1,2})(?:, ?(?:[a-c]{1,3}|-?[0-9]{1,2})){0,3}\)")
    r = chat(server, max_tokens=40, seed=rng.randrange(1 << 40), extra_body={"grammar": grammar})
    assert r.choices[0].finish_reason == "stop"
    assert ref.fullmatch(r.choices[0].message.content), r.choices[0].message.content
    r = server.client.completions.create(model="frost", prompt="List:", max_tokens=40, temperature=1.0, n=2,
                                         seed=rng.randrange(1 << 40), extra_body={"grammar": grammar})
    for c in r.choices:
        assert c.finish_reason == "stop"
        assert ref.fullmatch(c.text), c.text


TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
                                      "parameters": {"type": "object", "additionalProperties": False,
                                                     "required": ["city", "days", "unit"],
                                                     "properties": {"city": {"type": "string", "maxLength": 8},
                                                                    "days": {"type": "integer"},
                                                                    "unit": {"enum": ["celsius", "fahrenheit"]}}}}},
    {"type": "function", "function": {"name": "run_shell", "description": "Run a command",
                                      "parameters": {"type": "object", "required": ["cmd"],
                                                     "properties": {"cmd": {"type": "string", "maxLength": 12},
                                                                    "timeout": {"type": ["number", "null"]}}}}},
]


def check_calls(msg, allowed, tools=None):
    assert msg.tool_calls, msg
    by_name = {t["function"]["name"]: t["function"]["parameters"] for t in (tools or TOOLS)}
    for call in msg.tool_calls:
        assert call.function.name in allowed, call
        jsonschema.validate(json.loads(call.function.arguments), by_name[call.function.name])


def test_tool_choice_named_and_required_validate(server):
    rng = random.Random()
    msgs = [{"role": "user", "content": "What's the weather in Paris for 3 days?"}]
    ids = set()
    for _ in range(3):
        r = chat(server, messages=msgs, tools=TOOLS, seed=rng.randrange(1 << 40), max_tokens=200,
                 tool_choice={"type": "function", "function": {"name": "get_weather"}}, logit_bias=closers())
        assert r.choices[0].finish_reason == "tool_calls", r.choices[0]
        check_calls(r.choices[0].message, {"get_weather"})
        assert len(r.choices[0].message.tool_calls) == 1
        ids.update(c.id for c in r.choices[0].message.tool_calls)
        r = chat(server, messages=msgs, tools=TOOLS, seed=rng.randrange(1 << 40), max_tokens=200,
                 tool_choice="required", parallel_tool_calls=False, logit_bias=closers())
        assert r.choices[0].finish_reason == "tool_calls", r.choices[0]
        check_calls(r.choices[0].message, {"get_weather", "run_shell"})
        assert len(r.choices[0].message.tool_calls) == 1


def expect_400(fn, param, needle):
    with pytest.raises(openai.BadRequestError) as e:
        fn()
    body = e.value.body if isinstance(e.value.body, dict) else {}
    err = body.get("error", body)
    assert err.get("param") == param, err
    assert needle in err.get("message", ""), err


def test_bad_constraints_are_400_naming_the_field(server):
    rf = lambda schema: {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}
    expect_400(lambda: chat(server, response_format=rf({"type": "string", "pattern": "^a+$"})),
               "response_format.json_schema.schema", "unsupported keyword 'pattern'")
    expect_400(lambda: chat(server, response_format=rf({"type": "object", "properties": {"a": {"$ref": "#/$defs/b"}}})),
               "response_format.json_schema.schema", "does not resolve")
    expect_400(lambda: chat(server, response_format={"type": "json_schema"}), "response_format.json_schema", "name")
    expect_400(lambda: chat(server, response_format={"type": "xml"}), "response_format.type", "json_schema")
    expect_400(lambda: chat(server, extra_body={"grammar": "root ::= item"}), "grammar", "'item' is used but not defined")
    expect_400(lambda: chat(server, extra_body={"grammar": "root ::= root \"a\" | \"b\""}), "grammar", "left recursion")
    expect_400(lambda: server.client.completions.create(model="frost", prompt="x", extra_body={"regex": "(ab"}),
               "regex", "expected ')'")
    expect_400(lambda: chat(server, extra_body={"regex": "a", "grammar": "root ::= \"a\""}), "regex", "only one of")
    bad_tools = [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"x": {"type": "integer", "minimum": 0}}}}}]
    expect_400(lambda: chat(server, tools=bad_tools, tool_choice="required"), "tools[0].function.parameters",
               "unsupported keyword 'minimum'")
    # The same tools with tool_choice auto are fine: nothing is constrained, nothing compiled.
    assert chat(server, tools=bad_tools, max_tokens=2).choices[0].finish_reason in ("length", "stop", "tool_calls")


def test_constrained_turn_restored_from_a_capsule(server):
    """A constrained agent turn whose history is restored from the capsule the previous turn froze."""
    rng = random.Random()
    system = ("You are a careful coding agent working in a large repository. " * 12).strip()
    schema = {"type": "object", "additionalProperties": False, "required": ["file", "line"],
              "properties": {"file": {"type": "string", "maxLength": 10}, "line": {"type": "integer"}}}
    rf = {"type": "json_schema", "json_schema": {"name": "loc", "schema": schema, "strict": True}}
    turn1 = [{"role": "system", "content": system}, {"role": "user", "content": f"Where is bug {rng.randrange(10**6)}?"}]
    r1 = chat(server, messages=turn1, response_format=rf, seed=rng.randrange(1 << 40), logit_bias=closers())
    if r1.choices[0].finish_reason == "stop":
        parse_valid(r1.choices[0].message.content, schema)
    turn2 = turn1 + [{"role": "assistant", "content": r1.choices[0].message.content},
                     {"role": "user", "content": "And the next one?"}]
    r2 = chat(server, messages=turn2, response_format=rf, seed=rng.randrange(1 << 40), logit_bias=closers())
    assert (r2.model_extra or {}).get("frost", {}).get("plan") == "restore", r2.model_extra
    assert r2.choices[0].finish_reason == "stop", r2.choices[0]
    parse_valid(r2.choices[0].message.content, schema)


def xml_model_dir(model_dir, tmp):
    """The same checkpoint without its chat template: the server falls back to the built-in Qwen3.5
    template, whose tool calls are the XML form (<function=...><parameter=...>)."""
    out = os.path.join(tmp, "xml_model")
    os.makedirs(out)
    for f in os.listdir(model_dir):
        if f.startswith("."):
            continue
        if f == "tokenizer_config.json":
            with open(os.path.join(model_dir, f)) as src:
                cfg = json.load(src)
            cfg.pop("chat_template", None)
            with open(os.path.join(out, f), "w") as dst:
                json.dump(cfg, dst)
        else:
            os.symlink(os.path.join(model_dir, f), os.path.join(out, f))
    return out


# The XML form's parser (text::parse_tool_calls) types a value by its property's single "type";
# anything else (type arrays, anyOf) comes back as a string, so these tools use single types.
XML_TOOLS = json.loads(json.dumps(TOOLS).replace('["number", "null"]', '"number"'))


def test_tool_choice_xml_form_validates(model_dir, tmp_path):
    s = Server(xml_model_dir(model_dir, str(tmp_path)))
    try:
        assert "built-in Qwen3.5 template" in "".join(s.lines)
        rng = random.Random()
        msgs = [{"role": "user", "content": "What's the weather in Paris for 3 days?"}]
        bias = dict(closers())
        for _ in range(2):
            r = chat(s, messages=msgs, tools=XML_TOOLS, seed=rng.randrange(1 << 40), max_tokens=200, logit_bias=bias,
                     tool_choice={"type": "function", "function": {"name": "get_weather"}})
            assert r.choices[0].finish_reason == "tool_calls", r.choices[0]
            check_calls(r.choices[0].message, {"get_weather"}, XML_TOOLS)
            r = chat(s, messages=msgs, tools=XML_TOOLS, seed=rng.randrange(1 << 40), max_tokens=200, logit_bias=bias,
                     tool_choice="required", parallel_tool_calls=False)
            assert r.choices[0].finish_reason == "tool_calls", r.choices[0]
            check_calls(r.choices[0].message, {"get_weather", "run_shell"}, XML_TOOLS)
            assert len(r.choices[0].message.tool_calls) == 1
    finally:
        s.stop()
