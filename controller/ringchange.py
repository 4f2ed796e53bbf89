"""Ring (membership) changes on a real switch (docs/protocol.md "Membership",
docs/controller_runtime.md "Membership"): the admin socket's commands, and an online ``add`` or
``remove``: the switch's plan first (break-before-delete), then the agents' handoff
(:func:`kvswitch.controller.elastic.handoff`), then the new ring is the controller's."""

from __future__ import annotations

import logging
from typing import Any

from kvswitch import protocol as p
from kvswitch.agent.control import ControlError
from kvswitch.controller.context import Context
from kvswitch.controller.elastic import MembershipError, handoff
from kvswitch.controller.failures import Failures
from kvswitch.controller.plan import Plan, build_plan, diff

LOG = logging.getLogger("kvswitch.controller")


def without_moved(plan: Plan, new: frozenset[int], new_ring: p.Ring) -> Plan:
    """``plan`` under the ring ``new_ring`` of members ``new``: hot keys whose origin changes
    leave the hot set, servers outside ``new`` every replica set."""
    kept = [
        (key, tuple(s for s in kp.holders if s in new))
        for key, kp in plan.keys.items()
        if new_ring.origin(key) == kp.origin
    ]
    return build_plan(kept, plan, plan.servers, plan.slots)


class RingChange:
    def __init__(
        self,
        ctx: Context,
        failures: Failures,
        observe_only: bool = False,
        unsafe_handoff: bool = False,
        crash_in_handoff: bool = False,
    ) -> None:
        self.ctx = ctx
        self.failures = failures
        self.observe_only = observe_only
        self.unsafe_handoff = unsafe_handoff  # TESTS ONLY (controller/elastic.py handoff)
        self.crash_in_handoff = crash_in_handoff  # TESTS ONLY (the same)

    def admin(self, cmd: str, name: str | None) -> dict[str, Any]:
        """The admin socket's commands (controller/elastic.py): ``ring``, ``add``, ``remove``
        (the caller holds the period lock)."""
        if cmd == "ring":
            return {"ok": True, **self.record()}
        if cmd not in ("add", "remove"):
            raise MembershipError(f"unknown command {cmd!r} (ring, add, remove)")
        names_ = [h.name for h in self.ctx.rack.servers]
        if name not in names_:
            raise MembershipError(f"no server {name!r} in the rack file ({', '.join(names_)})")
        report = self.change(names_.index(name), cmd == "add")
        return {"ok": True, **self.record(), "handoff": report}

    def record(self) -> dict[str, Any]:
        return {
            "version": self.ctx.ring_version,
            "members": [self.ctx.name(s) for s in sorted(self.ctx.members)],
        }

    def _commit(self, version: int, members: frozenset[int]) -> None:
        self.ctx.committing = (version, members)
        self.ctx.save_state()

    def change(self, server: int, add: bool) -> dict[str, Any]:
        """Add ``server`` to the ring or remove it, online: hot keys whose origin changes leave
        the hot set and a removed server every replica set (break-before-delete, one batch),
        then the agents hand the moving keys over (controller/elastic.py), then the new ring is
        the controller's. A server held down may be removed (its hot keys are restored at their
        new origins from their replicas first; nothing else of it can be) or added back (if its
        ping answers); any other change waits until no server is down. Raises
        :class:`MembershipError` for a change that cannot be made."""
        ctx = self.ctx
        name = ctx.name(server)
        if ctx.agents is None or self.observe_only:
            raise MembershipError("membership changes need the agents' control channels")
        if add == (server in ctx.members):
            raise MembershipError(f"{name} is {'already' if add else 'not'} a member")
        new = ctx.members | {server} if add else ctx.members - {server}
        if not new:
            raise MembershipError("the ring needs at least one member")
        down = ctx.membership.down & (ctx.members | new)
        if down - {server}:
            raise MembershipError(
                f"servers {sorted(down - {server})} are down: no change while they are"
            )
        if add and server in down:
            event = self.failures.take_back(server)
            if event is None:
                raise MembershipError(
                    f"{name} is down and its agent does not answer: start it first"
                )
            ctx.events.append(event)
        gone = frozenset({server}) & ctx.membership.down  # removed while down: exports nothing
        old_ring, new_ring = ctx.versioned_ring(), ctx.versioned_ring(new, ctx.ring_version + 1)
        restored: dict[bytes, int] = {}
        lost: set[bytes] = set()
        if gone:  # its hot keys' latest versions, from their replicas, before they leave
            restored, lost = self.failures.restore_keys_of(server, new_ring.origin)
        # 1. the switch: hot keys whose origin changes leave the hot set; the removed server
        # leaves every replica set (the plan's diff orders the breaks before the removals)
        plan = ctx.plan
        new_plan = without_moved(plan, new, new_ring)
        ctx.driver.apply(diff(plan, new_plan, ctx.controller.rack, ctx.driver.read_version()))
        ctx.controller.plan = new_plan
        left = len(plan.keys) - len(new_plan.keys)
        if gone:  # copies of its keys the new owners hold but that were not restored: stale
            self._drop_unrestored(server, new_ring, restored)
        # 2. the agents
        agents = set(ctx.agents.controls) - ctx.membership.down
        try:
            report = handoff(
                ctx.agents.control,
                agents,
                old_ring,
                new_ring,
                self.unsafe_handoff,
                commit=lambda: self._commit(new_ring.version, new),
                gone=gone,
                crash=self.crash_in_handoff,
            )
        except ControlError as exc:
            if ctx.committing is not None:  # past the copy: finish it (and so would a restart)
                LOG.error(
                    "ring %d: switch-over failed (%s): set on every agent", new_ring.version, exc
                )
                ctx.adopt_ring(*ctx.committing)
                ctx.committing = None
                ctx.save_state()
                ctx.announce_ring()
            raise MembershipError(f"{'add' if add else 'remove'} {name}: {exc}") from exc
        ctx.committing = None
        # 3. the controller
        ctx.adopt_ring(new_ring.version, new)
        ctx.save_state()
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
        ctx.events.append(f"{name}:{'added' if add else 'removed'}")
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

    def _drop_unrestored(self, dead: int, new_ring: p.Ring, restored: dict[bytes, int]) -> None:
        """New owners of ``dead``'s keys drop the copies they hold of them (replica copies kept
        while it was down, or older ones) unless restored there: nothing proves them current, and
        from the switch-over on they would be served as the key's value."""
        ctx = self.ctx
        assert ctx.agents is not None
        for server, keys in ctx.agents.holdings(set(new_ring.ids)).items():
            for key in keys:
                if ctx.ring.origin(key) != dead or new_ring.origin(key) != server:
                    continue
                if restored.get(key) == server:
                    continue
                try:
                    ctx.agents.control(server).remove(key)
                    LOG.info("server %d: dropped an unproven copy of %s", server, key.hex())
                except ControlError as exc:
                    LOG.warning("server %d: cannot drop %s: %s", server, key.hex(), exc)
