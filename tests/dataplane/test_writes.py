"""Rule 1: a write of a hot key takes a new version (global_ver, slot_ver), is stamped with
(epoch, version), goes to the origin and, through its multicast group, to every replica as an
UPDATE/UPDATE_DEL with the replica's addresses and fresh checksums; the replicas stop serving."""

from __future__ import annotations

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


def test_hot_set_stamped_and_multicast(dp: Dataplane) -> None:
    op = proto().op
    dp.make_hot(KEY, SLOT, [ORIGIN, R1, R2])
    dp.make_valid(SLOT, [ORIGIN, R1, R2], ver=5)
    pkt = udp_packet(CLIENT, ORIGIN.ip, kvs(op.SET, KEY, VALUE, seq=42))
    stamped = kvs(op.SET, KEY, VALUE, seq=42, epoch=EPOCH, ver=6)
    update = kvs(op.UPDATE, KEY, VALUE, seq=42, epoch=EPOCH, ver=6)
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
                with_kvs(routed(pkt, ORIGIN), kvs(op.DEL, KEY, seq=9, epoch=EPOCH, ver=1)),
            ),
            (
                R2.port,
                with_kvs(
                    routed(pkt, R2, redirect=True),
                    kvs(op.UPDATE_DEL, KEY, seq=9, epoch=EPOCH, ver=1),
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
        want = with_kvs(routed(pkt, server), kvs(op.SET, key, b"v", seq=i, epoch=EPOCH, ver=i + 1))
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
                with_kvs(routed(pkt, ORIGIN), kvs(op.SET, KEY, VALUE, epoch=EPOCH, ver=1)),
            ),
            (
                R1.port,
                with_kvs(
                    routed(pkt, R1, redirect=True), kvs(op.UPDATE, KEY, VALUE, epoch=EPOCH, ver=1)
                ),
            ),
        ],
    )
