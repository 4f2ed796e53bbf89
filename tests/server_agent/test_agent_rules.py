"""The agent rules of docs/protocol.md, on AgentCore directly (no sockets) and on each backend."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kvswitch import protocol as p
from kvswitch.agent.backends import Backend, BackendError, Item, MemoryBackend
from kvswitch.agent.core import AgentCore, RecentIds

CLIENT = ("127.0.0.1", 40000)
SWITCH = ("127.0.0.1", 8999)
K = p.pad_key(b"key")


def msg(op: p.Op, value: bytes = b"", **fields: int) -> bytes:
    fields.setdefault("cid", 7)
    return p.Message(op, fields.pop("key", K), value, **fields).encode()  # type: ignore[arg-type]


def one(core: AgentCore, raw: bytes, src: tuple[str, int] = CLIENT) -> p.Message:
    out = core.handle(raw, src)
    assert len(out) == 1, out
    assert out[0][1] == src
    return p.Message.decode(out[0][0])


@pytest.fixture
def core(backend: Backend) -> AgentCore:
    return AgentCore(backend, SWITCH)


def test_get_set_delete(core: AgentCore) -> None:
    assert one(core, msg(p.Op.GET, seq=1)).status == p.Status.NOT_FOUND
    r = one(core, msg(p.Op.SET, b"v1", seq=2))
    assert (r.op, r.status, r.cid, r.seq, r.key) == (p.Op.SET_REPLY, p.Status.OK, 7, 2, K)
    r = one(core, msg(p.Op.GET, seq=3))
    assert (r.op, r.status, r.value) == (p.Op.GET_REPLY, p.Status.OK, b"v1")
    assert one(core, msg(p.Op.DEL, seq=4)).status == p.Status.OK
    assert one(core, msg(p.Op.GET, seq=5)).status == p.Status.NOT_FOUND
    assert one(core, msg(p.Op.DEL, seq=6)).status == p.Status.NOT_FOUND


def test_versioned_writes_only_if_newer(core: AgentCore) -> None:
    r = one(core, msg(p.Op.SET, b"v5", seq=1, epoch=1, ver=5))
    assert (r.status, r.epoch, r.ver) == (p.Status.OK, 1, 5)
    r = one(core, msg(p.Op.SET, b"v4", seq=2, epoch=1, ver=4))
    assert (r.status, r.epoch, r.ver) == (p.Status.STALE, 1, 5)
    assert one(core, msg(p.Op.SET, b"v5b", seq=3, epoch=1, ver=5)).status == p.Status.STALE
    # A newer epoch wins over any ver of an older one.
    assert one(core, msg(p.Op.SET, b"e2", seq=4, epoch=2, ver=1)).status == p.Status.OK
    assert one(core, msg(p.Op.SET, b"old", seq=5, epoch=1, ver=99)).status == p.Status.STALE
    g = one(core, msg(p.Op.GET, seq=6))
    assert (g.value, g.epoch, g.ver) == (b"e2", 2, 1)
    # An unversioned write always applies and keeps the stored version.
    assert one(core, msg(p.Op.SET, b"plain", seq=7)).status == p.Status.OK
    g = one(core, msg(p.Op.GET, seq=8))
    assert (g.value, g.epoch, g.ver) == (b"plain", 2, 1)
    assert one(core, msg(p.Op.SET, b"old", seq=9, epoch=2, ver=1)).status == p.Status.STALE


def test_versioned_delete_leaves_a_tombstone(core: AgentCore) -> None:
    one(core, msg(p.Op.SET, b"v", seq=1, epoch=1, ver=10))
    assert one(core, msg(p.Op.DEL, seq=2, epoch=1, ver=11)).status == p.Status.OK
    # A late, older update must not bring the key back.
    assert core.handle(msg(p.Op.UPDATE, b"late", seq=3, epoch=1, ver=10), SWITCH) == [
        (p.Message(p.Op.CONFIRM, K, epoch=1, ver=11).encode(), SWITCH)
    ]
    assert one(core, msg(p.Op.GET, seq=4)).status == p.Status.NOT_FOUND
    assert one(core, msg(p.Op.SET, b"new", seq=5, epoch=1, ver=12)).status == p.Status.OK
    assert one(core, msg(p.Op.GET, seq=6)).value == b"new"


def test_request_ids_applied_once(core: AgentCore) -> None:
    first = one(core, msg(p.Op.SET, b"a", seq=1, epoch=1, ver=3))
    one(core, msg(p.Op.SET, b"b", cid=8, seq=1))  # same seq, other client: applied
    again = one(core, msg(p.Op.SET, b"a", seq=1, epoch=1, ver=3))
    assert (again.status, again.flags) == (p.Status.OK, p.F_DUP)
    assert (again.epoch, again.ver) == (first.epoch, first.ver)
    assert one(core, msg(p.Op.GET, seq=2)).value == b"b"
    # A retried unversioned Set after another client's write must not overwrite it.
    one(core, msg(p.Op.SET, b"c", cid=9, seq=1))
    assert one(core, msg(p.Op.SET, b"b", cid=8, seq=1)).flags == p.F_DUP
    assert one(core, msg(p.Op.GET, seq=3)).value == b"c"
    assert one(core, msg(p.Op.DEL, seq=4)).status == p.Status.OK
    assert one(core, msg(p.Op.DEL, seq=4)).flags == p.F_DUP
    # A retried Delete of a missing key repeats NOT_FOUND: the client still learns it was missing.
    assert one(core, msg(p.Op.DEL, seq=5)).status == p.Status.NOT_FOUND
    repeat = one(core, msg(p.Op.DEL, seq=5))
    assert (repeat.status, repeat.flags) == (p.Status.NOT_FOUND, p.F_DUP)
    assert core.stats["duplicate"] == 4


def test_recent_ids_are_bounded() -> None:
    ids = RecentIds(per_client=3, clients=2)
    core = AgentCore(MemoryBackend(), None, recent_ids=ids)
    for seq in range(10):
        one(core, msg(p.Op.SET, b"x", seq=seq))
    assert len(ids) == 3
    assert one(core, msg(p.Op.SET, b"x", seq=9)).flags == p.F_DUP
    for cid in (100, 101, 102):
        one(core, msg(p.Op.SET, b"y", cid=cid, seq=1))
    assert len(ids) == 2  # clients 101 and 102, one id each
    assert ids.get((CLIENT[0], 7), 9) is None  # the oldest client was forgotten


def test_update_and_push_confirm_to_switch(core: AgentCore) -> None:
    out = core.handle(msg(p.Op.UPDATE, b"u", seq=1, epoch=3, ver=7, flags=p.F_TCP), SWITCH)
    assert [p.Message.decode(raw) for raw, _ in out] == [p.Message(p.Op.CONFIRM, K, epoch=3, ver=7)]
    assert out[0][1] == SWITCH
    # A stale push (the control channel's) is not applied; the confirm says what the replica holds.
    applied, held, out = core.push_item(K, b"old", 3, 6)
    assert (applied, held) == (False, (3, 7))
    assert out == [(p.Message(p.Op.CONFIRM, K, epoch=3, ver=7).encode(), SWITCH)]
    out = core.handle(msg(p.Op.UPDATE_DEL, seq=2, epoch=3, ver=8), SWITCH)
    assert p.Message.decode(out[0][0]).version == (3, 8)
    assert one(core, msg(p.Op.GET, seq=3)).status == p.Status.NOT_FOUND
    assert core.push_item(K, b"pushed", 3, 9)[:2] == (True, (3, 9))
    g = one(core, msg(p.Op.GET, seq=4))
    assert (g.value, g.version) == (b"pushed", (3, 9))


def test_sync_flow() -> None:
    core = AgentCore(MemoryBackend(), SWITCH)
    one(core, msg(p.Op.SET, b"val", seq=1))
    pending, out = core.start_sync(K)
    assert out == [(p.Message(p.Op.SYNC, K).encode(), SWITCH)]
    assert not pending.done.is_set()
    # A reflection for another key is ignored.
    assert core.handle(msg(p.Op.SYNC, cid=0, epoch=1, ver=5, key=p.pad_key(b"zz")), SWITCH) == []
    out = core.handle(msg(p.Op.SYNC, cid=0, epoch=1, ver=5), SWITCH)
    sent = [(p.Message.decode(raw), dst) for raw, dst in out]
    # SYNC_DONE only: the item goes back to the controller, which pushes it (no network PUSH)
    assert sent == [(p.Message(p.Op.SYNC_DONE, K, epoch=1, ver=5), SWITCH)]
    assert pending.done.is_set() and pending.version == (1, 5) and pending.value == b"val"
    assert one(core, msg(p.Op.GET, seq=2)).version == (1, 5)
    # A second reflection of the same SYNC is not expected any more.
    assert core.handle(msg(p.Op.SYNC, cid=0, epoch=1, ver=5), SWITCH) == []


def test_rebase_lets_the_new_serializers_versions_apply(core: AgentCore) -> None:
    """docs/fabric.md "Moving a key between levels": a leaf's (epoch 7, ver 40) copy would take
    a spine's (epoch 2, ver 1) write as STALE; after the controller's rebase the value stays,
    its version is gone, and the new serializer's write applies."""
    one(core, msg(p.Op.SET, b"leaf", seq=1, epoch=7, ver=40))
    assert one(core, msg(p.Op.SET, b"spine", seq=2, epoch=2, ver=1)).status == p.Status.STALE
    assert core.rebase_local(K) is True
    g = one(core, msg(p.Op.GET, seq=3))
    assert (g.value, g.epoch, g.ver) == (b"leaf", 0, 0)
    assert one(core, msg(p.Op.SET, b"spine", seq=4, epoch=2, ver=1)).status == p.Status.OK
    # a tombstone goes; an absent key stays absent
    assert one(core, msg(p.Op.DEL, seq=5, epoch=2, ver=2)).status == p.Status.OK
    assert core.rebase_local(K) is False and core.backend.get(K) is None
    assert core.rebase_local(p.pad_key(b"absent")) is False


