"""The agent's side of elastic membership (docs/protocol.md "Membership"), on AgentCore directly:
ownership (MOVED), RING_GET, and the handoff of a key from its old owner to its new one with no
moment where a write could be taken at the new owner while the old one still serves reads."""

from __future__ import annotations

from kvswitch import protocol as p
from kvswitch.agent.backends import Item, MemoryBackend
from kvswitch.agent.core import AgentCore

CLIENT = ("10.0.1.1", 40000)
SWITCH = ("10.0.0.254", 8900)
MEMBERS = [p.Member(i, f"10.0.0.{i + 1}") for i in range(3)]
V1 = p.Ring(1, tuple(MEMBERS[:2]))  # servers 0 and 1
V2 = p.Ring(2, tuple(MEMBERS))  # server 2 added
SEQ = iter(range(1, 1 << 30))


def key_moving(src: int, dst: int, old: p.Ring = V1, new: p.Ring = V2) -> bytes:
    return next(
        k
        for i in range(10000)
        if old.origin(k := p.pad_key(b"k%d" % i)) == src and new.origin(k) == dst
    )


def key_staying(server: int) -> bytes:
    return next(
        k
        for i in range(10000)
        if V1.origin(k := p.pad_key(b"k%d" % i)) == server and V2.origin(k) == server
    )


def ask(core: AgentCore, op: p.Op, key: bytes, value: bytes = b"") -> p.Message:
    raw = p.Message(op, key, value, cid=5, seq=next(SEQ)).encode()
    (out,) = core.handle(raw, CLIENT)
    assert out[1] == CLIENT
    return p.Message.decode(out[0])


def agents() -> list[AgentCore]:
    cores = [AgentCore(MemoryBackend(), SWITCH) for _ in range(3)]
    for me, core in enumerate(cores):
        core.set_ring(V1, me)
    return cores


def test_no_ring_serves_everything_as_before() -> None:
    core = AgentCore(MemoryBackend(), SWITCH)
    k = key_moving(0, 2)
    assert ask(core, p.Op.SET, k, b"v").status == p.Status.OK
    r = ask(core, p.Op.RING_GET, bytes(16))
    assert (r.op, r.status, r.value) == (p.Op.RING_REPLY, p.Status.NOT_FOUND, b"")


def test_ring_get_and_moved() -> None:
    a, b, _ = agents()
    r = ask(a, p.Op.RING_GET, bytes(16))
    assert (r.op, r.status) == (p.Op.RING_REPLY, p.Status.OK)
    assert p.Ring.decode(r.value) == V1
    raw = p.Message(p.Op.RING_GET, bytes(16), cid=5, seq=next(SEQ)).encode()
    (out,) = a.handle(raw, CLIENT, tcp=True)  # a TCP client may ask too
    assert p.Ring.decode(p.Message.decode(out[0]).value) == V1
    theirs = key_staying(1)
    for op in (p.Op.GET, p.Op.SET, p.Op.DEL):
        r = ask(a, op, theirs, b"x" if op == p.Op.SET else b"")
        assert (r.op, r.status, r.value) == (p.REPLY_OF[op], p.Status.MOVED, (1).to_bytes(4, "big"))
        assert (r.epoch, r.ver) == (0, 0)
    assert not a.backend.get(theirs)  # nothing applied
    assert ask(b, p.Op.SET, theirs, b"x").status == p.Status.OK


def test_replica_copy_served_only_to_a_get_the_switch_redirected() -> None:
    a, _, _ = agents()
    theirs = key_staying(1)
    a.push_item(theirs, b"copy", 1, 5)
    raw = p.Message(p.Op.GET, theirs, cid=5, seq=next(SEQ), flags=p.F_REDIRECT).encode()
    r = p.Message.decode(a.handle(raw, CLIENT)[0][0])
    assert (r.status, r.value) == (p.Status.OK, b"copy")
    # not redirected: a client with an old ring; the copy may lag the read set, so MOVED
    assert ask(a, p.Op.GET, theirs).status == p.Status.MOVED
    # over TCP the flag is a client's word (the switch redirects UDP Gets only)
    (out,) = a.handle(raw, CLIENT, tcp=True)
    assert p.Message.decode(out[0]).status == p.Status.MOVED
    assert ask(a, p.Op.SET, theirs, b"w").status == p.Status.MOVED


