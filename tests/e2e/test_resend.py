"""Aggressive resends on the Mininet rack (issue 20, docs/protocol.md "Agent rules"): hot keys
written by several clients whose resend timeouts are below the switch-server round trip, the C
load generator (``--window``, ``--timeout-us``, ``--resends``: the same request id again while
the first attempt is on its way) and the Python history clients (``--timeout``, ``--retries``)
both. Repeats of hot writes cross the switch again, some stamped after another writer's write:
the histories must stay linearizable (the explorer's ``resend-overtaken``, closed by
``F_SETTLED``, and ``resend-reread``, closed by rule 6 passing a replica's reply only at exactly
origin_ver), and the resends must really have happened.

Uses the rack's ``--loadgen-arg`` and ``--history-arg`` (extra arguments for every loadgen and
every history client) and kvsrack.history's ``--timeout``/``--retries``.
"""

from __future__ import annotations

from typing import Any

import pytest

from kvswitch.protocol import HashRing, pad_key
from tests.e2e.test_rack import BASE, SERVERS, check_linearizable

pytestmark = [pytest.mark.netns, pytest.mark.slow]

# 2 x 3 history threads on 4 keys; the loadgen keeps 4 requests in flight over Zipf keys with
# 20 % Sets. The resend timeouts sit below each target's switch-server round trip under this load
# (most requests are resent): on BMv2 the history clients resend after 2 ms (up to 100 times),
# the loadgen after 200 us (once); the software switch, itself Python, answers later and is
# starved by that many resends (measured 2026-11-25: with 1 ms, 6-22 operations per key in 8 s),
# so there the history clients resend after 3 ms (up to 60 times), the loadgen after 1 ms (up to 3
# times). The history keys must be hot and replicated for the test to prove anything, so the Zipf
# load is kept low, and on BMv2, whose resends are the more numerous, the history clients write
# 10 % (30 % on the software switch) and the loadgen resends once: resent Sets count as writes
# and the placement is write-aware (with 30 % Sets and 3 loadgen resends the history keys had no
# replica in 4 of 10 BMv2 runs). Periods stretch to seconds under these storms: a push waits for
# its SYNC reflection, which the switch refuses while a write is pending (up to 1.5 s). One key
# after another they took 4.9-11.5 s (up to 13.7 s in CI); in parallel about 2 s (docs/rack.md,
# "End-to-end tests"). Hence 12 s of load.
COMMON = [
    "--history-threads", "3", "--history-keys", "4",
    "--read-tail", "2", "--write-ratio", "0.2",
    "--loadgen-arg=--window=4",
]  # fmt: skip
RESEND = {
    "bmv2": [*COMMON, "--rate", "200", "--history-rate", "150", "--history-set-ratio", "0.1",
             "--loadgen-arg=--timeout-us=200", "--loadgen-arg=--resends=1",
             "--history-arg=--timeout=0.002", "--history-arg=--retries=100"],
    "softswitch": [*COMMON, "--rate", "300", "--history-rate", "150", "--history-set-ratio", "0.3",
                   "--loadgen-arg=--timeout-us=1000", "--loadgen-arg=--resends=3",
                   "--history-arg=--timeout=0.003", "--history-arg=--retries=60"],
}  # fmt: skip


def test_resends_below_the_round_trip_stay_linearizable(rack: Any, target: str) -> None:
    run = rack(*BASE, *RESEND[target], "--duration", "12", "--period", "0.5", timeout=240)
    assert not run.summary["failed"], run.summary["failed"]
    resent = sum(lg.get("timeout_resends", 0) for lg in run.summary["loadgen"])
    assert resent > 100, f"the loadgen hardly resent ({resent}): the test would prove nothing"
    # many of the history clients' Gets time out (and are left out): fewer operations
    n = check_linearizable(run, min_ops=10)
    keys = [f"lin{i}" for i in range(4)]
    # the resends crossed the switch while the keys had replicas: a plan installed before the load
    # ended placed replicas for a history key (the plan when the versions were read may hold
    # none: CI, 2026-11-25, 0 of 4 then, with 232 operations linearizable)
    wires = {pad_key(k.encode()).hex() for k in keys}
    plans = [m for m in run.metrics if m["time"] <= run.summary["load_end"]]  # in force in the load
    hot = {w for m in plans for w, held in m["holders"].items() if len(held) > 1}
    # the copies are not compared with the origin's (versions_agree): a replica may hold a newer
    # one, the copy of a repeat the origin did not adopt (no F_SETTLED; docs/protocol.md, "Agent
    # rules"), which rule 6 keeps out of reads (seen here: 2 of 4 runs, 24 to 205 versions above)
    ring, versions = HashRing(SERVERS), run.summary["versions"]
    above = 0
    for key in keys:
        wire = pad_key(key.encode()).hex()
        origin = versions[f"s{ring.origin(key) + 1}"].get(wire)
        assert origin is not None and origin[2], (key, "the origin does not hold it")
        above += sum(1 for r in versions.values() if (v := r.get(wire)) and v[:2] > origin[:2])
    # the controller's periods while the storm lasted (each period's pushes wait for SYNC
    # reflections; docs/rack.md "End-to-end tests")
    start, end = run.summary["load_start"], run.summary["load_end"]
    storm = sorted(
        m["period_ms"]
        for m in run.metrics
        if m["time"] >= start and m["time"] - m["period_ms"] / 1e3 <= end
    )
    spans = f"{len(storm)} periods in the load" + (
        f", {storm[len(storm) // 2]:.0f}/{storm[-1]:.0f} ms median/longest" if storm else ""
    )
    first = min((m["time"] for m in plans if set(m["holders"]) & wires), default=None)
    when = "never" if first is None else f"{first - start:.1f} s"
    print(
        f"{resent} loadgen resends; {n} operations linearizable; {len(hot & wires)} of 4 hot; "
        f"{above} copies above their origin's; {spans}; "
        f"first history key replicated at {when}"
    )
    if not hot & wires:
        # the histories were checked above (linearizable); what is missing is the precondition
        # for the strong claim. Seen on BMv2 beside the CI's other work while the controller
        # pushed one key after another: its periods stretched to 10-14 s (pushes waiting for SYNC
        # reflections in the resend storm), so the history keys got replicas only after the load
        # (issue 20). Pushes now run in parallel. Reported, not passed.
        slow = max(m["period_ms"] for m in run.metrics)
        pytest.skip(
            f"the history keys had no replicas before the load ended (longest controller period "
            f"{slow:.0f} ms): linearizable, but the resends did not cross replicated keys"
        )
