"""Agents and clients end to end through a Python model of the switch rules (tests/server_agent/model_switch.py).

A key is made hot with two replicas, the origin agent runs the SYNC flow through the control API,
each replica takes the item over its own control API and CONFIRMs, and Gets are then redirected to replicas; concurrent clients writing and
reading the hot key through redirection produce a linearizable history.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from kvswitch import protocol as p
from kvswitch.agent.backends import Item, MemoryBackend
from kvswitch.agent.control import AgentControl
from kvswitch.agent.core import AgentCore
from kvswitch.agent.server import AgentServer
from kvswitch.client import Client
from kvswitch.consistency.lincheck import Op as HistOp
from kvswitch.consistency.lincheck import check_history

from .model_switch import ModelSwitch

HOT = b"hot-key"


@pytest.fixture
def rack(
    agent_factory: Callable[..., AgentServer],
) -> Iterator[tuple[ModelSwitch, list[AgentServer]]]:
    agents = [agent_factory(MemoryBackend(), control_port=0) for _ in range(3)]
    switch = ModelSwitch([("127.0.0.1", a.port) for a in agents])
    for a in agents:
        a.core.switch_addr = switch.control_addr
    switch.start()
    yield switch, agents
    switch.stop()


def _wait(cond: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 5
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def _make_hot(switch: ModelSwitch, agents: list[AgentServer]) -> list[int]:
    origin = p.HashRing(3).origin(HOT)
    holders = [origin] + [i for i in range(3) if i != origin]
    switch.make_hot(HOT, holders)
    # The controller's push (controller/agents.py): the origin syncs, each replica takes the item
    # over its own control channel.
    with AgentControl("127.0.0.1", agents[origin].control_port or 0) as ctl:
        item = ctl.sync(HOT)
    for i in holders[1:]:
        with AgentControl("127.0.0.1", agents[i].control_port or 0) as ctl:
            assert ctl.push(HOT, item) == (item.epoch, item.ver)
    slot = switch.hot[p.pad_key(HOT)]
    assert (item.epoch, item.ver) == (switch.epoch, slot.slot_ver)
    _wait(
        lambda: (
            all(slot.valid_ver.get(i) == slot.slot_ver for i in holders[1:])
            and slot.origin_ver == slot.slot_ver
        ),
        "replicas to confirm the pushed version",
    )
    return holders


def test_push_then_redirected_gets(rack: tuple[ModelSwitch, list[AgentServer]]) -> None:
    switch, agents = rack
    with Client(switch.front_addrs, timeout=1.0) as c:
        c.set(HOT, b"v0")  # cold: unversioned, at the origin only
        holders = _make_hot(switch, agents)
        assert [c.get(HOT) for _ in range(30)] == [b"v0"] * 30
        assert switch.stats["get_to_replica"] == 20  # round robin over 3, two valid replicas
        for i in holders[1:]:
            assert agents[i].core.stats["op_get"] == 10
        # A write invalidates the replicas until the origin acknowledges and they confirm.
        c.set(HOT, b"v1")
        slot = switch.hot[p.pad_key(HOT)]
        _wait(
            lambda: all(slot.valid_ver.get(i) == slot.slot_ver for i in holders[1:]),
            "replicas to confirm the new write",
        )
        assert [c.get(HOT) for _ in range(9)] == [b"v1"] * 9
        # A confirm of an older version, from the replica's own address, changes nothing.
        old = p.Message(p.Op.CONFIRM, p.pad_key(HOT), epoch=1, ver=slot.slot_ver - 1)
        agents[holders[1]].send([(old.encode(), switch.control_addr)])
        _wait(lambda: switch.stats["confirm_ignored"] == 1, "the stale confirm")
        assert slot.valid_ver[holders[1]] == slot.slot_ver
        assert c.delete(HOT) is True
        assert c.get(HOT) is None


def test_concurrent_clients_through_redirection(
    rack: tuple[ModelSwitch, list[AgentServer]],
) -> None:
    switch, agents = rack
    with Client(switch.front_addrs, timeout=1.0) as c:
        c.set(HOT, b"init")
    _make_hot(switch, agents)
    before = switch.stats["get_to_replica"]
    history: list[HistOp] = []
    lock = threading.Lock()

    def worker(n: int) -> None:
        rng = random.Random(n)
        with Client(switch.front_addrs, timeout=1.0) as c:
            for i in range(80):
                key = HOT if rng.random() < 0.8 else b"cold"
                kind = "get" if rng.random() < 0.75 else "set"
                call = time.monotonic()
                value = b"%d-%d" % (n, i) if kind == "set" else None
                output = c.get(key) if kind == "get" else c.set(key, value or b"")
                ret = time.monotonic()
                with lock:
                    history.append(HistOp(kind, key, call, ret, value, output, n))
                if kind == "get":
                    time.sleep(0.001)  # leave the replicas time to confirm between writes

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    results = check_history(history, {HOT: b"init", b"cold": None})
    assert all(r.ok for r in results), [r.key for r in results if not r.ok]
    assert switch.stats["get_to_replica"] - before > 10, dict(switch.stats)
    assert switch.stats["stamped_writes"] > 10


def test_rig_catches_replicas_that_take_the_version_without_the_value(
    rack: tuple[ModelSwitch, list[AgentServer]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The broken variant: a replica takes an UPDATE's version but keeps the old value, and
    CONFIRMs it. Its read replies carry the version the origin reported, so rule 6 passes them,
    and redirected Gets return the old value: the history check must say so (the check has
    teeth). (A replica that confirms without applying is not enough any more: its replies carry
    the old version, which rule 6 drops, as only exactly origin_ver passes.)"""
    switch, agents = rack
    real_dispatch = AgentCore._dispatch

    def confirm_without_applying(
        self: AgentCore, msg: p.Message, src: tuple[str, int], reply_op: int | None
    ) -> list[tuple[bytes, tuple[str, int]]]:
        stored = self.backend.get(msg.key)
        if msg.op == p.Op.UPDATE and self.switch_addr is not None and stored is not None:
            self.backend.put(msg.key, Item(stored.value, msg.epoch, msg.ver))
            confirm = p.Message(p.Op.CONFIRM, msg.key, epoch=msg.epoch, ver=msg.ver)
            return [(confirm.encode(), self.switch_addr)]
        return real_dispatch(self, msg, src, reply_op)

    monkeypatch.setattr(AgentCore, "_dispatch", confirm_without_applying)
    history: list[HistOp] = []
    with Client(switch.front_addrs, timeout=1.0) as c:
        c.set(HOT, b"old")
        holders = _make_hot(switch, agents)
        call = time.monotonic()
        c.set(HOT, b"new")
        history.append(HistOp("set", HOT, call, time.monotonic(), b"new"))
        slot = switch.hot[p.pad_key(HOT)]
        _wait(
            lambda: all(slot.valid_ver.get(i) == slot.slot_ver for i in holders[1:]),
            "the (false) confirms",
        )
        for _ in range(6):
            call = time.monotonic()
            value = c.get(HOT)
            history.append(HistOp("get", HOT, call, time.monotonic(), output=value))
    assert b"old" in [op.output for op in history]
    assert not all(r.ok for r in check_history(history, {HOT: b"old"}))
