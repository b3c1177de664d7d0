"""The constrained-decoding engine's languages against independent readers: Python's `json`
(any JSON object), the `jsonschema` package (random strict-subset schemas, random valid and
broken instances) and Python's `re` (random regexes). The verdicts come from the
text_grammar_check helper (tests/text/tools/grammar_check.cpp); everything is drawn fresh per run."""
import json
import math
import os
import random
import re
import subprocess

import pytest

import jsonschema  # scripts/requirements-test.txt: a missing package fails the suite, never skips it

CHECK = os.environ.get("FROST_GRAMMAR_CHECK", "")


def _integer_literal(_checker, x):
    return isinstance(x, int) and not isinstance(x, bool)


# The grammar's "integer" is an integer literal: digits, no fraction, no exponent
# (src/text/grammar/json_schema.cpp, json-integer), the reading constrained decoders give it.
# JSON Schema itself also counts integer-valued numbers such as 1.0 or 3.125e+20 as integers, and
# jsonschema's default checker follows it; the reference uses the grammar's reading, so a float
# never passes as "integer" (a mutation that puts 3.125e+20 where an integer goes once failed CI).
SchemaValidator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine("integer", _integer_literal))


def schema_validate(value, schema):
    SchemaValidator(schema).validate(value)


def verdicts(kind, source, strings):
    if not CHECK or not os.path.exists(CHECK):
        pytest.fail("FROST_GRAMMAR_CHECK must name the text_grammar_check binary (ctest sets it)")
    lines = [json.dumps({"kind": kind, "source": source})] + [json.dumps(s) for s in strings]
    out = subprocess.run([CHECK], input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    got = out.stdout.split()
    assert len(got) == len(strings)
    return [g == "1" for g in got]


# ---- any JSON object vs json.loads -------------------------------------------------------------

def rand_json_text(rng, depth=0):
    atoms = ["0", "-0", "12", "-3.25", "1e5", "2E-3", "1.5e+10", "true", "false", "null", '""', '"a b"',
             '"\\n\\t\\"\\\\"', '"\\u00e9\\ud83d\\ude00"', '"é中"', "01", "1.", ".5", "+1", "tru", "nul", "'a'",
             '"\\x41"', "NaN", "Infinity", '"a\tb"', '"\\ud800"', '"\\udc00"', '"\\uD83D\\uDE00"', '"\\ud800\\ud800"',
             '"\\udbff\\u0041"', "1e99", "-1.5E-99", "1e100", "12345678901234567", "0.1234567890123456"]
    r = rng.random()
    ws = lambda: rng.choice(["", "", "", " ", "\n", "  ", "\t", "\r\n"])
    if depth > 3 or r < 0.4:
        return rng.choice(atoms)
    n = rng.randint(0, 3)
    if r < 0.75:
        items = []
        for _ in range(n):
            key = rng.choice(['"k"', '"é"', '""', "k", '"a\\"b"'])
            items.append(ws() + key + ws() + rng.choice([":", ":", ":", ""]) + ws() + rand_json_text(rng, depth + 1))
        return "{" + rng.choice([",", ",", ",", ""]).join(items) + ws() + rng.choice(["}", "}", "}", ",}", ""])
    items = [ws() + rand_json_text(rng, depth + 1) for _ in range(n)]
    return "[" + rng.choice([",", ",", ""]).join(items) + ws() + rng.choice(["]", "]", ",]"])


# The grammar's number bound (src/text/grammar/json_schema.cpp): at most 16 integer, 15 fraction
# and 2 exponent digits, so a generation cannot pad a number forever. Python reads longer ones.
BOUNDED_NUMBER = re.compile(r"-?(0|[1-9][0-9]{0,15})(\.[0-9]{1,15})?([eE][-+]?[0-9]{1,2})?")


def bounded_number(text, convert):
    if not BOUNDED_NUMBER.fullmatch(text):
        raise ValueError("number beyond the grammar's digit bound: " + text)
    return convert(text)


def strict_load(raw):
    """Python's strictest reading: UTF-8 scalar values only (no encoded surrogates, overlongs),
    json with strict=True (no raw control characters), no NaN/Infinity, every string encodable
    as UTF-8 again (no lone surrogate escape), every number a finite float within the grammar's
    digit bound."""
    text = raw.decode("utf-8")  # errors='strict'

    def walk(x):
        if isinstance(x, str):
            x.encode("utf-8")
        elif isinstance(x, (int, float)) and not isinstance(x, bool):
            assert math.isfinite(float(x)), x
        elif isinstance(x, list):
            for y in x:
                walk(y)

    def pairs(kv):  # every member, duplicates too: a dict keeps only a repeated key's last value
        for k, y in kv:
            walk(k)
            walk(y)
        return dict(kv)

    v = json.loads(text, strict=True, object_pairs_hook=pairs,
                   parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)),
                   parse_int=lambda t: bounded_number(t, int), parse_float=lambda t: bounded_number(t, float))
    walk(v)
    return v


