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

from kvswitch.protocol import pad_key
from tests.e2e.test_rack import BASE, check_linearizable, versions_agree

pytestmark = [pytest.mark.netns, pytest.mark.slow]

# 2 x 3 history threads on 4 keys, 30 % Sets, resending after 1 ms (up to 200 times); the
# loadgen keeps 4 requests in flight over Zipf keys with 20 % Sets, resending after 200 us, up to
# 3 times
RESEND = [
    "--history-threads", "3", "--history-keys", "4", "--history-rate", "100",
    "--history-set-ratio", "0.3", "--read-tail", "2", "--rate", "1000", "--write-ratio", "0.2",
    "--loadgen-arg=--window=4", "--loadgen-arg=--timeout-us=200", "--loadgen-arg=--resends=3",
    "--history-arg=--timeout=0.001", "--history-arg=--retries=200",
]  # fmt: skip


def test_resends_below_the_round_trip_stay_linearizable(rack: Any, target: str) -> None:
    if target == "softswitch":
        # measured 2026-11-25: 6 Python history threads resending every 1 ms starve the software
        # switch (itself Python) of CPU: 6-22 operations per key in 8 s, most Gets timed out
        # (issue 20 left open on this)
        pytest.skip("resends below the round trip saturate the software switch's CPU; BMv2 only")
    run = rack(*BASE, *RESEND, "--duration", "8", "--period", "0.5", timeout=240)
    assert not run.summary["failed"], run.summary["failed"]
    resent = sum(lg.get("timeout_resends", 0) for lg in run.summary["loadgen"])
    assert resent > 100, f"the loadgen hardly resent ({resent}): the test would prove nothing"
    # most of the history clients' Gets time out at 1 ms (and are left out): fewer operations
    n = check_linearizable(run, min_ops=10)
    # no copy newer than the origin's; replicas may lag it after a repeat the origin adopted
    replicated = versions_agree(run, [f"lin{i}" for i in range(4)], lagging_ok=True)
    print(f"{resent} loadgen resends; {n} operations linearizable; {replicated} of 4 keys hot")
    assert replicated > 0, "the history keys never became hot: the test would prove nothing"
