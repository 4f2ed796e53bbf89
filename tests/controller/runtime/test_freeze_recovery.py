"""A fabric controller killed in the middle of a write freeze (docs/protocol.md F7, "Changing the
writer map"; docs/fabric.md "Write rotation", "Failures"), then restarted: the agents list the
keys they hold frozen (``key_frozen``), the restarted controller freezes each again at those
agents and at the holders of the map the spine holds, imports the merge of their exports into
each and releases them (controller/rotation.py ``recover``). After it the key's writes are
served again, every holder of the spine's map holds the newest item and knows every request id
(a repeat is answered ``F_DUP``, never applied twice). In-process agents on the memory backend;
the fabric's switches are the software switch's (tests/controller/fabric_net.py)."""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path

import pytest

from kvswitch import protocol as p
from kvswitch.agent.backends import Backend
from kvswitch.agent.control import KeyExport
from kvswitch.agent.server import AgentServer
from kvswitch.controller.agents import AgentPool
from kvswitch.controller.fabric import FabricConfig
from kvswitch.controller.fabric_runtime import FabricRuntime
from kvswitch.controller.p4rt_driver import Program
from kvswitch.controller.rackfile import RackFile
from kvswitch.controller.rotation import MapChange, WriteFreeze, recover
from tests.controller import fabric_net as fn
from tests.controller.test_fabric_rotation import inputs
from tests.controller.test_fabric_runtime import HOT, origin_of

A = p.pad_key(b"a")
EPOCH = 0x8001


class Killed(BaseException):
    """The controller's process ends here (not an error any step catches)."""


class Crashing:
    """The agents' freeze hooks of ``pool`` that kill the controller at its ``at``-th call of
    ``step`` (1: the first)."""

    def __init__(self, pool: AgentPool, step: str, at: int) -> None:
        self.pool, self.step, self.left = pool, step, at

    def _call(self, step: str) -> None:
        if step == self.step:
            self.left -= 1
            if self.left == 0:
                raise Killed(step)

    def key_freeze(self, key: bytes, server: int) -> None:
        self._call("freeze")
        self.pool.key_freeze(key, server)

    def key_export(self, key: bytes, server: int) -> KeyExport:
        self._call("export")
        return self.pool.key_export(key, server)

    def key_import(self, key: bytes, server: int, export: KeyExport) -> None:
        self._call("import")
        self.pool.key_import(key, server, export)

    def key_release(self, key: bytes, server: int) -> None:
        self._call("release")
        self.pool.key_release(key, server)

    def key_frozen(self, server: int) -> list[bytes]:
        return self.pool.key_frozen(server)


class Agents:
    """``count`` in-process agents and a controller's AgentPool over them."""

    def __init__(
        self, start: Callable[..., AgentServer], make: Callable[[str], Backend], count: int
    ):
        self.agents = [start(make("memory"), control_port=0) for _ in range(count)]
        servers = [
            dict(name=f"s{i}", ip=f"10.0.0.{i + 1}", mac=f"02:00:00:00:00:{i + 1:02x}", port=i + 1)
            | {"control": f"127.0.0.1:{a.control_port}"}
            for i, a in enumerate(self.agents)
        ]
        self.rack = RackFile.parse(
            {"switch": {"ip": "10.0.0.254", "mac": "02:00:00:00:00:fe"}, "servers": servers}
        )
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(3.0)

    def pool(self) -> AgentPool:
        """A new controller's connections."""
        return AgentPool(self.rack, timeout=2.0)

    def ask(self, server: int, msg: p.Message) -> p.Message:
        self.sock.sendto(msg.encode(), ("127.0.0.1", self.agents[server].port))
        return p.Message.decode(self.sock.recvfrom(65535)[0])

    def frozen(self) -> list[set[bytes]]:
        return [set(a.core.frozen_keys) for a in self.agents]

    def item(self, server: int, key: bytes) -> tuple[bytes, int] | None:
        got = self.agents[server].core.backend.get(key)
        return None if got is None else (got.value, got.ver)


def two_writes(a: Agents, key: bytes) -> tuple[p.Message, p.Message]:
    """w1 taken by the origin (server 0), w2 by holder 1 (a rotated write); both applied."""
    w1 = p.Message(p.Op.SET, key, b"one", cid=3, seq=1, epoch=EPOCH, ver=4)
    w2 = p.Message(p.Op.SET, key, b"two", cid=4, seq=1, epoch=EPOCH, ver=5, flags=p.F_REDIRECT)
    assert a.ask(0, w1).status == p.Status.OK
    assert a.ask(1, w2).status == p.Status.OK
    return w1, w2


def served_right(a: Agents, key: bytes, holders: tuple[int, ...], writes) -> None:
    """Nothing frozen; every holder of the map holds the newest item and answers a repeat of
    every write F_DUP at its version (applied once); a new write is served."""
    assert a.frozen() == [set()] * len(a.agents)
    for h in holders:
        assert a.item(h, key) == (b"two", 5)
        for w in writes:
            r = a.ask(h, w)
            assert r.status == p.Status.OK and r.flags & p.F_DUP and r.ver == w.ver
        assert a.item(h, key) == (b"two", 5)
    last = holders[-1]
    new = p.Message(p.Op.SET, key, b"new", cid=5, seq=1, epoch=EPOCH, ver=6, flags=p.F_REDIRECT)
    assert a.ask(last, new).status == p.Status.OK and a.item(last, key) == (b"new", 6)


