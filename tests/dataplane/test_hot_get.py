"""Rule 4: a hot Get goes round-robin over the key's holders (ordinal 0 = origin), redirected to a
replica only when it confirmed the version the origin acknowledged; otherwise to the origin."""

from __future__ import annotations

from scapy.layers.inet import IP, IPOption_Router_Alert
from scapy.packet import Packet

from .base import (
    CLIENT,
    MAX_SERVERS,
    SERVERS,
    Dataplane,
    Host,
    fresh,
    kvs,
    proto,
    routed,
    udp_packet,
)

KEY = "hot-key-1"
SLOT = 60  # valid_ver part 3 (base.py)
ORIGIN, R1, R2 = SERVERS[0], SERVERS[1], SERVERS[2]


def _get(seq: int) -> Packet:
    return udp_packet(CLIENT, ORIGIN.ip, kvs(proto().op.GET, KEY, seq=seq))


def _send_gets(dp: Dataplane, first_seq: int, holders: list[Host]) -> None:
    for i, holder in enumerate(holders):
        pkt = _get(first_seq + i)
        want = routed(pkt, holder, redirect=holder != ORIGIN)
        dp.send_expect(CLIENT.port, pkt, [(holder.port, want)])


def test_round_robin_over_valid_replicas(dp: Dataplane) -> None:
    dp.make_hot(KEY, SLOT, [ORIGIN, R1, R2])
    dp.make_valid(SLOT, [ORIGIN, R1, R2], ver=5)
    _send_gets(dp, 1, [ORIGIN, R1, R2, ORIGIN, R1, R2, ORIGIN])
    assert dp.reg("rr", SLOT) == 1
    packets = dp.hot_count(KEY)[1]
    assert packets == 7
    assert dp.hot_count(KEY)[0] == 7 * len(_get(1))


def test_round_robin_is_exact_and_a_stale_turn_costs_one(dp: Dataplane) -> None:
    """Every holder gets 1/n of the turns, and 1/(n-1) each replica while the origin is down (its
    turns rotate over ordinals 1 .. n-1). A turn beyond the last one (what a shrunk n leaves in
    rr) counts as turn 0 and restarts the rotation: one extra turn for the first ordinal, the
    price of the two comparisons Tofino's stateful ALU has (features/replicas_tna.p4)."""
    r3 = SERVERS[3]
    holders = [ORIGIN, R1, R2, r3]
    dp.make_hot(KEY, SLOT, holders)
    dp.make_valid(SLOT, holders, ver=5)
    _send_gets(dp, 1, holders * 3)
    assert dp.reg("rr", SLOT) == 0
    dp.sw.register_write(dp.register("rr"), SLOT, 7)  # as after n shrank from 8 to 4
    _send_gets(dp, 20, [ORIGIN, *holders, ORIGIN])
    assert dp.reg("rr", SLOT) == 1
    dp.set_down(ORIGIN)
    dp.sw.register_write(dp.register("rr"), SLOT, 0)
    for seq, holder in enumerate([R1, R2, r3] * 3):
        pkt = _get(40 + seq)
        dp.send_expect(CLIENT.port, pkt, [(holder.port, routed(pkt, holder, redirect=True))])
    assert dp.reg("rr", SLOT) == 0


def test_invalid_replica_falls_back_to_origin(dp: Dataplane) -> None:
    dp.make_hot(KEY, SLOT, [ORIGIN, R1, R2])
    dp.make_valid(SLOT, [ORIGIN, R1, R2], ver=5)
    # R2 confirmed an older version only: its turns go to the origin.
    dp.set_valid_ver(SLOT * MAX_SERVERS + 2, 4)
    _send_gets(dp, 1, [ORIGIN, R1, ORIGIN, ORIGIN, R1, ORIGIN])
    assert dp.reg("rr", SLOT) == 0


