"""Server faults on the Mininet rack (8 servers, Zipf 0.99, memory backend; docs/rack.md "Server
faults"):

- an agent SIGKILLed mid-run: once the controller declared it down (within 3 periods) no request
  is lost any more: its own keys are refused at once with the typed error UNAVAILABLE, its hot keys'
  Gets are served by their replicas, the keys it replicated are served by the others; restarted
  later, the rack is back to lambda < 0.1 with it within 5 periods;
- a memory-backend agent killed and restarted within 0.5 s: no Get of a key whose origin stayed up
  returns NOT_FOUND after an acknowledged Set, and the history is linearizable;
- an agent SIGKILLed, declared down and then removed from the ring (docs/protocol.md
  "Membership"): within 3 periods its former keys' Gets are served by their new owners (none fails
  any more), its hot keys restored from their replicas keep their acknowledged values (the
  history is linearizable but for the keys reported lost, checked up to the removal), and the
  rack is balanced again (lambda < 0.1) within 5 periods.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from kvswitch.consistency.lincheck import check_history
from kvswitch.protocol import HashRing, pad_key
from tests.e2e.test_rack import BASE, FAST, HISTORY, SERVERS

pytestmark = [pytest.mark.netns, pytest.mark.slow]

PERIOD = 1.0


def _event(run: Any, action: str) -> dict[str, Any]:
    (event,) = [e for e in run.summary["events"] if e["action"] == action]
    return event


def _intervals(run: Any) -> list[dict[str, Any]]:
    """Every loadgen's per-second intervals, with their end time (Unix seconds)."""
    start = run.summary["load_start"]
    return [
        {**iv, "end": start + iv["t"]} for lg in run.summary["loadgen"] for iv in lg["intervals"]
    ]


def _lost_keys(run: Any) -> set[bytes]:
    """Hot keys the controller reported lost: a restarted memory-backend origin held their latest
    completed version and no replica could give it back (docs/controller_runtime.md)."""
    log = "".join(p.read_text() for p in sorted(run.out.glob("controller-*.log")))
    return {bytes.fromhex(k) for k in re.findall(r"hot key lost: ([0-9a-f]{32})", log)}


def _linearizable(
    run: Any, lost_after: float = float("inf"), lost: set[bytes] | None = None
) -> list[Any]:
    """The history checked with lincheck; for the keys the controller reported lost (or
    ``lost``), only the operations that began before ``lost_after`` (the restart, the removal):
    the issue allows an acknowledged Set held only by a dead memory-backend server to be lost,
    reported, not served stale."""
    lost = _lost_keys(run) | (lost or set())
    ops = [op for op in run.history() if op.key not in lost or op.call < lost_after]
    if lost:
        print(f"reported lost, checked up to the restart only: {sorted(k.hex() for k in lost)}")
    assert len({op.key for op in ops}) == 4, "the history clients did not run"
    bad = [r for r in check_history(ops) if not r.ok]
    assert not bad, [r.key for r in bad]
    return ops


def _origin_keys(server: int) -> list[bytes]:
    ring = HashRing(SERVERS)
    return [pad_key(f"lin{i}".encode()) for i in range(4) if ring.origin(f"lin{i}") == server]