def test_remove_drops_replica_copy(core: AgentCore) -> None:
    core.push_item(K, b"r", 1, 2)
    assert core.remove_local(K) is True
    assert one(core, msg(p.Op.GET, seq=2)).status == p.Status.NOT_FOUND
    assert core.remove_local(K) is False


@pytest.mark.parametrize("trusted", [True, False], ids=["rule on", "rule off (test flag)"])
def test_network_push_and_remove_are_refused(trusted: bool) -> None:
    """PUSH and REMOVE write the store bypassing a client request: only the control channel may
    (docs/protocol.md "Trust"). With ``--test-no-trust network-push`` they apply (the attack)."""
    off = frozenset() if trusted else frozenset({"network-push"})
    core = AgentCore(MemoryBackend(), SWITCH, no_trust=off)
    one(core, msg(p.Op.SET, b"real", seq=1))
    forged = msg(p.Op.PUSH, b"forged", cid=0, epoch=0xFFFF, ver=0xFFFFFFF0)
    core.handle(forged, CLIENT)
    g = one(core, msg(p.Op.GET, seq=2))
    assert (g.value == b"real") == trusted
    core.handle(msg(p.Op.REMOVE, cid=0, seq=1), CLIENT)
    assert (one(core, msg(p.Op.GET, seq=3)).status == p.Status.OK) == trusted
    assert core.stats["untrusted_op"] == (2 if trusted else 0)


