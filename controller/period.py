"""One control period: read the switch, predict, adapt T, place replicas, apply the difference.

The only I/O goes through a :class:`~kvswitch.controller.driver.Driver`; the same code runs on a
real switch and in the simulator.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

from kvswitch.controller.driver import Driver
from kvswitch.controller.hashring import ring_transfer
from kvswitch.controller.ops import Operation
from kvswitch.controller.placement import POLICIES, holder_load, place
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
    # share of Sets assumed for a key whose own share was not measured (balance policy): hot keys
    # are measured by the data plane (hotkey_writes); new candidates take the hot keys' overall
    # share when there is one, else this
    write_ratio: float = 0.0

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
    cold: list[float] = field(default_factory=list)  # each server's cold load it planned with
    writes: dict[bytes, int] = field(default_factory=dict)  # Sets and Deletes per hot key


@dataclass(frozen=True)
class FabricShare:
    """What the fabric controller decided for this rack (docs/fabric.md "Controllers"):
    ``keys``, the fabric-hot keys (and those leaving a spine), never hot here; per server of the
    rack, ``measured``, the load the spines sent it during their last period, and ``expected``,
    the load the new fabric plan puts on it next period. The rack plans with its measured loads
    minus ``measured`` plus ``expected``: the fabric's share as it will be, not as it was."""

    keys: frozenset[bytes]
    measured: tuple[float, ...] = ()
    expected: tuple[float, ...] = ()

    def planning_loads(self, loads: Sequence[float]) -> list[float]:
        """``loads`` with the fabric's share of next period instead of last period's (as
        measured loads when the share has no loads for every server)."""
        if len(self.measured) != len(loads) or len(self.expected) != len(loads):
            return [float(x) for x in loads]
        return [
            max(0.0, x - m) + e for x, m, e in zip(loads, self.measured, self.expected, strict=True)
        ]


def cold_load_estimate(
    loads: Sequence[float],
    hot_counts: Mapping[bytes, int],
    plan: Plan,
    predicted: Sequence[tuple[bytes, float]],
    observed: Mapping[bytes, int],
    origin_of: Callable[[bytes], int],
    write_ratios: Mapping[bytes, float] | None = None,
    gone: Collection[bytes] = (),
) -> list[float]:
    """Per-server load of the keys that will be cold next period, from this period's counters.

    A hot key's queries are taken as split over its holders by round-robin (with writes, its own
    share ``write_ratios[key]``: the model of :func:`placement.holder_load`); keys that leave the
    hot set return to their origin, except those in ``gone`` (another switch serializes them
    next period: their load goes where that switch's plan puts it), keys that join it leave their
    origin's cold load.
    """
    ratios = write_ratios or {}
    base = [float(x) for x in loads]
    wanted = {key for key, _ in predicted}
    for key, kp in plan.keys.items():
        count = float(hot_counts.get(key, 0))
        each = holder_load(count, len(kp.holders), ratios.get(key, 0.0))
        for s in kp.holders:
            base[s] -= each
        if key not in wanted and key not in gone:
            base[kp.origin] += count
    for key, _ in predicted:
        if key not in plan.keys:
            base[origin_of(key)] -= float(observed.get(key, 0))
    return [max(0.0, x) for x in base]


def key_write_ratios(hot: Mapping[bytes, int], writes: Mapping[bytes, int]) -> dict[bytes, float]:
    """Each hot key's share of Sets and Deletes this period (keys queried at least once)."""
    return {key: min(1.0, writes.get(key, 0) / count) for key, count in hot.items() if count > 0}


def overall_write_ratio(
    hot: Mapping[bytes, int], writes: Mapping[bytes, int], fallback: float
) -> float:
    """The share of Sets and Deletes over all hot keys' queries, ``fallback`` with none."""
    total = sum(hot.values())
    return min(1.0, sum(writes.values()) / total) if total > 0 else fallback


