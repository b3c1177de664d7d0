"""CORS (`frost serve --cors-origin`), with raw HTTP requests: off by default (no header, OPTIONS is
not answered as a preflight); on: the preflight is 204 without a key, with the allowed methods,
headers and max-age, and every reply (JSON, error, SSE stream) carries the allowed origin."""
import os
import subprocess

import pytest
from api_common import KEY, ApiServer
from serve_proc import FROST, serve_args

pytestmark = pytest.mark.skipif(not FROST or not os.path.exists(FROST), reason="FROST_BIN not set")
ORIGIN = "http://localhost:3000"
PREFLIGHT = {"Origin": ORIGIN, "Access-Control-Request-Method": "POST",
             "Access-Control-Request-Headers": "authorization, content-type, x-api-key, anthropic-version"}


@pytest.fixture(scope="module")
def cors(model_dir):
    s = ApiServer(model_dir, extra=["--cors-origin", ORIGIN])
    yield s
    s.stop()


@pytest.fixture(scope="module")
def plain(model_dir):
    s = ApiServer(model_dir)
    yield s
    s.stop()


def test_off_by_default(plain):
    status, h, _ = plain.raw("OPTIONS", "/v1/chat/completions", None, PREFLIGHT)
    assert status in (401, 405) and "access-control-allow-origin" not in h, (status, h)
    status, h, _ = plain.raw("GET", "/v1/models", None, {"Origin": ORIGIN, "Authorization": "Bearer " + KEY})
    assert status == 200 and not any(k.startswith("access-control-") for k in h), h


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages", "/v1/responses", "/tokenize", "/health"])
def test_preflight(cors, path):
    status, h, body = cors.raw("OPTIONS", path, None, PREFLIGHT)  # no key: preflights carry none
    assert status == 204 and body == b"", (status, h)
    assert h["access-control-allow-origin"] == ORIGIN
    methods = {m.strip() for m in h["access-control-allow-methods"].split(",")}
    assert {"GET", "POST", "DELETE", "OPTIONS"} <= methods
    allowed = {x.strip().lower() for x in h["access-control-allow-headers"].split(",")}
    assert {"authorization", "content-type", "x-api-key", "anthropic-version"} <= allowed
    assert int(h["access-control-max-age"]) > 0


def test_every_reply_carries_the_origin(cors):
    auth = {"Origin": ORIGIN, "Authorization": "Bearer " + KEY, "Content-Type": "application/json"}
    for method, path, body in [("GET", "/v1/models", None), ("GET", "/health", None),
                               ("POST", "/tokenize", {"prompt": "hi"}),
                               ("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}],
                                                                 "max_tokens": 2})]:
        status, h, _ = cors.raw(method, path, body, auth)
        assert status == 200 and h.get("access-control-allow-origin") == ORIGIN, (path, status, h)
    # Errors too (a browser must be able to read them), and SSE streams.
    status, h, _ = cors.raw("GET", "/v1/models", None, {"Origin": ORIGIN})
    assert status == 401 and h.get("access-control-allow-origin") == ORIGIN
    status, h, body = cors.raw("POST", "/v1/chat/completions",
                               {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "stream": True}, auth)
    assert status == 200 and h["content-type"].startswith("text/event-stream") and b"[DONE]" in body
    assert h.get("access-control-allow-origin") == ORIGIN


@pytest.mark.parametrize("bad", ["localhost:3000", "http://a b", "http://x\r\nSet-Cookie: y", ""])
def test_bad_flag_value_names_the_flag(model_dir, bad):
    r = subprocess.run(serve_args(model_dir, ["--cors-origin", bad]), capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--cors-origin" in r.stderr, r.stderr
