"""Rule 1: a write of a hot key takes a new version (global_ver, slot_ver), is stamped with
(epoch, version), goes to the origin and, through its multicast group, to every replica as an
UPDATE/UPDATE_DEL with the replica's addresses and fresh checksums; the replicas stop serving."""

from __future__ import annotations

from scapy.layers.inet import UDP
from scapy.layers.l2 import Ether

from .base import (
    CLIENT,
    EPOCH,
    SERVERS,
    Dataplane,
    kvs,
    proto,
    routed,
    udp_packet,
    with_kvs,
)

KEY = "written-key"
SLOT = 5
ORIGIN, R1, R2 = SERVERS[0], SERVERS[1], SERVERS[2]
VALUE = b"new value bytes"
SETTLED = proto().f_settled  # no earlier write of the key on its way to the origin (rule 1)


def test_hot_set_stamped_and_multicast(dp: Dataplane) -> None:
    op = proto().op
    dp.make_hot(KEY, SLOT, [ORIGIN, R1, R2])
    dp.make_valid(SLOT, [ORIGIN, R1, R2], ver=5)
    pkt = udp_packet(CLIENT, ORIGIN.ip, kvs(op.SET, KEY, VALUE, seq=42))
    # no write on its way to the origin (slot_ver 5 <= origin_ver 5): settled, copies too
    settled = proto().f_settled
    stamped = kvs(op.SET, KEY, VALUE, seq=42, epoch=EPOCH, ver=6, flags=settled)
    update = kvs(op.UPDATE, KEY, VALUE, seq=42, epoch=EPOCH, ver=6, flags=settled)
    dp.send_expect(
        CLIENT.port,
        pkt,
        [
            (ORIGIN.port, with_kvs(routed(pkt, ORIGIN), stamped)),
            (R1.port, with_kvs(routed(pkt, R1, redirect=True), update)),
            (R2.port, with_kvs(routed(pkt, R2, redirect=True), update)),
        ],
    )
    assert dp.reg("global_ver") == 6
    assert dp.reg("slot_ver", SLOT) == 6
    assert dp.reg("origin_ver", SLOT) == 5
    assert dp.hot_count(KEY)[1] == 1
    assert dp.sw.counter_read(dp.counter("hotkey_writes"), SLOT)[1] == 1
    # Replicas confirmed 5, the latest completed version; 6 is in flight: Gets keep spreading.
    for seq, holder in enumerate([ORIGIN, R1, R2]):
        get = udp_packet(CLIENT, ORIGIN.ip, kvs(op.GET, KEY, seq=100 + seq))
        dp.send_expect(
            CLIENT.port, get, [(holder.port, routed(get, holder, redirect=holder != ORIGIN))]
        )


def test_write_not_addressed_to_the_origin_takes_no_version(dp: Dataplane) -> None:
    # A client whose ring names another server for a hot key (it has not learnt the newer ring,
    # docs/protocol.md "Membership"), or a forged write: it goes where it was addressed, unstamped
    # and without copies, so the server answers MOVED and nothing changes. Stamped and copied, it
    # left the replicas with a version the origin never got: rule 6 then dropped their replies
    # until the next write.
    op = proto().op
    dp.make_hot(KEY, SLOT, [ORIGIN, R1, R2])
    dp.make_valid(SLOT, [ORIGIN, R1, R2], ver=5)
    before = [dp.reg("global_ver"), dp.reg("slot_ver", SLOT), dp.reg("origin_ver", SLOT)]
    for seq, (code, target) in enumerate(((op.SET, R1), (op.DEL, R2), (op.SET, SERVERS[3]))):
        pkt = udp_packet(
            CLIENT, target.ip, kvs(code, KEY, VALUE if code == op.SET else b"", seq=seq)
        )
        dp.send_expect(CLIENT.port, pkt, [(target.port, routed(pkt, target))])
    assert [dp.reg("global_ver"), dp.reg("slot_ver", SLOT), dp.reg("origin_ver", SLOT)] == before
    for seq, holder in enumerate([ORIGIN, R1, R2]):
        get = udp_packet(CLIENT, ORIGIN.ip, kvs(op.GET, KEY, seq=100 + seq))
        dp.send_expect(
            CLIENT.port, get, [(holder.port, routed(get, holder, redirect=holder != ORIGIN))]
        )