def restrict_holders(
    key: bytes,
    holders: tuple[int, ...],
    plan: Plan,
    down: frozenset[int],
    excluded: frozenset[int],
) -> tuple[int, ...]:
    """``holders`` (origin first) without the servers that may hold no replica this period
    (``excluded``: declared dead, or restarted and not yet re-pushed). A key whose origin is in
    ``down`` keeps the replicas it has (minus the excluded): nothing can push it new ones (its
    origin cannot SYNC), and the ones it has keep serving its Gets (docs/controller_runtime.md
    "Failure detection")."""
    origin = holders[0]
    if origin in down:
        before = plan.keys.get(key)
        kept = before.replicas if before is not None else ()
        return (origin, *(s for s in kept if s not in excluded))
    return (origin, *(s for s in holders[1:] if s not in excluded))


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
        # servers the runtime's failure detector declared dead (their keys' replicas are kept
        # fixed), and those that may hold no replica this period (dead, or just restarted)
        self.down: frozenset[int] = frozenset()
        self.excluded: frozenset[int] = frozenset()
        # servers down during the last decision (their requests were refused until this period's
        # end at least), and each server's cold load the last time it served a whole period
        self._down_before: frozenset[int] = frozenset()
        self._cold_seen: dict[int, float] = {}
        self._members_before: frozenset[int] | None = None  # the ring's at the last decision
        # the ring's members (docs/protocol.md "Membership"): hot keys are placed on them only;
        # None: every server of the rack
        self.members: tuple[int, ...] | None = None
        # keys another switch serializes (a spine of the fabric, docs/fabric.md): never hot here
        self.foreign: frozenset[bytes] = frozenset()

    def step(
        self,
        driver: Driver,
        fabric: FabricShare | None = None,
        more: Callable[[Sequence[Operation]], Sequence[Operation]] | None = None,
    ) -> PeriodReport:
        """Read, plan and apply one period. ``fabric``: the fabric's decision for this rack (its
        keys replace :attr:`foreign`; its loads are planned with, see :meth:`decide`). ``more``:
        given the plan's operations, operations applied after them in the same batch (the
        runtime's retried pushes, so that the driver runs them beside the plan's pushes); they
        are not in the report."""
        hot = driver.read_hot_counters()
        writes = driver.read_hot_writes()
        pipe = driver.read_hashpipe()
        loads = driver.read_load_counters()
        floor = driver.read_version()
        driver.reset_counters()
        previous = self.plan
        report = self.decide(hot, pipe, loads, self.hot_writes(writes), floor, fabric)
        extra = more(report.ops) if more is not None else ()
        try:
            driver.apply([*report.ops, *extra])
        except Exception:
            # the switch may hold part of the batch: keep the old plan so that the next period's
            # diff is computed against it (and fails loudly again rather than drifting silently)
            self.plan = previous
            raise
        return report

    def hot_writes(self, per_slot: Sequence[int]) -> dict[bytes, int]:
        """The ``hotkey_writes`` counts of this period's plan, by key."""
        return {
            key: int(per_slot[kp.slot])
            for key, kp in self.plan.keys.items()
            if kp.slot < len(per_slot)
        }

    def decide(
        self,
        hot: Mapping[bytes, int],
        pipe: Sequence[tuple[bytes, int]],
        loads: Sequence[float],
        writes: Mapping[bytes, int] | None = None,
        floor: int = 0,
        fabric: FabricShare | None = None,
    ) -> PeriodReport:
        """The planning half of :meth:`step` (pure apart from the controller's own state).
        ``writes``: Sets and Deletes of each hot key (its own write ratio; keys without a count
        use ``config.write_ratio``); ``floor``: the switch's ``global_ver`` (see plan.diff);
        ``fabric``: the fabric's keys (they become :attr:`foreign`: a hot one leaves the plan, its
        entries deleted by the diff) and loads (planned with in place of the spines' measured
        share; the report keeps the measured loads)."""
        cfg = self.config
        measured_loads = list(loads)
        if fabric is not None:
            self.foreign = fabric.keys
            loads = fabric.planning_loads(loads)
        observed = merge_observations(hot, pipe)
        predicted = self.predictor.update(observed)
        if self.foreign:
            predicted = [(key, load) for key, load in predicted if key not in self.foreign]
        # in a fabric, a key whose origin is in another rack is not this rack's to plan
        predicted = [(key, load) for key, load in predicted if self.origin_of(key) >= 0]
        # the load of a server down during this period (0, or a part: its requests were refused)
        # says nothing about the balance, nor about its cold load next period; nor does that of a
        # server outside the ring's, or of one that joined it during the period (keys moved to it
        # only then)
        members = self.members if self.members is not None else tuple(range(self.plan.servers))
        before = self._members_before if self._members_before is not None else frozenset(members)
        absent = self.down | self._down_before | (frozenset(members) - before)
        self._down_before, self._members_before = self.down, frozenset(members)
        live = [x for s, x in enumerate(loads) if s not in absent and s in members]
        threshold = self.threshold.update(live or loads)
        origins = [self.origin_of(key) for key, _ in predicted]
        measured = key_write_ratios(hot, writes or {})
        cold = self._stand_in_cold(
            cold_load_estimate(
                loads, hot, self.plan, predicted, observed, self.origin_of, measured, self.foreign
            ),
            absent,
            members,
        )
        if before != frozenset(members):
            cold = self._moved_cold(cold, absent, before, members)
        default = overall_write_ratio(hot, writes or {}, cfg.write_ratio)
        ratios = [measured.get(key, default) for key, _ in predicted]
        # placed over the members only: numbered 0 .. len(members)-1 for place(), then mapped back
        index = {s: i for i, s in enumerate(members)}
        local = place(
            predicted,
            [index[o] for o in origins],
            threshold,
            len(members),
            cfg.policy,
            cold_loads=[cold[s] for s in members],
            max_replicas_per_server=cfg.max_replicas_per_server,
            tolerance=cfg.tolerance,
            write_ratios=ratios,
        )
        holders = [tuple(members[i] for i in h) for h in local]
        excluded = self.excluded | self.down
        if excluded:
            holders = [
                restrict_holders(key, h, self.plan, self.down, excluded)
                for (key, _), h in zip(predicted, holders, strict=True)
            ]
        new_plan = build_plan(
            [(key, h) for (key, _), h in zip(predicted, holders, strict=True)],
            self.plan,
            self.plan.servers,
            self.plan.slots,
        )
        ops = diff(self.plan, new_plan, self.rack, floor)
        self.plan = new_plan
        return PeriodReport(
            observed, predicted, measured_loads, threshold, new_plan, ops, cold, dict(writes or {})
        )

    def _stand_in_cold(
        self, cold: list[float], absent: frozenset[int], members: Sequence[int]
    ) -> list[float]:
        """``cold`` with each absent member's estimate replaced by its last one from a period it
        served whole as a member (else the mean of the others'): a server back from the dead
        would otherwise look idle, draw replicas away from its own hot keys and be the most
        loaded next period. (One that joined the ring is estimated by :meth:`_moved_cold`.)"""
        present = [cold[s] for s in members if s not in absent]
        mean = sum(present) / len(present) if present else 0.0
        out = list(cold)
        for s in members:
            if s in absent:
                out[s] = self._cold_seen.get(s, mean)
            else:
                self._cold_seen[s] = cold[s]
        return out

    def _moved_cold(
        self,
        cold: list[float],
        absent: frozenset[int],
        before: frozenset[int],
        members: Sequence[int],
    ) -> list[float]:
        """After a ring change, each member's cold load next period: the shares of the old
        members' hash space it now owns, times their cold loads (a server's cold keys spread
        evenly over its space). A removed server's load lands on its keys' new origins (a dead
        one's as it was the last period it served whole), a new member takes its share of its
        neighbours'; measured as before, they would look idle or overloaded for a period."""
        out = list(cold)
        for n in members:
            out[n] = 0.0
        for o, shares in ring_transfer(before, members).items():
            load = self._cold_seen.get(o, cold[o]) if o in absent and o not in members else cold[o]
            for n, share in shares.items():
                out[n] += load * share
        return out