@pytest.mark.parametrize("trusted", [True, False], ids=["rule on", "rule off (test flag)"])
def test_tcp_request_versions_are_ignored(trusted: bool) -> None:
    """The switch parses only the first header of a TCP segment, so a version on a TCP request
    may be the client's own: ignored (the write applies unversioned)."""
    off = frozenset() if trusted else frozenset({"tcp-versions"})
    core = AgentCore(MemoryBackend(), SWITCH, no_trust=off)
    forged = msg(p.Op.SET, b"forged", seq=1, epoch=0xFFFF, ver=0xFFFFFFF0)
    r = p.Message.decode(core.handle(forged, CLIENT, tcp=True)[0][0])
    assert r.status == p.Status.OK
    assert (r.version == (0, 0)) == trusted
    # a later switch-stamped write (UDP) is not answered STALE
    later = one(core, msg(p.Op.SET, b"real", seq=2, epoch=1, ver=3))
    assert (later.status == p.Status.OK) == trusted
    assert (one(core, msg(p.Op.GET, seq=3)).value == b"real") == trusted


@pytest.mark.parametrize("trusted", [True, False], ids=["rule on", "rule off (test flag)"])
@pytest.mark.parametrize("op", [p.Op.UPDATE, p.Op.UPDATE_DEL, p.Op.SYNC])
def test_switch_ops_over_tcp_are_refused(trusted: bool, op: p.Op) -> None:
    """UPDATE/UPDATE_DEL/SYNC come from the switch over UDP; one inside a client's TCP stream (the
    switch parses only a segment's first header) is forged."""
    off = frozenset() if trusted else frozenset({"tcp-versions"})
    core = AgentCore(MemoryBackend(), SWITCH, no_trust=off)
    one(core, msg(p.Op.SET, b"real", seq=1))
    core.start_sync(K)
    value = b"forged" if op == p.Op.UPDATE else b""
    core.handle(msg(op, value, seq=2, epoch=0xFFFF, ver=0xFFFFFFF0), CLIENT, tcp=True)
    g = one(core, msg(p.Op.GET, seq=3))
    assert ((g.value, g.version) == (b"real", (0, 0))) == trusted
    assert core.stats["untrusted_op"] == (1 if trusted else 0)


