"""The write freeze of one key (docs/protocol.md F7, "Changing the writer map") on real agents,
each backend: the control channel's ``key_freeze``, ``key_export``, ``key_import`` and
``key_release``, with client writes over UDP as the spine delivers them (a rotated key's write
flagged F_REDIRECT to a holder that is not its origin)."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable, Iterator

import pytest

from kvswitch import protocol as p
from kvswitch.agent.backends import Backend
from kvswitch.agent.control import AgentControl, ControlError, KeyExport
from kvswitch.agent.core import RecentIds, make_result
from kvswitch.agent.server import AgentServer

KEY = p.pad_key(b"rotated")
OTHER = p.pad_key(b"other")


class Client:
    """A UDP socket sending as the switch delivers (versions and flags stamped)."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(3.0)

    def ask(self, agent: AgentServer, msg: p.Message) -> p.Message:
        self.sock.sendto(msg.encode(), ("127.0.0.1", agent.port))
        data, _ = self.sock.recvfrom(65535)
        return p.Message.decode(data)

    def send(self, agent: AgentServer, msg: p.Message) -> None:
        self.sock.sendto(msg.encode(), ("127.0.0.1", agent.port))


@pytest.fixture
def pair(
    backend_factory: Callable[[str], Backend],
    agent_factory: Callable[..., AgentServer],
    request: pytest.FixtureRequest,
) -> Iterator[tuple[AgentServer, AgentServer, AgentControl, AgentControl]]:
    kind = request.param
    a = agent_factory(backend_factory(kind), control_port=0)
    b = agent_factory(backend_factory(kind), control_port=0)
    ca, cb = AgentControl("127.0.0.1", a.control_port), AgentControl("127.0.0.1", b.control_port)
    yield a, b, ca, cb
    ca.close()
    cb.close()


BACKENDS = [
    "memory",
    pytest.param("memcached", marks=pytest.mark.backend),
    pytest.param("redis", marks=pytest.mark.backend),
]


def value(agent: AgentServer, key: bytes = KEY) -> tuple[bytes, int]:
    item = agent.core.backend.get(key)
    assert item is not None
    return item.value, item.ver


@pytest.mark.parametrize("pair", BACKENDS, indirect=True)
def test_freeze_export_import_release(pair) -> None:
    """Origin a took w1 (v5), holder b the rotated w2 (v6). Frozen at both: the key's writes
    answer RETRY and apply nothing (an UPDATE copy is dropped), its Gets and other keys' writes
    are served. Each exports its ids and item; imported into the other, the newer item wins
    and the ids merge; released, each answers the other's repeat with its first result
    (F_DUP), applying nothing a second time."""
    a, b, ca, cb = pair
    c = Client()
    w1 = p.Message(p.Op.SET, KEY, b"one", cid=7, seq=1, epoch=0x8001, ver=5)
    w2 = p.Message(p.Op.SET, KEY, b"two", cid=8, seq=1, epoch=0x8001, ver=6, flags=p.F_REDIRECT)
    assert c.ask(a, w1).status == p.Status.OK
    assert c.ask(b, w2).status == p.Status.OK
    assert ca.key_freeze(KEY) is False and ca.key_freeze(KEY) is True  # twice: already frozen
    assert cb.key_freeze(KEY) is False
    assert ca.key_frozen() == [KEY] and cb.key_frozen() == [KEY]  # what a new controller reads
    late = p.Message(p.Op.SET, KEY, b"late", cid=9, seq=1, epoch=0x8001, ver=7)
    r = c.ask(a, late)
    assert (r.op, r.status, r.ver) == (p.Op.SET_REPLY, p.Status.RETRY, 0)
    r = c.ask(b, p.Message(p.Op.DEL, KEY, cid=9, seq=2, epoch=0x8001, ver=8, flags=p.F_REDIRECT))
    assert (r.op, r.status) == (p.Op.DEL_REPLY, p.Status.RETRY)
    copy = p.Message(p.Op.UPDATE, KEY, b"copy", cid=9, seq=3, epoch=0x8001, ver=9)
    c.send(a, copy)
    got = c.ask(a, p.Message(p.Op.GET, KEY, cid=9, seq=4))  # Gets are served
    assert (got.status, got.value, got.ver) == (p.Status.OK, b"one", 5)
    assert c.ask(a, p.Message(p.Op.SET, OTHER, b"x", cid=9, seq=5)).status == p.Status.OK
    assert value(a) == (b"one", 5) and value(b) == (b"two", 6)
    ea, eb = ca.key_export(KEY), cb.key_export(KEY)
    assert [(r["cid"], r["seq"], r["ver"]) for r in ea.ids] == [(7, 1, 5)]
    assert [(r["cid"], r["seq"], r["ver"]) for r in eb.ids] == [(8, 1, 6)]
    assert ea.item is not None and (bytes.fromhex(ea.item["value_hex"]), ea.item["ver"]) == (
        b"one",
        5,
    )
    assert ca.key_import(KEY, eb) == (True, 1)  # b's newer item, b's id
    assert cb.key_import(KEY, ea) == (False, 1)  # a's older item is not stored, a's id is
    assert cb.key_import(KEY, ea) == (False, 0)  # again: nothing new
    assert value(a) == (b"two", 6) and value(b) == (b"two", 6)
    assert ca.key_release(KEY) is True and ca.key_release(KEY) is False
    assert cb.key_release(KEY) is True
    assert ca.key_frozen() == [] and cb.key_frozen() == []
    for agent, repeat in ((b, w1), (a, w2)):  # each id now known at the other holder
        r = c.ask(agent, repeat)
        assert r.flags & p.F_DUP and (r.status, r.ver) == (p.Status.OK, repeat.ver)
        assert value(agent) == (b"two", 6)
    assert c.ask(a, late).status == p.Status.OK  # released: served
    assert value(a) == (b"late", 7)


