"""A flood of slow connections against the real `frost serve` (design/reliability.md T12):
hundreds of clients that open a connection, send part of a request header and then nothing,
against a server whose process may hold only 128 file descriptors, while a normal client keeps
sending whole streaming chat requests.

Two ways the descriptors can run out, one test each:
- the connection cap (by default the descriptor limit less 64): at the cap the connection that
  has waited longest for a request is closed to make room;
- a cap set above what the process can open (`--max-connections 1000`): accept(2) itself fails
  with EMFILE, and the server must close a waiting connection and pause, not retry at once.

Before these were built the second case spun an I/O thread (1.2 cores) and a normal client waited
17 s behind 300 trickled headers. What must hold now, in both:
- every normal request is served to `[DONE]` while the flood goes on, well inside the header
  timeout (60 s here) that would otherwise free a descriptor;
- the server does not spin while the flood sits idle (CPU seconds over a quiet window);
- /metrics counts the evictions (or the accept pauses), and the open connections stay within the
  cap;
- after the flood, connections drain and the server serves as before.
The normal client's TTFT p50 / p99 with and without the flood is printed (the design asks for
p99 within 10 %), not asserted: tests never assert on time."""
import http.client
import json
import os
import re
import resource
import socket
import threading
import time

import pytest
from serve_proc import FROST, ServeProcess, read_chat_stream

pytestmark = pytest.mark.skipif(not FROST or not os.path.exists(FROST), reason="FROST_BIN not set")

FDS = 128          # the server process's descriptor limit, soft and hard (so it cannot raise it)
FLOOD = 300        # slow connections opened at once, more than the process can hold
REFRESH_PER_S = 40  # new slow connections per second while the normal client measures
REQUESTS = 16      # normal streaming requests measured per phase
QUIET_S = 2.0
KEY = "sk-slow"


def limit_fds():
    resource.setrlimit(resource.RLIMIT_NOFILE, (FDS, FDS))


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def metric(port, name):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    c.request("GET", "/metrics", headers={"Authorization": "Bearer " + KEY})
    text = c.getresponse().read().decode()
    c.close()
    m = re.search(rf"^{name} ([0-9.e+]+)$", text, re.M)
    assert m, f"no {name} in /metrics"
    return float(m.group(1))


def slow_connection(port):
    """A client that sends the start of a request header and then nothing."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthor")
    return s


def timed_chat(port, i):
    """One streaming chat request on a fresh connection: its TTFT in seconds; raises on any
    failure (the client's 20 s timeout included: the server's header timeout is 60 s)."""
    body = json.dumps({"model": "frost", "messages": [{"role": "user", "content": f"count to {i}"}],
                       "max_tokens": 4, "stream": True, "temperature": 0})
    t0 = time.time()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    try:
        c.request("POST", "/v1/chat/completions", body=body,
                  headers={"Authorization": "Bearer " + KEY, "Content-Type": "application/json"})
        r = c.getresponse()
        assert r.status == 200, (r.status, r.read()[:300])
        first, last = read_chat_stream(r, t0)
        assert last == b"data: [DONE]", last[:200]
        return first if first is not None else time.time() - t0
    finally:
        c.close()


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * q))] * 1000


@pytest.mark.parametrize("cap_arg", [None, 1000], ids=["at-the-connection-cap", "out-of-descriptors"])
def test_a_slow_connection_flood_neither_locks_out_nor_spins(model_dir, cap_arg):
    extra = ["--header-timeout-ms", "60000"] + (["--max-connections", str(cap_arg)] if cap_arg else [])
    server = ServeProcess(model_dir, extra, key=KEY, preexec_fn=limit_fds)
    flood, stop = [], threading.Event()
    try:
        threading.Thread(target=lambda: [None for _ in server.proc.stdout], daemon=True).start()
        banner = "".join(server.lines)
        m = re.search(r"max (\d+) connections", banner)
        assert m, banner
        cap = int(m.group(1))
        assert cap == (cap_arg or FDS - 64), banner

        base = [timed_chat(server.port, i) for i in range(REQUESTS)]

        for _ in range(FLOOD):
            flood.append(slow_connection(server.port))
        time.sleep(0.5)  # the backlog taken in: what the server does next, it does on its own
        c0 = cpu_seconds(server.proc.pid)
        time.sleep(QUIET_S)
        idle_cpu = cpu_seconds(server.proc.pid) - c0

        def refresh():  # the attacker keeps coming while the normal client works
            while not stop.is_set():
                try:
                    flood.append(slow_connection(server.port))
                except OSError:
                    pass
                time.sleep(1.0 / REFRESH_PER_S)

        t = threading.Thread(target=refresh, daemon=True)
        t.start()
        during = [timed_chat(server.port, i) for i in range(REQUESTS)]
        stop.set()
        t.join(timeout=10)

        open_now = metric(server.port, "frost_connections_open")
        evicted = metric(server.port, "frost_connections_evicted_total")
        pauses = metric(server.port, "frost_accept_pauses_total")
        print(f"slow clients ({'cap ' + str(cap)}; {FDS} descriptors): normal TTFT p50 / p99 "
              f"{pct(base, 0.5):.1f} / {pct(base, 0.99):.1f} ms alone, {pct(during, 0.5):.1f} / "
              f"{pct(during, 0.99):.1f} ms under {len(flood)} slow connections; {evicted:.0f} evicted, "
              f"{pauses:.0f} accept pauses, {open_now:.0f} open, server CPU {idle_cpu:.2f} s over "
              f"{QUIET_S:.0f} s idle")
        # A busy accept loop burns a core (the 2 s window measured 2.4 s before the fix).
        assert idle_cpu < 0.5 * QUIET_S, idle_cpu
        assert evicted >= FLOOD - min(cap, FDS), evicted  # room was made, not waited for
        # Over the cap by the connections whose close is on its way at most (the evicted one for
        # this /metrics request, the last chat's).
        assert open_now <= min(cap, FDS) + 2, open_now
        if cap_arg:
            assert pauses >= 1, pauses  # the cap was never reached: accept(2) ran out first
    except BaseException:
        server.kill()
        raise
    finally:
        stop.set()
        for s in flood:
            s.close()
    try:
        # Once the flood is gone: connections drain and the server serves as before.
        # (The gauge counts the asking connection, and for a moment the one asked before.)
        deadline = time.time() + 20
        while (left := metric(server.port, "frost_connections_open")) > 1 and time.time() < deadline:
            time.sleep(0.1)
        assert left <= 1, left
        timed_chat(server.port, 99)
    finally:
        assert server.stop() == 0


def test_the_soft_descriptor_limit_is_raised_to_the_hard_one(model_dir):
    """`frost serve` raises its soft RLIMIT_NOFILE to the hard one before sizing the connection
    cap: started at soft 128 / hard 256, the cap is 256 less the 64 it keeps for files."""
    server = ServeProcess(model_dir, key=KEY,
                          preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (FDS, 2 * FDS)))
    try:
        m = re.search(r"max (\d+) connections", "".join(server.lines))
        assert m and int(m.group(1)) == 2 * FDS - 64, server.lines
        with open(f"/proc/{server.proc.pid}/limits") as f:
            soft = next(line.split()[3] for line in f if line.startswith("Max open files"))
        assert int(soft) == 2 * FDS
    finally:
        assert server.stop() == 0