@pytest.mark.parametrize("trusted", [True, False], ids=["rule on", "rule off (test flag)"])
def test_request_ids_are_per_source_address(trusted: bool) -> None:
    """Another host that sends a victim's (cid, seq) first does not make the victim's own write a
    "repeat" that is never applied."""
    off = frozenset() if trusted else frozenset({"ids-without-source"})
    core = AgentCore(MemoryBackend(), SWITCH, no_trust=off)
    attacker = ("10.0.1.9", 40000)
    one(core, msg(p.Op.SET, b"forged", cid=7, seq=5), attacker)
    r = one(core, msg(p.Op.SET, b"victim", cid=7, seq=5))
    assert (r.flags == 0) == trusted
    assert (one(core, msg(p.Op.GET, seq=6)).value == b"victim") == trusted


def test_push_item_needs_a_switch_version() -> None:
    core = AgentCore(MemoryBackend(), SWITCH)
    for epoch, ver in ((0, 5), (1, 0), (0x10000, 1)):
        with pytest.raises(p.ProtocolError):
            core.push_item(K, b"v", epoch, ver)
    with pytest.raises(p.ProtocolError):
        core.push_item(K, b"v" * (p.MAX_VALUE + 1), 1, 1)
    with pytest.raises(ValueError):
        AgentCore(MemoryBackend(), SWITCH, no_trust=frozenset({"everything"}))
    assert core.snapshot() == []


@pytest.mark.parametrize(
    ("raw", "status"),
    [
        (msg(p.Op.SET, b"x" * (p.MAX_VALUE + 1), seq=1), p.Status.TOO_LARGE),
        (msg(p.Op.GET, b"value-on-a-get", seq=1), p.Status.BAD_REQUEST),
        (msg(p.Op.SET, b"x", seq=1, status=3), p.Status.BAD_REQUEST),
        (msg(p.Op.SET, b"x", seq=1, flags=0x8000), p.Status.BAD_REQUEST),
        (msg(p.Op.SET, b"x", seq=1, cid=0), p.Status.BAD_REQUEST),
    ],
)
def test_bad_requests_are_answered_and_change_nothing(raw: bytes, status: int) -> None:
    core = AgentCore(MemoryBackend(), SWITCH)
    r = one(core, raw)
    assert r.status == status
    assert core.snapshot() == []


