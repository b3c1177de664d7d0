"""What the Responses / Messages / tokenize / CORS / metrics tests share: a keyed `frost serve`
on the tiny synthetic model (or the chain-scripted one, chain_model.py) with both official
clients pointed at it, fresh random text, and raw HTTP for header checks."""
import http.client
import json
import os
import random

from serve_proc import FIXTURES, ServeProcess

KEY = "sk-frost-api"
TOKENIZER = os.path.join(FIXTURES, "tokenizer-qwen3", "tokenizer.json")
WEATHER_TOOL_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
WORDS = ["river", "stone", "agent", "compile", "window", "orange", "kernel", "cloud", "ledger", "harbor",
         "signal", "planet", "copper", "meadow", "vector", "garden", "falcon", "marble", "tensor", "lantern"]


def random_text(rng, n=8):
    return " ".join(rng.choice(WORDS) for _ in range(n))


def long_system(rng):
    """A system prompt well past two 64-token capsule grid points."""
    return "You are a careful agent. " + " ".join(rng.choice(WORDS) for _ in range(200))


class OpenAIServer(ServeProcess):
    """A keyed `frost serve` with the official openai client as .client (the chat-side suites)."""

    def __init__(self, model, key, sessions=1, extra=(), max_seq_len=1024):
        super().__init__(model, extra, key=key, sessions=sessions, max_seq_len=max_seq_len)
        import openai
        self.client = openai.OpenAI(base_url=self.base + "/v1", api_key=key, max_retries=0, timeout=300)


class ApiServer(ServeProcess):
    def __init__(self, model, sessions=2, extra=(), max_seq_len=2048, key=KEY):
        super().__init__(model, extra, key=key, sessions=sessions, max_seq_len=max_seq_len)
        import anthropic
        import openai
        self.openai = openai.OpenAI(base_url=self.base + "/v1", api_key=key or "none", max_retries=0, timeout=300)
        self.anthropic = anthropic.Anthropic(base_url=self.base, api_key=key or "none", max_retries=0, timeout=300)

    def raw(self, method, path, body=None, headers=None):
        """(status, headers dict lower-cased, body bytes) without any client library."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=300)
        data = None if body is None else (body if isinstance(body, (bytes, str)) else json.dumps(body))
        c.request(method, path, body=data, headers=headers or {})
        r = c.getresponse()
        out = (r.status, {k.lower(): v for k, v in r.getheaders()}, r.read())
        c.close()
        return out


def fresh_rng():
    seed = random.SystemRandom().randrange(1 << 30)
    print("rng seed", seed)
    return random.Random(seed)


def type_confusions(body, skip=()):
    """Every copy of `body` with one node (key or array element, at any depth) replaced by a
    value of each other JSON type: the bodies a careless or hostile client sends."""
    import copy
    values = [5, -1.5, "x", None, True, [], {}, [1, "a"], {"type": 7}]

    def paths(node, prefix):
        if isinstance(node, dict):
            for k, v in node.items():
                if k in skip:
                    continue
                yield prefix + [k]
                yield from paths(v, prefix + [k])
        elif isinstance(node, list):
            for i, v in enumerate(node):
                yield prefix + [i]
                yield from paths(v, prefix + [i])

    for p in list(paths(body, [])):
        for v in values:
            b = copy.deepcopy(body)
            node = b
            for k in p[:-1]:
                node = node[k]
            node[p[-1]] = copy.deepcopy(v)
            yield p, b
