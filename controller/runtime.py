"""The controller's period loop on a real switch: start-up, periods, metrics, restart.

Start-up (:meth:`Runtime.start`): the epoch register gets one more than the largest epoch found on
the switch or in the state file; the static entries of the rack (forwarding of every host, the
HostportTable of trust.p4, ServeroffsetTable, PorttoserverTable, LoadcountTable) are installed where missing or different;
the hot keys the switch already holds (HotkeyTable, ServermapTable) become the controller's plan,
entries and multicast groups that belong to no hot key are deleted, and copies that agents hold of
keys they neither originate nor replicate any more are dropped. A restarted controller therefore
continues with the rack as it left it.

Each period (:meth:`Runtime.period`): read counters and HashPipe, reset them, plan
(:class:`kvswitch.controller.period.Controller`), apply the batch, push and drop replicas; one log
line and one JSON object (``--metrics``) per period. When a batch fails the plan is read back from
the switch, so the next period's difference is against what the switch really holds.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from kvswitch import protocol as p
from kvswitch.agent.control import ControlError, KeyVersion
from kvswitch.controller import names
from kvswitch.controller.agents import AgentPool
from kvswitch.controller.driver import DriverError, SwitchDriver
from kvswitch.controller.elastic import MembershipError, handoff
from kvswitch.controller.membership import (
    NO_PROBE,
    Change,
    Event,
    Membership,
    Observation,
    State,
)
from kvswitch.controller.ops import (
    EntryOp,
    MulticastGroupSet,
    OpCounts,
    Operation,
    PushRequest,
    RegisterWrite,
    TableEntry,
)
from kvswitch.controller.period import Controller, ControllerConfig, PeriodReport
from kvswitch.controller.plan import KeyPlan, Plan, build_plan, diff, down_entry, rack_setup
from kvswitch.controller.rackfile import RackFile
from kvswitch.controller.threshold import imbalance, max_over_mean

LOG = logging.getLogger("kvswitch.controller")
EPOCH_MAX = 0xFFFF  # the epoch register is bit<16>; 0 is never used
#: A failed push is retried in this many following periods at most, then given up (logged).
PUSH_ATTEMPTS = 5


def next_epoch(*seen: int) -> int:
    """One more than the largest epoch seen, wrapping from 65535 to 1."""
    top = max(seen, default=0)
    return top + 1 if top < EPOCH_MAX else 1


def forwarding_ops(rack: RackFile) -> list[Operation]:
    """An ``ipv4_lpm`` /32 per host of the rack: its port, its MAC, the switch's MAC as source."""
    return [
        TableEntry(
            EntryOp.ADD,
            "ipv4_lpm",
            (("dst_addr", h.ip),),
            "set_next_hop",
            (("port", h.port), ("dmac", h.mac), ("smac", rack.switch_mac)),
        )
        for h in rack.servers + rack.clients
    ]


def trust_ops(rack: RackFile) -> list[Operation]:
    """A ``HostportTable`` /32 per host of the rack (p4src/features/trust.p4): the port its source
    address may arrive on, and whether it is a server (only servers may send replies, PUSH, REMOVE,
    CONFIRM, SYNC, SYNC_DONE)."""
    return [
        TableEntry(
            EntryOp.ADD,
            names.HOSTPORT_TABLE,
            ((names.MATCH_SRC, h.ip),),
            names.ACT_SET_SOURCE,
            ((names.PARAM_PORT, h.port), (names.PARAM_SERVER, int(server))),
        )
        for server, hosts in ((True, rack.servers), (False, rack.clients))
        for h in hosts
    ]


DYNAMIC_TABLES = (names.KEYINDEX_TABLE, names.SERVERMAP_TABLE, names.MULTIGROUP_TABLE)


@dataclass
class Metrics:
    period: int
    time: float
    lambda_: float
    max_mean: float
    threshold: float
    hot_keys: int
    replicas: int
    updates: int
    loads: list[int]
    agent_errors: int = 0
    period_ms: float = 0.0  # time the period's reads, planning and batch took
    error: str = ""
    down: list[int] = field(default_factory=list)  # servers declared dead (failure detector)
    events: list[str] = field(default_factory=list)  # membership changes seen this period
    # replicated keys (hex) -> their holders, origin first, as the switch holds them after the batch
    holders: dict[str, list[int]] = field(default_factory=dict)

    def line(self) -> str:
        text = (
            f"period {self.period}  lambda {self.lambda_:.3f}  T {self.threshold:.0f}  "
            f"hot {self.hot_keys}  replicas {self.replicas}  updates {self.updates}  "
            f"loads {','.join(str(x) for x in self.loads)}"
        )
        if self.down:
            text += f"  down {','.join(str(s) for s in self.down)}"
        if self.events:
            text += f"  events {','.join(self.events)}"
        return text + (f"  error {self.error}" if self.error else "")

    def record(self) -> dict[str, Any]:
        return {
            "period": self.period,
            "time": self.time,
            "lambda": self.lambda_,
            "max_mean": self.max_mean,
            "threshold": self.threshold,
            "hot_keys": self.hot_keys,
            "replicas": self.replicas,
            "updates": self.updates,
            "loads": self.loads,
            "agent_errors": self.agent_errors,
            "period_ms": round(self.period_ms, 2),
            "error": self.error,
            "down": self.down,
            "events": self.events,
            "holders": self.holders,
        }


