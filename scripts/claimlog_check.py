#!/usr/bin/env python3
"""Replays a Frost claim log (JSONL, one event per line) and verifies the ordering rules of
shared/design/capsules.md ("The store and claims"). Exit 0 and "OK ..." when the log is valid,
exit 1 and "REJECT line N: why" at the first violation, exit 2 on usage errors.

Per-claim state machine:
  (new) --accepted--> pending --materialized--> live       pending --refused--> (gone)
  live --demoted--> demoting --offloaded (lower tier)--> live      demoting --evicted--> (gone)
  live --restore_required--> restoring --restored--> live
  restoring --restoration_failed--> failed --refused (naming the claim)--> dying --evicted--> (gone)
  restoring --restoration_failed (retained)--> kept --refused (naming the claim, retained)--> live
    (a restore the heap refused: the request fails closed, the capsule's bytes are intact and stay)
  live --pinned/unpinned--> live;  live --expired|evicted--> (gone)
Also: seq strictly increasing, time non-decreasing, a pinned claim is never demoted nor evicted
for capacity, and a capacity refusal names only live claims that are pinned or being restored.
"""
import json
import sys

TIERS = {"device": 0, "host": 1, "disk": 2}
EVENTS = {"accepted", "materialized", "demoted", "offloaded", "restore_required", "restored",
          "restoration_failed", "refused", "expired", "evicted", "pinned", "unpinned"}
LIVE_STATES = {"live", "demoting", "restoring"}

# state -> {event: next state}
TRANSITIONS = {
    None: {"accepted": "pending"},
    "pending": {"materialized": "live", "refused": "gone"},
    "live": {"demoted": "demoting", "restore_required": "restoring", "pinned": "live",
             "unpinned": "live", "expired": "gone", "evicted": "gone"},
    "demoting": {"offloaded": "live", "evicted": "gone"},
    "restoring": {"restored": "live", "restoration_failed": "failed"},
    "failed": {"refused": "dying"},
    "kept": {"refused": "live"},
    "dying": {"evicted": "gone"},
    "gone": {},
}


class Reject(Exception):
    pass


def check_lines(lines):
    state = {}      # claim_id -> state
    pinned = {}     # claim_id -> bool
    tier = {}       # claim_id -> tier index
    pending_req = {}  # claim_id -> request id of the open restore_required
    last_seq = None
    last_time = None
    n = 0
    for lineno, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            e = json.loads(raw)
        except ValueError as exc:
            raise Reject(f"line {lineno}: not JSON ({exc})")
        if not isinstance(e, dict):
            raise Reject(f"line {lineno}: not an object")
        for field, kind in (("seq", int), ("time", (int, float)), ("claim_id", str), ("event", str),
                            ("tier", str), ("bytes", int), ("pinned", bool)):
            if field not in e or not isinstance(e[field], kind) or (kind is int and isinstance(e[field], bool)):
                raise Reject(f"line {lineno}: missing or mistyped field '{field}'")
        cid, ev = e["claim_id"], e["event"]
        if not cid:
            raise Reject(f"line {lineno}: empty claim_id")
        if ev not in EVENTS:
            raise Reject(f"line {lineno}: unknown event '{ev}'")
        if e["tier"] not in TIERS:
            raise Reject(f"line {lineno}: unknown tier '{e['tier']}'")
        if e["bytes"] < 0:
            raise Reject(f"line {lineno}: negative bytes")
        if last_seq is not None and e["seq"] <= last_seq:
            raise Reject(f"line {lineno}: seq {e['seq']} not after {last_seq} (reordered)")
        if last_time is not None and e["time"] < last_time:
            raise Reject(f"line {lineno}: time goes backwards")
        last_seq, last_time = e["seq"], e["time"]

        cur = state.get(cid)
        retained = e.get("retained", False)
        if not isinstance(retained, bool):
            raise Reject(f"line {lineno}: retained must be a boolean")
        if retained and ev not in ("restoration_failed", "refused"):
            raise Reject(f"line {lineno}: retained on a '{ev}' event")
        if retained and ev == "refused" and cur != "kept":
            raise Reject(f"line {lineno}: a retained refusal of claim {cid} without its retained restoration_failed")
        if cur == "kept" and ev == "refused" and not retained:
            raise Reject(f"line {lineno}: the refusal after a retained restoration_failed of {cid} must be retained")
        nxt = TRANSITIONS[cur].get(ev)
        if ev == "restoration_failed" and retained:
            nxt = "kept"
        if nxt is None:
            raise Reject(f"line {lineno}: event '{ev}' not allowed for claim {cid} in state {cur or 'unknown'}")
        t = TIERS[e["tier"]]
        was_pinned = pinned.get(cid, False)
        if ev == "accepted":
            pinned[cid] = e["pinned"]
        if ev == "pinned":
            pinned[cid] = True
        if ev == "unpinned":
            pinned[cid] = False
        if ev == "demoted" and was_pinned:
            raise Reject(f"line {lineno}: pinned claim {cid} demoted")
        if ev == "evicted" and cur == "live" and was_pinned and e.get("reason") == "capacity":
            raise Reject(f"line {lineno}: pinned claim {cid} evicted for capacity")
        if ev == "offloaded" and t <= tier.get(cid, -1):
            raise Reject(f"line {lineno}: offloaded claim {cid} did not move to a lower tier")
        if ev == "restore_required":
            pending_req[cid] = e.get("request_id")
        if ev in ("restored", "restoration_failed"):
            want = pending_req.pop(cid, None)
            if want is not None and e.get("request_id") not in (None, want):
                raise Reject(f"line {lineno}: {ev} for claim {cid} names request {e.get('request_id')}, "
                             f"restore_required named {want}")
        if ev == "refused":
            blocking = e.get("blocking_claim_ids")
            if not isinstance(blocking, list):
                raise Reject(f"line {lineno}: refused without blocking_claim_ids")
            if cur in ("failed", "kept"):
                if cid not in blocking:
                    raise Reject(f"line {lineno}: fail-closed refusal must name claim {cid}")
            else:
                for b in blocking:
                    if b == cid or state.get(b) not in LIVE_STATES:
                        raise Reject(f"line {lineno}: blocking claim {b} is not a live claim")
                    if not pinned.get(b, False) and state.get(b) != "restoring":
                        raise Reject(f"line {lineno}: blocking claim {b} is neither pinned nor busy")
        state[cid] = nxt
        tier[cid] = t
        n += 1
    return n, len(state)


def main(argv):
    if len(argv) != 2:
        print("usage: claimlog_check.py LOG.jsonl", file=sys.stderr)
        return 2
    try:
        with open(argv[1], encoding="utf-8") as f:
            lines = f.readlines()
    except OSError as exc:
        print(f"cannot read {argv[1]}: {exc}", file=sys.stderr)
        return 2
    try:
        events, claims = check_lines(lines)
    except Reject as exc:
        print(f"REJECT {exc}")
        return 1
    print(f"OK {events} events, {claims} claims")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
