"""The trace-driven simulator: the real controller against the pipeline model, period by period.

Every period draws ``queries`` requests from the workload and runs them through the model
(:mod:`kvswitch.bench.model`); then the controller (:mod:`kvswitch.controller.period`) reads the
model's counters and registers through the driver interface, plans and applies the next period's
batch. Modes:

- ``kvswitch``: the controller with a placement policy (``ring`` = the paper's, ``least-loaded``,
  ``balance``);
- ``original``: no balancing (the model without a controller);
- ``all-hot``: every key of the hot set replicated on every server (reads spread evenly, each write
  reaches all M servers); the hot set is the true top-K of the previous period;
- ``netcache``: the switch caches the hot keys whose values are <= 128 B (reads of them never reach
  a server; writes go to the origin); hot set as for ``all-hot``.

The baselines see the same query counts as the model (computed from the period's ground truth;
their writes are the expected share ``write_ratio`` of each key's queries).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np

from kvswitch.bench import metrics
from kvswitch.bench.model import Model
from kvswitch.bench.workload import SHIFTS, Workload
from kvswitch.controller.hashring import key_id, origins_of_ids
from kvswitch.controller.ops import OpCounts
from kvswitch.controller.period import Controller, ControllerConfig
from kvswitch.controller.placement import POLICIES
from kvswitch.controller.plan import rack_setup
from kvswitch.controller.rack import Rack

MODES = ("kvswitch", "original", "all-hot", "netcache")


@dataclass
class SimConfig:
    mode: str = "kvswitch"
    policy: str = "ring"
    servers: int = 32
    k: int = 10_000
    stages: int = 4
    keys: int = 1_000_000
    skew: float = 0.99
    write_ratio: float = 0.0
    small_value_fraction: float = 0.5
    queries: int = 4_000_000  # per period
    periods: int = 8
    alpha: float = 0.5
    bound: float = 0.30
    gamma: float = 0.8
    t0_fraction: float = 0.002  # T0 as a fraction of the mean server load of the first period
    max_replicas_per_server: int | None = None
    tolerance: float = 0.002
    lag: int = 300  # queries between a write and its replies/confirms (~20 us at 15 MQPS)
    capacity: float = 0.5e6  # per server, queries/s (M/M/1 service rate)
    offered: float = 0.5  # offered load for p50/p99, as a fraction of M * capacity
    slo: float = 50e-6  # p99 target for the throughput-at-SLO metric, seconds
    shift: str = "none"
    shift_period: int = 4  # the period at whose start the popularity shifts
    shift_count: int = 200
    seed: int = 1
    racks: int = 1  # this run simulates rack ``rack`` of ``racks`` (keys spread by rack_of)
    rack: int = 0

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"unknown mode {self.mode!r}; one of {', '.join(MODES)}")
        if self.policy not in POLICIES:
            raise ValueError(f"unknown policy {self.policy!r}; one of {', '.join(POLICIES)}")
        if self.shift not in SHIFTS:
            raise ValueError(f"unknown shift {self.shift!r}; one of {', '.join(SHIFTS)}")
        if self.queries <= 0 or self.periods <= 0 or self.servers <= 0 or self.k <= 0:
            raise ValueError("queries, periods, servers and k must be > 0")

    @property
    def slots(self) -> int:
        """K, as the P4 program's HOT_KEYS: w = kernel.hashpipe_width(K, d), a power of two, so
        any d works (the TNA build's default d = 3 does not divide K = 10 000)."""
        return self.k

    def label(self) -> str:
        return self.policy if self.mode == "kvswitch" else self.mode


def controller_config(cfg: SimConfig, t0: float, max_replicas: int | None) -> ControllerConfig:
    """The rack controller of a simulated rack (T0 from its first period's loads)."""
    return ControllerConfig(
        k=cfg.k,
        alpha=cfg.alpha,
        bound=cfg.bound,
        gamma=cfg.gamma,
        t0=t0,
        policy=cfg.policy,
        max_replicas_per_server=max_replicas,
        tolerance=cfg.tolerance,
    )


def _baseline_loads(
    mode: str,
    key_counts: np.ndarray,
    origin: np.ndarray,
    hot: np.ndarray,
    small: np.ndarray,
    servers: int,
    write_ratio: float,
) -> np.ndarray:
    loads = np.bincount(origin, weights=key_counts, minlength=servers).astype(np.float64)
    if hot.size == 0:
        return loads
    hot_counts = key_counts[hot]
    hot_origin = origin[hot]
    at_origin = np.bincount(hot_origin, weights=hot_counts, minlength=servers)
    reads = hot_counts * (1.0 - write_ratio)
    writes = hot_counts * write_ratio
    if mode == "all-hot":
        # reads spread evenly; each write reaches the origin and the M - 1 replicas
        return loads - at_origin + reads.sum() / servers + writes.sum()
    # netcache: cached (small-valued) hot keys' reads are answered by the switch
    cached = small[hot]
    served = np.bincount(hot_origin[cached], weights=reads[cached], minlength=servers)
    return loads - served


def simulate(cfg: SimConfig, progress: Callable[[str], None] | None = None) -> list[dict]:
    """Run ``cfg.periods`` periods; one row of metrics per period."""
    wl = Workload(
        cfg.keys, cfg.skew, cfg.write_ratio, cfg.small_value_fraction, cfg.seed, cfg.racks, cfg.rack
    )
    rack = Rack.synthetic(cfg.servers)
    origin = origins_of_ids(np.arange(cfg.keys), cfg.servers)
    model = Model(rack, cfg.slots, cfg.stages, origin, cfg.lag)
    model.apply(rack_setup(rack, epoch=1))
    controller: Controller | None = None
    small = wl.small_values()
    counts = np.zeros(wl.perm.size, np.int32)
    key_counts = np.zeros(cfg.keys, np.float64)
    info = wl.rank_info(origin)
    predicted = np.zeros(0, np.int64)
    prev_top = np.zeros(0, np.int64)
    rng = np.random.default_rng(cfg.seed + 99)
    rows: list[dict] = []
    for period in range(cfg.periods):
        if cfg.shift != "none" and period == cfg.shift_period:
            wl.shift(cfg.shift, cfg.shift_count, rng)
            info = wl.rank_info(origin)
        counts[:] = 0
        seed = cfg.seed * 1_000_003 + period + cfg.rack * 7_919
        model.run_sampled(cfg.queries, seed, wl, info, counts)
        model.flush()
        key_counts[:] = 0
        key_counts[wl.perm] = counts
        if cfg.mode in ("kvswitch", "original"):
            loads = np.array(model.read_load_counters(), np.float64)
        else:
            loads = _baseline_loads(
                cfg.mode, key_counts, origin, prev_top, small, cfg.servers, cfg.write_ratio
            )
        hot_set = predicted if cfg.mode == "kvswitch" else prev_top
        overlap, share, true_share = metrics.prediction_accuracy(hot_set, key_counts, cfg.k)
        shares = loads / cfg.queries
        row = {
            "mode": cfg.mode,
            "policy": cfg.label(),
            "skew": cfg.skew,
            "k": cfg.k,
            "servers": cfg.servers,
            "keys": cfg.keys,
            "write_ratio": cfg.write_ratio,
            "period": period,
            "queries": cfg.queries,
            "imbalance": metrics.imbalance(list(loads)),
            "max_over_mean": metrics.max_over_mean(list(loads)),
            "throughput_qps": metrics.throughput(loads, cfg.queries, cfg.capacity),
            "p50_us": 1e6
            * metrics.latency_percentile(
                shares, cfg.offered * cfg.servers * cfg.capacity, cfg.capacity, 0.5
            ),
            "p99_us": 1e6
            * metrics.latency_percentile(
                shares, cfg.offered * cfg.servers * cfg.capacity, cfg.capacity, 0.99
            ),
            "slo_throughput_qps": metrics.slo_throughput(shares, cfg.capacity, cfg.slo),
            "rack": cfg.rack,
            "rack_share": wl.share,
            "top_k_overlap": overlap,
            "predicted_share": share,
            "true_top_k_share": true_share,
        }
        if cfg.mode == "kvswitch":
            if controller is None:
                t0 = max(1.0, cfg.t0_fraction * loads.sum() / cfg.servers)
                controller = Controller(
                    controller_config(cfg, t0, cfg.max_replicas_per_server),
                    lambda key: int(origin[key_id(key)]),
                    rack,
                    cfg.slots,
                )
            report = controller.step(model)
            predicted = np.array([key_id(key) for key, _ in report.predicted], np.int64)
            per_server = report.plan.replicas_per_server()
            op_counts = OpCounts.of(report.ops)
            row.update(
                threshold=report.threshold,
                hot_keys=len(report.plan.keys),
                replicated_keys=report.plan.replicated_keys(),
                replicas_max=max(per_server),
                replicas_mean=sum(per_server) / cfg.servers,
                table_updates=op_counts.table,
                multicast_updates=op_counts.multicast,
                register_writes=op_counts.register,
            )
        else:
            replicas = (
                prev_top.size * (cfg.servers - 1) / cfg.servers if cfg.mode == "all-hot" else 0
            )
            row.update(
                threshold=math.nan,
                hot_keys=prev_top.size if cfg.mode != "original" else 0,
                replicated_keys=prev_top.size if cfg.mode == "all-hot" else 0,
                replicas_max=math.ceil(replicas),
                replicas_mean=replicas,
                table_updates=0,
                multicast_updates=0,
                register_writes=0,
            )
            model.reset_counters()
        if cfg.racks > 1:
            row["server_loads"] = " ".join(str(int(x)) for x in loads)
        k = min(cfg.k, wl.perm.size)
        prev_top = np.argpartition(key_counts, -k)[-k:]
        rows.append(row)
        if progress is not None:
            progress(
                f"{cfg.label():>12} skew={cfg.skew:<5} k={cfg.k:<6} w={cfg.write_ratio:<4} "
                f"period {period + 1}/{cfg.periods}: lambda={row['imbalance']:.4f} "
                f"max/mean={row['max_over_mean']:.3f} replicas/server<={row['replicas_max']}"
            )
    return rows


def summary(rows: list[dict], warmup: int) -> dict:
    """Mean of every numeric column over the periods after ``warmup`` (all periods if there are
    no more than ``warmup``); ``periods`` says how many were averaged."""
    kept = [r for r in rows if r["period"] >= warmup] or rows
    out = dict(kept[0])
    for key, value in kept[0].items():
        if isinstance(value, int | float) and key != "period":
            out[key] = float(np.mean([r[key] for r in kept]))
    out["periods"] = len(kept)
    return out


def config_dict(cfg: SimConfig) -> dict:
    return asdict(cfg)
