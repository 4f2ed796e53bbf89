"""bench/replica_drops.py's classes of dropped replica replies, on a hand-made packet sequence
(what a ``tcpdump -i any`` capture of the switch's ports holds: each message entering the switch
and, unless dropped, leaving it)."""

from __future__ import annotations

from kvswitch import protocol as p
from kvswitch.bench.replica_drops import Packet, classify

ORIGIN, REPLICA, CLIENT = "10.0.0.1", "10.0.0.2", "10.0.1.1"
KEY = p.pad_key(b"k")
EPOCH = 2


def test_each_dropped_reply_gets_its_class() -> None:
    t = [0.0]
    pkts: list[Packet] = []

    def add(out: bool, src: str, dst: str, op: int, seq: int = 0, ver: int = 0, **kw: int) -> None:
        t[0] += 0.001
        msg = p.Message(op, KEY, cid=7, seq=seq, epoch=kw.pop("epoch", EPOCH), ver=ver, **kw)
        pkts.append(Packet(t[0], out, src, dst, msg))

    def report(ver: int) -> None:  # the origin's write reply, entering then leaving
        add(False, ORIGIN, CLIENT, p.Op.SET_REPLY, seq=100 + ver, ver=ver)
        add(True, ORIGIN, CLIENT, p.Op.SET_REPLY, seq=100 + ver, ver=ver)

    def redirected(seq: int) -> None:
        add(False, CLIENT, ORIGIN, p.Op.GET, seq=seq, epoch=0)
        add(True, CLIENT, REPLICA, p.Op.GET, seq=seq, epoch=0, flags=p.F_REDIRECT)

    def answer(seq: int, ver: int, passes: bool, **kw: int) -> None:
        add(False, REPLICA, CLIENT, p.Op.GET_REPLY, seq=seq, ver=ver, **kw)
        if passes:
            add(True, REPLICA, CLIENT, p.Op.GET_REPLY, seq=seq, ver=ver, **kw)

    report(5)
    redirected(1)
    answer(1, 5, passes=True)
    redirected(2)  # at origin_ver 5; the origin reports 6 before the replica's answer
    report(6)
    answer(2, 5, passes=False)
    add(False, CLIENT, ORIGIN, p.Op.GET, seq=2, epoch=0)  # the client's resend
    redirected(3)
    answer(3, 7, passes=False)  # a write the origin has not reported
    redirected(4)
    answer(4, 4, passes=False)  # neither origin_ver nor the redirection's
    redirected(5)
    answer(5, 0, passes=False)  # a miss
    redirected(6)
    answer(6, 0, passes=True, status=p.Status.MOVED)  # no read result: not counted
    add(True, REPLICA, CLIENT, p.Op.GET_REPLY, seq=9, ver=6)  # its entry not captured

    result = classify(pkts, {KEY: ORIGIN}, {ORIGIN, REPLICA})
    assert result["by_kind"] == {
        "passed": 1,
        "overtaken": 1,
        "ahead": 1,
        "older": 1,
        "not current": 1,
    }
    assert result["resent_after"] == {
        "passed": 0,
        "overtaken": 1,
        "ahead": 0,
        "older": 0,
        "not current": 0,
    }
    assert result["replica_replies"] == 5 and result["left_but_not_seen_entering"] == 1
