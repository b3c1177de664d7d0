"""Bad request bodies against the REAL server (design/reliability.md T11), each sent while a
normal client streams: malformed JSON, wrong types, 8 MB of nested arrays, a body over the limit,
invalid UTF-8, and a prompt of four million newlines (about the most the 8 MiB body limit lets
through, escaped; 2^31 of them cannot get past it). Each must be answered 400 or 413 with a JSON error,
the server's RSS must stay within a bound while it is handled (sampled every 20 ms), and the
streaming client must be served to the end with the same text as when it ran alone."""
import http.client
import json
import os
import socket
import threading
import time

import pytest
from serve_proc import FROST, ServeProcess, rss_kib

pytestmark = pytest.mark.skipif(not FROST or not os.path.exists(FROST), reason="FROST_BIN not set")

KEY = "sk-bad-bodies"
RSS_BOUND_KIB = 512 * 1024  # growth while one bad body is handled: a few copies of 8 MB, not GBs
ANSWER_S = 120              # every answer comes back, well within this


def send(port, body, path="/v1/chat/completions"):
    """(status, body) of one POST. The server may answer (413) and close before the whole body is
    sent, as a server should: the answer is read after the send fails."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=ANSWER_S)
    head = (f"POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
    try:
        sock.sendall(head + body)
    except (BrokenPipeError, ConnectionResetError):
        pass
    r = http.client.HTTPResponse(sock)
    r.begin()
    data = r.read()
    sock.close()
    return r.status, data


def chat(content):
    return json.dumps({"model": "frost", "messages": [{"role": "user", "content": content}], "max_tokens": 4}).encode()


def stream_text(port):
    body = json.dumps({"model": "frost", "messages": [{"role": "user", "content": "Count slowly to twenty."}],
                       "max_tokens": 48, "temperature": 0, "stream": True}).encode()
    status, data = send(port, body)
    assert status == 200, data[:300]
    text = ""
    for line in data.split(b"\n"):
        if line.startswith(b"data: {"):
            for choice in json.loads(line[6:])["choices"]:
                text += choice.get("delta", {}).get("content") or ""
    assert data.rstrip().endswith(b"data: [DONE]"), data[-200:]
    return text


BAD = [
    ("malformed JSON", b'{"model": "frost", "messages": [', (400,)),
    ("wrong types", json.dumps({"model": "frost", "messages": 5, "max_tokens": "many"}).encode(), (400,)),
    ("8 MB of nested arrays", b'{"messages": ' + b"[" * 4_000_000 + b"]" * 4_000_000 + b"}", (400,)),
    ("a body over the limit", chat("x" * (9 << 20)), (413,)),
    ("invalid UTF-8", b'{"model": "frost", "messages": [{"role": "user", "content": "\xff\xfe\xc3("}]}', (400,)),
    ("four million newlines", chat("\n" * 4_000_000), (400,)),
]


@pytest.mark.parametrize("name,body,statuses", BAD, ids=[b[0] for b in BAD])
def test_bad_body_is_refused_in_bounded_memory_while_others_are_served(model_dir, name, body, statuses):
    s = ServeProcess(model_dir, [], key=KEY, sessions=2)
    try:
        alone = stream_text(s.port)
        rss0 = rss_kib(s.proc.pid)
        peak = [rss0]
        done = threading.Event()

        def sample():
            while not done.is_set():
                peak[0] = max(peak[0], rss_kib(s.proc.pid))
                time.sleep(0.02)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        other = {}
        streamer = threading.Thread(target=lambda: other.setdefault("text", stream_text(s.port)), daemon=True)
        streamer.start()
        t0 = time.time()
        status, data = send(s.port, body)
        took = time.time() - t0
        streamer.join(ANSWER_S)
        done.set()
        sampler.join(5)
        assert status in statuses, (name, status, data[:300])
        err = json.loads(data)["error"]
        if name == "four million newlines":
            # Refused from a bound on its token count: tokenizing stops once the count is known to
            # be far past the context (Tokenizer::encode_at_most), so the rest is never encoded.
            assert err["code"] == "context_length_exceeded" and "more than" in err["message"], err
        assert other.get("text") == alone, "the streaming client was not served as when alone"
        assert peak[0] - rss0 <= RSS_BOUND_KIB, f"{name}: RSS grew {(peak[0] - rss0) / 1024:.0f} MiB"
        assert s.proc.poll() is None
        print(f"{name}: {status} in {took * 1000:.0f} ms, RSS +{(peak[0] - rss0) / 1024:.0f} MiB")
    finally:
        assert s.stop() == 0
