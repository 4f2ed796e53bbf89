"""One control period: read the switch, predict, adapt T, place replicas, apply the difference.

The only I/O goes through a :class:`~kvswitch.controller.driver.Driver`; the same code runs on a
real switch and in the simulator.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from kvswitch.controller.driver import Driver
from kvswitch.controller.ops import Operation
from kvswitch.controller.placement import POLICIES, holder_loads, place
from kvswitch.controller.plan import Plan, build_plan, diff
from kvswitch.controller.predictor import Predictor, merge_observations
from kvswitch.controller.rack import Rack
from kvswitch.controller.threshold import Threshold


@dataclass
class ControllerConfig:
    k: int = 10_000
    alpha: float = 0.5
    bound: float = 0.30
    gamma: float = 0.8
    t0: float | None = None
    policy: str = "ring"
    max_replicas_per_server: int | None = None
    tolerance: float = 0.002
    write_ratio: float = 0.0  # estimated share of Sets (balance policy)
    window: float = 0.0  # Set-to-confirm delay as a fraction of the period (balance policy)

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ValueError(f"unknown policy {self.policy!r}; one of {', '.join(POLICIES)}")
        if self.k <= 0:
            raise ValueError("k must be > 0")


@dataclass
class PeriodReport:
    observed: dict[bytes, int]
    predicted: list[tuple[bytes, float]]
    loads: list[int]
    threshold: float
    plan: Plan
    ops: list[Operation] = field(default_factory=list)


def cold_load_estimate(
    loads: Sequence[float],
    hot_counts: Mapping[bytes, int],
    plan: Plan,
    predicted: Sequence[tuple[bytes, float]],
    observed: Mapping[bytes, int],
    origin_of: Callable[[bytes], int],
    write_ratio: float = 0.0,
    window: float = 0.0,
) -> list[float]:
    """Per-server load of the keys that will be cold next period, from this period's counters.

    A hot key's queries are taken as split over its holders by round-robin (with writes: the model
    of :func:`placement.holder_loads`); keys that leave the hot set return to their origin, keys
    that join it leave their origin's cold load.
    """
    base = [float(x) for x in loads]
    wanted = {key for key, _ in predicted}
    for key, kp in plan.keys.items():
        count = float(hot_counts.get(key, 0))
        at_origin, at_replica = holder_loads(count, len(kp.holders), write_ratio, window)
        for s in kp.holders:
            base[s] -= at_origin if s == kp.origin else at_replica
        if key not in wanted:
            base[kp.origin] += count
    for key, _ in predicted:
        if key not in plan.keys:
            base[origin_of(key)] -= float(observed.get(key, 0))
    return [max(0.0, x) for x in base]


class Controller:
    def __init__(
        self, config: ControllerConfig, origin_of: Callable[[bytes], int], rack: Rack, slots: int
    ) -> None:
        if config.k > slots:
            raise ValueError(f"k = {config.k} exceeds the switch's {slots} hot-key slots")
        servers = len(rack)
        self.rack = rack
        self.config = config
        self.origin_of = origin_of
        self.predictor = Predictor(config.alpha, config.k)
        self.threshold = Threshold(config.bound, config.gamma, config.t0)
        self.plan = Plan(servers, slots)

    def step(self, driver: Driver) -> PeriodReport:
        hot = driver.read_hot_counters()
        pipe = driver.read_hashpipe()
        loads = driver.read_load_counters()
        driver.reset_counters()
        previous = self.plan
        report = self.decide(hot, pipe, loads)
        try:
            driver.apply(report.ops)
        except Exception:
            # the switch may hold part of the batch: keep the old plan so that the next period's
            # diff is computed against it (and fails loudly again rather than drifting silently)
            self.plan = previous
            raise
        return report

    def decide(
        self, hot: Mapping[bytes, int], pipe: Sequence[tuple[bytes, int]], loads: Sequence[int]
    ) -> PeriodReport:
        """The planning half of :meth:`step` (pure apart from the controller's own state)."""
        cfg = self.config
        observed = merge_observations(hot, pipe)
        predicted = self.predictor.update(observed)
        threshold = self.threshold.update(loads)
        origins = [self.origin_of(key) for key, _ in predicted]
        cold = cold_load_estimate(
            loads, hot, self.plan, predicted, observed, self.origin_of, cfg.write_ratio, cfg.window
        )
        holders = place(
            predicted,
            origins,
            threshold,
            self.plan.servers,
            cfg.policy,
            cold_loads=cold,
            max_replicas_per_server=cfg.max_replicas_per_server,
            tolerance=cfg.tolerance,
            write_ratio=cfg.write_ratio,
            window=cfg.window,
        )
        new_plan = build_plan(
            [(key, h) for (key, _), h in zip(predicted, holders, strict=True)],
            self.plan,
            self.plan.servers,
            self.plan.slots,
        )
        ops = diff(self.plan, new_plan, self.rack)
        self.plan = new_plan
        return PeriodReport(observed, predicted, list(loads), threshold, new_plan, ops)
