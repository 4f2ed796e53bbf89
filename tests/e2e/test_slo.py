"""What balancing buys on real packets (issue 22): with 8 servers of equal bounded capacity
(``kvswitch agent --capacity``), a short ramp at Zipf 1.2 finds a higher rate sustained at the
p99 bound with the controller balancing than with ``--observe-only``. Asserts the direction, not a
figure: ``kvswitch bench slo`` measures the ratio (docs/rack.md)."""

from __future__ import annotations

from typing import Any

import pytest

from kvswitch.bench.rack_ramp import figures, rack_flags, sustained
from kvswitch.bench.slo import P99, workload_flags

pytestmark = [pytest.mark.netns, pytest.mark.slow]

CAPACITY = 100.0  # requests/s per server: 10 ms each, well above the CPU's share of a request
BOUND_MS = 10 * 1000 / CAPACITY  # 10 x the service time (the unloaded p50 is about 11 ms)
RATE = 400  # half the rack's 800/s: the busiest server without balancing gets > 100/s


def test_balancing_sustains_a_higher_rate_at_the_p99_bound(rack: Any) -> None:
    flags = workload_flags(CAPACITY, "fixed", 300, 1.2, 0.0)
    rows: dict[str, dict[str, Any]] = {}
    for mode in ("balanced", "unbalanced"):
        observe = mode == "unbalanced"
        args = rack_flags(RATE, duration=8.0, observe_only=observe, extra=flags)
        rows[mode] = {"rate": RATE, **figures(rack(*args).summary)}
        print(mode, {k: round(v, 3) for k, v in rows[mode].items()})
    best = {mode: sustained([row], BOUND_MS, P99) for mode, row in rows.items()}
    # without balancing the server of the hottest keys is past its capacity ...
    assert rows["unbalanced"]["offered_max_share"] * RATE > CAPACITY, rows["unbalanced"]
    # ... and balancing sustains the rate the unbalanced rack does not
    assert best["balanced"] > best["unbalanced"], (best, rows)
