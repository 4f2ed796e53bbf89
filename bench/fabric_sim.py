"""The fabric simulator: many racks, a KVSwitch leaf each, spines that serialize fabric-hot keys.

``racks`` racks of ``servers`` servers; each key's home rack is ``workload.rack_of`` (a hash
independent of the in-rack ring) and its origin the consistent-hash owner inside it. Every period
the whole fabric draws ``queries x racks`` queries (clients spread evenly over the racks) and
routes each one to the switch that serializes its key (docs/fabric.md):

- a fabric-hot key to its spine: a :class:`~kvswitch.bench.model.Model` whose servers are all the
  fabric's (round-robin over holders in any rack, read set, write copies to every holder);
- any other key to its home leaf: a rack :class:`Model` (hot-key table, HashPipe, in-rack
  replicas), exactly as the one-rack simulator.

Between periods the rack controllers (:class:`kvswitch.controller.period.Controller`) and the
fabric controller (:class:`kvswitch.controller.fabric.FabricController`) read their switches'
counters, plan and apply their batches to the models. A server's load is every packet it
received, from its leaf and from the spines (write copies included), as its leaf's LoadcountTable
counts them. With ``spine=False`` no key is ever fabric-hot: the racks balance alone (the
project before the spine level). No balancing at all ("Original") is computed from the same
draws: every query at its key's origin.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

import numpy as np

from kvswitch.bench import kernel, metrics
from kvswitch.bench.model import Model
from kvswitch.bench.simulator import SimConfig, controller_config
from kvswitch.bench.workload import Workload, rack_of
from kvswitch.controller.fabric import FabricConfig, FabricController, FabricShape
from kvswitch.controller.hashring import key_id, origins_of_ids
from kvswitch.controller.period import Controller
from kvswitch.controller.plan import rack_setup
from kvswitch.controller.predictor import merge_observations
from kvswitch.controller.rack import Rack

CHUNK = 1 << 21  # queries drawn and routed at a time


@dataclass
class FabricSimConfig:
    base: SimConfig = field(default_factory=lambda: SimConfig(policy="balance"))
    racks: int = 32
    spines: int = 4
    spine: bool = True  # the spine level on (False: every rack balances alone)
    fabric_bound: float = 0.05
    fabric_tolerance: float = 0.005
    holder_share: float = 0.1
    # replicas per server the racks leave to the fabric (of base.max_replicas_per_server)
    fabric_replicas: int = 16
    # write-heavy fabric-hot keys send each write to one holder (docs/protocol.md F7)
    write_rotation: bool = True
    # a rotating key stops only below (1 - this) of the rotation bound (fabric.rotates)
    rotation_hysteresis: float = 0.2
    # each key's most holders: the spines' MAX_HOLDERS (255: a spine built with
    # -DMAX_HOLDERS=255, the ordinal's width, as the paper's scale needs; the default build has
    # 64); None: unbounded (more than a spine program holds)
    max_holders: int | None = 255

    def __post_init__(self) -> None:
        if self.racks <= 0 or self.spines <= 0:
            raise ValueError("racks and spines must be > 0")
        if self.max_holders is not None and self.max_holders < 1:
            raise ValueError("max holders must be >= 1")
        if self.base.mode not in ("kvswitch", "original"):
            raise ValueError("the fabric simulator runs modes kvswitch and original")

    def label(self) -> str:
        if self.base.mode == "original":
            return "original"
        return f"{self.base.policy}+spine" if self.spine else f"{self.base.policy} (racks alone)"


class _Leaf:
    """One rack: its switch model and its controller."""

    def __init__(self, cfg: SimConfig, local: np.ndarray) -> None:
        self.rack = Rack.synthetic(cfg.servers)
        self.model = Model(self.rack, cfg.slots, cfg.stages, local, cfg.lag)
        self.model.apply(rack_setup(self.rack, epoch=1))
        self.local = local
        self.controller: Controller | None = None
        self.queries = 0
        self.cold: list[float] = [0.0] * cfg.servers  # its controller's last cold estimate


def simulate_fabric(
    cfg: FabricSimConfig,
    progress: Callable[[str], None] | None = None,
    check: Callable[[list[Model], list[Model]], None] | None = None,
) -> list[dict]:
    """Run ``cfg.base.periods`` periods; one row of metrics per period. ``check(leaves,
    spines)`` (tests) sees every switch model after each period's batches are applied."""
    b = cfg.base
    shape = FabricShape(cfg.racks, b.servers, cfg.spines)
    ids = np.arange(b.keys, dtype=np.int64)
    home = rack_of(ids, cfg.racks)
    local = origins_of_ids(ids, b.servers).astype(np.int64)
    origin = home * b.servers + local  # fabric server id of each key's origin
    wl = Workload(b.keys, b.skew, b.write_ratio, b.small_value_fraction, b.seed)
    info = wl.perm | (origin[wl.perm] << 32)
    counts = np.zeros(wl.perm.size, np.int32)
    leaves = [_Leaf(b, local) for _ in range(cfg.racks)]
    spines: list[Model] = []
    fabric: FabricController | None = None
    spine_of_key = np.full(b.keys, -1, np.int64)
    if cfg.spine and b.mode == "kvswitch":
        addresses = shape.addresses()
        for _ in range(cfg.spines):
            spine = Model(addresses, -(-b.k // b.stages) * b.stages, b.stages, origin, b.lag)
            spine.apply(rack_setup(addresses, epoch=1))
            spines.append(spine)
    spine_queries = [0] * len(spines)
    groups = cfg.racks + len(spines)
    kids = np.empty(CHUNK, np.int64)
    origins = np.empty(CHUNK, np.int64)
    writes = np.zeros(CHUNK, np.bool_)
    order = np.empty(CHUNK, np.int64)
    starts = np.zeros(groups + 1, np.int64)
    total = b.queries * cfg.racks
    rows: list[dict] = []
    for period in range(b.periods):
        started = time.perf_counter()
        # each switch's lag in its own queries: b.lag of a mean rack's stream
        per_rack = total / cfg.racks
        for leaf in leaves:
            leaf.model.lag = (
                max(1, round(b.lag * leaf.queries / per_rack)) if leaf.queries else b.lag
            )
            leaf.queries = 0
        for s, spine in enumerate(spines):
            spine.lag = (
                max(1, round(b.lag * spine_queries[s] / per_rack)) if spine_queries[s] else b.lag
            )
            spine_queries[s] = 0
        counts[:] = 0
        done = 0
        chunk_no = 0
        while done < total:
            n = min(CHUNK, total - done)
            seed = (b.seed * 1_000_003 + period) * 65_537 + chunk_no
            kernel.sample(seed, b.write_ratio, wl.alias, wl.head, wl.p_head, info, counts,
                          kids[:n], origins[:n], writes[:n])  # fmt: skip
            where = spine_of_key[kids[:n]]
            gid = np.where(where >= 0, cfg.racks + where, origins[:n] // b.servers)
            kernel.group(gid, groups, order[:n], starts)
            for g in range(groups):
                idx = order[starts[g] : starts[g + 1]]
                if idx.size == 0:
                    continue
                model = leaves[g].model if g < cfg.racks else spines[g - cfg.racks]
                model.run_trace(kids[idx], writes[idx])
                if g < cfg.racks:
                    leaves[g].queries += idx.size
                else:
                    spine_queries[g - cfg.racks] += idx.size
            done += n
            chunk_no += 1
        for leaf in leaves:
            leaf.model.flush()
        for spine in spines:
            spine.flush()
        row = _measure(cfg, shape, leaves, spines, fabric, counts, wl, origin, spine_queries)
        row["period"] = period
        if b.mode == "kvswitch":
            fabric = _control(cfg, shape, leaves, spines, fabric, origin, spine_of_key, row)
        else:
            for leaf in leaves:
                leaf.model.reset_counters()
        if check is not None:
            check([leaf.model for leaf in leaves], spines)
        row["seconds"] = time.perf_counter() - started
        rows.append(row)
        if progress is not None:
            progress(
                f"{cfg.label():>22} {cfg.racks}x{b.servers} w={b.write_ratio:<4} period "
                f"{period + 1}/{b.periods}: lambda all={row['imbalance']:.4f} "
                f"racks mean={row['rack_imbalance_mean']:.4f} max/mean={row['max_over_mean']:.3f} "
                f"{row['throughput_qps'] / 1e6:.1f} MQPS (original {row['original_qps'] / 1e6:.1f}) "
                f"fabric keys={row['fabric_keys']} rotated={row['rotated_keys']} "
                f"flips={row['rotation_flips']} replicas/server<={row['replicas_max']} "
                f"({row['seconds']:.0f} s)"
            )
    return rows


def _measure(
    cfg: FabricSimConfig,
    shape: FabricShape,
    leaves: list[_Leaf],
    spines: list[Model],
    fabric: FabricController | None,
    counts: np.ndarray,
    wl: Workload,
    origin: np.ndarray,
    spine_queries: list[int],
) -> dict:
    b = cfg.base
    total = b.queries * cfg.racks
    loads = np.concatenate([np.asarray(leaf.model.load, np.float64) for leaf in leaves])
    for spine in spines:
        loads += spine.load
    if b.mode == "original":
        loads = loads.copy()
    original = np.bincount(origin[wl.perm], weights=counts, minlength=shape.total)
    per_rack = loads.reshape(cfg.racks, b.servers)
    rack_lambda = [metrics.imbalance(list(r)) for r in per_rack]
    replicas = np.zeros(shape.total, np.int64)
    for r, leaf in enumerate(leaves):
        if leaf.controller is not None:
            replicas[shape.servers_of(r)] += leaf.controller.plan.replicas_per_server()
    copies = 0
    fabric_holders = 0
    rotated = 0
    if fabric is not None:
        for s, plan in enumerate(fabric.plans):
            replicas += np.asarray(plan.replicas_per_server(), np.int64)
            for kp in plan.keys.values():
                fabric_holders += len(kp.holders)
                if spines[s].rot[kp.slot]:  # one holder takes each write: no copies
                    rotated += 1
                else:
                    copies += int(spines[s].hot_wr[kp.slot]) * (len(kp.holders) - 1)
    at_spine = sum(spine_queries)
    at_leaves = total - at_spine
    crossing = at_leaves * (cfg.racks - 1) / cfg.racks + at_spine  # requests through a spine
    return {
        "policy": cfg.label(),
        "racks": cfg.racks,
        "servers": shape.total,
        "skew": b.skew,
        "k": b.k,
        "keys": b.keys,
        "write_ratio": b.write_ratio,
        "queries": total,
        "imbalance": metrics.imbalance(list(loads)),
        "max_over_mean": metrics.max_over_mean(list(loads)),
        "throughput_qps": metrics.throughput(loads, total, b.capacity),
        "original_imbalance": metrics.imbalance(list(original)),
        "original_qps": metrics.throughput(original, total, b.capacity),
        "rack_imbalance_mean": float(np.mean(rack_lambda)),
        "rack_imbalance_max": float(np.max(rack_lambda)),
        "rack_max_over_mean": metrics.max_over_mean(list(per_rack.sum(axis=1))),
        "replicas_max": int(replicas.max()),
        "replicas_mean": float(replicas.mean()),
        "fabric_keys": len(fabric.spine_of) if fabric is not None else 0,
        "fabric_holders": fabric_holders,
        "rotated_keys": rotated,
        "rotation_flips": 0,  # set at the period's end by _control
        "spine_share": at_spine / total,
        "cross_rack_share": crossing / total,
        # requests and replies through a spine, plus the spines' write copies and their CONFIRMs
        "spine_packets_per_query": (2 * crossing + 2 * copies) / total,
    }


def rotation_flips(
    before: Collection[bytes],
    was_rotated: Collection[bytes],
    after: Collection[bytes],
    rotated: Collection[bytes],
) -> int:
    """The keys fabric-hot before and after a plan (``before``, ``after``) whose rotation switched
    on or off: each switch is a write freeze of all the key's holders (docs/fabric.md "Write
    rotation"). A key that joins or leaves the fabric is not counted."""
    return sum(1 for key in before if key in after and (key in was_rotated) != (key in rotated))


def _leaf_cap(cfg: FabricSimConfig) -> int | None:
    cap = cfg.base.max_replicas_per_server
    if cap is None or not cfg.spine:
        return cap
    return max(1, cap - cfg.fabric_replicas)


def _control(
    cfg: FabricSimConfig,
    shape: FabricShape,
    leaves: list[_Leaf],
    spines: list[Model],
    fabric: FabricController | None,
    origin: np.ndarray,
    spine_of_key: np.ndarray,
    row: dict,
) -> FabricController | None:
    """One period boundary: read every switch, plan the fabric, then every rack; apply."""
    b = cfg.base
    reads = []
    observed: dict[bytes, int] = {}
    writes: dict[bytes, int] = {}
    loads = np.concatenate([np.asarray(leaf.model.read_load_counters(), float) for leaf in leaves])
    for spine in spines:
        loads += np.asarray(spine.read_load_counters(), float)
    for r, leaf in enumerate(leaves):
        m = leaf.model
        hot, per_slot, pipe, floor = (
            m.read_hot_counters(), m.read_hot_writes(), m.read_hashpipe(), m.read_version()
        )  # fmt: skip
        own = np.asarray(m.read_load_counters(), float)  # what reached its servers through it
        m.reset_counters()
        if leaf.controller is None:
            t0 = max(1.0, b.t0_fraction * loads[shape.servers_of(r)].mean())
            leaf.controller = Controller(
                controller_config(b, t0, _leaf_cap(cfg)),
                lambda key, local=leaf.local: int(local[key_id(key)]),
                leaf.rack,
                b.slots,
            )
        hot_writes = leaf.controller.hot_writes(per_slot)
        reads.append((hot, pipe, hot_writes, floor, own))
        observed.update(merge_observations(hot, pipe))
        writes.update(hot_writes)
    expected = np.zeros(shape.total)
    if spines:
        floors = []
        for s, spine in enumerate(spines):
            hot, per_slot, floor = (
                spine.read_hot_counters(),
                spine.read_hot_writes(),
                spine.read_version(),
            )
            spine.reset_counters()
            floors.append(floor)
            observed.update(hot)
            if fabric is not None:
                writes.update(
                    {key: int(per_slot[kp.slot]) for key, kp in fabric.plans[s].keys.items()}
                )
        if fabric is None:
            mean = loads.mean()
            fabric = FabricController(
                shape,
                FabricConfig(
                    k=b.k,
                    alpha=b.alpha,
                    bound=cfg.fabric_bound,
                    gamma=b.gamma,
                    t0=max(1.0, b.t0_fraction * mean),
                    tolerance=cfg.fabric_tolerance,
                    holder_share=cfg.holder_share,
                    # the racks keep the rest of the budget (_leaf_cap): together within it
                    max_replicas_per_server=(
                        cfg.fabric_replicas if b.max_replicas_per_server is not None else None
                    ),
                    write_rotation=cfg.write_rotation,
                    rotation_hysteresis=cfg.rotation_hysteresis,
                    max_holders=cfg.max_holders,
                ),
                lambda key: int(origin[key_id(key)]),
            )
        before = dict(fabric.spine_of)
        was_rotated = fabric.rotated
        started = time.perf_counter()
        cold = [x for leaf in leaves for x in leaf.cold]
        # each rack-hot key's holders in its rack's plan of this period, as fabric server ids
        homes = {
            key: tuple(r * b.servers + s for s in kp.holders)
            for r, leaf in enumerate(leaves)
            if leaf.controller is not None
            for key, kp in leaf.controller.plan.keys.items()
        }
        report = fabric.decide(observed, writes, list(loads), None, floors, cold, homes)
        row["fabric_plan_seconds"] = time.perf_counter() - started
        for s, spine in enumerate(spines):
            # the rotation flag goes with the key's HotkeyTable entry (docs/protocol.md F7)
            plan = report.plans[s]
            spine.set_rotated([plan.keys[key].slot for key in report.rotated if key in plan.keys])
            spine.apply(report.ops[s])
        spine_of_key[:] = -1
        for key, s in report.spine_of.items():
            spine_of_key[key_id(key)] = s
        expected = np.asarray(report.expected)
        # a key that stops being fabric-hot goes back to its home leaf with the count its spine
        # measured, so that the leaf may make it hot again at once
        for key in before:
            if key not in report.spine_of and key in observed:
                r = int(origin[key_id(key)]) // b.servers
                reads[r][1].append((key, observed[key]))
        row.update(
            rotation_flips=rotation_flips(before, was_rotated, report.spine_of, report.rotated),
            fabric_threshold=report.threshold,
            promoted=report.promoted,
            demoted=report.demoted,
        )
    foreign = frozenset(fabric.spine_of) if fabric is not None else frozenset()
    for r, leaf in enumerate(leaves):
        hot, pipe, hot_writes, floor, own = reads[r]
        ctrl = leaf.controller
        assert ctrl is not None
        ctrl.foreign = foreign
        # the leaf counts every packet to its servers; next period the spines' share is the
        # fabric plan's, which the fabric controller hands over
        mine = own + expected[shape.servers_of(r)]
        report = ctrl.decide(hot, pipe, [int(x) for x in mine], hot_writes, floor)
        leaf.model.apply(report.ops)
        # what the leaf cannot move, without the fabric's share (the fabric plans that itself)
        leaf.cold = list(np.maximum(0.0, np.asarray(report.cold) - expected[shape.servers_of(r)]))
    return fabric
