"""A small leaf-spine fabric for the fabric runtime's tests: 2 spines and 3 leaves of the software
switch in this process, each behind its own P4Runtime and Thrift servers on free loopback ports
(the rack controller's driver talks to them as to ``simple_switch_grpc``), wired by
:meth:`Net.send`, which carries frames over the links until they reach hosts.

    rack r (0..2): leaf r, servers 10.<r+1>.0.1 (port 1) and 10.<r+1>.0.2 (port 2), a client
                   10.<r+1>.1.1 (port 8); the leaf's address 10.<r+1>.0.254
    links: leaf r port 5 + s <-> spine s port r + 1

The leaves' rack entries (forwarding, trust, the rack's static tables) are installed as a rack
controller installs them (:func:`kvswitch.controller.startup.static_ops`); everything of the
fabric is the fabric runtime's.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from kvswitch import protocol as p
from kvswitch.bench.fabric_runtime_bench import LiveSwitch, fabric_dict, start_switch
from kvswitch.controller.fabricfile import FabricFile
from kvswitch.controller.p4rt_driver import P4RuntimeDriver, Program
from kvswitch.controller.rackfile import RackFile
from kvswitch.controller.startup import static_ops
from kvswitch.paths import p4src_dir
from softswitch.runtime.bundle import Bundle

SPINES, RACKS, SERVERS = 2, 3, 2
MAX_HOLDERS = 4
SPINE_DEFINES = {"HOT_KEYS": "16", "MAX_SERVERS": "16", "MAX_HOLDERS": str(MAX_HOLDERS)}
LEAF_DEFINES = {"HOT_KEYS": "16", "MAX_SERVERS": "4", "HP_STAGES": "2"}
UPLINK = 5  # leaf r's port to spine s: UPLINK + s
CLIENT_PORT = 8
LEAF_EPOCH = 3


def spine_mac(s: int) -> str:
    return f"02:00:00:00:f0:{s + 1:02x}"


def leaf_mac(r: int) -> str:
    return f"02:00:00:00:{r + 1:02x}:fe"


def leaf_ip(r: int) -> str:
    return f"10.{r + 1}.0.254"


def rack_json(r: int) -> dict:
    return {
        "kvs_port": p.KVS_PORT,
        "switch": {"ip": leaf_ip(r), "mac": leaf_mac(r)},
        "servers": [
            {
                "name": f"s{r + 1}{j + 1}",
                "ip": f"10.{r + 1}.0.{j + 1}",
                "mac": f"02:00:00:{r + 1:02x}:00:{j + 1:02x}",
                "port": j + 1,
            }
            for j in range(SERVERS)
        ],
        "clients": [
            {
                "name": f"c{r + 1}",
                "ip": f"10.{r + 1}.1.1",
                "mac": f"02:00:00:{r + 1:02x}:01:01",
                "port": CLIENT_PORT,
            }
        ],
    }


def fabric_json(spines: list[LiveSwitch], leaves: list[LiveSwitch], k: int = 16) -> dict:
    """The fabric file of the links above (the benchmark's layout)."""
    return fabric_dict(spines, leaves, SERVERS, k, MAX_HOLDERS)


def programs() -> tuple[Program, Program]:
    out = []
    for name, defines in (("kvswitch_spine.p4", SPINE_DEFINES), ("kvswitch_leaf.p4", LEAF_DEFINES)):
        bundle = Bundle.from_file(p4src_dir() / name, defines)
        out.append(Program(bundle.compile().p4info, bundle.to_bytes()))
    return out[0], out[1]


@dataclass
class Net:
    fabric: FabricFile
    spines: list[LiveSwitch]
    leaves: list[LiveSwitch]
    racks: list[RackFile]
    delivered: list[tuple[str, p.Message]] = field(default_factory=list)

    def host(self, r: int, port: int) -> str:
        rack = self.racks[r]
        return next(h.name for h in rack.servers + rack.clients if h.port == port)

    def send(self, r: int, port: int, frame: bytes) -> None:
        """``frame`` into leaf ``r``'s ``port``; everything it causes, over the links, until it
        reaches hosts (:attr:`delivered`)."""
        work = [("leaf", r, port, frame)]
        for _ in range(64):
            if not work:
                return
            kind, where, port, frame = work.pop(0)
            if kind == "leaf":
                for out, data in self.leaves[where].device.process(port, frame):
                    if UPLINK <= out < UPLINK + SPINES:
                        work.append(("spine", out - UPLINK, where + 1, data))
                    else:
                        msg = p.Message.decode(bytes(Ether(data)[UDP].payload))
                        self.delivered.append((self.host(where, out), msg))
            else:
                for out, data in self.spines[where].device.process(port, frame):
                    work.append(("leaf", out - 1, UPLINK + where, data))
        pytest.fail("packets still in flight after 64 hops")

    def take(self) -> list[tuple[str, p.Message]]:
        out, self.delivered = self.delivered, []
        return out

    def from_host(
        self, name: str, dst_ip: str, msg: p.Message, sport: int = 40000, dport: int = p.KVS_PORT
    ) -> None:
        """``msg`` sent by host ``name`` (a server or a client of any rack) to ``dst_ip``."""
        for r, rack in enumerate(self.racks):
            for h in rack.servers + rack.clients:
                if h.name == name:
                    mac = ":".join(f"{h.mac:012x}"[i : i + 2] for i in range(0, 12, 2))
                    frame = (
                        Ether(src=mac, dst=leaf_mac(r))
                        / IP(src=h.ip_text, dst=dst_ip)
                        / UDP(sport=sport, dport=dport)
                        / msg.encode()
                    )
                    self.send(r, h.port, bytes(frame))
                    return
        raise KeyError(name)

    def server_name(self, server: int) -> str:
        return self.racks[server // SERVERS].servers[server % SERVERS].name

    def server_ip(self, server: int) -> str:
        return self.racks[server // SERVERS].servers[server % SERVERS].ip_text


class PacketAgents:
    """The agents' side of a spine's pushes, as packets through the fabric: the origin's SYNC
    (to its leaf's address) comes back stamped by the key's spine, each replica CONFIRMs that
    version, the origin sends SYNC_DONE."""

    def __init__(self, net: Net) -> None:
        self.net = net
        self.pushes: list[tuple[bytes, int, tuple[int, ...]]] = []
        self.removals: list[tuple[bytes, int]] = []
        self.stamps: list[tuple[int, int]] = []  # (epoch, ver) of every SYNC reflected
        self.events: list[tuple] = []  # ("rebase", key, server), ("push", key), in order

    def push(self, key: bytes, origin: int, replicas: tuple[int, ...]) -> None:
        net = self.net
        self.pushes.append((key, origin, replicas))
        self.events.append(("push", key))
        leaf = leaf_ip(origin // SERVERS)
        net.from_host(net.server_name(origin), leaf, p.Message(p.Op.SYNC, key))
        got = net.take()
        if [(n, m.op) for n, m in got] != [(net.server_name(origin), p.Op.SYNC)]:
            raise RuntimeError(f"SYNC of {key.hex()} not reflected to its origin: {got}")
        epoch, ver = got[0][1].epoch, got[0][1].ver
        self.stamps.append((epoch, ver))
        for server in replicas:
            confirm = p.Message(p.Op.CONFIRM, key, epoch=epoch, ver=ver)
            net.from_host(net.server_name(server), leaf_ip(server // SERVERS), confirm)
        done = p.Message(p.Op.SYNC_DONE, key, epoch=epoch, ver=ver)
        net.from_host(net.server_name(origin), leaf, done)
        if net.take():
            raise RuntimeError("a CONFIRM or SYNC_DONE was not consumed by the spine")

    def remove(self, key: bytes, server: int) -> None:
        self.removals.append((key, server))

    def rebase(self, key: bytes, server: int) -> None:
        self.events.append(("rebase", key, server))


@contextlib.contextmanager
def fabric_net(tmp_path) -> Iterator[Net]:
    """The switches (empty: the drivers set their pipelines) and the leaves' rack entries."""
    spines = [start_switch(f"spine{s + 1}") for s in range(SPINES)]
    leaves = [start_switch(f"leaf{r + 1}") for r in range(RACKS)]
    try:
        path = tmp_path / "fabric.json"
        import json

        path.write_text(json.dumps(fabric_json(spines, leaves)))
        racks = [RackFile.parse(rack_json(r)) for r in range(RACKS)]
        yield Net(FabricFile.load(path), spines, leaves, racks)
    finally:
        for sw in spines + leaves:
            sw.stop()


def spine_drivers(net: Net, program: Program, agents: PacketAgents, cls=P4RuntimeDriver) -> list:
    rack = net.fabric.spine_rack()
    return [cls(sw.address, program, rack, agents, row=MAX_HOLDERS) for sw in net.spines]


def leaf_drivers(net: Net, program: Program, cls=P4RuntimeDriver) -> list:
    """The leaves' drivers, each leaf with its rack's entries as its rack controller writes
    them (set once, at the first connection)."""
    out = []
    for r, sw in enumerate(net.leaves):
        drv = cls(sw.address, program, net.racks[r].rack())
        if sw.device.pipeline is not None and not drv.read_entries("ipv4_lpm"):
            entries, registers = static_ops(
                net.racks[r], net.racks[r].rack(), LEAF_EPOCH, drv.has_liveness
            )
            drv.apply(entries + registers)
        out.append(drv)
    return out