def json_reference(s):
    """Valid JSON object text without outer whitespace (the grammar starts at the first byte),
    read strictly: Python's json lets a lone surrogate escape through, strict_load does not."""
    if s != s.strip(" \t\n\r") or not s.startswith("{"):
        return False
    try:
        v = strict_load(s.encode("utf-8"))
    except (ValueError, RecursionError, AssertionError):
        return False
    return isinstance(v, dict)


def test_json_object_agrees_with_python_json():
    rng = random.Random()
    cands = []
    for _ in range(3000):
        s = rand_json_text(rng)
        if rng.random() < 0.6:
            s = '{"x":' + s + "}"
        if rng.random() < 0.2 and s:  # one random byte-level edit
            i = rng.randrange(len(s))
            s = s[:i] + rng.choice(['"', ",", "}", "{", " ", "1", ":", "", "\\"]) + s[i + 1:]
        cands.append(s)
    ref = [json_reference(s) for s in cands]
    got = verdicts("json_object", "", cands)
    bad = [(s, r) for s, r, g in zip(cands, ref, got) if r != g]
    assert not bad, bad[:5]
    assert sum(ref) > 300


# ---- random schemas vs jsonschema ------------------------------------------------------------

def rand_schema(rng, depth=0):
    kinds = ["string", "string_len", "integer", "number", "boolean", "null", "enum", "const", "nullable", "array"]
    if depth < 3:
        kinds += ["object", "object", "anyOf", "ref"]
    k = rng.choice(kinds)
    if k == "string":
        return {"type": "string"}
    if k == "string_len":
        lo = rng.randint(0, 2)
        return {"type": "string", "minLength": lo, "maxLength": lo + rng.randint(0, 3)}
    if k in ("integer", "number", "boolean", "null"):
        return {"type": k, "description": "d"}
    if k == "enum":
        return {"enum": rng.sample(["a", "b c", 2.5, None, "x\"y", "s/t"], rng.randint(1, 3))}
    if k == "const":
        return {"const": rng.choice(["k", 3, None, False, [1, "a"], {"z": 1}])}
    if k == "nullable":
        return {"type": [rng.choice(["string", "integer", "number", "boolean"]), "null"]}
    if k == "array":
        lo = rng.randint(0, 2)
        s = {"type": "array", "items": rand_schema(rng, depth + 1), "minItems": lo}
        if rng.random() < 0.7:
            s["maxItems"] = lo + rng.randint(0, 2)
        return s
    if k == "anyOf":
        return {"anyOf": [rand_schema(rng, depth + 1) for _ in range(rng.randint(2, 3))]}
    if k == "ref":
        return {"$ref": "#/$defs/leaf"}
    props = {f"k{i}": rand_schema(rng, depth + 1) for i in range(rng.randint(0, 4))}
    return {"type": "object", "properties": props, "additionalProperties": False,
            "required": [p for p in props if rng.random() < 0.6]}


ALPHABET = "ab é中\"\\\n/"


def rand_string(rng, lo=0, hi=5):
    return "".join(rng.choice(ALPHABET) for _ in range(rng.randint(lo, hi)))


