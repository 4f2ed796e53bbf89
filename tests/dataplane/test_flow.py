"""The consistency rules working together, the way agents drive them (docs/protocol.md): a key
becomes hot without a write (SYNC, SYNC_DONE, PUSH, CONFIRM), replicas start serving, a write
invalidates them at once, and they serve again only after the origin's reply and their confirms."""

from __future__ import annotations

from scapy.layers.inet import UDP
from scapy.layers.l2 import Ether
from scapy.packet import Packet

from .base import (
    CLIENT,
    EPOCH,
    SERVERS,
    SWITCH_IP,
    Dataplane,
    Host,
    kvs,
    proto,
    routed,
    udp_packet,
)

KEY = "flow-key"
SLOT = 11
ORIGIN, R1, R2 = SERVERS[0], SERVERS[1], SERVERS[2]


def _to_switch(sender: Host, message: bytes) -> Packet:
    return udp_packet(sender, SWITCH_IP, message, sport=proto().kvs_port)


def _gets(dp: Dataplane, first_seq: int, count: int) -> list[int]:
    """Ports a burst of Gets (sent to the origin) came out of."""
    ports = []
    for seq in range(first_seq, first_seq + count):
        out = dp.send(CLIENT.port, udp_packet(CLIENT, ORIGIN.ip, kvs(proto().op.GET, KEY, seq=seq)))
        assert len(out) == 1
        ports.append(out[0][0])
    return ports


def _r1_replies(dp: Dataplane, seq: int, delivered: dict[int, bool]) -> None:
    """R1's read replies, one per version: each reaches the client or is dropped (rule 6)."""
    for ver, passes in delivered.items():
        got = udp_packet(
            R1,
            CLIENT.ip,
            kvs(proto().op.GET_REPLY, KEY, b"v", seq=seq, epoch=EPOCH, ver=ver),
            sport=proto().kvs_port,
            dport=40000,
        )
        dp.send_expect(R1.port, got, [(CLIENT.port, routed(got, CLIENT))] if passes else [])


def test_sync_push_confirm_write_cycle(dp: Dataplane) -> None:
    op = proto().op
    dp.make_hot(KEY, SLOT, [ORIGIN, R1, R2])
    assert set(_gets(dp, 0, 3)) == {ORIGIN.port}  # never written: origin only

    # The origin asks for a version (SYNC), records it (SYNC_DONE), pushes; replicas confirm.
    out = dp.send(ORIGIN.port, _to_switch(ORIGIN, kvs(op.SYNC, KEY)))
    assert [port for port, _ in out] == [ORIGIN.port]
    answer = Ether(out[0][1])
    # The UDP payload, whatever layer Scapy decodes it as (kvswitch.scapy_kvs may be bound).
    ver = int.from_bytes(bytes(answer[UDP].payload)[16:20], "big")
    assert ver == 1
    dp.send_expect(
        ORIGIN.port, _to_switch(ORIGIN, kvs(op.SYNC_DONE, KEY, epoch=EPOCH, ver=ver)), []
    )
    push = udp_packet(ORIGIN, R1.ip, kvs(op.PUSH, KEY, b"v1", epoch=EPOCH, ver=ver))
    dp.send_expect(ORIGIN.port, push, [(R1.port, routed(push, R1))])
    dp.send_expect(R1.port, _to_switch(R1, kvs(op.CONFIRM, KEY, epoch=EPOCH, ver=ver)), [])
    # rr is at ordinal 0 again after 3 Gets: origin, R1, origin (R2 has not confirmed).
    assert _gets(dp, 10, 3) == [ORIGIN.port, R1.port, ORIGIN.port]
    dp.send_expect(R2.port, _to_switch(R2, kvs(op.CONFIRM, KEY, epoch=EPOCH, ver=ver)), [])
    assert _gets(dp, 20, 3) == [ORIGIN.port, R1.port, R2.port]

    # A write: version 2, copies to R1 and R2; while it is in flight the read set (holders of
    # version 1, the latest completed) keeps serving.
    write = udp_packet(CLIENT, ORIGIN.ip, kvs(op.SET, KEY, b"v2", seq=99))
    assert sorted(port for port, _ in dp.send(CLIENT.port, write)) == [1, 2, 3]
    assert _gets(dp, 30, 3) == [ORIGIN.port, R1.port, R2.port]
    # A late duplicate confirm of version 1 changes nothing.
    dp.send_expect(R1.port, _to_switch(R1, kvs(op.CONFIRM, KEY, epoch=EPOCH, ver=1)), [])
    # R1 confirms 2 before the origin replies; a read reply of R1 carrying 2 (the write is still
    # in flight) is dropped (rule 6), one carrying 1 reaches the client.
    dp.send_expect(R1.port, _to_switch(R1, kvs(op.CONFIRM, KEY, epoch=EPOCH, ver=2)), [])
    _r1_replies(dp, 7, {2: False, 1: True})
    # The origin reported 2: the write completed; R2 (still at 1) leaves the read set.
    reply = udp_packet(
        ORIGIN,
        CLIENT.ip,
        kvs(op.SET_REPLY, KEY, seq=99, epoch=EPOCH, ver=2),
        sport=proto().kvs_port,
        dport=40000,
    )
    dp.send_expect(ORIGIN.port, reply, [(CLIENT.port, routed(reply, CLIENT))])
    # Now a replica's read reply passes only at exactly 2 (rule 6): one carrying 1 (a Get routed
    # before the write completed) is dropped, as a version below origin_ver may be one the origin
    # never held (a repeat's copy, docs/protocol.md "Agent rules").
    _r1_replies(dp, 8, {1: False, 2: True})
    assert _gets(dp, 50, 3) == [ORIGIN.port, R1.port, ORIGIN.port]
    dp.send_expect(R2.port, _to_switch(R2, kvs(op.CONFIRM, KEY, epoch=EPOCH, ver=2)), [])
    assert _gets(dp, 60, 3) == [ORIGIN.port, R1.port, R2.port]
    assert (dp.reg("global_ver"), dp.reg("slot_ver", SLOT), dp.reg("origin_ver", SLOT)) == (2, 2, 2)