def test_hot_delete_becomes_update_del(dp: Dataplane) -> None:
    op = proto().op
    dp.make_hot(KEY, SLOT, [ORIGIN, R2])
    pkt = udp_packet(CLIENT, ORIGIN.ip, kvs(op.DEL, KEY, seq=9))
    dp.send_expect(
        CLIENT.port,
        pkt,
        [
            (
                ORIGIN.port,
                with_kvs(
                    routed(pkt, ORIGIN), kvs(op.DEL, KEY, seq=9, epoch=EPOCH, ver=1, flags=SETTLED)
                ),
            ),
            (
                R2.port,
                with_kvs(
                    routed(pkt, R2, redirect=True),
                    kvs(op.UPDATE_DEL, KEY, seq=9, epoch=EPOCH, ver=1, flags=SETTLED),
                ),
            ),
        ],
    )
    assert dp.reg("global_ver") == 1
    assert dp.reg("slot_ver", SLOT) == 1


def test_versions_increase_across_keys(dp: Dataplane) -> None:
    op = proto().op
    dp.make_hot("k-a", 1, [ORIGIN])
    dp.make_hot("k-b", 2, [R1])
    for i, (key, server) in enumerate([("k-a", ORIGIN), ("k-b", R1), ("k-a", ORIGIN)]):
        pkt = udp_packet(CLIENT, server.ip, kvs(op.SET, key, b"v", seq=i))
        # the second write of k-a is stamped while its first is on its way: not settled
        flags = SETTLED if i < 2 else 0
        stamped = kvs(op.SET, key, b"v", seq=i, epoch=EPOCH, ver=i + 1, flags=flags)
        want = with_kvs(routed(pkt, server), stamped)
        dp.send_expect(CLIENT.port, pkt, [(server.port, want)])
    assert dp.reg("slot_ver", 1) == 3
    assert dp.reg("slot_ver", 2) == 2
    assert dp.reg("global_ver") == 3


def test_cold_set_not_versioned(dp: Dataplane) -> None:
    op = proto().op
    pkt = udp_packet(CLIENT, R1.ip, kvs(op.SET, "cold", VALUE))
    dp.send_expect(CLIENT.port, pkt, [(R1.port, routed(pkt, R1))])
    assert dp.reg("global_ver") == 0


def test_copy_to_unknown_port_dropped(dp: Dataplane) -> None:
    # A group member without a PorttoserverTable entry must not receive an unchanged SET.
    op = proto().op
    dp.make_hot(KEY, SLOT, [ORIGIN, R1])
    dp.sw.mc_group_set(SLOT + 1, [(ORIGIN.port, 0), (R1.port, 1), (7, 2)])
    pkt = udp_packet(CLIENT, ORIGIN.ip, kvs(op.SET, KEY, VALUE))
    dp.send_expect(
        CLIENT.port,
        pkt,
        [
            (
                ORIGIN.port,
                with_kvs(
                    routed(pkt, ORIGIN), kvs(op.SET, KEY, VALUE, epoch=EPOCH, ver=1, flags=SETTLED)
                ),
            ),
            (
                R1.port,
                with_kvs(
                    routed(pkt, R1, redirect=True),
                    kvs(op.UPDATE, KEY, VALUE, epoch=EPOCH, ver=1, flags=SETTLED),
                ),
            ),
        ],
    )


