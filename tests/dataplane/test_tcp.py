"""TCP: segments without payload are not requests; a TCP Set with options is parsed, stamped with a
fresh TCP checksum, and its multicast copies are rewritten to UDP datagrams (flags F_TCP)."""

from __future__ import annotations

from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from .base import (
    CLIENT,
    EPOCH,
    SERVERS,
    SWITCH_MAC,
    Dataplane,
    kvs,
    proto,
    routed,
    tcp_packet,
    with_kvs,
)

KEY = "tcp-key"
SLOT = 6
ORIGIN, R1, R2 = SERVERS[0], SERVERS[1], SERVERS[2]
OPTIONS = [("MSS", 1460), ("NOP", None), ("WScale", 7), ("Timestamp", (1, 2))]


def test_segments_without_payload_untouched(dp: Dataplane) -> None:
    dp.make_hot(KEY, SLOT, [ORIGIN, R1])
    for flags in ("S", "A", "FA", "SA"):
        pkt = tcp_packet(CLIENT, ORIGIN.ip, b"", flags=flags, options=OPTIONS)
        dp.send_expect(CLIENT.port, pkt, [(ORIGIN.port, routed(pkt, ORIGIN))])
    assert dp.reg("global_ver") == 0
    assert dp.hot_count(KEY) == (0, 0)
    assert dp.load_count(ORIGIN) == (0, 0)


def test_tcp_set_with_options_multicast_as_udp(dp: Dataplane) -> None:
    op = proto().op
    dp.make_hot(KEY, SLOT, [ORIGIN, R1, R2])
    value = b"tcp-value" * 5
    pkt = Ether(
        bytes(tcp_packet(CLIENT, ORIGIN.ip, kvs(op.SET, KEY, value, seq=3), options=OPTIONS))
    )
    assert pkt[TCP].dataofs > 5
    settled = proto().f_settled
    stamped = kvs(op.SET, KEY, value, seq=3, epoch=EPOCH, ver=1, flags=settled)
    update = kvs(op.UPDATE, KEY, value, seq=3, epoch=EPOCH, ver=1, flags=proto().f_tcp | settled)

    def as_udp_copy(to: int) -> Ether:
        server = SERVERS[to]
        ip = pkt[IP].copy()
        ip.remove_payload()
        ip.dst, ip.ttl, ip.proto, ip.len, ip.chksum = server.ip, ip.ttl - 1, 17, None, None
        l2 = Ether(src=SWITCH_MAC, dst=server.mac)
        return Ether(
            bytes(l2 / ip / UDP(sport=pkt[TCP].sport, dport=proto().kvs_port) / Raw(update))
        )

    dp.send_expect(
        CLIENT.port,
        pkt,
        [
            (ORIGIN.port, with_kvs(routed(pkt, ORIGIN), stamped)),
            (R1.port, as_udp_copy(1)),
            (R2.port, as_udp_copy(2)),
        ],
    )
    assert dp.reg("slot_ver", SLOT) == 1
    assert dp.load_count(R1)[1] == 1


def test_tcp_get_reply_from_server_parsed(dp: Dataplane) -> None:
    # Replies carry KVS_PORT as source port: parsed, counted nowhere (the client is no server).
    op = proto().op
    pkt = tcp_packet(
        ORIGIN, CLIENT.ip, kvs(op.GET_REPLY, KEY, b"v"), sport=proto().kvs_port, dport=5555
    )
    dp.send_expect(ORIGIN.port, pkt, [(CLIENT.port, routed(pkt, CLIENT))])


def test_tcp_get_of_hot_key_stays_on_its_connection(dp: Dataplane) -> None:
    # Gets are UDP by protocol; a Get sent over TCP is counted but never redirected.
    op = proto().op
    dp.make_hot(KEY, SLOT, [ORIGIN, R1])
    dp.make_valid(SLOT, [ORIGIN, R1], ver=2)
    for seq in range(3):
        pkt = tcp_packet(CLIENT, ORIGIN.ip, kvs(op.GET, KEY, seq=seq))
        dp.send_expect(CLIENT.port, pkt, [(ORIGIN.port, routed(pkt, ORIGIN))])
    assert dp.hot_count(KEY)[1] == 3
    assert dp.reg("rr", SLOT) == 1


def test_tcp_message_fits_its_segment_at_every_data_offset(dp: Dataplane) -> None:
    # KvsCheck's TcpFitsTable (shared/parser.p4): one constant row per data offset 5 .. 15. A Get
    # that fills its segment exactly is a message (counted), one whose vlen claims a byte more
    # than the segment holds is not (forwarded as plain IP, not counted).
    op = proto().op
    dp.make_hot(KEY, SLOT, [ORIGIN, R1])
    dp.make_valid(SLOT, [ORIGIN, R1], ver=2)
    for words in range(11):
        options = [("NOP", None)] * (4 * words)
        exact = tcp_packet(CLIENT, ORIGIN.ip, kvs(op.GET, KEY, seq=words), options=options)
        short = tcp_packet(CLIENT, ORIGIN.ip, kvs(op.GET, KEY, vlen=1), options=options)
        assert Ether(bytes(exact))[TCP].dataofs == 5 + words
        for pkt in (exact, short):
            dp.send_expect(CLIENT.port, pkt, [(ORIGIN.port, routed(pkt, ORIGIN))])
        assert dp.hot_count(KEY)[1] == words + 1, words