def test_ops_not_for_servers_are_dropped() -> None:
    core = AgentCore(MemoryBackend(), SWITCH)
    for op in (p.Op.GET_REPLY, p.Op.SET_REPLY, p.Op.DEL_REPLY, p.Op.CONFIRM, p.Op.SYNC_DONE):
        assert core.handle(msg(op, seq=1), CLIENT) == []
    assert core.stats["wrong_op"] == 5
    assert core.handle(b"\x01" * 35, CLIENT) == []
    assert core.stats["malformed"] == 1


class _FailingBackend(MemoryBackend):
    name = "failing"

    def get(self, key: bytes) -> Item | None:
        raise BackendError("down")


def test_backend_failure_answers_server_error() -> None:
    core = AgentCore(_FailingBackend(), SWITCH)
    assert one(core, msg(p.Op.GET, seq=1)).status == p.Status.SERVER_ERROR
    assert one(core, msg(p.Op.SET, b"v", seq=2)).status == p.Status.SERVER_ERROR
    assert core.stats["backend_error"] == 2


def test_backend_lists_keys_written_by_an_earlier_agent(
    backend_factory: Callable[[str], Backend], memcached_addr: str, redis_addr: str
) -> None:
    """A restarted agent (a new backend object, same store and prefix) still lists the keys."""
    from kvswitch.agent.backends import make_backend

    for kind, address in (("memcached", memcached_addr), ("redis", redis_addr)):
        first = make_backend(kind, address, prefix=f"restart-{kind}:")
        first.put(p.pad_key(b"a"), Item(b"1", 1, 2))
        first.put(p.pad_key(b"b"), Item(b"", 1, 3, live=False))
        first.close()
        second = make_backend(kind, address, prefix=f"restart-{kind}:")
        assert dict(second.items()) == {
            p.pad_key(b"a"): Item(b"1", 1, 2),
            p.pad_key(b"b"): Item(b"", 1, 3, live=False),
        }
        second.close()


def test_unstamped_sync_reflection_is_asked_again() -> None:
    """Rule 5: while a write is on its way to the origin the switch reflects a SYNC unstamped
    (ver 0); the origin records nothing and sends no SYNC_DONE, the SYNC ends as *busy* (its
    caller asks again a moment later, server.SYNC_BUSY_DELAY), and the write still applies."""
    core = AgentCore(MemoryBackend(), SWITCH)
    one(core, msg(p.Op.SET, b"a", seq=1, epoch=1, ver=5))
    pending, _ = core.start_sync(K)
    assert core.handle(msg(p.Op.SYNC, cid=0, epoch=0, ver=0), SWITCH) == []
    assert pending.done.is_set() and pending.busy and not pending.found
    assert K not in core.pending_syncs and core.stats["sync_busy"] == 1
    assert core.backend.get(K).version == (1, 5)
    assert one(core, msg(p.Op.SET, b"b", cid=9, seq=1, epoch=1, ver=6)).status == p.Status.OK
    assert one(core, msg(p.Op.GET, seq=2)).value == b"b"