def _write_flags(dp: Dataplane, seq: int) -> tuple[int, int]:
    """A hot Set of KEY by CLIENT: the (ver, flags) it reaches the origin with; its copy to R1
    carries the same."""
    op = proto().op
    pkt = udp_packet(CLIENT, ORIGIN.ip, kvs(op.SET, KEY, VALUE, seq=seq))
    out = dp.send(CLIENT.port, pkt)
    assert sorted(port for port, _ in out) == [ORIGIN.port, R1.port]
    # the UDP payload as bytes (with kvswitch.scapy_kvs imported by another test, Scapy parses
    # a KVS layer there and Raw is only the value)
    heads = {port: bytes(Ether(data)[UDP].payload) for port, data in out}
    ver, flags = (int.from_bytes(heads[ORIGIN.port][a:b], "big") for a, b in ((16, 20), (14, 16)))
    assert heads[R1.port][14:20] == heads[ORIGIN.port][14:20]  # flags, ver: the copy's the same
    return ver, flags


def test_settled_only_while_no_write_is_on_its_way(dp: Dataplane) -> None:
    # F_SETTLED (rule 1): the write was stamped while every earlier write of the key had been
    # reported by the origin (slot_ver <= origin_ver). Only such a repeat of a request id may move
    # the first application's value to the repeat's version (docs/protocol.md "Agent rules"): a
    # write stamped in between could be visible at a replica (explorer, resend-overtaken).
    op = proto().op
    dp.make_hot(KEY, SLOT, [ORIGIN, R1])
    dp.make_valid(SLOT, [ORIGIN, R1], ver=5)
    assert _write_flags(dp, 1) == (6, SETTLED)  # nothing on its way
    assert _write_flags(dp, 2) == (7, 0)  # 6 is on its way: a second writer
    assert _write_flags(dp, 1) == (8, 0)  # a resend of seq 1 while 6 and 7 are on their way
    reply = udp_packet(
        ORIGIN, CLIENT.ip, kvs(op.SET_REPLY, KEY, seq=1, epoch=EPOCH, ver=7), sport=proto().kvs_port
    )
    dp.send_expect(ORIGIN.port, reply, [(CLIENT.port, routed(reply, CLIENT))])
    assert _write_flags(dp, 3) == (9, 0)  # the origin reported 7, but 8 is still on its way
    reply = udp_packet(
        ORIGIN, CLIENT.ip, kvs(op.SET_REPLY, KEY, seq=1, epoch=EPOCH, ver=9), sport=proto().kvs_port
    )
    dp.send_expect(ORIGIN.port, reply, [(CLIENT.port, routed(reply, CLIENT))])
    assert _write_flags(dp, 1) == (10, SETTLED)  # every write before it was reported
    # a report from another server (a replica) does not settle anything
    assert _write_flags(dp, 4) == (11, 0)
    fake = udp_packet(
        R1, CLIENT.ip, kvs(op.SET_REPLY, KEY, seq=4, epoch=EPOCH, ver=11), sport=proto().kvs_port
    )
    dp.send(R1.port, fake)
    assert _write_flags(dp, 5) == (12, 0)
    assert dp.reg("origin_ver", SLOT) == 9


def test_client_cannot_forge_settled(dp: Dataplane) -> None:
    # Rule V clears F_SETTLED on every UDP request: a cold write reaches its origin without it, a
    # hot one carries it only if the switch sets it.
    op = proto().op
    forged = kvs(op.SET, "cold", VALUE, flags=SETTLED)
    pkt = udp_packet(CLIENT, R1.ip, forged)
    dp.send_expect(
        CLIENT.port, pkt, [(R1.port, with_kvs(routed(pkt, R1), kvs(op.SET, "cold", VALUE)))]
    )
    dp.make_hot(KEY, SLOT, [ORIGIN, R1])
    dp.make_valid(SLOT, [ORIGIN, R1], ver=5)
    assert _write_flags(dp, 1) == (6, SETTLED)
    pkt = udp_packet(CLIENT, ORIGIN.ip, kvs(op.SET, KEY, VALUE, seq=2, flags=SETTLED))
    out = dp.send(CLIENT.port, pkt)
    assert {bytes(Ether(data)[UDP].payload)[14:16] for _, data in out} == {b"\x00\x00"}
