"""The controller's loop on a real switch: start-up, periods, metrics, restart.

Start-up (:meth:`Runtime.start`): the epoch register gets one more than the largest epoch found on
the switch or in the state file; the static entries of the rack (forwarding of every host, the
HostportTable of trust.p4, ServeroffsetTable, PorttoserverTable, LoadcountTable) are installed where
missing or different; the hot keys the switch already holds (HotkeyTable, ServermapTable) become
the controller's plan, entries and multicast groups that belong to no hot key are deleted, and
copies that agents hold of keys they neither originate nor replicate any more are dropped. A
restarted controller therefore continues with the rack as it left it.

Each period (:meth:`Runtime.period`): the failure detector (:mod:`kvswitch.controller.failures`),
read counters and HashPipe, reset them, plan (:class:`kvswitch.controller.period.Controller`),
apply the batch, push and drop replicas, repair replicas out of step
(:mod:`kvswitch.controller.repair`); one log line and one JSON object (``--metrics``) per period.
When a batch fails the plan is read back from the switch, so the next period's difference is
against what the switch really holds. Ring changes run between periods
(:mod:`kvswitch.controller.ringchange`).

The runtime's parts share a :class:`~kvswitch.controller.context.Context`; what they decide is
pure (:mod:`~kvswitch.controller.startup`, :mod:`~kvswitch.controller.statefile`'s reading,
:mod:`~kvswitch.controller.repair`, :mod:`~kvswitch.controller.membership`,
:mod:`~kvswitch.controller.period`), and they reach the switch through the
:class:`~kvswitch.controller.driver.SwitchDriver` interface only.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from kvswitch.controller import names, statefile
from kvswitch.controller.agents import AgentPool
from kvswitch.controller.context import Context
from kvswitch.controller.driver import DriverError, SwitchDriver
from kvswitch.controller.failures import Failures
from kvswitch.controller.handoff import RackInput, read_share, write_inputs
from kvswitch.controller.membership import Membership
from kvswitch.controller.metrics import Metrics
from kvswitch.controller.ops import OpCounts, Operation, PushRequest
from kvswitch.controller.period import Controller, ControllerConfig, FabricShare, PeriodReport
from kvswitch.controller.plan import Plan, diff
from kvswitch.controller.rackfile import RackFile
from kvswitch.controller.repair import ReplicaRepair, repair_cells, unconfirmed_pushes
from kvswitch.controller.ringchange import RingChange
from kvswitch.controller.startup import (
    DYNAMIC_TABLES,
    EPOCH_MAX,
    SPINE_EPOCH_BASE,
    broken_entries,
    implied_entries,
    missing_copies,
    next_epoch,
    static_ops,
)
from kvswitch.controller.threshold import imbalance, max_over_mean

LOG = logging.getLogger("kvswitch.controller")


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
        fabric_out: Path | None = None,
        fabric_in: Path | None = None,
        fabric_max_age: float = 3.0,
    ) -> None:
        """``fabric_out``, ``fabric_in``: the hand-off files with the fabric controller
        (:mod:`kvswitch.controller.handoff`): this rack's inputs, written each period, and the
        fabric's share for it, read each period and ignored when older than ``fabric_max_age``
        seconds."""
        self.observe_only = observe_only
        self.fabric_out, self.fabric_in, self.fabric_max_age = fabric_out, fabric_in, fabric_max_age
        self.metrics = metrics
        # the ring (docs/protocol.md "Membership"): its members and version; keys' origins and
        # hot-key placement follow it, the failure detector watches its members only
        controller = Controller(
            config, lambda key: self.ctx.ring.origin(key), rack.rack(), driver.slots
        )
        self.ctx = Context(
            driver,
            rack,
            controller,
            agents,
            Membership(len(rack.servers), down_after, min_sent),
            frozenset(s for s, h in enumerate(rack.servers) if h.member),
            state_file,
        )
        self.window_members = self.ctx.members
        # held by a period and by a membership change (the admin socket's thread)
        self.lock = threading.Lock()
        self.periods = 0
        self.failures = Failures(self.ctx)
        self.ring_change = RingChange(
            self.ctx, self.failures, observe_only, unsafe_handoff, crash_in_handoff
        )
        self.repair = ReplicaRepair()
        if agents is not None:  # copies of a missed origin's keys are kept: they may be the last
            agents.keep = self._keep
        self.ctx.fabric_unknown = fabric_in is not None
        if fabric_in is not None:
            self.ctx.refresh_fabric = self.read_share

    def _keep(self, key: bytes, server: int) -> bool:
        """A copy no removal drops: one the failure detector keeps, or one of a fabric-hot key
        (a spine's holder may be this server: the fabric controller removes its copies)."""
        return key in self.ctx.controller.foreign or self.failures.keep(key, server)

    # -- the fabric hand-off ------------------------------------------------------------------------

    def read_share(self) -> FabricShare | None:
        """The fabric's share for this rack, if configured, readable and fresh (else logged by
        :func:`~kvswitch.controller.handoff.read_share`; the keys last read stay foreign: the
        leaf may still steer them). The first share read makes the fabric's keys known."""
        if self.fabric_in is None:
            return None
        share = read_share(self.fabric_in, self.ctx.servers, self.fabric_max_age)
        if share is not None:
            self.ctx.controller.foreign = share.keys
            self.ctx.fabric_unknown = False
        return share

    def write_inputs(self, report: PeriodReport, share: FabricShare | None) -> None:
        """This period's inputs for the fabric controller: candidates, their writes, the loads
        measured, each server's cold load without the fabric's share, its rack replicas, its
        servers declared dead."""
        if self.fabric_out is None:
            return
        fabric = share.expected if share is not None and share.expected else None
        cold = (
            [max(0.0, c - e) for c, e in zip(report.cold, fabric, strict=True)]
            if fabric is not None and len(report.cold) == len(fabric)
            else list(report.cold) or None
        )
        if self.observe_only:  # it moves nothing: all of its servers' load stays where it is
            cold = None
        replicas = [0] * self.ctx.servers
        for kp in report.plan.keys.values():
            for s in kp.replicas:
                replicas[s] += 1
        # its dead servers: the fabric takes them out of every fabric-hot key's holders
        down = self.ctx.membership.down
        x = RackInput(report.observed, list(report.loads), report.writes, cold, replicas, down)
        try:
            write_inputs(self.fabric_out, self.periods, x)
        except OSError as exc:
            LOG.warning("fabric inputs %s not written: %s", self.fabric_out, exc)

    # the shared state, by the names the callers and tests use
    driver = property(lambda self: self.ctx.driver)
    rack = property(lambda self: self.ctx.rack)
    agents = property(lambda self: self.ctx.agents)
    controller = property(lambda self: self.ctx.controller)
    membership = property(lambda self: self.ctx.membership)
    epoch = property(lambda self: self.ctx.epoch)
    ring = property(lambda self: self.ctx.ring)
    members = property(lambda self: self.ctx.members)
    ring_version = property(lambda self: self.ctx.ring_version)
    lagging = property(lambda self: self.repair.lagging)
    repushes = property(lambda self: self.repair.repushes)

    def handle_admin(self, cmd: str, name: str | None) -> dict[str, Any]:
        """The admin socket's commands (controller/elastic.py): ``ring``, ``add``, ``remove``;
        run between two periods (:mod:`kvswitch.controller.ringchange`)."""
        with self.lock:
            return self.ring_change.admin(cmd, name)

    # -- start-up -----------------------------------------------------------------------------------

    def start(self) -> None:
        """Epoch, static entries, and the plan the switch holds (see the module docstring)."""
        ctx, driver = self.ctx, self.ctx.driver
        on_switch = driver.read_register(names.REG_EPOCH)[0]
        saved = statefile.load(ctx.state_file)
        # a fabric's leaf: below the spines' epochs (startup.SPINE_EPOCH_BASE)
        fabric = self.fabric_out is not None or self.fabric_in is not None
        ctx.epoch = next_epoch(
            on_switch,
            statefile.saved_int(saved, "epoch", EPOCH_MAX),
            ctx.epoch,
            high=SPINE_EPOCH_BASE - 1 if fabric else EPOCH_MAX,
        )
        threshold = ctx.controller.threshold
        if threshold.value is None:  # a restarted controller carries on with its T
            threshold.value = statefile.saved_threshold(saved, threshold.floor)
        predictor = ctx.controller.predictor
        if not predictor.prev:  # and with last period's counts, as if it had not stopped
            predictor.prev = statefile.saved_observations(saved)
        # a restarted controller serves the ring it last activated, or the one it was switching
        # to when it stopped (past the copy: finishing the change is what keeps no write hidden)
        ring = statefile.saved_ring(saved, ctx.servers)
        if ring is not None:
            ctx.adopt_ring(*ring)
        ctx.save_state()
        if not driver.has_liveness:
            LOG.warning("the P4 program has no liveness.p4: dead servers are not refused")
        entries, registers = static_ops(
            ctx.rack, ctx.controller.rack, ctx.epoch, driver.has_liveness
        )
        driver.apply(driver.reconcile(entries))
        driver.apply(registers)  # the epoch register
        held_epoch = driver.read_register(names.REG_EPOCH)[0]
        if held_epoch != ctx.epoch:  # a write the switch took and did not apply
            raise DriverError(f"the switch holds epoch {held_epoch} after writing {ctx.epoch}")
        ctx.controller.plan = self.recover()
        for server in driver.read_down():  # a restarted controller keeps the dead dead
            ctx.membership.mark_down(server)
        ctx.set_down()
        if self.observe_only and ctx.plan.keys:
            LOG.info("observe-only: removing %d hot keys", len(ctx.plan.keys))
            driver.apply(diff(ctx.plan, ctx.empty_plan(), ctx.controller.rack))
            ctx.controller.plan = ctx.empty_plan()
        ctx.announce_ring()
        self.read_share()  # the fabric's keys before any copy is dropped as stale
        held = ctx.drop_stale_copies()
        zero = missing_copies(ctx.plan.keys, ctx.servers, held)
        if zero:  # agents that restarted while no controller watched: pushed again below
            LOG.warning("recover: %d replicas hold no copy of their key: invalidated", len(zero))
            driver.apply(zero)
        self.push_unconfirmed()
        LOG.info(
            "started: epoch %d, ring %d (%d of %d servers), %d slots, %d hot keys held",
            ctx.epoch,
            ctx.ring_version,
            len(ctx.members),
            ctx.servers,
            driver.slots,
            len(ctx.plan.keys),
        )

    def recover(self) -> Plan:
        """The switch's hot keys as a plan. A HotkeyTable entry that is not a whole hot key
        (see :meth:`SwitchDriver.read_plan`) is deleted first, so its Gets go to the origin;
        then entries and groups of no hot key are deleted and missing ones written."""
        driver = self.ctx.driver
        plan, broken = driver.read_plan()
        if broken:
            LOG.warning("recover: %d incomplete hot keys removed", len(broken))
            driver.apply(broken_entries(broken))
        # floor = the newest version handed out: confirms sent before this controller took over
        # cannot validate anything; replicas not yet valid are pushed again (push_unconfirmed)
        wanted = implied_entries(plan, self.ctx.controller.rack, driver.read_version())
        fixes = driver.reconcile(wanted, prune=DYNAMIC_TABLES, prune_groups=True)
        if fixes:
            LOG.info("recover: %d entries/groups fixed to match the hot keys", len(fixes))
            driver.apply(fixes)
        return plan

    def push_unconfirmed(self) -> None:
        """Push again every recovered key with a replica that is not valid (a push the previous
        controller did not make or that was lost): without a write to the key, nothing else would
        ever make that replica serve."""
        ctx, driver = self.ctx, self.ctx.driver
        if not any(kp.replicas for kp in ctx.plan.keys.values()):
            return
        pushes = unconfirmed_pushes(
            ctx.plan.keys,
            ctx.servers,
            driver.read_register(names.REG_SLOT_VER),
            driver.read_register(names.REG_ORIGIN_VER),
            driver.read_register(names.REG_VALID_VER),
        )
        if pushes:
            LOG.info("recover: pushing %d hot keys whose replicas are not valid", len(pushes))
            driver.apply(pushes)

    # -- periods ------------------------------------------------------------------------------------

    def period(self) -> Metrics:
        ctx = self.ctx
        self.periods += 1
        began = time.perf_counter()
        errors_before = ctx.driver.agent_errors
        error = ""
        events: list[str] = []
        ops: list[Operation] = []
        refused = ctx.membership.down  # the switch refused their requests during this period
        members = self.window_members  # one that joined during the window: from the next one
        share: FabricShare | None = None
        try:
            if not self.observe_only:
                events = self.failures.watch()
            share = self.read_share()
            if self.observe_only:
                report = self._observe(share)
            else:
                report = ctx.controller.step(ctx.driver, share, self._retry_pushes)
                ops = report.ops
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
        plan = ctx.plan
        counts = OpCounts.of(ops)
        loads = report.loads if report is not None else []
        # lambda of the ring's members up all period (one back at its end was refused until then)
        absent = ctx.membership.down | refused
        live = [x for s, x in enumerate(loads) if s not in absent and s in members & ctx.members]
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
            agent_errors=ctx.driver.agent_errors - errors_before,
            period_ms=(time.perf_counter() - began) * 1000.0,
            error=error,
            down=sorted(ctx.membership.down),
            events=ctx.events + events,
            holders={key.hex(): list(kp.holders) for key, kp in plan.keys.items() if kp.replicas},
        )
        ctx.events = []
        self.window_members = ctx.members  # the ring while the next period's counters run
        ctx.controller.excluded = frozenset()  # a restarted server is placed again next period
        if report is not None:
            ctx.save_state()
            self.write_inputs(report, share)
        LOG.info("%s", metrics.line())
        if self.metrics is not None:
            self.metrics.write(json.dumps(metrics.record()) + "\n")
            self.metrics.flush()
        return metrics

    def _retry_pushes(self, planned: Sequence[Operation]) -> list[PushRequest]:
        """Pushes again of the keys whose push failed in an earlier period and that are still hot
        with replicas (to the replicas they have now), to apply in the period's batch after the
        plan's operations ``planned`` (the driver runs them beside the plan's pushes, so a
        retried push that waits in vain for its SYNC reflection does not add its wait to the
        period's). Keys the plan pushes are not repeated, and their outcome is taken next period
        (as if the retries came after them). A key whose origin is down is not pushed (it cannot
        SYNC), and a push is given up after
        :data:`~kvswitch.controller.repair.PUSH_ATTEMPTS` periods (its replicas stay invalid;
        the key's next write makes them valid through its UPDATE copies)."""
        driver = self.ctx.driver
        retry, drop, given_up = self.repair.retries(
            list(driver.failed_pushes),
            self.ctx.plan.keys,
            self.ctx.membership.down,
            {op.key for op in planned if isinstance(op, PushRequest)},
        )
        for key, attempts in given_up:
            LOG.warning("push of %s given up after %d attempts", key.hex(), attempts)
        for key in drop:
            del driver.failed_pushes[key]
        if retry:
            LOG.info("retrying %d pushes", len(retry))
        return retry

    def repush_lagging(self) -> None:
        """Repair replicas left out of step with their origin by a lost packet
        (:meth:`ReplicaRepair.out_of_step`): those above ``origin_ver`` leave the read set, the
        keys of those below are pushed again. Reads only the cells of hot keys with replicas."""
        ctx, driver = self.ctx, self.ctx.driver
        keyed = [(key, kp) for key, kp in ctx.plan.keys.items() if kp.replicas]
        slots, cells = repair_cells(keyed, ctx.servers)
        origin_ver = driver.read_register_cells(names.REG_ORIGIN_VER, slots)
        slot_ver = driver.read_register_cells(names.REG_SLOT_VER, slots)
        valid = driver.read_register_cells(names.REG_VALID_VER, cells)
        driver.not_held.intersection_update(ctx.plan.keys)
        out = self.repair.out_of_step(
            keyed,
            ctx.servers,
            origin_ver,
            slot_ver,
            valid,
            ctx.membership.down,
            driver.failed_pushes,
            driver.not_held,
        )
        if out.zero:
            LOG.warning(
                "%d replicas confirmed a write their origin never reported: out of the read set",
                len(out.zero),
            )
            driver.repair(out.zero)
        for key, tries in out.given_up:
            LOG.warning(
                "replicas of %s still out of step after %d pushes: given up", key.hex(), tries
            )
        if out.push:
            LOG.info(
                "pushing %d hot keys again: a replica stayed out of step a period (%s)",
                len(out.push),
                " ".join(op.key.hex() for op in out.push[:5]),
            )
            driver.repair(out.push)

    def _observe(self, share: FabricShare | None = None) -> PeriodReport:
        """Read and reset as a period does, plan, but install nothing (the "controller off" run)."""
        driver = self.ctx.driver
        hot = driver.read_hot_counters()
        pipe = driver.read_hashpipe()
        loads = driver.read_load_counters()
        driver.reset_counters()
        report = self.ctx.controller.decide(hot, pipe, loads, fabric=share)
        report.ops = []
        self.ctx.controller.plan = self.ctx.empty_plan()
        return report

    def _after_error(self) -> None:
        """Reconnect to a switch that went away (and start again: it may have restarted, then it
        needs the pipeline, the static entries and a new epoch), or read the plan back from a
        switch that refused a batch."""
        driver = self.ctx.driver
        try:
            if not driver.connected:
                LOG.info("the switch went away: reconnecting")
                driver.reconnect()
                self.start()
            else:
                self.ctx.controller.plan = self.recover()
        except DriverError as exc:
            LOG.error("recovery failed (next period tries again): %s", exc)
