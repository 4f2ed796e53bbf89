"""Failure handling on a real switch (docs/controller_runtime.md "Failure detection"): the
failure detector fed each period, what the runtime does when a server goes down, restarts or
comes back, and the restore of a dead or restarted origin's hot keys from their replicas. The
decisions are :mod:`kvswitch.controller.membership`'s and :mod:`kvswitch.controller.repair`'s
(pure); this module reads the switch and the agents and applies them."""

from __future__ import annotations

import logging
from collections.abc import Callable

from kvswitch.agent.control import ControlError
from kvswitch.controller import names
from kvswitch.controller.context import Context
from kvswitch.controller.membership import NO_PROBE, Change, Event, Observation, State
from kvswitch.controller.ops import EntryOp, Operation
from kvswitch.controller.plan import KeyPlan, down_entry
from kvswitch.controller.repair import adopt_versions, restore_sources

LOG = logging.getLogger("kvswitch.controller")


class Failures:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def keep(self, key: bytes, server: int) -> bool:
        """A removal (deferred one period by the driver) that must not run: the key's origin is
        missed or down (the copy may be the last one), or ``server`` became its origin since the
        removal was planned (a ring change: the copy is the key's data now)."""
        origin = self.ctx.ring.origin(key)
        return origin == server or self.ctx.membership.state(origin) is not State.UP

    def watch(self) -> list[str]:
        """Feed the failure detector one period (packets sent to each server, its replies, its
        agent's ping) and act on what changed: a dead server's requests are refused by the switch
        and it leaves every replica set (this period's plan); a restarted one leaves them too (its
        copies are invalid) and is placed again from the next period; a server that comes back
        gets its stale copies dropped and its hot keys restored before its requests flow again.
        Returns the events, as the period line names them."""
        ctx, m = self.ctx, self.ctx.servers
        if ctx.driver.has_liveness:
            sent, replies = ctx.driver.read_load_counters(), ctx.driver.read_reply_counters()
        else:  # no reply counts: the pings alone
            sent, replies = [0] * m, [0] * m
        # without agents nothing can be pinged (nor shown back): such servers are not monitored
        probes = ctx.agents.ping() if ctx.agents is not None else [NO_PROBE] * m
        # a server outside the ring (a spare, or one removed) is not watched: never "dead"
        probes = [probe if s in ctx.members else NO_PROBE for s, probe in enumerate(probes)]
        observations = [Observation(sent[s], replies[s], probes[s]) for s in range(m)]
        changes = ctx.membership.observe(observations)
        restarted: set[int] = set()
        for change in changes:
            self._act(change, restarted)
        ctx.set_down()
        ctx.controller.excluded = frozenset(restarted)
        return [self._event_text(c) for c in changes]

    def _event_text(self, change: Change) -> str:
        name = self.ctx.name(change.server)
        if change.event is Event.UP and change.restarted:
            return f"{name}:up-restarted"
        return f"{name}:{change.event.value}"

    def _act(self, change: Change, restarted: set[int]) -> None:
        ctx = self.ctx
        server, name = change.server, ctx.name(change.server)
        if change.event is Event.DOWN:
            LOG.warning(
                "server %s declared down: its requests are refused, it holds no replica", name
            )
            if ctx.driver.has_liveness:
                ctx.driver.apply([down_entry(EntryOp.ADD, ctx.controller.rack, server)])
            ctx.driver.apply(self.adopt_replica_versions(server))
            return
        if change.event is Event.RESTART or change.restarted:
            LOG.warning("server %s restarted (incarnation %s)", name, change.incarnation)
            restarted.add(server)
            ctx.announce_ring({server})  # a new agent serves no ring until told
        # a restarted origin lost its memory; one that was only unreachable may have missed the
        # version its replicas hold (adopt_replica_versions): both get it back, newer only
        self.restore_origin(server)
        if change.event is Event.UP:
            self.serve_again(server)
            LOG.warning("server %s is back: serving its keys again", name)

    def serve_again(self, server: int) -> None:
        """A server back from down: its stale copies dropped, then its DownTable entry deleted
        (its requests reach it again)."""
        self.ctx.drop_stale_copies({server})
        if self.ctx.driver.has_liveness:
            self.ctx.driver.apply([down_entry(EntryOp.DELETE, self.ctx.controller.rack, server)])

    def take_back(self, server: int) -> str | None:
        """A down server being added back to the ring: up if its agent answers a ping (then as a
        restart: it serves the current ring, drops its stale copies, and its DownTable entry
        goes); returns its event, or None when its agent does not answer."""
        ctx = self.ctx
        assert ctx.agents is not None
        incarnation = ctx.agents.probe(server)
        if not isinstance(incarnation, int):
            return None
        name = ctx.name(server)
        LOG.warning("server %s answers again (incarnation %d): taken as up", name, incarnation)
        ctx.membership.mark_up(server, incarnation)
        ctx.set_down()
        ctx.announce_ring({server})
        self.serve_again(server)
        return f"{name}:up-restarted"

    def adopt_replica_versions(self, origin: int) -> list[Operation]:
        """For each hot key of a dead origin whose replicas confirmed a write the origin never
        reported (it died with the write in flight: ``valid_ver`` > ``origin_ver``), take the
        newest such version as the key's latest completed one (:func:`repair.replica_repair`).
        The origin gets that version back when it returns (:meth:`restore_origin`)."""
        ctx = self.ctx
        keys = [kp for kp in ctx.plan.keys.values() if kp.origin == origin]
        if not any(kp.replicas for kp in keys):
            return []
        origin_ver = ctx.driver.read_register(names.REG_ORIGIN_VER)
        valid = ctx.driver.read_register(names.REG_VALID_VER)
        ops = adopt_versions(keys, ctx.servers, origin_ver, valid)
        if ops:
            LOG.warning("%d hot keys take their replicas' newer, unreported version", len(ops))
        return ops

    def restore_origin(self, origin: int) -> None:
        """A restarted origin (memory backend: empty) gets each of its hot keys back from a
        replica the switch counts as holding the latest completed version (``valid_ver`` >=
        ``origin_ver`` > 0), before any Get reaches it through a DownTable entry's removal.
        Keys with no such replica are lost with the origin's memory and logged as lost."""
        ctx = self.ctx
        if ctx.agents is None:
            return
        if all(kp.origin != origin for kp in ctx.plan.keys.values()):
            return
        restored, lost = self.restore_keys_of(origin, lambda key: origin)
        ctx.drop_stale_copies()  # the copies kept for it while it was down
        LOG.warning(
            "server %s back: %d hot keys restored from replicas, %d without a valid replica",
            ctx.name(origin),
            len(restored),
            len(lost),
        )

    def restore_keys_of(
        self, origin: int, target_of: Callable[[bytes], int]
    ) -> tuple[dict[bytes, int], set[bytes]]:
        """Each hot key ``origin`` is the origin of, restored at ``target_of(key)`` by
        :meth:`_restore`: ({key: target} of those restored, the keys lost (logged))."""
        ctx = self.ctx
        restored: dict[bytes, int] = {}
        lost: set[bytes] = set()
        keys = [(k, kp) for k, kp in ctx.plan.keys.items() if kp.origin == origin]
        if not keys:
            return restored, lost
        origin_ver = ctx.driver.read_register(names.REG_ORIGIN_VER)
        valid = ctx.driver.read_register(names.REG_VALID_VER)
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
        dead, or its new origin when a dead one leaves the ring) from a replica in its read set
        (rule 4: ``valid_ver`` >= ``origin_ver`` > 0), else from any live server whose copy is at
        least that version (a replica that left the key's set just before the origin died keeps
        its copy while the origin is down, AgentPool.keep, and it may be the only one left);
        pushed "only if newer". True: restored; False: no server could give it back (logged
        ``hot key lost``); None: no version was ever completed, nothing to restore."""
        ctx = self.ctx
        assert ctx.agents is not None
        ov = origin_ver[kp.slot]
        if not ov:
            return None
        sources, others = restore_sources(kp, ctx.servers, ctx.membership.down, origin_ver, valid)
        for source in sources + others:
            try:
                at_least = (ctx.epoch, ov) if source in others else None
                if ctx.agents.restore(key, target, source, at_least):
                    LOG.info("restored %s on server %d from server %d", key.hex(), target, source)
                    return True
            except ControlError as exc:
                LOG.warning("restore %s from server %d: %s", key.hex(), source, exc)
        LOG.warning("hot key lost: %s (server %d, version %d)", key.hex(), kp.origin, ov)
        return False