def test_read_set_follows_the_completed_version(dp: Dataplane) -> None:
    dp.make_hot(KEY, SLOT, [ORIGIN, R1])
    dp.make_valid(SLOT, [ORIGIN, R1], ver=5)
    # A newer write (6) crossed the switch; the origin has not reported it, R1 holds 5, the latest
    # completed version: a write in flight is no doubt, R1 keeps its turns.
    dp.sw.register_write(dp.register("slot_ver"), SLOT, 6)
    _send_gets(dp, 1, [ORIGIN, R1, ORIGIN])
    # R1 confirmed 6 (it got the UPDATE) before the origin reported it: still in the read set.
    dp.set_valid_ver(SLOT * MAX_SERVERS + 1, 6)
    _send_gets(dp, 4, [R1, ORIGIN])
    # The origin reported 6 (the write completed) and R1 has only confirmed 5: the origin only.
    dp.set_valid_ver(SLOT * MAX_SERVERS + 1, 5)
    dp.sw.register_write(dp.register("origin_ver"), SLOT, 6)
    _send_gets(dp, 6, [ORIGIN, ORIGIN])
    # R1 confirms 6: it serves its turn again (7 Gets so far: this one is ordinal 1).
    dp.set_valid_ver(SLOT * MAX_SERVERS + 1, 6)
    _send_gets(dp, 8, [R1, ORIGIN])


def test_never_written_key_goes_to_origin(dp: Dataplane) -> None:
    # slot_ver 0 (no version yet): zero-filled origin_ver/valid_ver must not count as "confirmed".
    dp.make_hot(KEY, SLOT, [ORIGIN, R1, R2])
    _send_gets(dp, 1, [ORIGIN, ORIGIN, ORIGIN])


def test_single_holder_key_stays_on_origin(dp: Dataplane) -> None:
    dp.make_hot(KEY, SLOT, [ORIGIN])
    dp.make_valid(SLOT, [ORIGIN], ver=3)
    _send_gets(dp, 1, [ORIGIN, ORIGIN])
    assert dp.hot_count(KEY)[1] == 2


def test_cold_get_untouched(dp: Dataplane) -> None:
    dp.make_hot(KEY, SLOT, [ORIGIN, R1])
    dp.make_valid(SLOT, [ORIGIN, R1], ver=5)
    pkt = udp_packet(CLIENT, R2.ip, kvs(proto().op.GET, "cold-key"))
    dp.send_expect(CLIENT.port, pkt, [(R2.port, routed(pkt, R2))])
    assert dp.hot_count(KEY) == (0, 0)
    assert dp.reg("rr", SLOT) == 0


def test_hot_get_with_ipv4_options_dropped(dp: Dataplane) -> None:
    # No build processes IPv4 options (test_forwarding.py): a hot Get with options is dropped
    # before it takes a turn.
    dp.make_hot(KEY, SLOT, [ORIGIN, R1])
    dp.make_valid(SLOT, [ORIGIN, R1], ver=5)
    pkt = _get(0)
    pkt[IP].options = [IPOption_Router_Alert()]
    pkt = fresh(pkt)
    assert pkt[IP].ihl == 6
    dp.send_expect(CLIENT.port, pkt, [])
    assert dp.reg("rr", SLOT) == 0
    assert dp.hot_count(KEY) == (0, 0)


def test_membership_answers_of_a_non_origin_pass(dp: Dataplane) -> None:
    # A client whose ring names R2 for a hot key of ORIGIN (it has not learnt the newer ring) gets
    # R2's MOVED or RETRY (epoch and ver 0, no read result): rule 6 lets them through, while R2's
    # miss or value without a current version is still dropped (docs/protocol.md rule 6).
    op, status = proto().op, proto().status
    dp.make_hot(KEY, SLOT, [ORIGIN, R1])
    dp.make_valid(SLOT, [ORIGIN, R1], ver=5)
    answers = [
        (status.MOVED, (7).to_bytes(4, "big"), True),
        (status.RETRY, b"", True),
        (status.NOT_FOUND, b"", False),
        (status.OK, b"old", False),
    ]
    for seq, (code, value, delivered) in enumerate(answers):
        for sender in (R2, R1):
            reply = udp_packet(
                sender,
                CLIENT.ip,
                kvs(op.GET_REPLY, KEY, value, status=code, seq=seq),
                sport=proto().kvs_port,
                dport=40000,
            )
            want = [(CLIENT.port, routed(reply, CLIENT))] if delivered else []
            dp.send_expect(sender.port, reply, want)
