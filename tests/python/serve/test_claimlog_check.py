"""scripts/claimlog_check.py accepts valid claim logs and rejects mutated ones (reordered, wrong
claim id, missing restore_required, event after evicted, pinned demoted, bogus blocking ids)."""
import copy
import json
import os
import random
import subprocess
import sys

import pytest

SRC = os.environ.get("FROST_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", "..", ".."))
CHECKER = os.path.join(SRC, "scripts", "claimlog_check.py")


def ev(cid, event, tier="device", pinned=False, **kw):
    d = {"claim_id": cid, "event": event, "tier": tier, "bytes": 4096, "pinned": pinned, "request_id": None}
    d.update(kw)
    return d


def valid_log():
    events = [
        ev("cap-a", "accepted", request_id="r1"),
        ev("cap-a", "materialized"),
        ev("cap-p", "accepted", pinned=True, request_id="r2"),
        ev("cap-p", "materialized", pinned=True),
        ev("cap-a", "demoted"),
        ev("cap-a", "offloaded", tier="host"),
        ev("cap-b", "accepted", pinned=True, request_id="r3"),
        ev("cap-b", "refused", pinned=True, request_id="r3", blocking_claim_ids=["cap-p"], reason="insufficient capacity"),
        ev("cap-a", "restore_required", tier="host", request_id="r4"),
        ev("cap-a", "restored", tier="device", request_id="r4"),
        ev("cap-a", "restore_required", request_id="r5"),
        ev("cap-a", "restoration_failed", request_id="r5", reason="checksum"),
        ev("cap-a", "refused", request_id="r5", blocking_claim_ids=["cap-a"], reason="checksum"),
        ev("cap-a", "evicted", reason="restoration failed"),
        ev("cap-p", "unpinned"),
        ev("cap-p", "demoted"),
        ev("cap-p", "offloaded", tier="disk"),
        ev("cap-p", "expired", tier="disk", reason="ttl"),
    ]
    for i, e in enumerate(events):
        e["seq"] = i + 1
        e["time"] = 0.5 * i
    return events


def run(events, tmp_path):
    p = tmp_path / "claims.jsonl"
    p.write_text("".join(json.dumps(e) + "\n" for e in events))
    r = subprocess.run([sys.executable, CHECKER, str(p)], capture_output=True, text=True, timeout=60)
    return r.returncode, r.stdout + r.stderr


def renumber(events):
    for i, e in enumerate(events):
        e["seq"] = i + 1
        e["time"] = 0.5 * i
    return events


def test_valid_log_passes(tmp_path):
    code, out = run(valid_log(), tmp_path)
    assert code == 0, out
    assert out.startswith("OK 18 events")


def test_empty_log_passes(tmp_path):
    code, out = run([], tmp_path)
    assert code == 0, out


def test_reordered_seq_rejected(tmp_path):
    log = valid_log()
    log[3], log[4] = log[4], log[3]
    code, out = run(log, tmp_path)
    assert code == 1 and "REJECT" in out


def test_reordered_events_renumbered_rejected(tmp_path):
    # materialized before accepted, with consistent seq numbers: the state machine catches it.
    log = valid_log()
    log[0], log[1] = log[1], log[0]
    code, out = run(renumber(log), tmp_path)
    assert code == 1 and "not allowed" in out


def test_wrong_claim_id_rejected(tmp_path):
    log = valid_log()
    log[9]["claim_id"] = "cap-p"  # 'restored' for a claim that never asked for a restore
    code, out = run(log, tmp_path)
    assert code == 1 and "REJECT" in out


def test_missing_restore_required_rejected(tmp_path):
    log = [e for i, e in enumerate(valid_log()) if i != 8]
    code, out = run(renumber(log), tmp_path)
    assert code == 1 and "restored" in out


def test_event_after_evicted_rejected(tmp_path):
    log = valid_log()
    log.append(ev("cap-a", "restore_required"))
    code, out = run(renumber(log), tmp_path)
    assert code == 1 and "gone" in out


def test_pinned_claim_demoted_rejected(tmp_path):
    log = [e for e in valid_log() if not (e["claim_id"] == "cap-p" and e["event"] == "unpinned")]
    code, out = run(renumber(log), tmp_path)
    assert code == 1 and "pinned" in out


def test_blocking_id_must_be_live_pinned(tmp_path):
    log = valid_log()
    log[7]["blocking_claim_ids"] = ["cap-a"]  # live but not pinned
    code, out = run(log, tmp_path)
    assert code == 1
    log[7]["blocking_claim_ids"] = ["cap-zzz"]  # unknown
    code, out = run(log, tmp_path)
    assert code == 1


def test_fail_closed_refusal_must_name_claim(tmp_path):
    log = valid_log()
    log[12]["blocking_claim_ids"] = []
    code, out = run(log, tmp_path)
    assert code == 1


def test_random_single_mutations_are_rejected(tmp_path):
    # Dropping any one 'accepted', 'materialized', 'demoted' or 'restore_required' line breaks
    # the lifecycle of its claim.
    base = valid_log()
    rng = random.Random()
    idx = [i for i, e in enumerate(base) if e["event"] in ("accepted", "materialized", "demoted", "restore_required")]
    for i in rng.sample(idx, k=min(4, len(idx))):
        log = [copy.deepcopy(e) for j, e in enumerate(base) if j != i]
        code, out = run(renumber(log), tmp_path)
        assert code == 1, (i, base[i], out)


def retained_log():
    """A pinned claim whose restore the heap refused (T33): the request fails closed (restoration_failed
    + refused naming the claim, both `retained`), and the claim goes on live: restored later, expired."""
    return renumber([
        ev("cap-p", "accepted", pinned=True, request_id="r1"),
        ev("cap-p", "materialized", pinned=True),
        ev("cap-p", "restore_required", pinned=True, request_id="r2"),
        ev("cap-p", "restoration_failed", pinned=True, request_id="r2", reason="out of host memory", retained=True),
        ev("cap-p", "refused", pinned=True, request_id="r2", blocking_claim_ids=["cap-p"], reason="out of host memory",
           retained=True),
        ev("cap-p", "restore_required", pinned=True, request_id="r3"),
        ev("cap-p", "restored", pinned=True, request_id="r3"),
        ev("cap-p", "expired", pinned=True, reason="ttl"),
    ])


def test_retained_restore_failure_keeps_the_claim_live(tmp_path):
    code, out = run(retained_log(), tmp_path)
    assert code == 0, out


@pytest.mark.parametrize("mutate,why", [
    (lambda log: log[4].pop("retained"), "must be retained"),           # the refusal forgets it
    (lambda log: log[3].pop("retained"), "without its retained"),       # the failure forgets it
    (lambda log: log[6].__setitem__("retained", True), "retained on"),  # on another event
    (lambda log: log[4].__setitem__("retained", "yes"), "boolean"),
])
def test_retained_mutations_are_rejected(tmp_path, mutate, why):
    log = retained_log()
    mutate(log)
    code, out = run(log, tmp_path)
    assert code == 1 and why in out, out


def test_a_retained_claim_cannot_skip_its_refusal(tmp_path):
    log = [e for i, e in enumerate(retained_log()) if i != 4]
    code, out = run(renumber(log), tmp_path)
    assert code == 1 and "not allowed" in out, out
