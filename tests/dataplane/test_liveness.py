"""liveness.p4: replies counted per server (ReplycountTable), and requests for a server the
controller declared dead (DownTable) answered by the switch with UNAVAILABLE, except hot Gets that a
replica in the read set can serve."""

from __future__ import annotations

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Packet

from .base import (
    CLIENT,
    SERVERS,
    SWITCH_MAC,
    Dataplane,
    fresh,
    kvs,
    proto,
    routed,
    tcp_packet,
    udp_packet,
)

S0, S1, S2, S3 = SERVERS


KEY = "hot-of-dead"
SLOT = 5


def _refused(pkt: Packet, reply_op: int, key: str, seq: int) -> Packet:
    """The switch's UNAVAILABLE answer to ``pkt``: back out of the client's port, addresses and
    ports swapped, the reply op, vlen/epoch/ver 0 (a Set's value bytes stay after the header)."""
    out = pkt.copy()
    out[Ether].src, out[Ether].dst = SWITCH_MAC, pkt[Ether].src
    out[IP].src, out[IP].dst = pkt[IP].dst, pkt[IP].src
    out[IP].ttl = 64
    out[UDP].sport, out[UDP].dport = pkt[UDP].dport, pkt[UDP].sport
    value = bytes(pkt[UDP].payload)[36:]
    header = kvs(reply_op, key, status=proto().status.UNAVAILABLE, seq=seq)
    out[UDP].remove_payload()
    out[UDP].add_payload(header + value)
    return fresh(out)


def test_replies_counted_by_source(dp: Dataplane) -> None:
    op = proto().op
    for seq in range(3):
        reply = udp_packet(S1, CLIENT.ip, kvs(op.GET_REPLY, "k", seq=seq), sport=proto().kvs_port)
        dp.send(S1.port, reply)
    dp.send(S2.port, udp_packet(S2, CLIENT.ip, kvs(op.SET_REPLY, "k"), sport=proto().kvs_port))
    # A request is no reply; a client's forged reply is dropped by trust.p4 before it counts.
    dp.send(CLIENT.port, udp_packet(CLIENT, S1.ip, kvs(op.GET, "k")))
    dp.send(CLIENT.port, udp_packet(CLIENT, S3.ip, kvs(op.GET_REPLY, "k")))
    assert dp.reply_count(S1)[1] == 3
    assert dp.reply_count(S2)[1] == 1
    assert dp.reply_count(S3)[1] == 0
    assert dp.reply_count(S0)[1] == 0


def test_requests_for_a_dead_cold_origin_are_refused(dp: Dataplane) -> None:
    op = proto().op
    dp.set_down(S3)
    before = dp.snapshot()
    for seq, (request, reply, value) in enumerate(
        [
            (op.GET, op.GET_REPLY, b""),
            (op.SET, op.SET_REPLY, b"v" * 20),
            (op.DEL, op.DEL_REPLY, b""),
        ]
    ):
        pkt = udp_packet(CLIENT, S3.ip, kvs(request, "cold", value, seq=seq))
        dp.send_expect(CLIENT.port, pkt, [(CLIENT.port, _refused(pkt, reply, "cold", seq))])
    assert dp.snapshot() == before
    assert dp.load_count(S3) == (0, 0)
    # Other servers are untouched.
    pkt = udp_packet(CLIENT, S2.ip, kvs(op.GET, "cold"))
    dp.send_expect(CLIENT.port, pkt, [(S2.port, routed(pkt, S2))])


def test_tcp_requests_for_a_dead_origin_are_forwarded(dp: Dataplane) -> None:
    dp.set_down(S3)
    pkt = tcp_packet(CLIENT, S3.ip, kvs(proto().op.GET, "cold"))
    dp.send_expect(CLIENT.port, pkt, [(S3.port, routed(pkt, S3))])


def test_hot_gets_of_a_dead_origin_go_to_valid_replicas(dp: Dataplane) -> None:
    op = proto().op
    dp.make_hot(KEY, SLOT, [S0, S1, S2])
    dp.make_valid(SLOT, [S0, S1, S2], ver=9)
    dp.set_down(S0)
    # The turns rotate over ordinals 1 .. n-1: S1, S2, S1, S2 ...
    for seq, holder in enumerate([S1, S2, S1, S2]):
        pkt = udp_packet(CLIENT, S0.ip, kvs(op.GET, KEY, seq=seq))
        dp.send_expect(CLIENT.port, pkt, [(holder.port, routed(pkt, holder, redirect=True))])
    # S2 falls out of the read set (it confirmed an older version): its turns are refused, not
    # sent to the dead origin.
    dp.set_valid_ver(SLOT * 8 + 2, 8)
    pkt = udp_packet(CLIENT, S0.ip, kvs(op.GET, KEY, seq=10))
    dp.send_expect(CLIENT.port, pkt, [(S1.port, routed(pkt, S1, redirect=True))])
    pkt = udp_packet(CLIENT, S0.ip, kvs(op.GET, KEY, seq=11))
    dp.send_expect(CLIENT.port, pkt, [(CLIENT.port, _refused(pkt, op.GET_REPLY, KEY, 11))])


def test_hot_writes_of_a_dead_origin_take_no_version_and_make_no_copy(dp: Dataplane) -> None:
    op = proto().op
    dp.make_hot(KEY, SLOT, [S0, S1, S2])
    dp.make_valid(SLOT, [S0, S1, S2], ver=9)
    dp.set_down(S0)
    before = dp.snapshot()
    pkt = udp_packet(CLIENT, S0.ip, kvs(op.SET, KEY, b"new", seq=3))
    dp.send_expect(CLIENT.port, pkt, [(CLIENT.port, _refused(pkt, op.SET_REPLY, KEY, 3))])
    pkt = udp_packet(CLIENT, S0.ip, kvs(op.DEL, KEY, seq=4))
    dp.send_expect(CLIENT.port, pkt, [(CLIENT.port, _refused(pkt, op.DEL_REPLY, KEY, 4))])
    # rr is the only register a refused write may not touch either: nothing changed.
    assert dp.snapshot() == before


def test_single_holder_hot_key_of_a_dead_origin_is_refused(dp: Dataplane) -> None:
    op = proto().op
    dp.make_hot(KEY, SLOT, [S0])
    dp.make_valid(SLOT, [S0], ver=2)
    dp.set_down(S0)
    pkt = udp_packet(CLIENT, S0.ip, kvs(op.GET, KEY))
    dp.send_expect(CLIENT.port, pkt, [(CLIENT.port, _refused(pkt, op.GET_REPLY, KEY, 1))])
