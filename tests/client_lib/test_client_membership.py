"""The Python client's side of elastic membership (docs/protocol.md "Membership"): it follows a
ring change through MOVED and RING_GET, backs off on RETRY, and gives up with a typed error."""

from __future__ import annotations

import asyncio
import itertools
import socket
import time
from collections.abc import Callable, Iterator

import pytest

from kvswitch import protocol as p
from kvswitch.agent.backends import MemoryBackend
from kvswitch.agent.server import AgentServer
from kvswitch.client import AsyncClient, Client, Moved, Request

from .conftest import fake_server

LOOP = "127.0.0.1"


def _ring(version: int, agents: list[AgentServer], ids: list[int]) -> p.Ring:
    return p.Ring(version, tuple(p.Member(i, LOOP, agents[i].port) for i in ids))


def test_client_follows_an_added_server(agent_factory: Callable[..., AgentServer]) -> None:
    agents = [agent_factory(MemoryBackend()) for _ in range(3)]
    v1, v2 = _ring(1, agents, [0, 1]), _ring(2, agents, [0, 1, 2])
    for me, a in enumerate(agents):
        a.core.set_ring(v1, me)
    keys = [b"k%d" % i for i in range(60)]
    moving = [k for k in keys if v2.origin(k) == 2]
    assert moving
    # the client knows servers 0 and 1 only (version 0 of its ring)
    with Client([(LOOP, agents[0].port), (LOOP, agents[1].port)], timeout=0.5) as c:
        for k in keys:
            c.set(k, b"v-" + k)
        for me, a in enumerate(agents):
            a.core.prepare_ring(v2, me)
        for src in (0, 1):
            agents[2].core.import_items(agents[src].core.export(2), src, complete=False)
        for a in agents:
            a.core.freeze()
        for src in (0, 1):
            agents[2].core.import_items(agents[src].core.export(2), src, complete=True)
        for a in agents:
            a.core.release()
        for a in agents:
            a.core.activate_ring()
        assert c.ring.version == 0
        for k in keys:
            assert c.get(k) == b"v-" + k
        assert c.ring == v2 and c.ring_refreshes == 1
        assert agents[2].core.stats["op_get"] == len(moving)
        c.set(moving[0], b"new")
        assert c.get(moving[0]) == b"new"
    # a pipelining client with the old ring follows MOVED too
    with Client([(LOOP, agents[0].port), (LOOP, agents[1].port)], timeout=0.5) as c:
        outs = c.pipeline([Request("get", k) for k in keys[1:]], window=16)
        assert [o.error for o in outs] == [None] * (len(keys) - 1)
        assert [o.value for o in outs] == [
            b"new" if k == moving[0] else b"v-" + k for k in keys[1:]
        ]
        assert c.ring == v2
    assert sum(a.core.drop_moved() for a in agents[:2]) == len(moving)


def test_retry_backs_off_then_succeeds() -> None:
    seen: list[float] = []

    def answer(req: p.Message) -> p.Message:
        seen.append(time.monotonic())
        status = p.Status.RETRY if len(seen) <= 3 else p.Status.OK
        return req.reply(p.REPLY_OF[p.Op(req.op)], status)

    for server in fake_server(answer):
        with Client([server], timeout=0.5, retries=1) as c:
            c.set(b"k", b"v")
    gaps = [b - a for a, b in itertools.pairwise(seen)]
    assert len(seen) == 4
    assert gaps[0] >= 0.002 and gaps[1] >= 0.004 and gaps[2] >= 0.008


def test_pipeline_retry_backs_off_then_succeeds() -> None:
    answers: dict[int, int] = {}

    def answer(req: p.Message) -> p.Message:
        answers[req.seq] = answers.get(req.seq, 0) + 1
        status = p.Status.RETRY if answers[req.seq] <= 2 else p.Status.OK
        return req.reply(p.REPLY_OF[p.Op(req.op)], status, b"v" if status == p.Status.OK else b"")

    for server in fake_server(answer):
        with Client([server], timeout=0.5, retries=1) as c:
            outs = c.pipeline([Request("get", b"k%d" % i) for i in range(20)], window=8)
    assert [o.error for o in outs] == [None] * 20 and all(o.value == b"v" for o in outs)
    assert sorted(answers.values()) == [3] * 20


