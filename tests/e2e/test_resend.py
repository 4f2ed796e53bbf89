"""Aggressive resends on the Mininet rack (issue 20, docs/protocol.md "Agent rules"): hot keys
written by several clients whose resend timeouts are below the switch-server round trip, the C
load generator (``--window``, ``--timeout-us``, ``--resends``: the same request id again while
the first attempt is on its way) and the Python history clients (``--timeout``, ``--retries``)
both. Repeats of hot writes cross the switch again, some stamped after another writer's write:
the histories must stay linearizable (the explorer's ``resend-overtaken``, closed by
``F_SETTLED``), and the resends must really have happened.

Needs rack.py's ``--loadgen-arg`` and ``--history-arg`` (extra arguments for every loadgen and
every history client) and mininet/history.py's ``--timeout``/``--retries``; skipped without them.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.conftest import rack_script
from tests.e2e.test_rack import BASE, check_linearizable, versions_agree

pytestmark = [pytest.mark.netns, pytest.mark.slow]

# 2 x 3 history threads on 4 keys, 30 % Sets, resending after 0.5 ms; the loadgen keeps 16
# requests in flight over Zipf keys with 20 % Sets, resending after 200 us, up to 50 times
RESEND = [
    "--history-threads", "3", "--history-keys", "4", "--history-rate", "100",
    "--history-set-ratio", "0.3", "--read-tail", "2", "--rate", "1000", "--write-ratio", "0.2",
    "--loadgen-arg=--window=16", "--loadgen-arg=--timeout-us=200", "--loadgen-arg=--resends=50",
    "--history-arg=--timeout=0.0005", "--history-arg=--retries=50",
]  # fmt: skip


def test_resends_below_the_round_trip_stay_linearizable(rack: Any) -> None:
    text = rack_script().read_text()
    if "--loadgen-arg" not in text or "--history-arg" not in text:
        pytest.skip("mininet/rack.py has no --loadgen-arg/--history-arg yet")
    run = rack(*BASE, *RESEND, "--duration", "8", "--period", "0.5", timeout=240)
    assert not run.summary["failed"], run.summary["failed"]
    resent = sum(lg.get("timeout_resends", 0) for lg in run.summary["loadgen"])
    assert resent > 100, f"the loadgen hardly resent ({resent}): the test would prove nothing"
    n = check_linearizable(run)
    replicated = versions_agree(run, [f"lin{i}" for i in range(4)])
    print(f"{resent} loadgen resends; {n} operations linearizable; {replicated} of 4 keys hot")
    assert replicated > 0, "the history keys never became hot: the test would prove nothing"