@pytest.mark.parametrize("pair", BACKENDS, indirect=True)
def test_bad_arguments_are_one_line_and_change_nothing(pair) -> None:
    a, _b, ca, _cb = pair
    c = Client()
    assert (
        c.ask(a, p.Message(p.Op.SET, KEY, b"one", cid=7, seq=1, epoch=1, ver=5)).status
        == p.Status.OK
    )
    good = {"ip": "127.0.0.1", "cid": 3, "seq": 4, "status": 0, "epoch": 1, "ver": 4}
    item = {"value_hex": b"new".hex(), "epoch": 1, "ver": 9, "live": True}
    for call in (
        lambda: ca.key_export(KEY),  # not frozen
        lambda: ca.key_import(KEY, KeyExport([good], item)),  # not frozen
        lambda: ca.request(cmd="key_freeze", key_hex="abcd"),  # not 16 bytes
    ):
        with pytest.raises(ControlError, match=r"not frozen|16 bytes") as err:
            call()
        assert "\n" not in str(err.value)
    ca.key_freeze(KEY)
    for bad in (
        KeyExport([good, {**good, "status": 999}], item),  # an unknown status
        KeyExport([good, {**good, "ip": "not an address"}], item),
        KeyExport([good, {**good, "cid": 0}], item),
        KeyExport([good, {**good, "seq": "4"}], item),
        KeyExport([good], {**item, "ver": 1 << 40}),
        KeyExport([good], {**item, "value_hex": "zz"}),
        KeyExport([good], {**item, "value_hex": "00" * (p.MAX_VALUE + 1)}),
        KeyExport("nope", item),  # type: ignore[arg-type]
    ):
        with pytest.raises(ControlError, match="refused key_import: bad request") as err:
            ca.key_import(KEY, bad)
        assert "\n" not in str(err.value)
    assert value(a) == (b"one", 5)
    assert ca.key_export(KEY).ids == [
        {"ip": "127.0.0.1", "cid": 7, "seq": 1, "status": 0, "epoch": 1, "ver": 5}
    ]
    assert ca.key_import(KEY, KeyExport([good], item)) == (True, 1)  # the good one applies
    assert value(a) == (b"new", 9)