class Runtime:
    def __init__(
        self,
        driver: SwitchDriver,
        rack: RackFile,
        config: ControllerConfig,
        agents: AgentPool | None = None,
        observe_only: bool = False,
        metrics: TextIO | None = None,
        state_file: Path | None = None,
        down_after: int = 2,
        min_sent: int = 5,
        unsafe_handoff: bool = False,
        crash_in_handoff: bool = False,
    ) -> None:
        self.driver = driver
        self.rack = rack
        self.agents = agents
        self.observe_only = observe_only
        self.metrics = metrics
        self.state_file = state_file
        # the ring (docs/protocol.md "Membership"): its members and version; keys' origins and
        # hot-key placement follow it, the failure detector watches its members only
        self.members = frozenset(s for s, h in enumerate(rack.servers) if h.member)
        self.ring_version = 1
        self.ring = p.HashRing.of(self.members)
        self.controller = Controller(
            config, lambda key: self.ring.origin(key), rack.rack(), driver.slots
        )
        self.controller.members = tuple(sorted(self.members))
        self.window_members = self.members
        # held by a period and by a membership change (the admin socket's thread)
        self.lock = threading.Lock()
        self.membership_events: list[str] = []
        self.unsafe_handoff = unsafe_handoff  # TESTS ONLY (controller/elastic.py handoff)
        self.crash_in_handoff = crash_in_handoff  # TESTS ONLY (the same)
        # a ring change past its point of no return (written to the state file as "ring_next")
        self.committing: tuple[int, frozenset[int]] | None = None
        self.periods = 0
        self.epoch = 0
        self.membership = Membership(len(rack.servers), down_after, min_sent)
        if agents is not None:  # copies of a missed origin's keys are kept: they may be the last
            agents.keep = self._keep
        self.push_attempts: dict[bytes, int] = {}
        self.lagging: dict[tuple[bytes, int], int] = {}  # (key, replica) -> origin_ver seen
        self.repushes: dict[bytes, int] = {}  # re-pushes of a key whose replica stays out of step

    def _keep(self, key: bytes, server: int) -> bool:
        """A removal (deferred one period by the driver) that must not run: the key's origin is
        missed or down (the copy may be the last one), or ``server`` became its origin since the
        removal was planned (a ring change: the copy is the key's data now)."""
        origin = self.ring.origin(key)
        return origin == server or self.membership.state(origin) is not State.UP

    # -- start-up -----------------------------------------------------------------------------------

    def start(self) -> None:
        """Epoch, static entries, and the plan the switch holds (see the module docstring)."""
        on_switch = self.driver.read_register(names.REG_EPOCH)[0]
        saved = self._load_state()
        self.epoch = next_epoch(on_switch, _state_int(saved, "epoch", EPOCH_MAX), self.epoch)
        threshold = self.controller.threshold
        saved_t = saved.get("threshold")
        if (  # a restarted controller carries on with its T
            threshold.value is None
            and isinstance(saved_t, int | float)
            and not isinstance(saved_t, bool)
            and threshold.floor <= saved_t < float("inf")
        ):
            threshold.value = float(saved_t)
        predictor = self.controller.predictor
        if not predictor.prev:  # and with last period's counts, as if it had not stopped
            predictor.prev = _observations(saved.get("observed"))
        # a restarted controller serves the ring it last activated, or the one it was switching
        # to when it stopped (past the copy: finishing the change is what keeps no write hidden)
        servers = len(self.rack.servers)
        ring = _saved_ring(saved.get("ring_next"), servers) or _saved_ring(
            saved.get("ring"), servers
        )
        if ring is not None:
            self._adopt_ring(*ring)
        self._save_state()
        static = forwarding_ops(self.rack) + trust_ops(self.rack)
        static += rack_setup(self.controller.rack, self.epoch)
        if not self.driver.has_liveness:
            LOG.warning("the P4 program has no liveness.p4: dead servers are not refused")
            static = [op for op in static if not _liveness_op(op)]
        self.driver.apply(self.driver.reconcile([op for op in static if _switch_op(op)]))
        self.driver.apply([op for op in static if not _switch_op(op)])  # the epoch register
        held_epoch = self.driver.read_register(names.REG_EPOCH)[0]
        if held_epoch != self.epoch:  # a write the switch took and did not apply
            raise DriverError(f"the switch holds epoch {held_epoch} after writing {self.epoch}")
        self.controller.plan = self.recover()
        for server in self.driver.read_down():  # a restarted controller keeps the dead dead
            self.membership.mark_down(server)
        self._set_down()
        if self.observe_only and self.controller.plan.keys:
            LOG.info("observe-only: removing %d hot keys", len(self.controller.plan.keys))
            self.driver.apply(diff(self.controller.plan, self._empty(), self.controller.rack))
            self.controller.plan = self._empty()
        self.announce_ring()
        held = self.drop_stale_copies()
        self.invalidate_missing_copies(held)
        self.push_unconfirmed()
        LOG.info(
            "started: epoch %d, ring %d (%d of %d servers), %d slots, %d hot keys held",
            self.epoch,
            self.ring_version,
            len(self.members),
            len(self.rack.servers),
            self.driver.slots,
            len(self.controller.plan.keys),
        )

    def recover(self) -> Plan:
        """The switch's hot keys as a plan. A HotkeyTable entry that is not a whole hot key
        (see :meth:`SwitchDriver.read_plan`) is deleted first, so its Gets go to the origin;
        then entries and groups of no hot key are deleted and missing ones written."""
        plan, broken = self.driver.read_plan()
        if broken:
            LOG.warning("recover: %d incomplete hot keys removed", len(broken))
            self.driver.apply(
                [
                    TableEntry(EntryOp.DELETE, names.HOTKEY_TABLE, ((names.MATCH_KEY, key),))
                    for key in broken
                ]
            )
        # floor = the newest version handed out: confirms sent before this controller took over
        # cannot validate anything; replicas not yet valid are pushed again (push_unconfirmed)
        floor = self.driver.read_version()
        wanted = [
            op
            for op in diff(self._empty(), plan, self.controller.rack, floor)
            if isinstance(op, MulticastGroupSet)
            or (isinstance(op, TableEntry) and op.table != names.HOTKEY_TABLE)
        ]
        fixes = self.driver.reconcile(wanted, prune=DYNAMIC_TABLES, prune_groups=True)
        if fixes:
            LOG.info("recover: %d entries/groups fixed to match the hot keys", len(fixes))
            self.driver.apply(fixes)
        return plan

    def push_unconfirmed(self) -> None:
        """Push again every recovered key with a replica that is not valid (a push the previous
        controller did not make or that was lost): without a write to the key, nothing else would
        ever make that replica serve."""
        plan = self.controller.plan
        if not any(kp.replicas for kp in plan.keys.values()):
            return
        slot_ver = self.driver.read_register(names.REG_SLOT_VER)
        origin_ver = self.driver.read_register(names.REG_ORIGIN_VER)
        valid = self.driver.read_register(names.REG_VALID_VER)
        m = len(self.rack.servers)
        pushes: list[Operation] = []
        for key, kp in plan.keys.items():
            ver = slot_ver[kp.slot]
            base = names.valid_base(kp.slot, m)
            if kp.replicas and (
                ver == 0
                or origin_ver[kp.slot] != ver
                or any(valid[base + s] != ver for s in kp.replicas)
            ):
                pushes.append(PushRequest(key, kp.origin, kp.replicas))
        if pushes:
            LOG.info("recover: pushing %d hot keys whose replicas are not valid", len(pushes))
            self.driver.apply(pushes)

    def invalidate_missing_copies(self, held: dict[int, dict[bytes, KeyVersion]]) -> None:
        """A replica of the recovered plan whose agent answered but holds no live copy of the key
        (it restarted while no controller watched, so no incarnation change was seen) gets its
        ``valid_ver`` cell zeroed: no Get is redirected to it, and :meth:`push_unconfirmed` pushes
        the key again."""
        m = len(self.rack.servers)
        zero: list[Operation] = [
            RegisterWrite(names.REG_VALID_VER, names.valid_base(kp.slot, m) + s, 0)
            for key, kp in self.controller.plan.keys.items()
            for s in kp.replicas
            if s in held and key not in held[s]
        ]
        if zero:
            LOG.warning("recover: %d replicas hold no copy of their key: invalidated", len(zero))
            self.driver.apply(zero)

    def drop_stale_copies(
        self, servers: set[int] | None = None
    ) -> dict[int, dict[bytes, KeyVersion]]:
        """Agents (all, or ``servers``) drop copies of keys they neither originate nor replicate
        in the plan; returns what each reachable agent held live before."""
        if self.agents is None:
            return {}
        plan = self.controller.plan
        holdings = self.agents.holdings(servers)
        for server, keys in holdings.items():
            for key in keys:
                kp = plan.keys.get(key)
                if self.ring.origin(key) == server or (kp is not None and server in kp.holders):
                    continue
                try:
                    self.agents.remove(key, server)
                    LOG.info("server %d: dropped a stale copy of %s", server, key.hex())
                except Exception as exc:  # logged; the copy is never served (no table uses it)
                    LOG.warning("server %d: cannot drop %s: %s", server, key.hex(), exc)
        return holdings

    # -- periods ------------------------------------------------------------------------------------

    def period(self) -> Metrics:
        self.periods += 1
        began = time.perf_counter()
        errors_before = self.driver.agent_errors
        error = ""
        events: list[str] = []
        ops: list[Operation] = []
        refused = self.membership.down  # the switch refused their requests during this period
        members = self.window_members  # one that joined during the window: from the next one
        try:
            if not self.observe_only:
                events = self.watch()
            if self.observe_only:
                report = self._observe()
            else:
                report = self.controller.step(self.driver)
                ops = report.ops
                self._retry_pushes(ops)
                self.repush_lagging()
        except DriverError as exc:
            error = str(exc).splitlines()[0]
            LOG.error("period %d: %s", self.periods, exc)
            self._after_error()
            report = None
        except Exception as exc:  # a bug must not end the rack's control: report, resync, go on
            error = f"internal error: {exc!r}"
            LOG.exception("period %d: internal error", self.periods)
            self._after_error()
            report = None
        plan = self.controller.plan
        counts = OpCounts.of(ops)
        loads = report.loads if report is not None else []
        # lambda of the ring's members up all period (one back at its end was refused until then)
        absent = self.membership.down | refused
        live = [x for s, x in enumerate(loads) if s not in absent and s in members & self.members]
        metrics = Metrics(
            period=self.periods,
            time=time.time(),
            lambda_=imbalance(live),
            max_mean=max_over_mean(live),
            threshold=report.threshold if report is not None else 0.0,
            hot_keys=len(plan.keys),
            replicas=sum(len(kp.replicas) for kp in plan.keys.values()),
            updates=counts.table + counts.multicast + counts.register,
            loads=list(loads),
            agent_errors=self.driver.agent_errors - errors_before,
            period_ms=(time.perf_counter() - began) * 1000.0,
            error=error,
            down=sorted(self.membership.down),
            events=self.membership_events + events,
            holders={key.hex(): list(kp.holders) for key, kp in plan.keys.items() if kp.replicas},
        )
        self.membership_events = []
        self.window_members = self.members  # the ring while the next period's counters run
        self.controller.excluded = frozenset()  # a restarted server is placed again next period
        if report is not None:
            self._save_state()
        LOG.info("%s", metrics.line())
        if self.metrics is not None:
            self.metrics.write(json.dumps(metrics.record()) + "\n")
            self.metrics.flush()
        return metrics

    # -- failure detection (docs/controller_runtime.md "Failure detection") ----------------------

    def watch(self) -> list[str]:
        """Feed the failure detector one period (packets sent to each server, its replies, its
        agent's ping) and act on what changed: a dead server's requests are refused by the switch
        and it leaves every replica set (this period's plan); a restarted one leaves them too (its
        copies are invalid) and is placed again from the next period; a server that comes back
        gets its stale copies dropped and its hot keys restored before its requests flow again."""
        m = len(self.rack.servers)
        if self.driver.has_liveness:
            sent, replies = self.driver.read_load_counters(), self.driver.read_reply_counters()
        else:  # no reply counts: the pings alone
            sent, replies = [0] * m, [0] * m
        # without agents nothing can be pinged (nor shown back): such servers are not monitored
        probes = self.agents.ping() if self.agents is not None else [NO_PROBE] * m
        # a server outside the ring (a spare, or one removed) is not watched: never "dead"
        probes = [probe if s in self.members else NO_PROBE for s, probe in enumerate(probes)]
        observations = [Observation(sent[s], replies[s], probes[s]) for s in range(m)]
        changes = self.membership.observe(observations)
        restarted: set[int] = set()
        for change in changes:
            self._act(change, restarted)
        self._set_down()
        self.controller.excluded = frozenset(restarted)
        return [_event_text(c, self.rack) for c in changes]

    def _act(self, change: Change, restarted: set[int]) -> None:
        server, name = change.server, self.rack.servers[change.server].name
        if change.event is Event.DOWN:
            LOG.warning(
                "server %s declared down: its requests are refused, it holds no replica", name
            )
            if self.driver.has_liveness:
                self.driver.apply([down_entry(EntryOp.ADD, self.controller.rack, server)])
            self.driver.apply(self.adopt_replica_versions(server))
            return
        if change.event is Event.RESTART or change.restarted:
            LOG.warning("server %s restarted (incarnation %s)", name, change.incarnation)
            restarted.add(server)
            self.announce_ring({server})  # a new agent serves no ring until told
        # a restarted origin lost its memory; one that was only unreachable may have missed the
        # version its replicas hold (adopt_replica_versions): both get it back, newer only
        self.restore_origin(server)
        if change.event is Event.UP:
            self._serve_again(server)
            LOG.warning("server %s is back: serving its keys again", name)

    def _serve_again(self, server: int) -> None:
        """A server back from down: its stale copies dropped, then its DownTable entry deleted
        (its requests reach it again)."""
        self.drop_stale_copies({server})
        if self.driver.has_liveness:
            self.driver.apply([down_entry(EntryOp.DELETE, self.controller.rack, server)])

    def _set_down(self) -> None:
        down = self.membership.down
        self.controller.down = down
        if self.agents is not None:
            self.agents.down = down

    def adopt_replica_versions(self, origin: int) -> list[Operation]:
        """For each hot key of a dead origin whose replicas confirmed a write the origin never
        reported (it died with the write in flight: ``valid_ver`` > ``origin_ver``), take the
        newest such version as the key's latest completed one. That write was never acknowledged,
        so making it visible is allowed (it was pending), and it must be: rule 6 drops every reply
        of a replica holding it, so the key's Gets would time out instead of being served. The
        origin gets that version back when it returns (:meth:`restore_origin`)."""
        keys = [kp for kp in self.controller.plan.keys.values() if kp.origin == origin]
        if not any(kp.replicas for kp in keys):
            return []
        origin_ver = self.driver.read_register(names.REG_ORIGIN_VER)
        valid = self.driver.read_register(names.REG_VALID_VER)
        m = len(self.rack.servers)
        ops: list[Operation] = []
        for kp in keys:
            base = names.valid_base(kp.slot, m)
            newest = max((valid[base + s] for s in kp.replicas), default=0)
            if origin_ver[kp.slot] and newest > origin_ver[kp.slot]:
                ops.append(RegisterWrite(names.REG_ORIGIN_VER, kp.slot, newest))
        if ops:
            LOG.warning("%d hot keys take their replicas' newer, unreported version", len(ops))
        return ops

    def restore_origin(self, origin: int) -> None:
        """A restarted origin (memory backend: empty) gets each of its hot keys back from a
        replica the switch counts as holding the latest completed version (``valid_ver`` >=
        ``origin_ver`` > 0), before any Get reaches it through a DownTable entry's removal.
        Keys with no such replica are lost with the origin's memory and logged as lost."""
        if self.agents is None:
            return
        if all(kp.origin != origin for kp in self.controller.plan.keys.values()):
            return
        restored, lost = self._restore_keys_of(origin, lambda key: origin)
        self.drop_stale_copies()  # the copies kept for it while it was down
        LOG.warning(
            "server %s back: %d hot keys restored from replicas, %d without a valid replica",
            self.rack.servers[origin].name,
            len(restored),
            len(lost),
        )

    def _restore_keys_of(
        self, origin: int, target_of: Callable[[bytes], int]
    ) -> tuple[dict[bytes, int], set[bytes]]:
        """Each hot key ``origin`` is the origin of, restored at ``target_of(key)`` by
        :meth:`_restore`: ({key: target} of those restored, the keys lost (logged))."""
        restored: dict[bytes, int] = {}
        lost: set[bytes] = set()
        keys = [(k, kp) for k, kp in self.controller.plan.keys.items() if kp.origin == origin]
        if not keys:
            return restored, lost
        origin_ver = self.driver.read_register(names.REG_ORIGIN_VER)
        valid = self.driver.read_register(names.REG_VALID_VER)
        for key, kp in keys:
            target = target_of(key)
            outcome = self._restore(key, kp, target, origin_ver, valid)
            if outcome:
                restored[key] = target
            elif outcome is False:
                lost.add(key)
        return restored, lost

    def _restore(
        self, key: bytes, kp: KeyPlan, target: int, origin_ver: list[int], valid: list[int]
    ) -> bool | None:
        """Copy hot ``key``'s latest completed version into ``target`` (its origin back from the
        dead, or its new origin when a dead one leaves the ring) from a replica the switch counts
        as holding it (``valid_ver`` >= ``origin_ver`` > 0), else from any live server whose copy
        is at least that version (a replica that left the key's set just before the origin died
        keeps its copy while the origin is down, AgentPool.keep, and it may be the only one
        left); pushed "only if newer". True: restored; False: no server could give it back
        (logged ``hot key lost``); None: no version was ever completed, nothing to restore."""
        assert self.agents is not None
        m, down = len(self.rack.servers), self.membership.down
        ov = origin_ver[kp.slot]
        if not ov:
            return None
        base = names.valid_base(kp.slot, m)
        sources = [s for s in kp.replicas if s not in down and valid[base + s] >= ov]
        others = [s for s in range(m) if s != kp.origin and s not in down and s not in sources]
        for source in sources + others:
            try:
                at_least = (self.epoch, ov) if source in others else None
                if self.agents.restore(key, target, source, at_least):
                    LOG.info("restored %s on server %d from server %d", key.hex(), target, source)
                    return True
            except ControlError as exc:
                LOG.warning("restore %s from server %d: %s", key.hex(), source, exc)
        LOG.warning("hot key lost: %s (server %d, version %d)", key.hex(), kp.origin, ov)
        return False

    def _retry_pushes(self, done: list[Operation]) -> None:
        """Push again the keys whose push failed in an earlier period and that are still hot with
        replicas (to the replicas they have now); those this period pushed are not repeated. A
        key whose origin is down is not pushed (it cannot SYNC), and a push is given up after
        :data:`PUSH_ATTEMPTS` periods (its replicas stay invalid; the key's next write makes them
        valid through its UPDATE copies)."""
        pushed = {op.key for op in done if isinstance(op, PushRequest)}
        plan = self.controller.plan.keys
        down = self.membership.down
        retry: list[Operation] = []
        for key in list(self.driver.failed_pushes):
            kp = plan.get(key)
            attempts = self.push_attempts.get(key, 0)
            if kp is None or not kp.replicas or kp.origin in down or attempts >= PUSH_ATTEMPTS:
                if kp is not None and kp.replicas and attempts >= PUSH_ATTEMPTS:
                    LOG.warning("push of %s given up after %d attempts", key.hex(), attempts)
                del self.driver.failed_pushes[key]
                self.push_attempts.pop(key, None)
            elif key not in pushed:
                self.push_attempts[key] = attempts + 1
                retry.append(PushRequest(key, kp.origin, kp.replicas))
        if retry:
            LOG.info("retrying %d pushes", len(retry))
            self.driver.apply(retry)

    def repush_lagging(self) -> None:
        """Repair replicas left out of step with their origin by a lost packet. A replica is out
        of step when its ``valid_ver`` differs from ``origin_ver`` (or ``origin_ver`` is still 0);
        it is acted on when it was so at the end of two periods in a row with ``origin_ver``
        unchanged, as no write or push in between came to repair it (a replica or origin only
        slower than the other is not: the write that made the difference changes
        ``origin_ver``).

        - Below (``valid_ver < origin_ver``): it lost its push's UPDATE or its CONFIRM (UDP) and
          is out of the read set. Its key is pushed again, unless a write is pending
          (``slot_ver > origin_ver``: the switch refuses the SYNC), the push failed
          (:meth:`_retry_pushes`) or found no copy at the origin, or the origin is down; at most
          :data:`PUSH_ATTEMPTS` times in a row, then given up (logged) until it is in step.
        - Above (``valid_ver > origin_ver``): it confirmed a write its origin never reported (a
          re-sent write the origin answered with its first result). It is in the read set, but
          rule 6 drops each of its replies, and no push can help while that write is pending.
          Its ``valid_ver`` cell is zeroed: it leaves the read set (always safe), its Gets go
          to the holders that answer, and the key's next write brings it back."""
        keyed = [(key, kp) for key, kp in self.controller.plan.keys.items() if kp.replicas]
        m = len(self.rack.servers)
        slots = [kp.slot for _, kp in keyed]
        origin_ver = self.driver.read_register_cells(names.REG_ORIGIN_VER, slots)
        slot_ver = self.driver.read_register_cells(names.REG_SLOT_VER, slots)
        valid = self.driver.read_register_cells(
            names.REG_VALID_VER,
            [names.valid_base(kp.slot, m) + s for _, kp in keyed for s in kp.replicas],
        )
        lagging: dict[tuple[bytes, int], int] = {}  # (key, replica) -> origin_ver
        cells: dict[tuple[bytes, int], int] = {}  # (key, replica) -> its valid_ver cell
        for key, kp in keyed:
            ver, base = origin_ver[kp.slot], names.valid_base(kp.slot, m)
            for s in kp.replicas:
                if ver == 0 or valid[base + s] != ver:
                    lagging[(key, s)], cells[(key, s)] = ver, base + s
        stuck = [pair for pair, ver in lagging.items() if self.lagging.get(pair) == ver]
        self.lagging = lagging
        for key in set(self.repushes) - {key for key, _ in lagging}:
            del self.repushes[key]  # in step again (or no longer hot with replicas)
        self.driver.not_held.intersection_update(self.controller.plan.keys)
        ahead = [pair for pair in stuck if 0 < lagging[pair] < valid[cells[pair]]]
        if ahead:
            LOG.warning(
                "%d replicas confirmed a write their origin never reported: out of the read set",
                len(ahead),
            )
            self.driver.apply([RegisterWrite(names.REG_VALID_VER, cells[p], 0) for p in ahead])
        skip = set(self.driver.failed_pushes)
        for key, kp in keyed:
            ver = origin_ver[kp.slot]
            if kp.origin in self.membership.down or slot_ver[kp.slot] > ver:
                skip.add(key)  # down: it cannot SYNC; a write pending: the switch refuses it
            elif ver == 0 and key in self.driver.not_held:
                skip.add(key)  # nothing to push: its first write validates the replicas
        again: list[Operation] = []
        plan = dict(keyed)
        for key in sorted({key for key, _ in stuck} - skip):
            kp = plan[key]
            tries = self.repushes.get(key, 0)
            if tries == PUSH_ATTEMPTS:
                LOG.warning(
                    "replicas of %s still out of step after %d pushes: given up", key.hex(), tries
                )
            if tries < PUSH_ATTEMPTS:
                again.append(PushRequest(key, kp.origin, kp.replicas))
            self.repushes[key] = tries + 1
        if again:
            LOG.info(
                "pushing %d hot keys again: a replica stayed out of step a period (%s)",
                len(again),
                " ".join(op.key.hex() for op in again[:5]),
            )
            self.driver.apply(again)

    def _observe(self) -> PeriodReport:
        """Read and reset as a period does, plan, but install nothing (the "controller off" run)."""
        hot = self.driver.read_hot_counters()
        pipe = self.driver.read_hashpipe()
        loads = self.driver.read_load_counters()
        self.driver.reset_counters()
        report = self.controller.decide(hot, pipe, loads)
        report.ops = []
        self.controller.plan = self._empty()
        return report

    def _after_error(self) -> None:
        """Reconnect to a switch that went away (and start again: it may have restarted, then it
        needs the pipeline, the static entries and a new epoch), or read the plan back from a
        switch that refused a batch."""
        try:
            if not self.driver.connected:
                LOG.info("the switch went away: reconnecting")
                self.driver.reconnect()
                self.start()
            else:
                self.controller.plan = self.recover()
        except DriverError as exc:
            LOG.error("recovery failed (next period tries again): %s", exc)

    def _empty(self) -> Plan:
        return Plan(len(self.rack.servers), self.driver.slots)

    # -- membership (docs/protocol.md "Membership") -----------------------------------------------

    def versioned_ring(self, members: frozenset[int] | None = None, version: int = 0) -> p.Ring:
        """The ring of ``members`` (default: the current ones) with the rack's addresses."""
        ids = self.members if members is None else members
        return p.Ring(
            version or self.ring_version,
            tuple(
                p.Member(s, self.rack.servers[s].ip_text, self.rack.kvs_port) for s in sorted(ids)
            ),
        )

    def _commit_ring(self, version: int, members: frozenset[int]) -> None:
        self.committing = (version, members)
        self._save_state()

    def _adopt_ring(self, version: int, members: frozenset[int]) -> None:
        self.ring_version, self.members = version, members
        self.ring = p.HashRing.of(members)
        self.controller.members = tuple(sorted(members))

    def announce_ring(self, servers: set[int] | None = None) -> None:
        """Tell agents (all, or ``servers``) the current ring (start-up, an agent restart)."""
        if self.agents is None:
            return
        ring = self.versioned_ring()
        for server in sorted(self.agents.controls if servers is None else servers):
            try:
                self.agents.controls[server].ring_set(ring, server)
            except (ControlError, KeyError) as exc:
                LOG.warning("server %d: ring %d not set: %s", server, ring.version, exc)

    def handle_admin(self, cmd: str, name: str | None) -> dict[str, Any]:
        """The admin socket's commands (controller/elastic.py): ``ring``, ``add``, ``remove``."""
        with self.lock:
            if cmd == "ring":
                return {"ok": True, **self.ring_record()}
            if cmd not in ("add", "remove"):
                raise MembershipError(f"unknown command {cmd!r} (ring, add, remove)")
            names_ = [h.name for h in self.rack.servers]
            if name not in names_:
                raise MembershipError(f"no server {name!r} in the rack file ({', '.join(names_)})")
            report = self.change_membership(names_.index(name), cmd == "add")
            return {"ok": True, **self.ring_record(), "handoff": report}

    def ring_record(self) -> dict[str, Any]:
        return {
            "version": self.ring_version,
            "members": [self.rack.servers[s].name for s in sorted(self.members)],
        }

    def change_membership(self, server: int, add: bool) -> dict[str, Any]:
        """Add ``server`` to the ring or remove it, online: hot keys whose origin changes leave
        the hot set and a removed server every replica set (break-before-delete, one batch),
        then the agents hand the moving keys over (controller/elastic.py), then the new ring is
        the controller's. A server held down may be removed (its hot keys are restored at their
        new origins from their replicas first; nothing else of it can be) or added back (if its
        ping answers); any other change waits until no server is down. Raises
        :class:`MembershipError` for a change that cannot be made."""
        name = self.rack.servers[server].name
        if self.agents is None or self.observe_only:
            raise MembershipError("membership changes need the agents' control channels")
        if add == (server in self.members):
            raise MembershipError(f"{name} is {'already' if add else 'not'} a member")
        new = self.members | {server} if add else self.members - {server}
        if not new:
            raise MembershipError("the ring needs at least one member")
        down = self.membership.down & (self.members | new)
        if down - {server}:
            raise MembershipError(
                f"servers {sorted(down - {server})} are down: no change while they are"
            )
        if add and server in down:
            self._take_back(server)
        gone = frozenset({server}) & self.membership.down  # removed while down: exports nothing
        old_ring, new_ring = self.versioned_ring(), self.versioned_ring(new, self.ring_version + 1)
        restored: dict[bytes, int] = {}
        lost: set[bytes] = set()
        if gone:  # its hot keys' latest versions, from their replicas, before they leave
            restored, lost = self._restore_keys_of(server, new_ring.origin)
        # 1. the switch: hot keys whose origin changes leave the hot set; the removed server
        # leaves every replica set (the plan's diff orders the breaks before the removals)
        plan = self.controller.plan
        kept = [
            (key, tuple(s for s in kp.holders if s in new))
            for key, kp in plan.keys.items()
            if new_ring.origin(key) == kp.origin
        ]
        new_plan = build_plan(kept, plan, plan.servers, plan.slots)
        self.driver.apply(diff(plan, new_plan, self.controller.rack, self.driver.read_version()))
        self.controller.plan = new_plan
        left = len(plan.keys) - len(kept)
        if gone:  # copies of its keys the new owners hold but that were not restored: stale
            self._drop_unrestored(server, new_ring, restored)
        # 2. the agents
        agents = set(self.agents.controls) - self.membership.down
        try:
            report = handoff(
                self.agents.control,
                agents,
                old_ring,
                new_ring,
                self.unsafe_handoff,
                commit=lambda: self._commit_ring(new_ring.version, new),
                gone=gone,
                crash=self.crash_in_handoff,
            )
        except ControlError as exc:
            if self.committing is not None:  # past the copy: finish it (and so would a restart)
                LOG.error(
                    "ring %d: switch-over failed (%s): set on every agent", new_ring.version, exc
                )
                self._adopt_ring(*self.committing)
                self.committing = None
                self._save_state()
                self.announce_ring()
            raise MembershipError(f"{'add' if add else 'remove'} {name}: {exc}") from exc
        self.committing = None
        # 3. the controller
        self._adopt_ring(new_ring.version, new)
        self._save_state()
        record = report.record() | {"hot_keys_left": left, "server": name, "added": add}
        if gone:
            record |= {
                "was_down": True,
                "hot_keys_restored": sorted(k.hex() for k in restored),
                "hot_keys_lost": sorted(k.hex() for k in lost),
            }
            LOG.warning(
                "ring %d: %s removed while down: %d hot keys restored at their new origins, "
                "%d lost; its cold keys are lost with it",
                new_ring.version,
                name,
                len(restored),
                len(lost),
            )
        self.membership_events.append(f"{name}:{'added' if add else 'removed'}")
        LOG.warning(
            "ring %d: %s %s; %d items moved (%d in the bulk copy), writes frozen %.1f ms, "
            "%d hot keys re-planned",
            new_ring.version,
            "added" if add else "removed",
            name,
            report.moved,
            report.bulk,
            report.freeze_ms,
            left,
        )
        return record

    def _take_back(self, server: int) -> None:
        """A down server that is not a member (removed while down) being added back: up if its
        agent answers a ping (then as a restart: it serves the current ring, drops its stale
        copies, and its DownTable entry goes), else :class:`MembershipError`."""
        assert self.agents is not None
        name = self.rack.servers[server].name
        incarnation = self.agents.probe(server)
        if not isinstance(incarnation, int):
            raise MembershipError(f"{name} is down and its agent does not answer: start it first")
        LOG.warning("server %s answers again (incarnation %d): taken as up", name, incarnation)
        self.membership.mark_up(server, incarnation)
        self._set_down()
        self.announce_ring({server})
        self._serve_again(server)
        self.membership_events.append(f"{name}:up-restarted")

    def _drop_unrestored(self, dead: int, new_ring: p.Ring, restored: dict[bytes, int]) -> None:
        """New owners of ``dead``'s keys drop the copies they hold of them (replica copies kept
        while it was down, or older ones) unless restored there: nothing proves them current, and
        from the switch-over on they would be served as the key's value."""
        assert self.agents is not None
        for server, keys in self.agents.holdings(set(new_ring.ids)).items():
            for key in keys:
                if self.ring.origin(key) != dead or new_ring.origin(key) != server:
                    continue
                if restored.get(key) == server:
                    continue
                try:
                    self.agents.control(server).remove(key)
                    LOG.info("server %d: dropped an unproven copy of %s", server, key.hex())
                except ControlError as exc:
                    LOG.warning("server %d: cannot drop %s: %s", server, key.hex(), exc)

    # -- state file ---------------------------------------------------------------------------------

    def _load_state(self) -> dict[str, Any]:
        if self.state_file is None or not self.state_file.exists():
            return {}
        try:
            state = json.loads(self.state_file.read_text())
        except (OSError, ValueError) as exc:
            LOG.warning("state file %s unreadable (%s): ignored", self.state_file, exc)
            return {}
        return state if isinstance(state, dict) else {}

    def _save_state(self) -> None:
        """The epoch, the threshold and last period's counts, for a restarted controller."""
        if self.state_file is None:
            return
        state: dict[str, Any] = {
            "epoch": self.epoch,
            "ring": {"version": self.ring_version, "members": sorted(self.members)},
        }
        if self.committing is not None:
            version, members = self.committing
            state["ring_next"] = {"version": version, "members": sorted(members)}
        if self.controller.threshold.value is not None:
            state["threshold"] = self.controller.threshold.value
        if self.controller.predictor.prev:
            state["observed"] = {k.hex(): v for k, v in self.controller.predictor.prev.items()}
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(state) + "\n")
        tmp.replace(self.state_file)


