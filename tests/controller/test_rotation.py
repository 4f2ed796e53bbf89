"""controller/rotation.py: which writer maps a plan changes (docs/protocol.md F7), the write
freeze over real agents (AgentPool: freeze every holder of both maps, export, import the merge
into each, release), a change put off when an agent refuses, and the holder a rotated key's
SYNC is asked of."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable

import pytest

from kvswitch import protocol as p
from kvswitch.agent.backends import Backend
from kvswitch.agent.control import KeyExport
from kvswitch.agent.server import AgentServer
from kvswitch.controller.agents import AgentPool
from kvswitch.controller.plan import KeyPlan, Plan
from kvswitch.controller.rackfile import RackFile
from kvswitch.controller.rotation import (
    MapChange,
    WriteFreeze,
    dead_holder_repairs,
    lacking,
    map_changes,
    merge,
    put_off,
    sync_source,
)

A, B = p.pad_key(b"a"), p.pad_key(b"b")
ORIGIN = {A: 0, B: 1}


def plans(*spines: dict[bytes, KeyPlan]) -> list[Plan]:
    return [Plan(8, 4, dict(keys)) for keys in spines]


def test_which_writer_maps_change() -> None:
    rot, flat = KeyPlan(0, (0, 2, 3), True), KeyPlan(0, (0, 2, 3))
    before = plans({A: rot, B: KeyPlan(1, (1, 4))}, {})
    same = map_changes(before, plans({A: rot, B: KeyPlan(1, (1, 4, 5))}, {}), ORIGIN.get)
    assert same == {}  # A unchanged; B never rotates: its writes all go to its origin
    cases = {
        "rotation off": ({A: flat}, {}, ((0, 2, 3), (0, 2, 3), True, False)),
        "a holder added": ({A: KeyPlan(0, (0, 2, 3, 5), True)}, {}, ((0, 2, 3), (0, 2, 3, 5))),
        "a holder removed": ({A: KeyPlan(0, (0, 3), True)}, {}, ((0, 2, 3), (0, 3))),
        "the key leaves": ({}, {}, ((0, 2, 3), (0,))),
        "another spine": ({}, {A: rot}, ((0, 2, 3), (0, 2, 3))),
    }
    for name, (s0, s1, want) in cases.items():
        [change] = map_changes(before, plans(s0, s1), ORIGIN.get).values()
        assert (change.before, change.after) == want[:2], name
        if len(want) == 4:
            assert (change.rotated_before, change.rotated_after) == want[2:]
    # a key made rotated: its origin took every write until now
    [change] = map_changes(plans({}, {}), plans({A: rot}, {}), ORIGIN.get).values()
    assert (change.before, change.after, change.servers) == ((0,), (0, 2, 3), (0, 2, 3))
    assert MapChange(A, (0, 2), (0, 3), True, True).servers == (0, 2, 3)


def test_a_change_put_off_goes_back_to_the_old_map() -> None:
    rot = KeyPlan(0, (0, 2, 3), True)
    before = plans({A: rot}, {})
    # A leaves and B takes its slot: A comes back, B is not made this period
    after = plans({B: KeyPlan(0, (1, 4), True)}, {})
    assert put_off(before, after, [A])[0].keys == {A: rot}
    # a new rotated key is made without rotation; a moved key goes back to its spine
    assert put_off(plans({}, {}), after, [B])[0].keys == {B: KeyPlan(0, (1, 4))}
    moved = put_off(before, plans({}, {A: KeyPlan(2, (0, 5), True)}), [A])
    assert (moved[0].keys, moved[1].keys) == ({A: rot}, {})
    assert before[0].keys == {A: rot}  # the inputs are not changed


def test_the_sync_source_of_a_rotated_key() -> None:
    kp = KeyPlan(0, (0, 2, 3), True)
    assert sync_source(kp, 0, 2, [0, 0, 0]) == 0  # the make: the origin (R5)
    assert sync_source(kp, 7, 2, [5, 0, 7]) == 2  # done_by in the read set
    # done_by not in the read set: no SYNC (the spine takes one from done_by's holder only)
    assert sync_source(kp, 7, 1, [5, 0, 7]) is None
    assert sync_source(kp, 7, 3, [7, 7, 7]) is None  # an ordinal the key no longer has


def test_which_rotated_keys_a_dead_holder_left() -> None:
    """docs/fabric.md "Failures": a rotated key that held a dead server and stays on its spine
    without it has its read state reset; not one whose change was put off (it still names the
    dead holder), one that left or moved spine (made anew there), nor one that does not rotate
    (every write reached its origin)."""
    rot = KeyPlan(0, (0, 2, 3), True)
    before = plans({A: rot, B: KeyPlan(1, (1, 3))}, {})
    after = plans({A: KeyPlan(0, (0, 2), True), B: KeyPlan(1, (1, 4))}, {})
    assert dead_holder_repairs(before, after, {3}) == [{A: KeyPlan(0, (0, 2), True)}, {}]
    assert dead_holder_repairs(before, after, {5}) == [{}, {}]
    assert dead_holder_repairs(before, after, ()) == [{}, {}]
    assert dead_holder_repairs(before, before, {3}) == [{}, {}]  # put off
    moved = plans({B: KeyPlan(1, (1, 4))}, {A: KeyPlan(0, (0, 2), True)})
    assert dead_holder_repairs(before, moved, {3}) == [{}, {}]


def test_the_write_freeze_leaves_a_dead_holder_out() -> None:
    """A holder declared dead is neither frozen nor exported from nor imported into: the change
    is made with the live holders alone (an agent that does not answer would put it off)."""
    calls: list[tuple[str, int]] = []

    class Hooks:
        def key_freeze(self, key: bytes, server: int) -> None:
            if server == 3:
                raise OSError("dead")
            calls.append(("freeze", server))

        def key_export(self, key: bytes, server: int) -> KeyExport:
            calls.append(("export", server))
            return KeyExport([], None)

        def key_import(self, key: bytes, server: int, export: KeyExport) -> None:
            calls.append(("import", server))

        def key_release(self, key: bytes, server: int) -> None:
            calls.append(("release", server))

        def key_frozen(self, server: int) -> list[bytes]:
            return []

    change = {A: MapChange(A, (0, 2, 3), (0, 2), True, True)}
    freeze = WriteFreeze(Hooks())
    freeze.freeze(change)
    assert list(freeze.failed) == [A]  # not known dead: the change is put off
    calls.clear()
    freeze = WriteFreeze(Hooks(), dead=frozenset({3}))
    freeze.freeze(change)
    assert freeze.failed == {} and freeze.frozen == {(A, 0), (A, 2)}
    assert [c for c in calls if c[1] == 3] == [] and len(calls) == 6
    assert freeze.release() == {} and freeze.frozen == set()


def test_the_holders_are_exported_from_and_imported_into_at_once() -> None:
    """A key's exports, then its imports, reach all its holders at the same time (each call
    waits at a barrier the holders' calls meet only together: one after the other, the first
    call times out), and each holder is sent only the ids it lacks, with the newest item."""
    holders = (0, 1, 2)
    gate = threading.Barrier(len(holders), timeout=5.0)
    imported: dict[int, tuple[list[int], dict | None]] = {}

    def row(server: int) -> dict:
        return {"ip": "10.0.0.1", "cid": 1 + server, "seq": 1, "status": 0, "epoch": 1, "ver": 1}

    class Hooks:
        def key_freeze(self, key: bytes, server: int) -> None:
            pass

        def key_export(self, key: bytes, server: int) -> KeyExport:
            gate.wait()
            return KeyExport([row(server)], {"value_hex": "00", "epoch": 1, "ver": server})

        def key_import(self, key: bytes, server: int, export: KeyExport) -> None:
            gate.wait()
            imported[server] = ([r["cid"] for r in export.ids], export.item)

        def key_release(self, key: bytes, server: int) -> None:
            pass

        def key_frozen(self, server: int) -> list[bytes]:
            return []

    freeze = WriteFreeze(Hooks())
    freeze.freeze({A: MapChange(A, holders, holders, True, True)})
    assert freeze.failed == {}
    newest = {"value_hex": "00", "epoch": 1, "ver": 2}
    assert imported == {s: ([1 + x for x in holders if x != s], newest) for s in holders}


def test_an_import_carries_what_its_holder_lacks() -> None:
    row = {"ip": "10.0.0.1", "cid": 1, "seq": 1, "status": 0, "epoch": 1, "ver": 3}
    item = {"value_hex": "00", "epoch": 1, "ver": 3, "live": True}
    merged = KeyExport([row, {**row, "seq": 2}, {**row, "ip": "10.0.0.2"}], item)
    got = lacking(merged, KeyExport([{**row, "status": 1}], None))
    assert [(r["ip"], r["seq"]) for r in got.ids] == [("10.0.0.1", 2), ("10.0.0.2", 1)]
    assert got.item == item


def test_merge_keeps_every_id_once_and_the_newest_item() -> None:
    row = {"ip": "10.0.0.1", "cid": 1, "seq": 1, "status": 0, "epoch": 1, "ver": 3}
    old = {"value_hex": "00", "epoch": 1, "ver": 3, "live": True}
    new = {"value_hex": "01", "epoch": 1, "ver": 4, "live": False}
    got = merge(
        [KeyExport([row], old), KeyExport([row, {**row, "seq": 2}], new), KeyExport([], None)]
    )
    assert [r["seq"] for r in got.ids] == [1, 2] and got.item == new


def ask(sock: socket.socket, agent: AgentServer, msg: p.Message) -> p.Message:
    sock.sendto(msg.encode(), ("127.0.0.1", agent.port))
    return p.Message.decode(sock.recvfrom(65535)[0])


@pytest.mark.parametrize("kind", ["memory", pytest.param("redis", marks=pytest.mark.backend)])
def test_the_write_freeze_on_real_agents(
    kind: str,
    backend_factory: Callable[[str], Backend],
    agent_factory: Callable[..., AgentServer],
) -> None:
    """Three agents: A rotated over (0, 1) goes to (0, 1, 2). Every holder is frozen (writes
    RETRY) until released; each ends with every id (a repeat is F_DUP anywhere) and the newest
    item. An agent that does not answer fails its key's freeze: reported, and the holders
    frozen before it are released."""
    agents = [agent_factory(backend_factory(kind), control_port=0) for _ in range(3)]
    servers = [
        dict(name=f"s{i}", ip=f"10.0.0.{i + 1}", mac=f"02:00:00:00:00:{i + 1:02x}", port=i + 1)
        | {"control": f"127.0.0.1:{a.control_port}"}
        for i, a in enumerate(agents)
    ]
    rack = RackFile.parse(
        {"switch": {"ip": "10.0.0.254", "mac": "02:00:00:00:00:fe"}, "servers": servers}
    )
    pool = AgentPool(rack, timeout=2.0)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(3.0)
    try:
        w1 = p.Message(p.Op.SET, A, b"one", cid=3, seq=1, epoch=0x8001, ver=4)
        w2 = p.Message(p.Op.SET, A, b"two", cid=4, seq=1, epoch=0x8001, ver=5, flags=p.F_REDIRECT)
        assert ask(sock, agents[0], w1).status == p.Status.OK
        assert ask(sock, agents[1], w2).status == p.Status.OK
        freeze = WriteFreeze(pool)
        freeze.freeze({A: MapChange(A, (0, 1), (0, 1, 2), True, True)})
        assert freeze.failed == {} and freeze.frozen == {(A, 0), (A, 1), (A, 2)}
        later = p.Message(p.Op.SET, A, b"x", cid=5, seq=1, epoch=0x8001, ver=6, flags=p.F_REDIRECT)
        assert ask(sock, agents[2], later).status == p.Status.RETRY
        for agent in agents:
            item = agent.core.backend.get(A)
            assert item is not None and (item.value, item.ver) == (b"two", 5)
        assert freeze.release() == {} and freeze.frozen == set()
        for agent in agents:  # both ids known everywhere: a repeat is never applied again
            for repeat in (w1, w2):
                r = ask(sock, agent, repeat)
                assert r.flags & p.F_DUP and r.ver == repeat.ver
        assert ask(sock, agents[2], later).status == p.Status.OK
        agents[2].stop()
        for control in pool.connections(2):  # its open connection too: the agent is gone
            control.close()
        freeze.freeze({B: MapChange(B, (0, 1), (0, 2), True, True)})
        assert list(freeze.failed) == [B] and freeze.frozen == set()
        assert not agents[0].core.frozen_keys and not agents[1].core.frozen_keys
    finally:
        sock.close()
        pool.close()
