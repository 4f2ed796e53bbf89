"""UNAVAILABLE (the switch answers for a dead origin, docs/protocol.md "Faults") is a prompt typed
error in the Python clients: ``Unavailable``; a write is ``maybe_applied`` unless its first attempt
got the answer (an earlier unanswered attempt may have reached the key's replicas). The C client's
KVS_ERR_UNAVAILABLE is tested in client_lib/c/tests/test_client.c."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator

import pytest

from kvswitch import protocol as p
from kvswitch.client import AsyncClient, Client, Request, ServerError, Unavailable
from tests.client_lib.conftest import fake_server


def _serve(ignore_first: bool) -> Iterator[tuple[str, int]]:
    """Answers every request UNAVAILABLE, as the switch does; with ``ignore_first``, only from
    the second datagram of each request id on (the first one was "lost")."""
    seen: set[tuple[int, int]] = set()

    def answer(req: p.Message) -> p.Message | None:
        if ignore_first and (req.cid, req.seq) not in seen:
            seen.add((req.cid, req.seq))
            return None
        return req.reply(p.REPLY_OF[p.Op(req.op)], p.Status.UNAVAILABLE)

    yield from fake_server(answer)


@pytest.fixture
def refusing() -> Iterator[tuple[str, int]]:
    yield from _serve(ignore_first=False)


@pytest.fixture
def refusing_late() -> Iterator[tuple[str, int]]:
    yield from _serve(ignore_first=True)


def test_refused_at_once_is_not_applied(refusing: tuple[str, int]) -> None:
    with Client([refusing], timeout=2.0, retries=3) as c:
        began = time.monotonic()
        with pytest.raises(Unavailable) as info:
            c.set(b"k", b"v")
        assert time.monotonic() - began < 1.0  # no timeout waited
        assert info.value.maybe_applied is False and info.value.status == p.Status.UNAVAILABLE
        assert isinstance(info.value, ServerError)
        with pytest.raises(Unavailable):
            c.get(b"k")
        with pytest.raises(Unavailable) as info:
            c.delete(b"k")
        assert info.value.maybe_applied is False
        outcomes = c.pipeline([Request("set", b"a", b"1"), Request("get", b"a")])
        assert all(isinstance(o.error, Unavailable) for o in outcomes)
        assert isinstance(outcomes[0].error, Unavailable) and not outcomes[0].error.maybe_applied


def test_refused_after_a_lost_attempt_may_be_applied(refusing_late: tuple[str, int]) -> None:
    with Client([refusing_late], timeout=0.2, retries=3) as c:
        with pytest.raises(Unavailable) as info:
            c.set(b"k", b"v")
        assert info.value.maybe_applied is True
        (out,) = c.pipeline([Request("delete", b"a")])
        assert isinstance(out.error, Unavailable) and out.error.maybe_applied


def test_async_client_raises_unavailable(refusing: tuple[str, int]) -> None:
    async def run() -> None:
        async with await AsyncClient.connect([refusing], timeout=2.0) as kv:
            with pytest.raises(Unavailable):
                await kv.get(b"k")
            with pytest.raises(Unavailable) as info:
                await kv.set(b"k", b"v")
            assert info.value.maybe_applied  # the asyncio client does not say: unknown

    asyncio.run(run())


def test_a_tcp_write_to_a_server_whose_agent_is_gone_is_unavailable_at_once() -> None:
    """TCP is not the switch's to answer: a refused connection (the host is up, no agent listens)
    is the client's own prompt Unavailable, nothing sent, nothing applied."""
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with Client([("127.0.0.1", port)], timeout=2.0, retries=3, tcp_writes=True) as c:
        began = time.monotonic()
        with pytest.raises(Unavailable) as info:
            c.set(b"k", b"v")
        assert time.monotonic() - began < 1.0  # no timeout waited, no retry loop
        assert info.value.maybe_applied is False
        assert "refused the TCP connection" in str(info.value)