def _moved_forever(version: int) -> Iterator[tuple[str, int]]:
    where: list[tuple[str, int]] = []

    def answer(req: p.Message) -> p.Message:
        if req.op == p.Op.RING_GET:
            ring = p.Ring(version, (p.Member(0, LOOP, where[0][1]),))
            return req.reply(p.Op.RING_REPLY, p.Status.OK, ring.encode())
        return req.reply(p.REPLY_OF[p.Op(req.op)], p.Status.MOVED, version.to_bytes(4, "big"))

    for server in fake_server(answer):
        where.append(server)
        yield server


def test_moved_without_end_is_a_typed_error() -> None:
    for server in _moved_forever(5):
        with Client([server], timeout=0.3) as c:
            start = time.monotonic()
            with pytest.raises(Moved):
                c.get(b"k")
            assert time.monotonic() - start < 0.3
            assert c.ring.version == 5
            (out,) = c.pipeline([Request("set", b"k", b"v")])
            assert isinstance(out.error, Moved)


def test_malformed_ring_reply_is_ignored() -> None:
    def answer(req: p.Message) -> p.Message:
        if req.op == p.Op.RING_GET:
            return req.reply(p.Op.RING_REPLY, p.Status.OK, b"\x00\x00\x00\x09junk")
        return req.reply(p.REPLY_OF[p.Op(req.op)], p.Status.MOVED, (9).to_bytes(4, "big"))

    for server in fake_server(answer):
        with Client([server], timeout=0.3) as c:
            with pytest.raises(Moved):
                c.get(b"k")
            assert c.ring.version == 0


def test_async_client_follows_moved_and_retry(agent_factory: Callable[..., AgentServer]) -> None:
    agents = [agent_factory(MemoryBackend()) for _ in range(2)]
    v1, v2 = _ring(1, agents, [0]), _ring(2, agents, [0, 1])
    for me, a in enumerate(agents):
        a.core.set_ring(v1, me)
    keys = [b"a%d" % i for i in range(40)]
    moving = [k for k in keys if v2.origin(k) == 1]

    async def run() -> None:
        async with await AsyncClient.connect([(LOOP, agents[0].port)], timeout=0.5) as c:
            for k in keys:
                await c.set(k, k)
            for me, a in enumerate(agents):
                a.core.prepare_ring(v2, me)
            agents[0].core.freeze()
            # frozen: a write of a moving key is answered RETRY until the handoff ends
            late = asyncio.get_running_loop().call_later(0.05, handoff)
            await c.set(moving[0], b"after")
            late.cancel()
            assert [await c.get(k) for k in keys] == [
                b"after" if k == moving[0] else k for k in keys
            ]
            assert c.ring == v2

    def handoff() -> None:  # the agents' own lock: their threads serve the client meanwhile
        with agents[0].lock, agents[1].lock:
            agents[1].core.import_items(agents[0].core.export(1), 0, complete=True)
            agents[0].core.release()
            for a in agents:
                a.core.activate_ring()

    asyncio.run(run())
    assert agents[0].core.stats["retry"] > 0 and agents[1].core.stats["op_set"] == 1


def test_pipeline_asks_another_member_after_a_timeout(
    agent_factory: Callable[..., AgentServer],
) -> None:
    """Server 0 is gone (silent) and the ring without it is out: the pipeline's timed-out
    requests fetch the ring from the other member and are resent to their new origin."""
    agent = agent_factory(MemoryBackend())
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as silent:
        silent.bind((LOOP, 0))
        servers = [silent.getsockname(), (LOOP, agent.port)]
        agent.core.set_ring(p.Ring(1, (p.Member(1, LOOP, agent.port),)), 1)
        with Client(servers, timeout=0.2, retries=2) as c:
            keys = [b"k%d" % i for i in range(40)]
            assert any(c.ring.origin(k) == 0 for k in keys)
            outs = c.pipeline([Request("set", k, b"v") for k in keys], window=8)
            assert [o.error for o in outs] == [None] * len(keys)
            assert c.ring.version == 1 and c.ring_refreshes == 1