# (step, call, frozen after, map the switch holds): where the controller is killed in a change
# from (0, 1) rotated to (0, 1, 2): while freezing (two of three holders frozen), after one
# export, after one import (the others not imported), in the release (one holder released; the
# switch was written with the new map, or its write failed and it holds the old one)
OLD, NEW = (0, 1), (0, 1, 2)
KILLS = [
    ("freeze", 3, (0, 1), OLD),
    ("export", 2, NEW, OLD),
    ("import", 2, NEW, OLD),
    ("release", 2, (1, 2), OLD),
    ("release", 2, (1, 2), NEW),
]


@pytest.mark.parametrize(("step", "call", "left", "holders"), KILLS)
def test_a_freeze_left_by_a_killed_controller_is_finished(
    agents: Agents, step: str, call: int, left: tuple[int, ...], holders: tuple[int, ...]
) -> None:
    a = agents
    w1, w2 = two_writes(a, A)
    crashed = a.pool()
    try:
        freeze = WriteFreeze(Crashing(crashed, step, call))
        with pytest.raises(Killed):
            freeze.freeze({A: MapChange(A, OLD, NEW, True, True)})
            freeze.release()
    finally:
        crashed.close()
    assert [s for s, keys in enumerate(a.frozen()) if A in keys] == list(left)
    later = p.Message(p.Op.SET, A, b"x", cid=6, seq=1, epoch=EPOCH, ver=6, flags=p.F_REDIRECT)
    assert a.ask(1, later).status == p.Status.RETRY  # its writes wait for a controller
    pool = a.pool()  # the restarted controller
    try:
        got = recover(WriteFreeze(pool), range(len(a.agents)), lambda key: holders)
    finally:
        pool.close()
    assert got.found == {A: left} and got.unlisted == {} and got.failed == {}
    served_right(a, A, holders, (w1, w2))


def test_an_agent_that_does_not_answer_is_listed_again(agents: Agents) -> None:
    """A server whose frozen keys cannot be read is reported; the others are finished."""
    a = agents
    pool = a.pool()
    try:
        pool.key_freeze(A, 0)
        a.agents[5].stop()
        got = recover(WriteFreeze(pool), range(len(a.agents)), lambda key: (0,))
        assert got.found == {A: (0,)} and list(got.unlisted) == [5] and got.failed == {}
        assert not a.agents[0].core.frozen_keys
    finally:
        pool.close()


def test_a_restarted_fabric_controller_finishes_a_freeze_it_was_killed_in(
    net: fn.Net, progs: tuple[Program, Program], tmp_path: Path, agents: Agents
) -> None:
    """The fabric runtime on the test fabric with real agents: HOT is made rotated; the next
    period turns its rotation off and the controller is killed after the first import (every
    holder frozen, the spine not written). A new runtime's start() finds HOT frozen at its
    holders, finishes the freeze toward the map the spine holds (still rotated) and releases
    it: HOT's writes are served, each holder holds the newest item and knows both ids."""
    a = agents
    packets = fn.PacketAgents(net)
    spines = fn.spine_drivers(net, progs[0], packets)
    leaves = fn.leaf_drivers(net, progs[1])
    config = FabricConfig(k=16, t0=10.0, holder_share=0.1)
    state = tmp_path / "state.json"
    first, second = a.pool(), a.pool()
    try:
        rt = FabricRuntime(net.fabric, spines, leaves, config, origin_of, state, freeze=first)
        rt.start()
        assert rt.period(inputs()).errors == []
        s = rt.spine_of[HOT]
        kp = rt.plans[s].keys[HOT]
        assert kp.rotate and kp.holders[0] == 0 and len(kp.holders) >= 2
        w1 = p.Message(p.Op.SET, HOT, b"one", cid=3, seq=1, epoch=EPOCH, ver=4)
        w2 = p.Message(p.Op.SET, HOT, b"two", cid=4, seq=1, epoch=EPOCH, ver=5, flags=p.F_REDIRECT)
        assert a.ask(kp.holders[0], w1).status == p.Status.OK
        assert a.ask(kp.holders[1], w2).status == p.Status.OK
        rt.freezer = WriteFreeze(Crashing(first, "import", 2))
        with pytest.raises(Killed):
            rt.period(inputs(writes=0))  # rotation off: a map change
        rt.close()
        assert [s for s, keys in enumerate(a.frozen()) if HOT in keys] == sorted(kp.holders)
        again = FabricRuntime(net.fabric, spines, leaves, config, origin_of, state, freeze=second)
        try:
            again.start()
            assert again.plans[s].keys[HOT] == kp  # the spine still holds the rotated map
            assert again.unlisted == set()
            served_right(a, HOT, kp.holders, (w1, w2))
        finally:
            again.close()
    finally:
        first.close()
        second.close()
        for d in spines + leaves:
            d.close()
