"""A fabric's leaf (p4src/kvswitch_leaf.p4; docs/fabric.md "Leaf program"): the messages of a
fabric-hot key go up to its spine from the hosts (and from another spine) and come down from it
untouched, with none of the leaf's own rules (F3); what comes from an uplink was checked at its
first leaf (F5); a restarted leaf holds KVSwitch messages until its steering table is installed.
The rack is base.py's with two spines (leaf.py); every test runs on every leaf build."""

from __future__ import annotations

from scapy.layers.l2 import Ether
from scapy.packet import Packet

from .base import CLIENT, EPOCH, SERVERS, SWITCH_IP, Host, kvs, proto, routed, udp_packet, with_kvs
from .leaf import REMOTE, SPINE0, SPINE1, LeafPlane

KEY = "fabric-key"
ORIGIN, REPLICA = SERVERS[0], SERVERS[1]


def up(pkt: Packet, spine: Host = SPINE0, *, routed_here: bool = True) -> Packet:
    """``pkt`` sent up to ``spine``: its MAC as destination; forwarded by a route of the leaf
    (``routed_here``: the leaf's MAC as source, TTL - 1) or not (a CONFIRM or SYNC to the
    switch's own address keeps its source MAC and TTL)."""
    out = routed(pkt, spine) if routed_here else Ether(bytes(pkt))
    out[Ether].dst = spine.mac
    return out


def test_host_messages_go_up_to_the_keys_spine(lf: LeafPlane) -> None:
    op, kport = proto().op, proto().kvs_port
    lf.make_fabric_hot(KEY, SPINE0)
    before = lf.snapshot()
    # a client of this rack, the key's origin in this rack too: up all the same, versions cleared
    get = udp_packet(CLIENT, ORIGIN.ip, kvs(op.GET, KEY, epoch=3, ver=9))
    lf.send_expect(CLIENT.port, get, [(SPINE0.port, up(with_kvs(get, kvs(op.GET, KEY))))])
    put = udp_packet(CLIENT, ORIGIN.ip, kvs(op.SET, KEY, b"v", seq=2))
    lf.send_expect(CLIENT.port, put, [(SPINE0.port, up(put))])
    reply = udp_packet(ORIGIN, CLIENT.ip, kvs(op.SET_REPLY, KEY, epoch=EPOCH, ver=4), sport=kport)
    lf.send_expect(ORIGIN.port, reply, [(SPINE0.port, up(reply))])
    # consumed by a rack switch, carried to the spine by a leaf
    for code in (op.CONFIRM, op.SYNC):
        msg = kvs(code, KEY, epoch=EPOCH, ver=4, cid=0)
        pkt = udp_packet(REPLICA, SWITCH_IP, msg, sport=kport)
        lf.send_expect(REPLICA.port, pkt, [(SPINE0.port, up(pkt, routed_here=False))])
    assert lf.snapshot() == before  # no HashPipe, no version register
    assert lf.load_count(ORIGIN) == (0, 0)  # counted where it comes down
    assert lf.reply_count(ORIGIN)[1] == 1  # the failure detector still sees the origin answer


def test_spine_messages_come_down_untouched(lf: LeafPlane) -> None:
    op, kport = proto().op, proto().kvs_port
    settled = proto().f_settled
    lf.make_fabric_hot(KEY, SPINE0)
    before = lf.snapshot()
    stamped = kvs(op.SET, KEY, b"v", epoch=EPOCH, ver=12, flags=settled)
    copy = kvs(op.UPDATE, KEY, b"v", epoch=EPOCH, ver=12, flags=settled)
    get = kvs(op.GET, KEY, flags=0x0004)  # redirected by the spine: F_REDIRECT kept
    sync = kvs(op.SYNC, KEY, epoch=EPOCH, ver=13, cid=0)  # the spine's reflection
    for src, dst, msg, sport in (
        (CLIENT, ORIGIN, stamped, 40000),
        (CLIENT, REPLICA, copy, 40000),
        (CLIENT, REPLICA, get, 40000),
        (Host("leaf", SWITCH_IP, SPINE0.mac, SPINE0.port), ORIGIN, sync, kport),
    ):
        pkt = udp_packet(Host(src.name, src.ip, SPINE0.mac, SPINE0.port), dst.ip, msg, sport=sport)
        lf.send_expect(SPINE0.port, pkt, [(dst.port, routed(pkt, dst))])
    assert lf.snapshot() == before
    assert lf.load_count(ORIGIN)[1] == lf.load_count(REPLICA)[1] == 2


def test_requests_from_another_spine_go_up_to_the_keys_spine(lf: LeafPlane) -> None:
    op = proto().op
    lf.make_fabric_hot(KEY, SPINE0)
    far = Host("far", "10.2.0.9", SPINE1.mac, SPINE1.port)
    get = udp_packet(far, ORIGIN.ip, kvs(op.GET, KEY))
    lf.send_expect(SPINE1.port, get, [(SPINE0.port, up(get))])
    # an UPDATE only comes down from the key's spine; from another, or from a host, it is forged
    update = udp_packet(far, ORIGIN.ip, kvs(op.UPDATE, KEY, b"x"))
    lf.send_expect(SPINE1.port, update, [])
    lf.send_expect(CLIENT.port, udp_packet(CLIENT, ORIGIN.ip, kvs(op.UPDATE, KEY, b"x")), [])


def test_uplinks_carry_what_their_first_leaf_checked(lf: LeafPlane) -> None:
    op, kport = proto().op, proto().kvs_port
    # a server of rack 2 answers a client here (a cold key): a rack switch takes it for a client
    # sending a server's op (rule O); from an uplink it passes
    reply = udp_packet(REMOTE, CLIENT.ip, kvs(op.GET_REPLY, "cold", b"v"), sport=kport)
    lf.send_expect(SPINE0.port, reply, [(CLIENT.port, routed(reply, CLIENT))])
    # ... and the same from a host port of this leaf is refused, as on the rack switch
    local = Host("remote-here", REMOTE.ip, "02:00:00:00:01:01", CLIENT.port)
    forged = udp_packet(local, CLIENT.ip, kvs(op.GET_REPLY, "cold", b"v"), sport=kport)
    lf.send_expect(CLIENT.port, forged, [])


def test_held_until_the_steering_table_is_installed(lf: LeafPlane) -> None:
    op = proto().op
    lf.ready(installed=False)  # what a restarted leaf starts with
    get = udp_packet(CLIENT, ORIGIN.ip, kvs(op.GET, "cold"))
    lf.send_expect(CLIENT.port, get, [])
    lf.send_expect(SPINE0.port, udp_packet(REMOTE, ORIGIN.ip, kvs(op.GET, "cold")), [])
    lf.ready()
    lf.send_expect(CLIENT.port, get, [(ORIGIN.port, routed(get, ORIGIN))])