def rand_number(rng, integer):
    if integer:
        return rng.choice([0, 1, -7, 123456, -42])
    return rng.choice([0, 1.5, -2.25, 1e-5, 3.125e20, -0.5, 7])


def instance(rng, s, defs, depth=0):
    """A value that satisfies s (keys in declared order), or usually does."""
    if "$ref" in s:
        return instance(rng, defs["leaf"], defs, depth)
    if "const" in s:
        return s["const"]
    if "enum" in s:
        return rng.choice(s["enum"])
    if "anyOf" in s:
        return instance(rng, rng.choice(s["anyOf"]), defs, depth)
    t = s.get("type")
    if isinstance(t, list):
        t = rng.choice(t)
    if t == "string":
        return rand_string(rng, s.get("minLength", 0), s.get("maxLength", 6))
    if t in ("integer", "number"):
        return rand_number(rng, t == "integer")
    if t == "boolean":
        return rng.random() < 0.5
    if t == "null":
        return None
    if t == "array":
        hi = s.get("maxItems", s["minItems"] + 2)
        return [instance(rng, s["items"], defs, depth + 1) for _ in range(rng.randint(s["minItems"], hi))]
    out = {}
    for k, sub in s["properties"].items():
        if k in s["required"] or rng.random() < 0.5:
            out[k] = instance(rng, sub, defs, depth + 1)
    return out


def mutate(rng, v):
    """A random change that often breaks validity."""
    choices = [lambda: "str", lambda: 3, lambda: None, lambda: [v], lambda: {"zz": v}, lambda: 2.5, lambda: True]
    if isinstance(v, dict) and v and rng.random() < 0.7:
        k = rng.choice(list(v))
        w = dict(v)
        r = rng.random()
        if r < 0.3:
            del w[k]
        elif r < 0.5:
            w["extra"] = 1
        else:
            w[k] = mutate(rng, v[k])
        return w
    if isinstance(v, list) and v and rng.random() < 0.7:
        w = list(v)
        i = rng.randrange(len(w))
        if rng.random() < 0.5:
            w[i] = mutate(rng, w[i])
        else:
            w.append(w[i])
        return w
    return rng.choice(choices)()


def test_integer_is_an_integer_literal():
    # Integer-valued numbers in other spellings are numbers, not integers, for the grammar and
    # for the reference alike; both readings of "integer" accept the plain literals.
    schema = {"type": "object", "properties": {"n": {"type": "integer"}, "x": {"type": "number"}},
              "required": ["n"], "additionalProperties": False}
    texts = ['{"n":3}', '{"n":-0}', '{"n":1.0}', '{"n":3.125e+20}', '{"n":1e5}', '{"n":12,"x":1e5}',
             '{"n":-42,"x":3.125e+20}', '{"n":true}']
    ref = []
    for t in texts:
        try:
            schema_validate(json.loads(t), schema)
            ref.append(True)
        except jsonschema.ValidationError:
            ref.append(False)
    assert ref == [True, True, False, False, False, True, True, False]
    assert verdicts("json_schema", schema, texts) == ref


def test_random_schemas_agree_with_jsonschema():
    rng = random.Random()
    total_valid = 0
    for _ in range(40):
        defs = {"leaf": rand_schema(rng, 3)}
        schema = rand_schema(rng)
        schema["$defs"] = defs
        cands, values = [], []
        for _ in range(60):
            v = instance(rng, schema, defs)
            if rng.random() < 0.5:
                v = mutate(rng, v)
            sep = rng.choice([(",", ":"), (", ", ": ")])
            values.append(v)
            cands.append(json.dumps(v, separators=sep, ensure_ascii=rng.random() < 0.5,
                                    indent=2 if rng.random() < 0.1 else None))
        ref = []
        for v in values:
            try:
                schema_validate(v, schema)
                ref.append(True)
            except jsonschema.ValidationError:
                ref.append(False)
        got = verdicts("json_schema", schema, cands)
        bad = [(c, r) for c, r, g in zip(cands, ref, got) if r != g]
        assert not bad, (json.dumps(schema), bad[:3])
        total_valid += sum(ref)
    assert total_valid > 200


