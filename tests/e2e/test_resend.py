"""Aggressive resends on the Mininet rack (issue 20, docs/protocol.md "Agent rules"): hot keys
written by several clients whose resend timeouts are below the switch-server round trip, the C
load generator (``--window``, ``--timeout-us``, ``--resends``: the same request id again while
the first attempt is on its way) and the Python history clients (``--timeout``, ``--retries``)
both. Repeats of hot writes cross the switch again, some stamped after another writer's write:
the histories must stay linearizable (the explorer's ``resend-overtaken``, closed by
``F_SETTLED``), and the resends must really have happened.

Uses rack.py's ``--loadgen-arg`` and ``--history-arg`` (extra arguments for every loadgen and
every history client) and mininet/history.py's ``--timeout``/``--retries``.
"""

from __future__ import annotations

from typing import Any

import pytest

from kvswitch.protocol import HashRing, pad_key
from tests.e2e.test_rack import BASE, SERVERS, check_linearizable

pytestmark = [pytest.mark.netns, pytest.mark.slow]

# 2 x 3 history threads on 4 keys, 30 % Sets; the loadgen keeps 4 requests in flight over Zipf
# keys with 20 % Sets, resending up to 3 times. The resend timeouts sit below each target's
# switch-server round trip under this load: on BMv2 (p50 0.6 ms) the history clients resend after
# 1 ms (up to 200 times), the loadgen after 200 us; the software switch, itself Python, answers
# later (p50 1.7 ms) and is starved by that many resends (measured 2026-11-25: 6-22 operations per
# key in 8 s), so there the history clients resend after 3 ms (up to 60 times), the loadgen after
# 1 ms, at a lower rate.
COMMON = [
    "--history-threads", "3", "--history-keys", "4",
    "--history-set-ratio", "0.3", "--read-tail", "2", "--write-ratio", "0.2",
    "--loadgen-arg=--window=4", "--loadgen-arg=--resends=3",
]  # fmt: skip
RESEND = {
    "bmv2": [*COMMON, "--rate", "1000", "--history-rate", "100", "--loadgen-arg=--timeout-us=200",
             "--history-arg=--timeout=0.001", "--history-arg=--retries=200"],
    "softswitch": [*COMMON, "--rate", "300", "--history-rate", "150",
                   "--loadgen-arg=--timeout-us=1000", "--history-arg=--timeout=0.003",
                   "--history-arg=--retries=60"],
}  # fmt: skip


def test_resends_below_the_round_trip_stay_linearizable(rack: Any, target: str) -> None:
    run = rack(*BASE, *RESEND[target], "--duration", "8", "--period", "0.5", timeout=240)
    assert not run.summary["failed"], run.summary["failed"]
    resent = sum(lg.get("timeout_resends", 0) for lg in run.summary["loadgen"])
    assert resent > 100, f"the loadgen hardly resent ({resent}): the test would prove nothing"
    # many of the history clients' Gets time out (and are left out): fewer operations
    n = check_linearizable(run, min_ops=10)
    keys = [f"lin{i}" for i in range(4)]
    # the resends crossed the switch while the keys had replicas: some period of the load placed
    # replicas for a history key (the plan when the versions were read may hold none: CI,
    # 2026-11-25, 0 of 4 then, with 232 operations linearizable)
    wires = {pad_key(k.encode()).hex() for k in keys}
    hot = {w for m in run.during_load(0.5) for w, held in m["holders"].items() if len(held) > 1}
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
    print(
        f"{resent} loadgen resends; {n} operations linearizable; {len(hot & wires)} of 4 hot; "
        f"{above} copies above their origin's"
    )
    assert hot & wires, "the history keys never had replicas: the test would prove nothing"