@pytest.mark.parametrize("pair", ["memory"], indirect=True)
def test_an_export_longer_than_a_control_line_is_imported_whole(pair) -> None:
    """A key written often has more ids than one control line holds (1 MiB, about 10 000):
    ``key_import`` sends them in lines of IMPORT_CHUNK, the item with the last; every id is
    then known to the holder and the item stored. In one line the agent refuses it ("line too
    long"): the freeze fails and the key's map change is put off, period after period."""
    a, _b, ca, _cb = pair
    ids = [
        {"ip": "10.0.1.1", "cid": 1 + n // 1000, "seq": n % 1000, "status": 0}
        | {"epoch": 0x8001, "ver": 1 + n}
        for n in range(30_000)
    ]
    item = {"value_hex": b"newest".hex(), "epoch": 0x8001, "ver": 30_000, "live": True}
    line = json.dumps({"cmd": "key_import", "key_hex": KEY.hex(), "ids": ids, "item": item})
    assert len(line) > 1 << 20
    ca.key_freeze(KEY)
    assert ca.key_import(KEY, KeyExport(ids, item)) == (True, 30_000)
    assert value(a) == (b"newest", 30_000)
    held = {(r["cid"], r["seq"]) for r in ca.key_export(KEY).ids}
    assert held == {(r["cid"], r["seq"]) for r in ids}
    assert ca.key_import(KEY, KeyExport(ids, item)) == (False, 0)  # again: nothing new


def test_a_keys_ids_since_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """``of_key(key, since)``: the ids added since then, oldest first; an id added again counts
    from its new time."""
    now = [0.0]
    monkeypatch.setattr("kvswitch.agent.core.time.monotonic", lambda: now[0])
    ids = RecentIds()
    ok = make_result(0, 1, 1)
    for seq in range(4):
        now[0] = float(seq)
        ids.add(("h", 1), seq, ok, KEY)
        ids.add(("h", 2), seq, ok, OTHER)
    now[0] = 5.0
    ids.add(("h", 1), 0, ok, KEY)  # again, later
    assert [rid[1] for rid, _ in ids.of_key(KEY)] == [1, 2, 3, 0]
    assert [rid[1] for rid, _ in ids.of_key(KEY, since=2.0)] == [2, 3, 0]
    assert [rid[1] for rid, _ in ids.of_key(KEY, since=5.5)] == []
    assert [rid[1] for rid, _ in ids.of_key(OTHER, since=3.0)] == [3]


@pytest.mark.parametrize("pair", ["memory"], indirect=True)
def test_an_export_within_a_window_has_the_ids_a_client_may_still_repeat(pair) -> None:
    """``key_export`` with ``window``: only the ids applied in the last ``window`` seconds (a
    client re-sends a write within its overall time, so older ids are never repeated); without
    it every id remembered. A bad window is a one-line error and exports nothing."""
    a, _b, ca, _cb = pair
    c = Client()
    old = p.Message(p.Op.SET, KEY, b"old", cid=7, seq=1, epoch=0x8001, ver=5)
    assert c.ask(a, old).status == p.Status.OK
    time.sleep(0.5)
    new = p.Message(p.Op.SET, KEY, b"new", cid=8, seq=1, epoch=0x8001, ver=6)
    assert c.ask(a, new).status == p.Status.OK
    ca.key_freeze(KEY)
    assert [r["cid"] for r in ca.key_export(KEY, window=0.3).ids] == [8]
    assert [r["cid"] for r in ca.key_export(KEY).ids] == [7, 8]
    assert ca.key_export(KEY, window=0.3).item["ver"] == 6  # type: ignore[index]
    for bad in (0, -1, "1", True):
        with pytest.raises(ControlError, match="window must be") as err:
            ca.request(cmd="key_export", key_hex=KEY.hex(), window=bad)
        assert "\n" not in str(err.value)


def test_a_keys_ids_are_indexed_within_the_bounds() -> None:
    """RecentIds remembers which key each id wrote, and forgets it with the id."""
    ids = RecentIds(per_client=3, clients=2)
    ok = make_result(0, 1, 1)
    for cid in range(4):
        for seq in range(5):
            ids.add(("h", cid), seq, ok, KEY if seq % 2 else OTHER)
    assert ids.indexed() == len(ids) == 6
    assert sorted(rid for rid, _ in ids.of_key(KEY)) == [(("h", 2), 3), (("h", 3), 3)]
    with pytest.raises(p.ProtocolError):
        make_result(99, 0, 0)


@pytest.mark.parametrize("pair", ["memory"], indirect=True)
def test_writer_writes_count_the_rotated_writes_applied(pair) -> None:
    """``writer_writes``: per key, the SET/DEL flagged F_REDIRECT (a rotated key's write sent to
    its writer) this agent applied; not a plain write, an UPDATE copy, a repeat of an applied
    id, a STALE write nor a write refused while the key is frozen."""
    a, _b, ca, _cb = pair
    c = Client()
    assert ca.writer_writes() == {}
    w1 = p.Message(p.Op.SET, KEY, b"one", cid=7, seq=1, epoch=0x8001, ver=5, flags=p.F_REDIRECT)
    assert c.ask(a, w1).status == p.Status.OK
    assert c.ask(a, w1).flags & p.F_DUP  # a repeat: applied once
    d = p.Message(p.Op.DEL, KEY, cid=7, seq=2, epoch=0x8001, ver=6, flags=p.F_REDIRECT)
    assert c.ask(a, d).status == p.Status.OK
    old = p.Message(p.Op.SET, KEY, b"old", cid=7, seq=3, epoch=0x8001, ver=4, flags=p.F_REDIRECT)
    assert c.ask(a, old).status == p.Status.STALE
    assert c.ask(a, p.Message(p.Op.SET, OTHER, b"x", cid=7, seq=4)).status == p.Status.OK
    c.send(a, p.Message(p.Op.UPDATE, OTHER, b"copy", cid=7, seq=5, epoch=0x8001, ver=9))
    ca.key_freeze(KEY)
    late = p.Message(p.Op.SET, KEY, b"late", cid=7, seq=6, epoch=0x8001, ver=7, flags=p.F_REDIRECT)
    assert c.ask(a, late).status == p.Status.RETRY
    ca.key_release(KEY)
    assert c.ask(a, p.Message(p.Op.GET, OTHER, cid=7, seq=7)).value == b"copy"  # copy applied
    assert ca.writer_writes() == {KEY: 2}
    assert ca.stats()["writer_write"] == 2
