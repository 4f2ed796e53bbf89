"""What the runtime's parts share (:mod:`kvswitch.controller.runtime`, ``failures``,
``ringchange``): the switch driver, the rack, the planner and its plan, the agents, the failure
detector, the epoch and the ring (docs/protocol.md "Membership"), and the few agent-side steps
that several of them take (telling agents the ring, dropping stale copies, the state file)."""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kvswitch import protocol as p
from kvswitch.agent.control import ControlError, KeyVersion
from kvswitch.controller import statefile
from kvswitch.controller.agents import AgentPool
from kvswitch.controller.driver import SwitchDriver
from kvswitch.controller.hashring import RackOrigins
from kvswitch.controller.membership import Membership
from kvswitch.controller.period import Controller
from kvswitch.controller.plan import Plan
from kvswitch.controller.rackfile import RackFile
from kvswitch.controller.startup import stale_copies

LOG = logging.getLogger("kvswitch.controller")


@dataclass
class Context:
    driver: SwitchDriver
    rack: RackFile
    controller: Controller
    agents: AgentPool | None
    membership: Membership
    members: frozenset[int]
    state_file: Path | None = None
    epoch: int = 0
    ring_version: int = 1
    # a ring change past its point of no return (written to the state file as "ring_next")
    committing: tuple[int, frozenset[int]] | None = None
    # ring changes made between two periods (the admin socket), reported with the next period
    events: list[str] = field(default_factory=list)
    ring: p.HashRing | RackOrigins = field(init=False)
    # a fabric hand-off is configured and its share has not been read: agents may hold copies of
    # fabric-hot keys this controller does not know, so no copy is dropped as stale
    fabric_unknown: bool = False
    # reads the fabric's share again (the runtime's read_share); called by drop_stale_copies
    # after it read what the agents hold
    refresh_fabric: Callable[[], object] | None = None

    def __post_init__(self) -> None:
        self.adopt_ring(self.ring_version, self.members)

    @property
    def servers(self) -> int:
        """Servers in the rack (M)."""
        return len(self.rack.servers)

    @property
    def plan(self) -> Plan:
        return self.controller.plan

    def empty_plan(self) -> Plan:
        return Plan(self.servers, self.driver.slots)

    def name(self, server: int) -> str:
        return self.rack.servers[server].name

    # -- the ring --------------------------------------------------------------------------------

    def adopt_ring(self, version: int, members: frozenset[int]) -> None:
        """Serve ring ``version`` of ``members``: keys' origins and hot-key placement follow it."""
        self.ring_version, self.members = version, members
        rf = self.rack
        if rf.fabric_ring:  # the fabric's ring: the clients' (membership changes not supported)
            self.ring = RackOrigins(len(rf.fabric_ring), rf.fabric_first, self.servers)
        else:
            self.ring = p.HashRing.of(members)
        self.controller.members = tuple(sorted(members))

    def versioned_ring(self, members: frozenset[int] | None = None, version: int = 0) -> p.Ring:
        """The ring of ``members`` (default: the current ones) with the rack's addresses."""
        ids = self.members if members is None else members
        rf = self.rack
        if rf.fabric_ring:
            return p.Ring(
                version or self.ring_version,
                tuple(
                    p.Member(i, str(ipaddress.IPv4Address(ip)), rf.kvs_port)
                    for i, ip in enumerate(rf.fabric_ring)
                ),
            )
        return p.Ring(
            version or self.ring_version,
            tuple(
                p.Member(s, self.rack.servers[s].ip_text, self.rack.kvs_port) for s in sorted(ids)
            ),
        )

    def announce_ring(self, servers: set[int] | None = None) -> None:
        """Tell agents (all, or ``servers``) the current ring (start-up, an agent restart)."""
        if self.agents is None:
            return
        ring = self.versioned_ring()
        for server in sorted(self.agents.controls if servers is None else servers):
            try:
                self.agents.controls[server].ring_set(ring, self.rack.fabric_first + server)
            except (ControlError, KeyError) as exc:
                LOG.warning("server %d: ring %d not set: %s", server, ring.version, exc)

    # -- agents and the failure detector ------------------------------------------------------------

    def set_down(self) -> None:
        """The planner and the agents' pool follow the failure detector's dead servers."""
        down = self.membership.down
        self.controller.down = down
        if self.agents is not None:
            self.agents.down = down

    def drop_stale_copies(
        self, servers: set[int] | None = None
    ) -> dict[int, dict[bytes, KeyVersion]]:
        """Agents (all, or ``servers``) drop copies of keys they neither originate nor replicate
        in the plan; returns what each reachable agent held live before."""
        if self.agents is None:
            return {}
        holdings = self.agents.holdings(servers)
        # the share read after the holdings: the fabric controller writes it before it pushes
        # (kvswitch fabric-controller), so every fabric copy seen here is named in it. Read
        # before them, a copy pushed in between was dropped under a spine that counts it
        # valid: its Gets found nothing until the key's next write (docs/fabric.md)
        if self.refresh_fabric is not None:
            self.refresh_fabric()
        if self.fabric_unknown:
            LOG.warning("the fabric's keys are not known: no stale copy dropped")
            return holdings
        foreign = self.controller.foreign  # a spine's holders: the fabric controller's copies
        for server, key in stale_copies(self.plan, self.ring.origin, holdings):
            if key in foreign:
                continue
            try:
                self.agents.remove(key, server)
                LOG.info("server %d: dropped a stale copy of %s", server, key.hex())
            except Exception as exc:  # logged; the copy is never served (no table uses it)
                LOG.warning("server %d: cannot drop %s: %s", server, key.hex(), exc)
        return holdings

    # -- the state file -----------------------------------------------------------------------------

    def save_state(self) -> None:
        """The epoch, the ring, the threshold and last period's counts, for a restarted
        controller."""
        if self.state_file is None:
            return
        statefile.save(
            self.state_file,
            statefile.record(
                self.epoch,
                (self.ring_version, self.members),
                self.committing,
                self.controller.threshold.value,
                self.controller.predictor.prev,
            ),
        )