def test_dead_server_then_restarted(rack: Any) -> None:
    # s8 is the origin of the history keys lin0 and lin3 (consistent hashing over 8 servers)
    victim, index = "s8", 7
    assert _origin_keys(index), "pick a victim that is the origin of a history key"
    run = rack(*BASE, *FAST, *HISTORY, "--duration", "24", "--period", str(PERIOD),
               "--kill", f"{victim}@6", "--restart", f"{victim}@16", timeout=240)  # fmt: skip
    assert not run.summary["failed"], run.summary["failed"]
    killed, restarted = _event(run, "kill")["time"], _event(run, "restart")["time"]
    down = [m for m in run.metrics if f"{victim}:down" in m["events"]]
    assert len(down) == 1, run.stdout
    detection = down[0]["time"] - killed
    print(f"{victim} declared down {detection:.2f} s after its SIGKILL")
    assert detection <= 3 * PERIOD

    # from 3 periods after the kill until the restart: nothing lost, the victim's keys refused
    ivs = [iv for iv in _intervals(run) if killed + 3 * PERIOD < iv["end"] - 1 <= restarted - 1]
    assert len(ivs) >= 5, ivs
    sent = sum(iv["sent"] for iv in ivs)
    lost = sum(iv["lost"] for iv in ivs)  # sent in these seconds, never answered (by send time)
    answered_for_victim = sum(iv["replies_per_server"][index] for iv in ivs)
    print(f"while down: {sent} sent, {lost} lost, {answered_for_victim} answered UNAVAILABLE")
    assert lost <= 0.002 * sent, (lost, sent)
    assert sum(lg["errors"] for lg in run.summary["loadgen"]) >= answered_for_victim > 0

    # the victim's hot keys kept serving Gets (from their replicas) while it was down
    own = set(_origin_keys(index))
    ops = _linearizable(run, _event(run, "restart")["mono"])
    since, until = _event(run, "kill")["mono"] + 3 * PERIOD, _event(run, "restart")["mono"]
    served = [
        op
        for op in ops
        if op.kind == "get" and op.key in own and since < op.call and op.ret < until
    ]
    print(f"{len(served)} Gets of {victim}'s hot keys served while it was down")
    # the holders of its keys in the last plan before the kill (CI, 2026-11-25: 0 served once,
    # in 1 run of many; the plan then was not recorded)
    before = [m["holders"] for m in run.metrics if m["time"] <= killed][-1:] or [{}]
    holders = {k.hex()[:8]: before[0].get(k.hex(), []) for k in own}
    assert len(served) > 50, holders

    # restarted: seen up by the first ping after its agent serves again (within 2 periods of
    # "ready", as in test_fast_restart_of_a_memory_agent), carrying load in the 2 periods after
    # that one and balanced (lambda < 0.1) within 5 periods from it; the one that sees it ends
    # with its lambda over the 7 servers the switch served (docs/rack.md measured "within 3
    # periods in 3 runs of 5, within 5 in all"; a CI-like run on BMv2 had 0.221, 0.123, ...,
    # 0.035 in the 5th). Counted from its agent serving, not from the restart command: the
    # agent's start-up is not the controller's (0.92 s in a run beside other tests, where it was
    # seen up in the 3rd period after the command, and the 2nd and 3rd carried none of its load)
    ready = _event(run, "restart")["ready"]
    after = [m for m in run.metrics if m["time"] > restarted]
    up = [i for i, m in enumerate(after) if any(f"{victim}:up" in e for e in m["events"])][:1]
    assert up and after[up[0]]["time"] - ready <= 2 * PERIOD, (ready, after[:5])
    after = after[up[0] : up[0] + 5]
    print(f"seen up in the period ending {after[0]['time'] - ready:.2f} s after its agent served "
          f"again; lambda in the 5 periods from it: {[round(m['lambda'], 3) for m in after]}")  # fmt: skip
    assert min(m["lambda"] for m in after) < 0.1, after
    assert all(m["loads"][index] > 0 for m in after[1:3]), after


def test_fast_restart_of_a_memory_agent(rack: Any) -> None:
    # s3 originates no history key: their origins stay up; it replicates some of them (checked)
    victim, index = "s3", 2
    assert not _origin_keys(index)
    run = rack(*BASE, *HISTORY, "--duration", "12", "--period", str(PERIOD),
               "--kill", f"{victim}@6", "--restart", f"{victim}@6.1", timeout=240)  # fmt: skip
    assert not run.summary["failed"], run.summary["failed"]
    kill, restart = _event(run, "kill"), _event(run, "restart")
    assert restart["time"] - kill["time"] < 0.5
    history_keys = {pad_key(f"lin{i}".encode()).hex() for i in range(4)}
    held = history_keys & set(kill["held"])
    print(f"{victim} held {len(held)} history keys when killed; restarted after "
          f"{restart['time'] - kill['time']:.2f} s, serving after "
          f"{restart['ready'] - kill['time']:.2f} s")  # fmt: skip
    assert held, "the victim held no history key: the test would prove nothing"
    # the restart is seen by the first ping after the new agent answers (docs/controller_runtime.md
    # "Failure detection": within P), in the metrics of that period, which end once its plan is
    # written: within 2 P of "ready". Not of the restart command: the agent's own start-up (about
    # 0.2 s, 1.1 s on a loaded CI machine) is not the controller's
    seen = [m for m in run.metrics if any(e.startswith(f"{victim}:") for e in m["events"])]
    assert seen, run.stdout
    print(f"the restart seen in the period ending {seen[0]['time'] - restart['ready']:.2f} s "
          f"after the agent served again")  # fmt: skip
    assert seen[0]["time"] - restart["ready"] <= 2 * PERIOD, run.stdout
    ops = _linearizable(run)
    # no NOT_FOUND for a key after its first acknowledged Set (nothing here deletes)
    first_set = {}
    for op in sorted(ops, key=lambda o: o.ret):
        if op.kind == "set" and op.ret != float("inf"):
            first_set.setdefault(op.key, op.ret)
    missing = [
        op
        for op in ops
        if op.kind == "get" and op.output is None and op.call > first_set.get(op.key, float("inf"))
    ]
    assert not missing, missing[:5]


