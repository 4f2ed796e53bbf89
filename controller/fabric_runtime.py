"""The fabric controller's loop on real switches (docs/fabric.md "Runtime"): the spines and the
leaves of a leaf-spine fabric over the :class:`~kvswitch.controller.driver.SwitchDriver`
interface, planned by :class:`~kvswitch.controller.fabric.FabricController`.

Start-up (:meth:`FabricRuntime.start`), for every spine: its epoch (the one it holds when it is
the one the state file names, so a restarted controller does not send every fabric-hot key's
Gets to its origin; else one more than any seen, as a rack switch's), its static entries, and
the hot keys it holds read back as its plan (entries and groups of no hot key deleted, missing
ones written); the write freezes a crashed controller left at the agents finished toward the
map the spines hold and released (controller/rotation.py ``recover``), then every spine's
SpineHoldTable default ``hold`` -> ``NoAction``; for every leaf: its static entries of the
fabric, the steering entries of exactly the keys the spines hold, then FabricHotTable's default
``hold`` -> ``NoAction``.

Each period (:meth:`FabricRuntime.period`): read and reset every spine's counters, take the
rack controllers' candidates and loads (:class:`RackInput`), plan, cut every key to the spines'
``max_holders``, then write in this order: every spine's table, group and register part of its
batch (break, make, HotkeyTable last; :func:`~kvswitch.controller.fabric_ops.spine_diff`); the
leaves' steering (deletes after the spines' break, adds after their make); the pushes and
removals, a new key's push only once every leaf steers it (the origin's SYNC must cross its
spine). A key whose writer map the plans change (docs/protocol.md F7: rotation on or off,
holders, the key leaving or moving) is frozen at the holders of both maps, exported and
imported (controller/rotation.py) before any of these writes, and released after the switches'
writes and the rebases, before the pushes; a key whose freeze fails keeps its map this period.
A write a switch refuses is reported in the period's metrics and never counted as done:
the spine's plan is read back from it, a leaf's steering table is reconciled whole the next
period, and a switch that went away is reconnected and started again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from kvswitch.controller import names, statefile
from kvswitch.controller.driver import DriverError, SwitchDriver
from kvswitch.controller.fabric import FabricConfig, FabricController
from kvswitch.controller.fabric_ops import (
    SPINE_DYNAMIC,
    SpineLayout,
    cap_plans,
    fit_pools,
    implied_spine_entries,
    leaf_static,
    spine_diff,
    spine_plan,
    spine_ready,
    spine_static,
    steering,
    steering_diff,
    steering_of,
    steering_ready,
    unrotated,
)
from kvswitch.controller.fabricfile import FabricFile
from kvswitch.controller.handoff import RackInput
from kvswitch.controller.ops import (
    EntryOp,
    Operation,
    PushRequest,
    RebaseRequest,
    RegisterWrite,
    RemoveRequest,
    TableEntry,
)
from kvswitch.controller.period import FabricShare, key_write_ratios
from kvswitch.controller.plan import KeyPlan, Plan
from kvswitch.controller.repair import unconfirmed_pushes
from kvswitch.controller.rotation import (
    FreezeHooks,
    MapChange,
    WriteFreeze,
    dead_holder_repairs,
    first_line,
    map_changes,
    put_off,
    recover,
    sync_source,
)
from kvswitch.controller.startup import EPOCH_MAX, SPINE_EPOCH_BASE, next_epoch

LOG = logging.getLogger("kvswitch.fabric")
T = TypeVar("T")


@dataclass
class FabricMetrics:
    period: int
    fabric_keys: int = 0
    holders: int = 0
    promoted: int = 0
    demoted: int = 0
    capped: int = 0  # keys cut to max_holders
    threshold: float = 0.0
    updates: int = 0  # table, group and register writes sent (and taken)
    pushes: int = 0
    withheld: int = 0  # pushes waiting for a leaf's steering
    plan_ms: float = 0.0
    write_ms: float = 0.0  # every switch's writes of the period, in order
    period_ms: float = 0.0
    errors: list[str] = field(default_factory=list)
    rack_loads: list[float] = field(default_factory=list)  # what the plan started from

    def record(self) -> dict[str, Any]:
        return asdict(self)

    def line(self) -> str:
        text = (
            f"fabric period {self.period}: {self.fabric_keys} keys, {self.holders} holders "
            f"(+{self.promoted} -{self.demoted}, {self.capped} capped), T_f {self.threshold:.1f}, "
            f"racks {'/'.join(f'{x:.0f}' for x in self.rack_loads) or '-'}, "
            f"{self.updates} updates, {self.pushes} pushes in {self.write_ms:.1f} ms"
        )
        return text + (f"; errors: {'; '.join(self.errors)}" if self.errors else "")


class FabricRuntime:
    def __init__(
        self,
        fabric: FabricFile,
        spines: Sequence[SwitchDriver],
        leaves: Sequence[SwitchDriver],
        config: FabricConfig,
        origin_of: Callable[[bytes], int],
        state_file: Path | None = None,
        drain: float = 0.005,
        liveness: float | None = 0.5,
        freeze: FreezeHooks | None = None,
    ) -> None:
        """``drain``: seconds between a key's old serializer's break and its rebase (writes
        that serializer stamped reach the origin first; docs/fabric.md "Moving a key between
        levels"). ``liveness``: seconds a spine's control port has to take a connection at the
        start of each period (:meth:`SwitchDriver.reachable`); one that does not is lost for
        that period without a call to it (None: no such check). ``freeze``: the agents' write
        freeze of one key (docs/protocol.md F7); without it no writer map changes (a key that
        would rotate is made without rotation, a rotated one keeps its map)."""
        if len(spines) != len(fabric.spines) or len(leaves) != len(fabric.racks):
            raise ValueError("one driver per spine and per leaf of the fabric file")
        if config.k > min(d.slots for d in spines):
            raise ValueError(f"k = {config.k} exceeds a spine's hot-key slots")
        self.fabric = fabric
        self.spines = list(spines)
        self.leaves = list(leaves)
        self.state_file = state_file
        self.drain = drain
        self.liveness = liveness
        self.controller = FabricController(fabric.shape, config, origin_of)
        self.layouts = [SpineLayout(fabric, s) for s in range(len(spines))]
        self.epochs = [0] * len(spines)
        # what each leaf's FabricHotTable holds (None: unknown), and whether it holds nothing
        # else and forwards (its default NoAction); a leaf that is not clean is reconciled whole
        self.steered: list[dict[bytes, int] | None] = [None] * len(leaves)
        self.clean = [False] * len(leaves)
        self.spine_ok = [False] * len(spines)
        self.withheld: dict[bytes, PushRequest] = {}  # pushes waiting for every leaf's steering
        # the write freeze of the keys whose writer map a period changes (controller/rotation.py)
        self.freezer = WriteFreeze(freeze) if freeze is not None else None
        # servers whose frozen keys a crashed controller may have left and that were not listed
        # yet (start() lists every server; one that does not answer is listed again each period)
        self.unlisted: set[int] = set()
        # servers the rack controllers declared dead (RackInput.down, fabric server ids): out of
        # every key's holders, never frozen, no removal or rebase sent to them
        self.dead: frozenset[int] = frozenset()
        self.periods = 0
        # for the rack controllers (share()): keys that left the spines in the last period (their
        # removals run with the next batch), and per server of the fabric the load the spines
        # sent it last period and the one the new plans put on it (empty: not known)
        self.leaving: frozenset[bytes] = frozenset()
        self.measured: list[float] = []
        self.expected: list[float] = []
        # called once a period's plans are decided, before any of their writes (the fabric
        # controller writes the racks' shares there: a key is named to its racks before a copy
        # of it is pushed, so a rack controller never drops one as stale)
        self.announce: Callable[[], None] | None = None
        # the switches of one step are written at the same time, one thread each
        self.pool = ThreadPoolExecutor(len(spines) + len(leaves), thread_name_prefix="fabric")

    def close(self) -> None:
        self.pool.shutdown(wait=True)

    @property
    def plans(self) -> list[Plan]:
        return self.controller.plans

    @property
    def spine_of(self) -> dict[bytes, int]:
        return self.controller.spine_of

    # -- start-up -----------------------------------------------------------------------------------

    def start(self) -> None:
        """Every spine, then every leaf (module docstring); a switch that cannot be started is
        reported and tried again by the next period."""
        saved = statefile.load(self.state_file)
        threshold = self.controller.threshold
        if threshold.value is None:
            threshold.value = statefile.saved_threshold(saved, threshold.floor)
        if not self.controller.predictor.prev:
            self.controller.predictor.prev = statefile.saved_observations(saved)
        epochs = saved.get("spine_epochs")
        for s in range(len(self.spines)):
            held = epochs[s] if isinstance(epochs, list) and s < len(epochs) else 0
            self.epochs[s] = held if isinstance(held, int) and 0 < held <= EPOCH_MAX else 0
        for s in range(len(self.spines)):
            try:
                self._start_spine(s)
            except DriverError as exc:
                LOG.error("spine %s: start failed: %s", self._spine_name(s), exc)
        self._own_spines()
        self.unlisted = set(range(self.fabric.total))
        self._recover_freezes(None)
        for s in range(len(self.spines)):
            if self.spine_ok[s]:
                try:
                    self._ready_spine(s)
                except DriverError as exc:
                    LOG.error("spine %s: start failed: %s", self._spine_name(s), exc)
        for r in range(len(self.leaves)):
            try:
                self._start_leaf(r)
            except DriverError as exc:
                LOG.error("leaf %s: start failed: %s", self._leaf_name(r), exc)
        if all(held is not None for held in self.steered):
            self._push_unconfirmed()
        LOG.info(
            "fabric started: epochs %s, %d fabric-hot keys held",
            self.epochs,
            len(self.spine_of),
        )

    def _start_spine(self, s: int) -> None:
        drv = self.spines[s]
        self.spine_ok[s] = False
        on_switch = drv.read_register(names.REG_EPOCH)[0]
        saved = self.epochs[s]
        epoch = (
            on_switch
            if on_switch == saved and on_switch >= SPINE_EPOCH_BASE
            else next_epoch(on_switch, saved, low=SPINE_EPOCH_BASE)
        )
        self.epochs[s] = epoch
        self.save_state()  # before the switch has it: a crash after the write never reuses it
        self.layouts[s].rotation = drv.has_rotation  # without it: driven as before
        drv.apply(drv.reconcile(spine_static(self.fabric, s, drv.has_liveness)))
        if epoch != on_switch:
            drv.apply([RegisterWrite(names.REG_EPOCH, 0, epoch)])
            held = drv.read_register(names.REG_EPOCH)[0]
            if held != epoch:
                raise DriverError(f"the spine holds epoch {held} after writing {epoch}")
        self.controller.plans[s] = self._recover_spine(s)
        self.spine_ok[s] = True

    def _ready_spine(self, s: int) -> None:
        """Lift spine ``s``'s hold (p4src/features/spine_hold.p4: a restarted spine forwards no
        KVSwitch message until now); once it is reinstalled and the rotated keys it held are
        gathered into their origins. A program without the hold table is driven as before."""
        drv = self.spines[s]
        if drv.has_hold:
            drv.apply([spine_ready()])
        else:
            LOG.warning(
                "spine %s: its program has no %s", self._spine_name(s), names.SPINE_HOLD_TABLE
            )

    def _recover_spine(self, s: int) -> Plan:
        """The spine's hot keys as a plan; HotkeyTable entries of no whole hot key deleted first,
        then entries and groups of no hot key deleted and missing ones written."""
        drv, layout = self.spines[s], self.layouts[s]
        plan, broken = spine_plan(
            drv.read_entries(names.HOTKEY_TABLE),
            drv.read_entries(names.SERVERMAP_TABLE),
            layout,
            self.controller.config.k,
        )
        if broken:
            LOG.warning(
                "spine %s: %d incomplete hot keys removed", self._spine_name(s), len(broken)
            )
            drv.apply(
                [
                    TableEntry(EntryOp.DELETE, names.HOTKEY_TABLE, ((names.MATCH_KEY, k),))
                    for k in broken
                ]
            )
        wanted = implied_spine_entries(plan, layout, drv.read_version())
        fixes = drv.reconcile(wanted, prune=SPINE_DYNAMIC, prune_groups=True)
        if fixes:
            LOG.info("spine %s: %d entries/groups fixed", self._spine_name(s), len(fixes))
            drv.apply(fixes)
        return plan

    def _push_unconfirmed(self) -> None:
        """Push again every recovered key with a replica that is not valid (a push the previous
        controller did not make, or lost): nothing else but the key's next write would ever
        make that replica serve. Once every leaf steers (the SYNC must cross the spine)."""
        for s, drv in enumerate(self.spines):
            plan = self.plans[s]
            if not self.spine_ok[s] or not any(kp.replicas for kp in plan.keys.values()):
                continue
            try:
                pushes = unconfirmed_pushes(
                    plan.keys,
                    plan.servers,
                    drv.read_register(names.REG_SLOT_VER),
                    drv.read_register(names.REG_ORIGIN_VER),
                    drv.read_register(names.REG_VALID_VER),
                    {
                        key: row[0]
                        for key, kp in plan.keys.items()
                        if (row := self.layouts[s].row_of(key, kp)) is not None
                    },
                )
                pushes = self._sync_sources(s, pushes)
                if pushes:
                    LOG.info(
                        "spine %s: pushing %d recovered keys", self._spine_name(s), len(pushes)
                    )
                    drv.apply(pushes)
            except DriverError as exc:
                LOG.error("spine %s: %s", self._spine_name(s), exc)

    def _own_spines(self) -> None:
        """The fabric-hot keys are what the spines hold; a key two spines hold (a controller
        that stopped in the middle of a move) stays on the first and is broken on the others."""
        spine_of: dict[bytes, int] = {}
        for s, plan in enumerate(self.controller.plans):
            twice = [key for key in plan.keys if key in spine_of]
            if twice and self.spine_ok[s]:
                kept = plan.without(twice)
                try:
                    self.spines[s].apply(self._switch_diff(s, plan, kept))
                    plan = self.controller.plans[s] = kept
                except DriverError as exc:
                    LOG.error("spine %s: %s", self._spine_name(s), exc)
                    self.spine_ok[s] = False
            for key in plan.keys:
                spine_of.setdefault(key, s)
        self.controller.spine_of = spine_of
        self.controller.rotated = frozenset(
            key for plan in self.plans for key, kp in plan.keys.items() if kp.rotate
        )

    def _start_leaf(self, r: int) -> None:
        drv = self.leaves[r]
        self.steered[r], self.clean[r] = None, False
        drv.apply(drv.reconcile(leaf_static(self.fabric, r)))
        self._reconcile_steering(r)

    def _reconcile_steering(self, r: int) -> None:
        """Leaf ``r``'s FabricHotTable made to hold exactly the keys the spines hold, then its
        default set to NoAction (it forwards KVSwitch packets again)."""
        drv = self.leaves[r]
        self.steered[r], self.clean[r] = None, False
        wanted = steering(self.fabric, r, self.spine_of)
        drv.apply(drv.reconcile(wanted, prune=(names.FABRIC_HOT_TABLE,)))
        self.steered[r] = dict(self.spine_of)
        drv.apply([steering_ready()])
        self.clean[r] = True

    # -- periods ------------------------------------------------------------------------------------

    def period(self, racks: Sequence[RackInput]) -> FabricMetrics:
        began = time.perf_counter()
        self.periods += 1
        m = FabricMetrics(self.periods)
        self.measured, self.expected = [], []  # until this period has planned
        self.dead = frozenset(
            r * self.fabric.shape.servers + j for r, x in enumerate(racks) for j in x.down
        )
        if self.freezer is not None:
            self.freezer.dead = self.dead
        self._release(m)  # holders a release failed for last period
        self._repair(m)
        self._recover_freezes(m)
        if not all(self.spine_ok):
            self._lose_spines(m)
            m.errors.append("a spine is not started: no plan this period")
            return self._done(m, began)
        if not all(drv.connected for drv in self.leaves):
            self._lose_leaf(m)
            m.errors.append("a leaf is not started: no plan this period")
            return self._done(m, began)
        shape = self.fabric.shape
        if len(racks) != shape.racks or any(len(x.loads) != shape.servers for x in racks):
            raise ValueError("one RackInput per rack, one load per server of the rack")
        observed: dict[bytes, int] = {}
        writes: dict[bytes, int] = {}

        def read(s: int) -> tuple[dict[bytes, int], list[int], int]:
            drv = self.spines[s]
            got = drv.read_hot_counters(), drv.read_hot_writes(), drv.read_version()
            drv.reset_counters()
            return got

        reads = self._parallel(len(self.spines), read)
        failed = [(s, r) for s, r in enumerate(reads) if isinstance(r, DriverError)]
        for s, exc in failed:
            self._spine_error(m, s, exc)  # type: ignore[arg-type]
        if failed:
            if not all(self.spine_ok):
                self._lose_spines(m)
            return self._done(m, began)
        floors: list[int] = []
        spine_counts: dict[bytes, int] = {}
        for s, (hot, per_slot, floor) in enumerate(reads):  # type: ignore[misc]
            floors.append(floor)
            observed.update(hot)
            spine_counts.update(hot)
            writes.update(
                {
                    key: int(per_slot[kp.slot])
                    for key, kp in self.plans[s].keys.items()
                    if kp.slot < len(per_slot)
                }
            )
        for x in racks:
            for key, count in x.observed.items():
                observed.setdefault(key, count)
            for key, count in x.writes.items():
                writes.setdefault(key, count)
        loads = [float(v) for x in racks for v in x.loads]
        cold = _joined([x.cold for x in racks])
        replicas = _joined([x.replicas for x in racks])
        before, held = list(self.plans), dict(self.spine_of)
        ratios = key_write_ratios(observed, writes)
        measured = self.controller.fabric_load(spine_counts, ratios)
        planned = time.perf_counter()
        report = self.controller.decide(
            observed, writes, loads, replicas, floors, cold, dead=self.dead
        )
        plans, m.capped = cap_plans(before, report.plans, self.fabric.max_holders)
        plans, pooled = fit_pools(before, plans, self.layouts)
        plans = [pl if self.layouts[s].rotation else unrotated(pl) for s, pl in enumerate(plans)]
        plans = self._freeze_changes(m, before, plans)
        plans, late = fit_pools(before, plans, self.layouts)  # a change put off keeps its row
        m.capped += pooled + late
        changes = map_changes(before, plans, self.controller.origin_of).values()
        if any(c.rotated_before and not c.rotated_after for c in changes):
            # the rotation goes off: the origin's read replies sent before the import (of a
            # value older than a write another holder completed) must arrive while the spine
            # still judges them by R6, not by rule 2 (docs/protocol.md F7; the explorer's
            # `off-undrained`)
            self._drain()
        repairs = dead_holder_repairs(before, plans, self.dead)
        self.controller.rotated = frozenset(
            key for pl in plans for key, kp in pl.keys.items() if kp.rotate
        )
        self.controller.spine_of = {key: s for s, pl in enumerate(plans) for key in pl.keys}
        if m.capped:
            LOG.warning(
                "%d keys had more holders than a spine's %d: cut", m.capped, self.fabric.max_holders
            )
        batches = [
            self._without_dead(
                spine_diff(before[s], plans[s], self.layouts[s], floors[s]), repairs[s]
            )
            for s in range(len(plans))
        ]
        m.plan_ms = (time.perf_counter() - planned) * 1000.0
        m.threshold, m.promoted, m.demoted = report.threshold, report.promoted, report.demoted
        m.rack_loads = [round(x, 1) for x in report.rack_loads]
        self.controller.plans = plans
        self.measured = measured
        self.expected = self.controller.fabric_load(dict(report.predicted), ratios)
        self.leaving = frozenset(held) - frozenset(self.spine_of)
        self.save_state()
        if self.announce is not None:
            self.announce()
        writing = time.perf_counter()
        self._write(m, batches, held)
        m.write_ms = (time.perf_counter() - writing) * 1000.0
        return self._done(m, began)

    def _write(
        self, m: FabricMetrics, batches: list[list[Operation]], before: dict[bytes, int]
    ) -> None:
        """The spines' switch part, the leaves' steering, the rebases of keys that changed
        level, then the agents' part (module docstring); ``before``: the fabric-hot keys the
        switches held before this period's writes."""
        planned = {key for plan in self.plans for key in plan.keys}
        try:
            self._write_spines(m, batches)
            self._write_steering(m)
            if any(held is None for held in self.steered):
                self._unsteered(m)
            self._rebase(m, before, planned)
        finally:  # the write freeze of the keys whose map changed ends with the switches' writes
            self._release(m)
        self._write_agents(m, batches)

    # -- the write freeze of writer map changes (docs/protocol.md F7) ---------------------------

    def _freeze_changes(
        self, m: FabricMetrics, before: Sequence[Plan], plans: list[Plan]
    ) -> list[Plan]:
        """Freeze, export and import every key whose writer map ``plans`` change (controller/
        rotation.py); a key whose freeze fails is reported and its change put off (which may
        change another key's map: frozen in turn). If that does not settle, no plan changes."""
        done: dict[bytes, set[int]] = {}
        for _ in range(4):
            changes = {
                key: change
                for key, change in map_changes(before, plans, self.controller.origin_of).items()
                if not set(change.servers) <= done.get(key, set())
            }
            if not changes:
                return plans
            if self.freezer is None:
                m.errors.append(
                    f"{len(changes)} writer map changes put off: no agent control to freeze them"
                )
                plans = put_off(before, plans, changes)
                continue
            self.freezer.freeze(changes)
            failed = self._frozen(m, changes)
            for key, change in changes.items():
                if key not in failed:
                    done.setdefault(key, set()).update(change.servers)
            if failed:
                plans = put_off(before, plans, failed)
        m.errors.append("writer map changes did not settle: no plan change this period")
        return [Plan(pl.servers, pl.slots, dict(pl.keys)) for pl in before]

    def _without_dead(self, batch: list[Operation], keys: dict[bytes, KeyPlan]) -> list[Operation]:
        """A spine's ``batch`` with ``keys`` (rotated keys a dead holder just left, their new
        entries: :func:`~kvswitch.controller.rotation.dead_holder_repairs`) repaired: their
        ``slot_ver``, ``origin_ver`` and ``done_by`` zeroed first (inside the freeze, before the
        new map: no Get follows ``done_by`` to the dead holder, no read reply passes until the
        origin's SYNC), each pushed from its origin after the release (R5 at ``origin_ver``
        0); and no removal sent to a dead server."""
        out: list[Operation] = []
        for key, kp in keys.items():
            LOG.warning(
                "key %s: dead holder left its rotated map, now %s: read state reset, pushed",
                key.hex(),
                kp.holders,
            )
            out += [
                RegisterWrite(name, kp.slot, 0)
                for name in (names.REG_SLOT_VER, names.REG_ORIGIN_VER, names.REG_DONE_BY)
            ]
        pushed = {op.key for op in batch if isinstance(op, PushRequest)}
        for op in batch:
            if isinstance(op, RemoveRequest) and self.dead:
                live = tuple(x for x in op.servers if x not in self.dead)
                if live:
                    out.append(RemoveRequest(op.key, live))
                continue
            out.append(op)
        out += [
            PushRequest(key, kp.origin, kp.replicas)
            for key, kp in keys.items()
            if key not in pushed and kp.replicas
        ]
        return out

    def _frozen(self, m: FabricMetrics, changes: dict[bytes, MapChange]) -> set[bytes]:
        """The keys of ``changes`` whose freeze failed, reported (their holders released)."""
        assert self.freezer is not None
        failed = {key: self.freezer.failed.pop(key) for key in list(self.freezer.failed)}
        for key, why in failed.items():
            m.errors.append(f"write freeze of key {key.hex()}: {why}; its map change put off")
            LOG.error("write freeze of key %s failed: %s", key.hex(), why)
        for key, change in changes.items():
            if key not in failed:
                LOG.info(
                    "key %s: writers %s%s -> %s%s (frozen)",
                    key.hex(),
                    change.before,
                    " rotated" if change.rotated_before else "",
                    change.after,
                    " rotated" if change.rotated_after else "",
                )
        return set(failed)

    def _release(self, m: FabricMetrics, keys: set[bytes] | None = None) -> None:
        """Release every frozen holder (of ``keys`` only, if given); one whose release fails is
        reported and released again by the next period (its writes of the key answer RETRY
        meanwhile)."""
        if self.freezer is None or not self.freezer.frozen:
            return
        for (key, server), why in self.freezer.release(keys).items():
            m.errors.append(f"release of key {key.hex()} at server {server}: {why}")
            LOG.error("release of key %s at server %d failed: %s", key.hex(), server, why)

    def _recover_freezes(self, m: FabricMetrics | None) -> None:
        """Finish the write freezes a crashed controller left at the servers of
        :attr:`unlisted` (:func:`~kvswitch.controller.rotation.recover`), toward the map the
        spines hold now; what fails is reported (in ``m``, or the log at start-up)."""
        if self.freezer is None or not self.unlisted:
            return

        def holders_of(key: bytes) -> tuple[int, ...]:
            s = self.spine_of.get(key)
            kp = self.plans[s].keys.get(key) if s is not None else None
            return kp.holders if kp is not None else (self.controller.origin_of(key),)

        got = recover(self.freezer, sorted(self.unlisted), holders_of)
        self.unlisted = set(got.unlisted)
        errors = [f"frozen keys of server {s} not listed: {why}" for s, why in got.unlisted.items()]
        errors += [
            f"write freeze of key {k.hex()} left frozen: {why}" for k, why in got.failed.items()
        ]
        for key, at in got.found.items():
            if key not in got.failed:
                LOG.warning("key %s was left frozen at %s: finished, released", key.hex(), at)
        for error in errors:
            LOG.error("%s", error)
            if m is not None:
                m.errors.append(error)

    def _gather(
        self, m: FabricMetrics, before: list[Plan], after: list[Plan] | None = None
    ) -> None:
        """The rotated keys that leave ``before`` outside a plan (a spine lost, restarted or a
        leaf that does not steer; ``after``: the plans now, default :attr:`plans`) frozen, their
        ids and newest item gathered into their origins (docs/fabric.md "Write rotation",
        "Failures"); the caller releases them once the keys' steering or entries are gone. A
        holder that does not answer is reported: its ids are lost, as a dead origin's."""
        changes = map_changes(before, after or list(self.plans), self.controller.origin_of)
        if not changes:
            return
        if self.freezer is None:
            m.errors.append(f"{len(changes)} rotated keys left their spine without a write freeze")
            return
        self.freezer.freeze(changes)
        for key, why in self.freezer.failed.items():
            m.errors.append(f"write freeze of key {key.hex()} (gathered into its origin): {why}")
        self.freezer.failed.clear()

    def _sync_sources(self, s: int, ops: list[Operation]) -> list[Operation]:
        """``ops`` with each push of a rotated key asked of the holder R5 lets SYNC
        (docs/protocol.md F7: the ``done_by`` holder when its cell is in the read set;
        :func:`~kvswitch.controller.rotation.sync_source`), pushed to every other holder, the
        origin included; a push no holder can SYNC is left out (the key's next write validates
        its writer)."""
        plan, layout = self.plans[s], self.layouts[s]
        rotated = {
            op.key: plan.keys[op.key]
            for op in ops
            if isinstance(op, PushRequest) and op.key in plan.keys and plan.keys[op.key].rotate
        }
        if not rotated:
            return ops
        drv = self.spines[s]
        slots = sorted({kp.slot for kp in rotated.values()})
        origin_ver = drv.read_register_cells(names.REG_ORIGIN_VER, slots)
        done_by = drv.read_register_cells(names.REG_DONE_BY, slots)
        rows = {
            key: row for key, kp in rotated.items() if (row := layout.row_of(key, kp)) is not None
        }
        valid = drv.read_register_cells(
            names.REG_VALID_VER, [base + o for base, cells in rows.values() for o in range(cells)]
        )
        out: list[Operation] = []
        for op in ops:
            kp = rotated.get(op.key) if isinstance(op, PushRequest) else None
            if kp is None:
                out.append(op)
                continue
            row = rows.get(op.key)
            cells = [valid[row[0] + o] for o in range(len(kp.holders))] if row else []
            j = sync_source(kp, origin_ver[kp.slot], done_by[kp.slot], cells) if row else None
            if j is None:
                LOG.info("push of rotated key %s: no holder in its read set", op.key.hex())
                continue
            source = kp.holders[j]
            out.append(PushRequest(op.key, source, tuple(h for h in kp.holders if h != source)))
        return out

    def _parallel(self, count: int, step: Callable[[int], T]) -> list[T | DriverError]:
        """``step(i)`` for i in range(count), one switch each, at the same time (each driver has
        its own connection); what each returned, or the DriverError it raised."""
        futures = [self.pool.submit(step, i) for i in range(count)]
        out: list[T | DriverError] = []
        for future in futures:
            try:
                out.append(future.result())
            except DriverError as exc:
                out.append(exc)
        return out

    def _write_spines(self, m: FabricMetrics, batches: list[list[Operation]]) -> None:
        def write(s: int) -> int:
            switch = [op for op in batches[s] if _switch_op(op)]
            self.spines[s].apply(switch)
            return len(switch)

        for s, done in enumerate(self._parallel(len(batches), write)):
            if isinstance(done, DriverError):
                self._spine_error(m, s, done)
            else:
                m.updates += done
        # the fabric-hot keys are the ones the spines hold (a refused batch was read back)
        self.controller.spine_of = {
            key: s for s, plan in enumerate(self.plans) for key in plan.keys
        }

    def _write_steering(self, m: FabricMetrics) -> None:
        spine_of = self.spine_of

        def write(r: int) -> int:
            drv, held = self.leaves[r], self.steered[r]
            try:
                if held is None or not self.clean[r]:
                    self._reconcile_steering(r)
                    return 0
                gone, made = steering_diff(self.fabric, r, held, spine_of)
                self.steered[r] = None  # unknown until both writes are taken
                drv.apply(gone)
                drv.apply(made)
                self.steered[r] = dict(spine_of)
                return len(gone) + len(made)
            except DriverError:
                self.steered[r], self.clean[r] = None, False
                raise

        for r, done in enumerate(self._parallel(len(self.leaves), write)):
            if isinstance(done, DriverError):
                m.errors.append(f"leaf {self._leaf_name(r)}: {first_line(done)}")
                LOG.error("leaf %s: steering not written: %s", self._leaf_name(r), done)
            else:
                m.updates += done

    def _unsteered(self, m: FabricMetrics) -> None:
        """After a leaf refused steering: the keys some leaf does not steer to their spine are
        broken at that spine (a write from the origin's rack would reach the origin unstamped,
        and a replica an UPDATE copy validated would then serve a stale value), then their
        steering entries go from every leaf that has them."""
        held: list[dict[bytes, int]] = []
        for r, drv in enumerate(self.leaves):
            try:
                held.append(steering_of(drv.read_entries(names.FABRIC_HOT_TABLE), self.fabric, r))
            except DriverError:
                held.append({})  # unreachable: its rack is cut off; it steers nothing known
        spine_of = self.spine_of
        bad = {key for key, s in spine_of.items() if any(h.get(key) != s for h in held)}
        if not bad:
            return
        LOG.warning(
            "%d fabric-hot keys not steered by every leaf: broken at their spines", len(bad)
        )
        kept = [p.without(bad) for p in self.plans]
        self._gather(m, list(self.plans), kept)
        try:
            self._break_unsteered(m, bad, held)
        finally:
            self._release(m, bad)

    def _break_unsteered(
        self, m: FabricMetrics, bad: set[bytes], held: list[dict[bytes, int]]
    ) -> None:
        for s, plan in enumerate(self.plans):
            kept = plan.without(bad)
            if len(kept.keys) == len(plan.keys):
                continue
            ops = self._switch_diff(s, plan, kept)
            try:
                self.spines[s].apply(ops)
                self._remember(s, plan, kept)  # made again by the first plan all leaves steer
                self.controller.plans[s] = kept
            except DriverError as exc:
                self._spine_error(m, s, exc)
        self.controller.spine_of = {
            key: s for s, plan in enumerate(self.plans) for key in plan.keys
        }
        for r, drv in enumerate(self.leaves):
            gone, _ = steering_diff(self.fabric, r, held[r], self.spine_of)
            try:
                drv.apply(gone)
                # known again; a leaf that refused is still reconciled whole next period
                self.steered[r] = {k: v for k, v in held[r].items() if k in self.spine_of}
            except DriverError as exc:
                m.errors.append(f"leaf {self._leaf_name(r)}: {first_line(exc)}")
                self.steered[r], self.clean[r] = None, False

    def _rebase(self, m: FabricMetrics, before: dict[bytes, int], planned: set[bytes]) -> None:
        """Keys that changed serializer this period (docs/fabric.md "Moving a key between
        levels"): the old one stopped stamping them (a leaf's hot entry is bypassed once every
        leaf steers the key up; a spine's HotkeyTable entry and then the steering are gone);
        after ``drain`` seconds their copies forget their (epoch, version), so that the new
        serializer's versions apply: every holder of a key that came to a spine (before its
        push), the origin of one that left or was broken again."""
        now = self.spine_of
        ops: dict[int, list[Operation]] = {}
        for key, s in now.items():
            if before.get(key) != s:
                ops.setdefault(s, []).append(RebaseRequest(key, self.plans[s].keys[key].holders))
        for key in (set(before) | planned) - set(now):
            s = before.get(key, self.controller.spine_of.get(key, 0))
            origin = self.controller.origin_of(key)
            if origin in self.dead:  # it cannot answer (docs/fabric.md "Failures")
                LOG.warning("key %s left its spine: its dead origin is not rebased", key.hex())
                continue
            ops.setdefault(s, []).append(RebaseRequest(key, (origin,)))
        if not ops:
            return
        self._drain()
        for s, batch in ops.items():
            drv = self.spines[s]
            errors = drv.agent_errors
            try:
                drv.apply(batch)
            except DriverError as exc:
                self._spine_error(m, s, exc)
            if drv.agent_errors > errors:
                m.errors.append(
                    f"spine {self._spine_name(s)}: {drv.agent_errors - errors} agent rebases failed"
                )

    def _write_agents(self, m: FabricMetrics, batches: list[list[Operation]]) -> None:
        """Pushes and removals; a push only once every leaf steers its key (the origin's SYNC
        and the replicas' CONFIRMs must cross the key's spine), else it waits (replicas stay
        invalid: Gets go to the origin)."""
        steered_everywhere = all(held is not None for held in self.steered)
        for s, batch in enumerate(batches):
            agents: list[Operation] = []
            plan = self.plans[s]
            for op in batch:
                if isinstance(op, PushRequest):
                    if op.key not in plan.keys:
                        continue
                    if not steered_everywhere:
                        self.withheld[op.key] = op
                        continue
                    agents.append(op)
                elif isinstance(op, RemoveRequest):
                    agents.append(op)
            if steered_everywhere:
                agents += self._retries(s, {op.key for op in agents if isinstance(op, PushRequest)})
            try:
                agents = self._sync_sources(s, agents)
                m.pushes += sum(1 for op in agents if isinstance(op, PushRequest))
                self.spines[s].apply(agents)
            except DriverError as exc:
                self._spine_error(m, s, exc)
        m.withheld = len(self.withheld)

    def _retries(self, s: int, pushed: set[bytes]) -> list[Operation]:
        """Pushes to make again for spine ``s``: withheld until every leaf steered the key, or
        failed at the agents; with the key's replicas as the plan has them now."""
        drv, plan = self.spines[s], self.plans[s]
        out: list[Operation] = []
        for key in list(self.withheld) + list(drv.failed_pushes):
            kp = plan.keys.get(key)
            if kp is None or not kp.replicas or key in pushed:
                continue
            pushed.add(key)
            out.append(PushRequest(key, kp.origin, kp.replicas))
        for key in list(self.withheld):
            if key in pushed or self.spine_of.get(key) is None:
                del self.withheld[key]
        return out

    def _spine_error(self, m: FabricMetrics, s: int, exc: DriverError) -> None:
        """A spine refused a write or went away: reported; its plan is what it holds."""
        m.errors.append(f"spine {self._spine_name(s)}: {first_line(exc)}")
        LOG.error("spine %s: %s", self._spine_name(s), exc)
        drv = self.spines[s]
        if not drv.connected:
            self.spine_ok[s] = False  # reconnected and started by the next period
            return
        try:
            self.controller.plans[s] = self._recover_spine(s)
        except DriverError as again:
            LOG.error("spine %s: read-back failed: %s", self._spine_name(s), again)
            self.spine_ok[s] = False

    def _lose_spines(self, m: FabricMetrics) -> None:
        """Spines that could not be started (dead, or not answering): the leaves stop steering
        their keys (docs/fabric.md "Failures": steered into a dead link, their requests would
        be lost; cold, they reach their origins through the other spines). Their plans are
        read back when they are started again."""
        lost = [s for s, ok in enumerate(self.spine_ok) if not ok and self.plans[s].keys]
        if not lost:
            return
        held = list(self.plans)
        for s in lost:
            LOG.warning(
                "spine %s is down: its %d keys are cold",
                self._spine_name(s),
                len(self.plans[s].keys),
            )
            self._remember(s, self.plans[s])
            self.controller.plans[s] = Plan(self.plans[s].servers, self.plans[s].slots)
        self._gather(m, held)  # its rotated keys into their origins, before the steering goes
        before = dict(self.spine_of)
        self.controller.spine_of = {
            key: s for s, plan in enumerate(self.plans) for key in plan.keys
        }
        try:
            self._write_steering(m)
            self._rebase_origins(m, set(before) - set(self.spine_of))
        finally:
            self._release(m)

    def _switch_diff(self, s: int, old: Plan, new: Plan) -> list[Operation]:
        """Spine ``s``'s switch writes from ``old`` to ``new`` (no agent's push or removal: a key
        broken outside a plan)."""
        return [op for op in spine_diff(old, new, self.layouts[s]) if _switch_op(op)]

    def _drain(self) -> None:
        """Wait :attr:`drain` seconds: the messages on their way now arrive meanwhile."""
        time.sleep(self.drain)

    def _rebase_origins(self, m: FabricMetrics, gone: set[bytes]) -> None:
        """The origins of keys that left the spines outside a plan: their next serializer's
        versions must apply (those of a lost spine cannot be compared)."""
        ops = [RebaseRequest(key, (self.controller.origin_of(key),)) for key in gone]
        live = [s for s, ok in enumerate(self.spine_ok) if ok]
        if ops and live:
            self._drain()
            try:
                self.spines[live[0]].apply(ops)
            except DriverError as exc:
                self._spine_error(m, live[0], exc)

    def _lose_leaf(self, m: FabricMetrics) -> None:
        """A leaf that could not be started again (dead, or not answering): it cannot steer, so
        every fabric-hot key is broken at its spine (docs/fabric.md "Failures": a leaf that
        forwards without steering could let a write reach its origin unstamped) and its origin
        rebased; no plan is made until the leaf is back, and the first one then starts from the
        broken keys' holders (``FabricController.restore``)."""
        if not self.spine_of:
            return
        before = dict(self.spine_of)
        self._unsteered(m)
        self._rebase_origins(m, set(before) - set(self.spine_of))

    def _drop_stale(self, m: FabricMetrics, s: int, held: Plan) -> None:
        """The keys spine ``s`` holds again, started after it was lost, that its plan ``held``
        lacks: dropped while the controller could not reach it (its control channel lost, its
        data plane and tables kept). Their origins took writes since, cold, that this spine never
        saw, so a replica its registers call valid may hold an older value: deleted from it, not
        adopted (the next plan makes them again, pushed from their origins), and the origins of
        those no other spine holds rebased (writes it stamped while it was unreachable may have
        left them a version of its epoch; docs/fabric.md "Failures")."""
        plan = self.plans[s]
        stale = {key for key in plan.keys if key not in held.keys}
        if not stale:
            return
        LOG.warning(
            "spine %s: %d keys dropped while it was unreachable deleted",
            self._spine_name(s),
            len(stale),
        )
        kept = plan.without(stale)
        self.spines[s].apply(self._switch_diff(s, plan, kept))
        self.controller.plans[s] = kept
        others = {key for x, pl in enumerate(self.plans) if x != s for key in pl.keys}
        self._rebase_origins(m, stale - others)

    def _remember(self, s: int, held: Plan, now: Plan | None = None) -> None:
        """Spine ``s`` lost the keys of ``held`` that ``now`` lacks: the next plan starts from
        their holders on that spine (its entries come back), if they are still hot."""
        for key, kp in held.keys.items():
            if now is None or key not in now.keys:
                self.controller.restore[key] = (s, kp.holders)

    def _repair(self, m: FabricMetrics) -> None:
        """Reconnect and start the switches that went away; reconcile leaves whose steering is
        unknown (the period writes them)."""
        for s, drv in enumerate(self.spines):
            if self.liveness is not None and not drv.reachable(self.liveness):
                # its process is gone: a call would wait for its timeout (seconds, while the
                # leaves steer its keys into it), even while the stream has not noticed
                self.spine_ok[s] = False
                m.errors.append(
                    f"spine {self._spine_name(s)}: its control port takes no connection"
                )
                continue
            if self.spine_ok[s] and drv.connected:
                continue
            try:
                if not drv.connected:
                    drv.reconnect()
                held = self.plans[s]
                self._start_spine(s)
                self._drop_stale(m, s, held)
                self._remember(s, held, self.plans[s])  # it restarted empty
                after = list(self.plans)
                self._gather(m, [held if x == s else pl for x, pl in enumerate(after)], after)
                self._release(m)  # the restarted spine has no map of them: the origin writes
                self._ready_spine(s)  # its keys gathered: its hold lifted
            except DriverError as exc:
                self.spine_ok[s] = False
                m.errors.append(f"spine {self._spine_name(s)}: {first_line(exc)}")
        self._own_spines()
        for r, drv in enumerate(self.leaves):
            if drv.connected:
                continue
            try:
                drv.reconnect()
                self._start_leaf(r)
            except DriverError as exc:
                self.steered[r], self.clean[r] = None, False
                m.errors.append(f"leaf {self._leaf_name(r)}: {first_line(exc)}")

    def share(self, r: int) -> FabricShare:
        """What rack ``r``'s controller must know (docs/fabric.md "Runtime"): the keys it must
        not make hot (every key a spine plans, every key that left a spine last period, every
        key its leaf may still steer) and its servers' fabric load, last period's and next
        period's (left out when this period did not plan)."""
        planned = {key for plan in self.plans for key in plan.keys}  # before they are written
        keys = set(self.spine_of) | planned | self.leaving | set(self.steered[r] or {})
        servers = self.fabric.shape.servers_of(r)
        if not self.measured or not self.expected:
            return FabricShare(frozenset(keys))
        return FabricShare(
            frozenset(keys),
            tuple(self.measured[s] for s in servers),
            tuple(self.expected[s] for s in servers),
        )

    def _done(self, m: FabricMetrics, began: float) -> FabricMetrics:
        m.fabric_keys = len(self.spine_of)
        m.holders = sum(len(kp.holders) for plan in self.plans for kp in plan.keys.values())
        m.period_ms = (time.perf_counter() - began) * 1000.0
        (LOG.warning if m.errors else LOG.info)("%s", m.line())
        return m

    # -- the state file ---------------------------------------------------------------------------

    def save_state(self) -> None:
        """The spines' epochs, T_f and last period's counts, for a restarted controller."""
        if self.state_file is None:
            return
        state: dict[str, Any] = {"spine_epochs": list(self.epochs)}
        if self.controller.threshold.value is not None:
            state["threshold"] = self.controller.threshold.value
        if self.controller.predictor.prev:
            state["observed"] = {k.hex(): v for k, v in self.controller.predictor.prev.items()}
        statefile.save(self.state_file, state)

    def _spine_name(self, s: int) -> str:
        return self.fabric.spines[s].switch.name

    def _leaf_name(self, r: int) -> str:
        return self.fabric.racks[r].switch.name


def _joined(parts: Sequence[Sequence[Any] | None]) -> list[Any] | None:
    """The racks' per-server lists one after the other; None unless every rack gave one."""
    if any(x is None for x in parts):
        return None
    return [v for x in parts if x is not None for v in x]


def _switch_op(op: Operation) -> bool:
    return not isinstance(op, PushRequest | RemoveRequest)
