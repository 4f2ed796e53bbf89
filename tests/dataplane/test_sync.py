"""Rules 2 and 5: the origin's SYNC is stamped with a fresh version and reflected to it; its
SYNC_DONE and its OK replies set origin_ver only when they carry the slot's current version and come
from the key's origin on its own port. SYNC_DONE is consumed; replies go on to the client."""

from __future__ import annotations

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from .base import (
    CLIENT,
    EPOCH,
    SERVERS,
    SWITCH_IP,
    SWITCH_MAC,
    Dataplane,
    Host,
    fresh,
    kvs,
    proto,
    routed,
    udp_packet,
    with_kvs,
)

KEY = "synced-key"
SLOT = 25  # valid_ver part 1 (base.py)
ORIGIN, R1 = SERVERS[0], SERVERS[1]


def _sync(sender: Host, key: str = KEY) -> bytes:
    return bytes(udp_packet(sender, SWITCH_IP, kvs(proto().op.SYNC, key, seq=77), sport=41000))


def test_sync_from_origin_reflected_stamped(dp: Dataplane) -> None:
    dp.make_hot(KEY, SLOT, [ORIGIN, R1])
    dp.sw.register_write(dp.register("global_ver"), 0, 41)
    pkt = Ether(_sync(ORIGIN))
    want = pkt.copy()
    want[Ether].src, want[Ether].dst = SWITCH_MAC, ORIGIN.mac
    want[IP].src, want[IP].dst, want[IP].ttl = SWITCH_IP, ORIGIN.ip, 64
    want[UDP].sport, want[UDP].dport = proto().kvs_port, 41000
    want = with_kvs(fresh(want), kvs(proto().op.SYNC, KEY, seq=77, epoch=EPOCH, ver=42))
    dp.send_expect(ORIGIN.port, pkt, [(ORIGIN.port, want)])
    assert dp.reg("global_ver") == 42
    assert dp.reg("slot_ver", SLOT) == 42
    assert dp.reg("origin_ver", SLOT) == 0


@pytest.mark.parametrize(
    ("case", "port", "sender"),
    [
        ("replica, not origin", SERVERS[1].port, SERVERS[1]),
        ("origin address on a wrong port", SERVERS[1].port, SERVERS[0]),
        ("client", CLIENT.port, CLIENT),
    ],
)
def test_sync_not_from_origin_dropped(dp: Dataplane, case: str, port: int, sender: Host) -> None:
    dp.make_hot(KEY, SLOT, [ORIGIN, R1])
    before = dp.snapshot()
    dp.send_expect(port, _sync(sender), [])
    assert dp.snapshot() == before, case


def test_sync_of_cold_key_dropped(dp: Dataplane) -> None:
    before = dp.snapshot()
    dp.send_expect(ORIGIN.port, _sync(ORIGIN, key="cold"), [])
    assert dp.snapshot() == before


def _setup_written(dp: Dataplane, ver: int) -> None:
    dp.make_hot(KEY, SLOT, [ORIGIN, R1])
    dp.sw.register_write(dp.register("global_ver"), 0, ver)
    dp.sw.register_write(dp.register("slot_ver"), SLOT, ver)


def test_sync_done_sets_origin_ver_and_is_consumed(dp: Dataplane) -> None:
    _setup_written(dp, 12)
    done = udp_packet(ORIGIN, SWITCH_IP, kvs(proto().op.SYNC_DONE, KEY, epoch=EPOCH, ver=12))
    dp.send_expect(ORIGIN.port, done, [])
    assert dp.reg("origin_ver", SLOT) == 12