def test_dead_server_removed(rack: Any) -> None:
    # s8 is the origin of the history keys lin0 and lin3, hot (they take 150 Gets/s each)
    victim, index = "s8", 7
    own = set(_origin_keys(index))
    assert own, "pick a victim that is the origin of a history key"
    run = rack(*BASE, *FAST, *HISTORY, "--duration", "18", "--period", str(PERIOD),
               "--kill", f"{victim}@5", "--remove", f"{victim}@9", timeout=240)  # fmt: skip
    assert not run.summary["failed"], run.summary["failed"]
    assert [m for m in run.metrics if f"{victim}:down" in m["events"]], run.stdout
    removal = _event(run, "remove")
    handoff = removal["answer"]["handoff"]
    restored = {bytes.fromhex(k) for k in handoff["hot_keys_restored"]}
    lost = own - restored  # its cold keys and the hot ones no replica could give back
    print(f"{victim} removed while down in {removal['done'] - removal['time']:.3f} s: "
          f"{len(restored)} hot keys restored at their new origins "
          f"({len(own & restored)} of its {len(own)} history keys), "
          f"{len(handoff['hot_keys_lost'])} lost")  # fmt: skip
    assert handoff["was_down"] and own & restored, handoff

    # its former keys are served by their new owners again within 3 periods: no Get fails later
    done, settled = removal["done_mono"], removal["done_mono"] + 3 * PERIOD
    failed = [
        json.loads(line)
        for path in run.summary["history"]
        for line in Path(f"{path}.failed").read_text().splitlines()
    ]
    since = [f for f in failed if bytes.fromhex(f["key"]) in own and f["call"] > done]
    late = [f for f in since if f["call"] > settled]
    ops = run.history()
    served = [op for op in ops if op.kind == "get" and op.key in own and op.call > done]
    first = min((op.ret for op in served), default=float("inf")) - done
    print(f"{len(served)} Gets of its history keys served after the removal (the first "
          f"{first:.3f} s after it); failed Gets of them after it: {len(since)}, "
          f"{len(late)} more than 3 periods after it")  # fmt: skip
    assert not late, late[:5]
    assert first <= 3 * PERIOD and len(served) > 50
    ivs = [iv for iv in _intervals(run) if iv["end"] - 1 > removal["done"] + 3 * PERIOD]
    sent = sum(iv["sent"] for iv in ivs)
    lost_requests = sum(iv["lost"] for iv in ivs)  # by send time
    to_victim = sum(iv["sent_per_server"][index] for iv in ivs)
    answered = sum(iv["replies_per_server"][index] for iv in ivs)  # UNAVAILABLE, by the switch
    print(f"C loadgens from 3 periods after the removal: {sent} sent, {lost_requests} lost, "
          f"{to_victim} sent to {victim}, {answered} answered UNAVAILABLE")  # fmt: skip
    assert ivs and to_victim == answered == 0, ivs
    assert lost_requests <= 0.002 * sent, (lost_requests, sent)

    # restored keys keep their acknowledged values: their whole history is linearizable; the
    # keys lost with it only up to the removal
    _linearizable(run, lost_after=removal["mono"], lost=lost)

    after = [m for m in run.metrics if m["time"] > removal["done"]][:5]
    lambdas = [round(m["lambda"], 3) for m in after]
    print(f"lambda in the 5 periods after the removal: {lambdas}")
    assert len(after) == 5 and min(lambdas) < 0.1, after
    assert run.summary["controller_status"] == 0