def _event_text(change: Change, rack: RackFile) -> str:
    name = rack.servers[change.server].name
    if change.event is Event.UP and change.restarted:
        return f"{name}:up-restarted"
    return f"{name}:{change.event.value}"


def _observations(raw: Any) -> dict[bytes, float]:
    """Saved per-key counts ({key hex: count}); anything malformed is left out."""
    out: dict[bytes, float] = {}
    if isinstance(raw, dict):
        for key, count in raw.items():
            try:
                wire = bytes.fromhex(key)
            except (TypeError, ValueError):
                continue
            if len(wire) == p.KEY_LEN and isinstance(count, int | float) and count >= 0:
                out[wire] = float(count)
    return out


def _saved_ring(raw: Any, servers: int) -> tuple[int, frozenset[int]] | None:
    """(version, members) of a saved ring; None if absent or malformed."""
    if not isinstance(raw, dict):
        return None
    version, members = raw.get("version"), raw.get("members")
    if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version < 1 << 32:
        return None
    if not isinstance(members, list) or not members:
        return None
    if not all(
        isinstance(s, int) and not isinstance(s, bool) and 0 <= s < servers for s in members
    ):
        return None
    return version, frozenset(members)


def _state_int(state: dict[str, Any], name: str, top: int) -> int:
    value = state.get(name, 0)
    return value if isinstance(value, int) and 0 <= value <= top else 0


def _liveness_op(op: Operation) -> bool:
    return isinstance(op, TableEntry) and op.table in (names.REPLYCOUNT_TABLE, names.DOWN_TABLE)


def _switch_op(op: Operation) -> bool:
    return isinstance(op, TableEntry | MulticastGroupSet)