# ---- random sentences of the JSON grammars vs strict readers ---------------------------------

def generate(kind, source, n, seed):
    """n random sentences of the grammar, drawn byte by byte by the helper (exact bytes)."""
    if not CHECK or not os.path.exists(CHECK):
        pytest.fail("FROST_GRAMMAR_CHECK must name the text_grammar_check binary (ctest sets it)")
    spec = json.dumps({"kind": kind, "source": source, "generate": n, "seed": seed})
    out = subprocess.run([CHECK], input=spec + "\n", capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, (seed, out.stdout[-2000:], out.stderr)
    return [bytes.fromhex(line) for line in out.stdout.split()]


def test_generated_json_parses_strictly():
    seed = random.Random().randrange(1 << 62)
    rng = random.Random(seed)
    outs = generate("json_object", "", 300, seed)
    assert len(outs) >= 250, (seed, len(outs))
    pairs = 0
    for raw in outs:
        try:
            v = strict_load(raw)
        except (ValueError, UnicodeError, AssertionError) as e:
            pytest.fail(f"seed {seed}: {raw!r}: {e}")
        assert isinstance(v, dict)
        pairs += len(re.findall(rb"\\u[dD][89abAB]", raw))
    assert pairs > 5, (seed, "too few surrogate pairs generated to test them")
    # Schemas: the sentences also validate.
    valid = 0
    for _ in range(8):
        defs = {"leaf": rand_schema(rng, 3)}
        schema = rand_schema(rng)
        schema["$defs"] = defs
        sub = rng.randrange(1 << 62)
        for raw in generate("json_schema", schema, 40, sub):
            try:
                v = strict_load(raw)
                schema_validate(v, schema)
            except (ValueError, UnicodeError, AssertionError, jsonschema.ValidationError) as e:
                pytest.fail(f"seed {sub}: schema {json.dumps(schema)}: {raw!r}: {e}")
            valid += 1
    assert valid > 100, (seed, valid)


# ---- random regexes vs re ---------------------------------------------------------------------

def rand_regex(rng, depth=0):
    """(pattern, nullable): never a quantifier over something that can be empty (the engine
    rejects that as left recursion, see test_grammar.cpp)."""
    r = rng.random()
    if depth > 2 or r < 0.35:
        return rng.choice([("a", False), ("b", False), ("[ab]", False), ("[^a]", False), ("\\d", False),
                           (".", False), ("c", False), ("\\.", False)])
    if r < 0.55:
        parts = [rand_regex(rng, depth + 1) for _ in range(rng.randint(2, 3))]
        return "".join(p for p, _ in parts), all(n for _, n in parts)
    if r < 0.7:
        parts = [rand_regex(rng, depth + 1) for _ in range(2)]
        return "(?:" + "|".join(p for p, _ in parts) + ")", any(n for _, n in parts)
    inner, nullable = rand_regex(rng, depth + 1)
    if nullable:
        return "(" + inner + ")", True
    q = rng.choice(["*", "+", "?", "{2}", "{1,3}", "{0,2}", "{2,}"])
    return "(" + inner + ")" + q, q in ("*", "?", "{0,2}")


def test_random_regexes_agree_with_python_re():
    rng = random.Random()
    matched = 0
    for _ in range(40):
        pattern, _ = rand_regex(rng)
        cands = ["".join(rng.choice("abc1.\n") for _ in range(rng.randint(0, 7))) for _ in range(300)]
        ref = [re.fullmatch(pattern, s, re.S * 0) is not None for s in cands]
        got = verdicts("regex", pattern, cands)
        bad = [(s, r) for s, r, g in zip(cands, ref, got) if r != g]
        assert not bad, (pattern, bad[:3])
        matched += sum(ref)
    assert matched > 50


def test_compile_errors_name_the_problem():
    out = subprocess.run([CHECK], input=json.dumps({"kind": "json_schema", "source": {"type": "string", "format": "date"}}) + "\n",
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "unsupported keyword 'format'" in out.stdout, out.stdout