def test_duplicate_write_adopts_newer_version_only_if_settled_and_nothing_came_between() -> None:
    """A re-sent write crosses the switch again with a newer version. If the first application is
    still the key's last write and the switch flagged the repeat F_SETTLED (no other write of the
    key was on its way to the origin when it was stamped), the server adopts the newer version (its
    reply then acknowledges it, rule 2); if another write came between, or the flag is missing (a
    second writer's write may have been stamped in between: the explorer's resend-overtaken),
    nothing changes."""
    core = AgentCore(MemoryBackend(), SWITCH)
    settled = p.F_SETTLED
    assert one(core, msg(p.Op.SET, b"a", cid=3, seq=1, epoch=1, ver=5)).status == p.Status.OK
    unsettled = one(core, msg(p.Op.SET, b"a", cid=3, seq=1, epoch=1, ver=6))
    assert (unsettled.status, unsettled.flags, unsettled.ver) == (p.Status.OK, p.F_DUP, 5)
    assert core.backend.get(K).version == (1, 5)
    again = one(core, msg(p.Op.SET, b"a", cid=3, seq=1, epoch=1, ver=7, flags=settled))
    assert (again.status, again.flags, again.ver) == (p.Status.OK, p.F_DUP, 7)
    assert core.backend.get(K).version == (1, 7)
    one(core, msg(p.Op.SET, b"b", cid=4, seq=1, epoch=1, ver=8))
    late = one(core, msg(p.Op.SET, b"a", cid=3, seq=1, epoch=1, ver=9, flags=settled))
    assert (late.status, late.flags, late.ver) == (p.Status.OK, p.F_DUP, 7)
    assert core.backend.get(K).version == (1, 8)
    assert one(core, msg(p.Op.GET, seq=2)).value == b"b"


def test_replica_adopts_no_settled_repeat() -> None:
    """A replica's first copy of a request id may be older than what the origin had reported when
    the repeat was stamped (a second writer's copy still on its way to the replica), so the flag
    says nothing about it: an UPDATE repeat changes nothing; the replica confirms what it holds."""
    core = AgentCore(MemoryBackend(), SWITCH)
    assert core.handle(msg(p.Op.UPDATE, b"a", cid=3, seq=1, epoch=1, ver=5), CLIENT)
    out = core.handle(
        msg(p.Op.UPDATE, b"a", cid=3, seq=1, epoch=1, ver=7, flags=p.F_SETTLED), CLIENT
    )
    assert [p.Message.decode(raw).version for raw, _ in out] == [(1, 5)]
    assert core.backend.get(K) == Item(b"a", 1, 5)


def test_settled_duplicate_adopts_nothing_over_a_tcp_write() -> None:
    """An unversioned write over TCP keeps the stored version: the stored version is still the
    first application's, but the value is not; a settled repeat must not move it to the repeat's
    version (the replicas got the repeat's value at that version)."""
    core = AgentCore(MemoryBackend(), SWITCH)
    one(core, msg(p.Op.SET, b"a", cid=3, seq=1, epoch=1, ver=5))
    core.handle(msg(p.Op.SET, b"tcp", cid=4, seq=1), ("10.0.0.9", 5000), tcp=True)
    assert core.backend.get(K) == Item(b"tcp", 1, 5)
    again = one(core, msg(p.Op.SET, b"a", cid=3, seq=1, epoch=1, ver=6, flags=p.F_SETTLED))
    assert (again.flags, again.ver) == (p.F_DUP, 5)
    assert core.backend.get(K) == Item(b"tcp", 1, 5)


def test_settled_flag_over_tcp_is_ignored() -> None:
    core = AgentCore(MemoryBackend(), SWITCH)
    raw = msg(p.Op.SET, b"a", cid=3, seq=1, epoch=1, ver=5, flags=p.F_SETTLED)
    ((reply, _),) = core.handle(raw, ("10.0.0.9", 5000), tcp=True)
    assert p.Message.decode(reply).status == p.Status.OK
    assert core.stats["tcp_version_ignored"] == 1 and core.backend.get(K).version == (0, 0)


def test_duplicate_of_a_stale_write_adopts_nothing() -> None:
    core = AgentCore(MemoryBackend(), SWITCH)
    one(core, msg(p.Op.SET, b"new", cid=4, seq=1, epoch=1, ver=9))
    assert one(core, msg(p.Op.SET, b"old", cid=3, seq=1, epoch=1, ver=8)).status == p.Status.STALE
    again = one(core, msg(p.Op.SET, b"old", cid=3, seq=1, epoch=1, ver=10))
    assert (again.status, again.flags, again.ver) == (p.Status.STALE, p.F_DUP, 9)
    assert core.backend.get(K).version == (1, 9)
    assert one(core, msg(p.Op.GET, seq=2)).value == b"new"
