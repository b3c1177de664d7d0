"""What the end-to-end server tests share: the synthetic model they serve (made once, under a file
lock, because ctest runs these files in parallel against the same folder) and a real `frost serve`
process on an ephemeral loopback port."""
import fcntl
import json
import os
import re
import signal
import subprocess
import time
import urllib.request

FROST = os.environ.get("FROST_BIN", "")
FIXTURES = os.environ.get("FROST_FIXTURES_DIR", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "fixtures"))
BUILD = os.environ.get("FROST_BINARY_DIR", "/tmp")
SOURCE = os.environ.get("FROST_SOURCE_DIR", "")
START_TIMEOUT_S = 120


# The synth preset served: "tiny" (dense) unless FROST_SERVE_PRESET names another (ctest runs the
# openai-client suite a second time on "moe-tiny", a mixture-of-experts model).
PRESET = os.environ.get("FROST_SERVE_PRESET", "tiny")
# The engine backend the servers run: the CPU reference unless FROST_SERVE_BACKEND=cuda (the GPU
# machine's `scripts/gpu/run_all.sh serve` runs these suites on CUDA with FROST_SERVE_PRESET=tiny-gpu,
# whose head_dim the CUDA kernels take).
BACKEND = os.environ.get("FROST_SERVE_BACKEND", "cpu")
# On CUDA the servers run --chunk-invariant: the suites check that a capsule's restore + append
# answers exactly as a cold prefill, which the CUDA engine's default numerics do not promise (its
# GEMM plans depend on the row count; README, "Capsules"). The CPU engine is exact either way.
SERVE_FLAGS = ["--chunk-invariant"] if BACKEND == "cuda" else []


def synth_model_dir():
    """A tiny synthetic checkpoint whose vocab is the real Qwen3 tokenizer's; None without the fixture."""
    tok = os.path.join(FIXTURES, "tokenizer-qwen3")
    if not os.path.exists(os.path.join(tok, "tokenizer.json")):
        return None
    out = os.path.join(BUILD, "serve_py_model" + ("" if PRESET == "tiny" else "_" + PRESET))
    with open(out + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = os.path.join(out, ".complete")
        if not os.path.exists(done):
            subprocess.run([FROST, "synth", "--out", out, "--preset", PRESET, "--tokenizer", tok],
                           check=True, capture_output=True, timeout=300)
            open(done, "w").close()
    return out


def rss_kib(pid):
    """A process's resident memory in KiB (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0

def read_chat_stream(response, t0):
    """Reads a chat completion's SSE stream to its end: (seconds from t0 to the first token, or
    None when none came; the last `data:` line, which is `data: [DONE]` for a whole stream)."""
    first, last = None, b""
    for line in response:
        if line.startswith(b"data:"):
            last = line.strip()
            if first is None and last != b"data: [DONE]":
                delta = (json.loads(last[5:])["choices"] or [{}])[0].get("delta", {})
                if delta.get("content") or delta.get("reasoning_content"):
                    first = time.time() - t0  # the first token, not the role chunk
    return first, last


def serve_args(model, extra=(), key=None, sessions=2, max_seq_len=1024):
    args = [FROST, "serve", "--model", model, "--port", "0", "--sessions", str(sessions), "--backend", BACKEND]
    args += SERVE_FLAGS
    if max_seq_len is not None:  # None: the server's default (the model's context)
        args += ["--max-seq-len", str(max_seq_len)]
    return args + (["--api-key", key] if key else []) + list(extra)


class ServeProcess:
    """`frost serve --port 0` with the given arguments (and environment, when `env` is given;
    `preexec_fn` runs in the child before exec, e.g. to set resource limits); waits for the
    "on http://127.0.0.1:PORT" line."""

    def __init__(self, model, extra=(), key=None, sessions=2, max_seq_len=1024, env=None, preexec_fn=None):
        self.key = key
        self.proc = subprocess.Popen(serve_args(model, extra, key, sessions, max_seq_len), stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, env=env, preexec_fn=preexec_fn)
        self.lines = []
        self.port = None
        deadline = time.time() + START_TIMEOUT_S
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            self.lines.append(line)
            m = re.search(r"on http://127\.0\.0\.1:(\d+)", line)
            if m:
                self.port = int(m.group(1))
                break
        assert self.port, "server did not start: " + "".join(self.lines)
        self.base = f"http://127.0.0.1:{self.port}"

    def stop(self):
        """SIGTERM (graceful: flushes capsules); returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                out, _ = self.proc.communicate(timeout=30)
                self.lines.append(out or "")
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def kill(self):
        """SIGKILL: nothing is flushed."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.communicate(timeout=30)

    def api(self, method, path, body=None, timeout=120):
        headers = {"Authorization": "Bearer " + self.key} if self.key else {}
        req = urllib.request.Request(self.base + path, method=method, headers=headers,
                                     data=None if body is None else json.dumps(body).encode())
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.load(r)
