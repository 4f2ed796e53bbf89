"""Who is in a network and how it is wired: hosts with their addresses and switch ports, the
switches, the links. Pure data (no Mininet): :mod:`kvsrack.network` builds it, the launchers and
the rack file read it.

:func:`rack` is the one-switch rack of docs/rack.md. A fabric (spines and leaves) is another
function returning a :class:`Topology`, with more switches and links between them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kvswitch.controller.rackfile import Host, RackFile

SWITCH_IP, SWITCH_MAC = "10.0.0.254", "02:00:00:00:00:fe"


@dataclass(frozen=True)
class Node:
    """A host: its name, IPv4 and MAC addresses and its port on the switch it hangs off."""

    name: str
    ip: str
    mac: str
    port: int


@dataclass(frozen=True)
class Link:
    """A cable from ``node`` (a host, or a switch by role) to port ``port`` of switch ``switch``;
    ``node_port`` is the port on ``node`` when it is a switch."""

    node: str
    switch: str
    port: int
    node_port: int | None = None


@dataclass(frozen=True)
class Topology:
    """Switches by role (``("tor",)`` for a rack), servers in ring order, clients, the links.
    ``spares`` are servers outside the first ring (added later, online). Every host is on one
    subnet (``prefix``) with static ARP entries for the others and for its switch's address:
    ``switch_ip``/``switch_mac``, or its own in ``gateways`` (a fabric's leaves)."""

    switches: tuple[str, ...]
    servers: tuple[Node, ...]
    clients: tuple[Node, ...]
    links: tuple[Link, ...]
    spares: frozenset[str] = frozenset()
    switch_ip: str = SWITCH_IP
    switch_mac: str = SWITCH_MAC
    prefix: int = 16
    gateways: Mapping[str, tuple[str, str]] = field(default_factory=dict)

    @property
    def hosts(self) -> tuple[Node, ...]:
        return (*self.servers, *self.clients)

    def gateway(self, host: str) -> tuple[str, str]:
        """The IPv4 and MAC address of ``host``'s switch (the agents reply through it)."""
        return self.gateways.get(host, (self.switch_ip, self.switch_mac))

    def server(self, name: str) -> Node:
        return next(s for s in self.servers if s.name == name)

    @property
    def members(self) -> tuple[Node, ...]:
        """The servers of the first ring (the clients' configured servers)."""
        return tuple(s for s in self.servers if s.name not in self.spares)


def servers_of(count: int) -> list[Node]:
    """Servers s1..sM: 10.0.0.i, 02:00:00:00:00:ii, switch port i (ring order = file order)."""
    return [Node(f"s{i}", f"10.0.0.{i}", f"02:00:00:00:00:{i:02x}", i) for i in range(1, count + 1)]


def clients_of(count: int, first_port: int) -> list[Node]:
    """Clients c1..cC: 10.0.1.j, 02:00:00:00:01:jj, switch ports after the servers'."""
    return [
        Node(f"c{j}", f"10.0.1.{j}", f"02:00:00:00:01:{j:02x}", first_port + j - 1)
        for j in range(1, count + 1)
    ]


def rack(servers: int, clients: int, spares: int = 0) -> Topology:
    """One ToR switch (``tor``), servers s1..s(M+spares) on ports 1.., clients after them; the
    last ``spares`` servers are outside the first ring."""
    every = servers_of(servers + spares)
    guests = clients_of(clients, servers + spares + 1)
    return Topology(
        switches=("tor",),
        servers=tuple(every),
        clients=tuple(guests),
        links=tuple(Link(n.name, "tor", n.port) for n in (*every, *guests)),
        spares=frozenset(s.name for s in every[servers:]),
    )


def control_socket(run_dir: Path, server: str) -> Path:
    """The Unix socket of ``server``'s agent control API, in the run's socket folder."""
    return run_dir / f"{server}.ctl"


def control_endpoint(run_dir: Path, server: str) -> str:
    """The agent's control endpoint of ``server`` (the rack file's ``control``)."""
    return f"unix:{control_socket(run_dir, server)}"


def rack_file(topo: Topology, run_dir: Path) -> RackFile:
    """The controller's rack file (docs/rack.md) of a one-switch topology, spares marked
    ``"member": false``."""
    return RackFile.of(
        topo.switch_ip,
        topo.switch_mac,
        servers=tuple(
            Host.of(
                s.name,
                s.ip,
                s.mac,
                s.port,
                control_endpoint(run_dir, s.name),
                s.name not in topo.spares,
            )
            for s in topo.servers
        ),
        clients=tuple(Host.of(c.name, c.ip, c.mac, c.port) for c in topo.clients),
    )


# ---------------------------------------------------------------- a leaf-spine fabric

#: a leaf's port to spine s is UPLINK + s (after any rack's hosts); a spine's port to leaf r, r + 1
UPLINK = 101


@dataclass(frozen=True)
class FabricLayout:
    """A leaf-spine fabric: ``spines`` spines (roles sp1..), ``racks`` leaves (l1..), each with
    ``servers`` servers; the clients spread over the leaves, c1 on l1, c2 on l2, ... Rack r
    (0-based) is the subnet 10.(r+1).0.0/16: servers 10.(r+1).0.j on leaf ports 1.., clients
    10.(r+1).1.j after them, the leaf 10.(r+1).0.254. Servers are s1..s(R*M) in the fabric's
    order (rack by rack), which is the clients' ring order and the fabric file's."""

    spines: int
    racks: int
    servers: int
    clients: int

    def spine(self, s: int) -> str:
        return f"sp{s + 1}"

    def leaf(self, r: int) -> str:
        return f"l{r + 1}"

    def leaf_ip(self, r: int) -> str:
        return f"10.{r + 1}.0.254"

    def leaf_mac(self, r: int) -> str:
        return f"02:00:00:00:{r + 1:02x}:fe"

    def spine_mac(self, s: int) -> str:
        return f"02:00:00:00:f0:{s + 1:02x}"

    def subnet(self, r: int) -> str:
        return f"10.{r + 1}.0.0/16"

    def rack_servers(self, r: int) -> tuple[Node, ...]:
        return tuple(
            Node(
                f"s{r * self.servers + j}",
                f"10.{r + 1}.0.{j}",
                f"02:00:00:{r + 1:02x}:00:{j:02x}",
                j,
            )
            for j in range(1, self.servers + 1)
        )

    def rack_clients(self, r: int) -> tuple[Node, ...]:
        mine = [c for c in range(1, self.clients + 1) if (c - 1) % self.racks == r]
        return tuple(
            Node(f"c{c}", f"10.{r + 1}.1.{i}", f"02:00:00:{r + 1:02x}:01:{i:02x}", self.servers + i)
            for i, c in enumerate(mine, start=1)
        )

    def rack_topology(self, r: int) -> Topology:
        """Rack r as its rack controller sees it (its rack file): its leaf, servers, clients."""
        return Topology(
            switches=(self.leaf(r),),
            servers=self.rack_servers(r),
            clients=self.rack_clients(r),
            links=(),
            switch_ip=self.leaf_ip(r),
            switch_mac=self.leaf_mac(r),
        )

    def topology(self) -> Topology:
        spines = tuple(self.spine(s) for s in range(self.spines))
        leaves = tuple(self.leaf(r) for r in range(self.racks))
        servers = tuple(n for r in range(self.racks) for n in self.rack_servers(r))
        clients = sorted(
            (n for r in range(self.racks) for n in self.rack_clients(r)),
            key=lambda n: int(n.name[1:]),
        )
        links = [
            Link(n.name, self.leaf(r), n.port)
            for r in range(self.racks)
            for n in (*self.rack_servers(r), *self.rack_clients(r))
        ]
        links += [
            Link(self.leaf(r), self.spine(s), r + 1, UPLINK + s)
            for r in range(self.racks)
            for s in range(self.spines)
        ]
        gateways = {
            n.name: (self.leaf_ip(r), self.leaf_mac(r))
            for r in range(self.racks)
            for n in (*self.rack_servers(r), *self.rack_clients(r))
        }
        return Topology(
            switches=(*spines, *leaves),
            servers=servers,
            clients=tuple(clients),
            links=tuple(links),
            prefix=8,
            gateways=gateways,
        )
