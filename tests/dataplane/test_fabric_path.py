"""The spine and three fabric leaves wired together (software switch, v1model builds, in process):
a fabric-hot key's write from a client in another rack, and from a client in the origin's own
rack, reaches the origin stamped by the spine and its replicas as copies through their leaf; the
origin's reply completes it at the spine; the replicas' confirms, steered up by their leaf, put
them in the read set; Gets then go round-robin over the racks (docs/fabric.md "A write across
racks"). spine.py's fabric: a (origin) and b behind leaf 1, c and d behind leaf 2, e and the
client behind leaf 3; each leaf's port 5 goes to the spine's port of its rack."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from scapy.layers.inet import UDP
from scapy.layers.l2 import Ether
from scapy.packet import Packet

from kvswitch.controller import names
from kvswitch.paths import p4src_dir
from kvswitch.protocol import Message

from .base import (
    DEFINES,
    EPOCH,
    SWITCH_MAC,
    Host,
    SwitchTarget,
    ip_int,
    kvs,
    mac_int,
    proto,
    udp_packet,
)
from .leaf import LeafPlane
from .spine import FAR_CLIENT, RACKS, SPINE_DEFINES, A, B, C, D, E, SpinePlane, leaf_mac

KEY = "across-racks"
SLOT = 2
UPLINK = 5
LEAF_IP = "10.{}.0.254"  # each leaf's own address (CONFIRM and SYNC go to it)
NEAR_CLIENT = Host("near", "10.1.1.1", "02:00:00:01:01:01", 8)  # a client in the origin's rack


def _on_leaf(host: Host, port: int) -> Host:
    """``host`` as its leaf sees it: its own MAC, its port on the leaf."""
    return Host(
        host.name, host.ip, f"02:00:00:{ip_int(host.ip) >> 16 & 255:02x}:00:{port:02x}", port
    )


# each rack's hosts on their leaf's ports
RACK_HOSTS = {
    1: [_on_leaf(A, 1), _on_leaf(B, 2), NEAR_CLIENT],
    2: [_on_leaf(C, 1), _on_leaf(D, 2)],
    3: [_on_leaf(E, 1), _on_leaf(FAR_CLIENT, 8)],
}


def _switch(program: str, defines: dict[str, str]) -> SwitchTarget:
    try:
        from softswitch import Switch
    except ImportError as exc:
        pytest.skip(f"software switch engine not available: {exc}")
    source = p4src_dir() / program
    return Switch.from_file(str(source), defines=defines, include_dirs=[str(source.parent)])


@dataclass
class Fabric:
    spine: SpinePlane
    leaves: dict[int, SwitchTarget]
    delivered: list[tuple[str, bytes]] = field(default_factory=list)  # (host name, frame)

    def send(self, rack: int, port: int, frame: bytes) -> None:
        """``frame`` into leaf ``rack``'s ``port``; everything it causes, carried over the links,
        until it reaches hosts (``delivered``)."""
        work = [("leaf", rack, port, frame)]
        for _ in range(64):
            if not work:
                return
            kind, where, port, frame = work.pop(0)
            if kind == "leaf":
                for out_port, data in self.leaves[where].process(port, frame):
                    if out_port == UPLINK:
                        work.append(("spine", 0, where, data))
                    else:
                        host = next(h for h in RACK_HOSTS[where] if h.port == out_port)
                        self.delivered.append((host.name, data))
            else:
                for out_port, data in self.spine.send(port, frame):
                    work.append(("leaf", out_port, UPLINK, data))
        pytest.fail("packets still in flight after 64 hops")

    def take(self) -> list[tuple[str, Message]]:
        out = [
            (name, Message.decode(bytes(Ether(data)[UDP].payload))) for name, data in self.delivered
        ]
        self.delivered.clear()
        return out


def _leaf(rack: int) -> SwitchTarget:
    sw = _switch("kvswitch_leaf.p4", DEFINES)
    plane = LeafPlane(sw)
    plane.reset()
    mine = mac_int(leaf_mac(rack))
    for host in RACK_HOSTS[rack]:
        route = {"port": host.port, "dmac": mac_int(host.mac), "smac": mine}
        sw.table_add("ipv4_lpm", {"dst_addr": (ip_int(host.ip), 32)}, "set_next_hop", route)
        server = int(host is not NEAR_CLIENT and host.name != FAR_CLIENT.name)
        sw.table_add(
            names.HOSTPORT_TABLE,
            {names.MATCH_SRC: (ip_int(host.ip), 32)},
            names.ACT_SET_SOURCE,
            {names.PARAM_PORT: host.port, names.PARAM_SERVER: server},
        )
    for other in RACKS:
        if other != rack:
            route = {"port": UPLINK, "dmac": mac_int(SWITCH_MAC), "smac": mine}
            sw.table_add(
                "ipv4_lpm", {"dst_addr": (ip_int(f"10.{other}.0.0"), 16)}, "set_next_hop", route
            )
    sw.table_add(names.UPLINK_TABLE, {names.MATCH_PORT: UPLINK}, names.ACT_SET_UPLINK, {})
    spine = Host("spine", "10.255.0.1", SWITCH_MAC, UPLINK)
    plane.make_fabric_hot(KEY, spine)
    plane.ready()
    return sw


@pytest.fixture(scope="module")
def fabric() -> Iterator[Fabric]:
    spine = SpinePlane(_switch("kvswitch_spine.p4", SPINE_DEFINES))
    spine.reset()
    spine.setup_rack()
    spine.make_hot(KEY, SLOT, [A, C, D])
    yield Fabric(spine, {rack: _leaf(rack) for rack in RACKS})


def _from(rack: int, name: str, dst: str, msg: bytes, sport: int = 40000) -> tuple[int, bytes]:
    host = next(h for h in RACK_HOSTS[rack] if h.name == name)
    pkt: Packet = udp_packet(Host(name, host.ip, host.mac, host.port), dst, msg, sport=sport)
    pkt["Ether"].dst = leaf_mac(rack)
    return host.port, bytes(pkt)


def test_a_write_across_racks_then_gets_over_the_racks(fabric: Fabric) -> None:
    op, kport = proto().op, proto().kvs_port
    # a client behind leaf 3 writes: stamped by the spine, copied to c and d behind leaf 2
    fabric.send(3, *_from(3, "client", A.ip, kvs(op.SET, KEY, b"one", seq=1, ver=99)))
    got = sorted((name, m.op, m.epoch, m.ver) for name, m in fabric.take())
    assert got == [("a", op.SET, EPOCH, 1), ("c", op.UPDATE, EPOCH, 1), ("d", op.UPDATE, EPOCH, 1)]
    # the origin's reply completes version 1 at the spine and reaches the client
    fabric.send(
        1, *_from(1, "a", FAR_CLIENT.ip, kvs(op.SET_REPLY, KEY, seq=1, epoch=EPOCH, ver=1), kport)
    )
    assert [(n, m.op) for n, m in fabric.take()] == [("client", op.SET_REPLY)]
    assert fabric.spine.reg(names.REG_ORIGIN_VER, SLOT) == 1
    # before the replicas confirm, every Get goes to the origin
    fabric.send(3, *_from(3, "client", A.ip, kvs(op.GET, KEY, seq=2)))
    assert [n for n, _ in fabric.take()] == ["a"]
    for rack, name in ((2, "c"), (2, "d")):
        confirm = kvs(op.CONFIRM, KEY, epoch=EPOCH, ver=1, cid=0)
        fabric.send(rack, *_from(rack, name, LEAF_IP.format(rack), confirm, kport))
    assert fabric.take() == []  # consumed by the spine
    for seq in range(3, 9):
        fabric.send(3, *_from(3, "client", A.ip, kvs(op.GET, KEY, seq=seq)))
    got = fabric.take()
    assert [n for n, _ in got] == ["c", "d", "a", "c", "d", "a"]  # rr went on from ordinal 1
    assert all(m.flags & 0x0004 for n, m in got if n != "a")  # F_REDIRECT: served as replicas


def test_a_write_from_the_origins_rack_is_stamped_too(fabric: Fabric) -> None:
    """The invariant of F3: the near client's write goes up to the spine and comes back down to
    the origin stamped (not straight to it, as the rack switch would send it)."""
    op = proto().op
    before = fabric.spine.reg(names.REG_GLOBAL_VER)
    fabric.send(1, *_from(1, "near", A.ip, kvs(op.SET, KEY, b"two", seq=1)))
    got = sorted((name, m.op, m.ver) for name, m in fabric.take())
    ver = before + 1
    assert got == [("a", op.SET, ver), ("c", op.UPDATE, ver), ("d", op.UPDATE, ver)]