def test_a_write_the_spine_rotated_here_is_served_by_a_holder_that_is_not_the_origin() -> None:
    """docs/protocol.md F7: the spine sends a rotated key's write to one holder, flagged
    F_REDIRECT; that holder applies it by the version rule, remembers its request id and answers
    the client, though the key's origin is another server. Unflagged, or over TCP, MOVED."""
    a, _, _ = agents()
    theirs = key_staying(1)
    a.push_item(theirs, b"copy", 1, 5)
    seq = next(SEQ)
    raw = p.Message(
        p.Op.SET, theirs, b"w", cid=5, seq=seq, epoch=1, ver=6, flags=p.F_REDIRECT
    ).encode()
    r = p.Message.decode(a.handle(raw, CLIENT)[0][0])
    assert (r.op, r.status, r.epoch, r.ver) == (p.Op.SET_REPLY, p.Status.OK, 1, 6)
    assert a.backend.get(theirs).value == b"w"
    again = p.Message.decode(a.handle(raw, CLIENT)[0][0])  # a repeat: its first result
    assert again.flags & p.F_DUP and (again.status, again.ver) == (p.Status.OK, 6)
    (out,) = a.handle(raw, CLIENT, tcp=True)  # over TCP the flag is a client's word
    assert p.Message.decode(out[0]).status == p.Status.MOVED
    assert ask(a, p.Op.DEL, theirs).status == p.Status.MOVED
    assert a.backend.get(theirs).value == b"w"


def test_handoff_steps() -> None:
    a, b, c = agents()
    k = key_moving(0, 2)
    stay = key_staying(0)
    assert ask(a, p.Op.SET, k, b"old").status == p.Status.OK
    assert ask(a, p.Op.SET, stay, b"stays").status == p.Status.OK
    assert ask(c, p.Op.GET, k).status == p.Status.MOVED  # not a member of v1
    for me, core in enumerate((a, b, c)):
        core.prepare_ring(V2, me)
    # prepared: the new owner answers RETRY for its incoming key, the old one still serves
    assert ask(c, p.Op.GET, k).status == p.Status.RETRY
    assert ask(c, p.Op.SET, k, b"early").status == p.Status.RETRY
    assert ask(a, p.Op.SET, k, b"v1").status == p.Status.OK
    # bulk copy while serving
    assert c.import_items(a.export(2), 0, complete=False) == (1, 0)
    assert ask(a, p.Op.SET, k, b"v2").status == p.Status.OK  # a change after the bulk copy
    # freeze: writes of outgoing keys RETRY, Gets served, other keys untouched
    a.freeze()
    assert ask(a, p.Op.SET, k, b"v3").status == p.Status.RETRY
    assert ask(a, p.Op.DEL, k).status == p.Status.RETRY
    assert ask(a, p.Op.GET, k).value == b"v2"
    assert ask(a, p.Op.SET, stay, b"s2").status == p.Status.OK
    assert c.import_items(a.export(2), 0, complete=True) == (1, 0)
    # release (old owners), then activate (new owners)
    a.release()
    r = ask(a, p.Op.GET, k)
    assert (r.status, r.value) == (p.Status.MOVED, (2).to_bytes(4, "big"))
    assert p.Ring.decode(ask(a, p.Op.RING_GET, bytes(16)).value) == V2
    assert ask(c, p.Op.GET, k).status == p.Status.RETRY  # not active yet
    for core in (a, b, c):
        core.activate_ring()
    r = ask(c, p.Op.GET, k)
    assert (r.status, r.value) == (p.Status.OK, b"v2")
    assert ask(a, p.Op.GET, stay).value == b"s2"
    assert a.drop_moved() == 1 and a.backend.get(k) is None
    assert ask(a, p.Op.GET, k).status == p.Status.MOVED


def test_complete_import_drops_what_the_old_owner_deleted() -> None:
    a, _, c = agents()
    k = key_moving(0, 2)
    ask(a, p.Op.SET, k, b"v")
    for me, core in enumerate((a, _, c)):
        core.prepare_ring(V2, me)
    c.import_items(a.export(2), 0, complete=False)
    assert ask(a, p.Op.DEL, k).status == p.Status.OK  # unversioned: gone, no tombstone
    a.freeze()
    assert c.import_items(a.export(2), 0, complete=True) == (0, 1)
    assert c.backend.get(k) is None


def test_import_keeps_a_newer_version_and_refuses_keys_not_moving() -> None:
    a, _, c = agents()
    for me, core in enumerate((a, _, c)):
        core.prepare_ring(V2, me)
    k = key_moving(0, 2)
    c.backend.put(k, Item(b"newer", 1, 9))
    assert c.import_items([(k, Item(b"older", 1, 3))], 0, complete=False) == (0, 0)
    assert c.backend.get(k).value == b"newer"  # type: ignore[union-attr]
    try:
        c.import_items([(key_staying(1), Item(b"x"))], 1, complete=False)
    except p.ProtocolError:
        pass
    else:
        raise AssertionError("a key that does not move here was imported")


def test_steps_out_of_order_are_refused() -> None:
    a, _, _ = agents()
    for step in (a.freeze, a.activate_ring, lambda: a.export(1)):
        try:
            step()
        except p.ProtocolError:
            continue
        raise AssertionError(f"{step} without a prepared ring")
    try:
        a.prepare_ring(V1, 0)
    except p.ProtocolError:
        pass
    else:
        raise AssertionError("an older ring was prepared")