def test_sync_while_a_write_is_on_its_way_reflected_unstamped(dp: Dataplane) -> None:
    """A write stamped 12 has not been acknowledged by the origin (origin_ver 11): a SYNC stamped now
    could overtake it and give the old value version 13. It comes back with version 0 instead."""
    _setup_written(dp, 12)
    dp.sw.register_write(dp.register("origin_ver"), SLOT, 11)
    pkt = Ether(_sync(ORIGIN))
    want = pkt.copy()
    want[Ether].src, want[Ether].dst = SWITCH_MAC, ORIGIN.mac
    want[IP].src, want[IP].dst, want[IP].ttl = SWITCH_IP, ORIGIN.ip, 64
    want[UDP].sport, want[UDP].dport = proto().kvs_port, 41000
    want = with_kvs(fresh(want), kvs(proto().op.SYNC, KEY, seq=77, epoch=0, ver=0))
    before = dp.snapshot()
    dp.send_expect(ORIGIN.port, pkt, [(ORIGIN.port, want)])
    # global_ver is taken before the stamp is decided (one access per register): a number is
    # skipped, nothing else changes
    after = dp.snapshot()
    gv = dp.register("global_ver")
    assert after[gv] == [before[gv][0] + 1]
    assert {k: v for k, v in after.items() if k != gv} == {
        k: v for k, v in before.items() if k != gv
    }


@pytest.mark.parametrize(
    ("op_name", "status"),
    [("SET_REPLY", "OK"), ("DEL_REPLY", "OK"), ("SET_REPLY", "STALE"), ("DEL_REPLY", "STALE")],
)
def test_current_origin_reply_sets_origin_ver(dp: Dataplane, op_name: str, status: str) -> None:
    # a STALE reply counts too: a newer write reached the origin first, and the reply carries the
    # version the origin holds
    _setup_written(dp, 12)
    reply = udp_packet(
        ORIGIN,
        CLIENT.ip,
        kvs(proto().op[op_name], KEY, epoch=EPOCH, ver=12, status=proto().status[status]),
        sport=proto().kvs_port,
        dport=40000,
    )
    dp.send_expect(ORIGIN.port, reply, [(CLIENT.port, routed(reply, CLIENT))])
    assert dp.reg("origin_ver", SLOT) == 12


@pytest.mark.parametrize(
    ("case", "port", "sender", "ver", "status"),
    [
        ("older than what the origin reported", SERVERS[0].port, SERVERS[0], 11, "OK"),
        ("epoch of another switch incarnation", SERVERS[0].port, SERVERS[0], 12, "EPOCH-1"),
        ("a failed write", SERVERS[0].port, SERVERS[0], 12, "SERVER_ERROR"),
        ("replica, not origin", SERVERS[1].port, SERVERS[1], 12, "OK"),
        ("origin address on a wrong port", SERVERS[1].port, SERVERS[0], 12, "OK"),
    ],
)
def test_bad_origin_reply_ignored(
    dp: Dataplane, case: str, port: int, sender: Host, ver: int, status: str
) -> None:
    _setup_written(dp, 12)
    dp.sw.register_write(dp.register("origin_ver"), SLOT, 11)
    epoch = EPOCH - 1 if status == "EPOCH-1" else EPOCH
    code = proto().status["OK" if status == "EPOCH-1" else status]
    msg = kvs(proto().op.SET_REPLY, KEY, epoch=epoch, ver=ver, status=code)
    reply = udp_packet(sender, CLIENT.ip, msg, sport=proto().kvs_port, dport=40000)
    before = dp.snapshot()
    # An address arriving on another server's port is spoofed: dropped (docs/protocol.md "Trust").
    out = [] if port != sender.port else [(CLIENT.port, routed(reply, CLIENT))]
    dp.send_expect(port, reply, out)
    assert dp.snapshot() == before, case


def test_bad_sync_done_consumed(dp: Dataplane) -> None:
    _setup_written(dp, 12)
    dp.sw.register_write(dp.register("origin_ver"), SLOT, 11)
    before = dp.snapshot()
    done = udp_packet(ORIGIN, SWITCH_IP, kvs(proto().op.SYNC_DONE, KEY, epoch=EPOCH, ver=11))
    dp.send_expect(ORIGIN.port, done, [])
    assert dp.snapshot() == before
