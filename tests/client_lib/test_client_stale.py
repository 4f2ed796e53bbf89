"""A write answered STALE is never a success (docs/client.md): the Python clients raise
``StaleWrite`` with the version the server holds (sync, pipelined and asyncio); a Get is unaffected.
(The C client's KVS_ERR_STALE is tested in client_lib/c/tests/test_client.c.)"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from kvswitch import protocol as p
from kvswitch.client import AsyncClient, Client, Request, ServerError, StaleWrite
from tests.client_lib.conftest import fake_server

HELD = (9, 1234)


@pytest.fixture
def stale_server() -> Iterator[tuple[str, int]]:
    """Answers every Set/Delete STALE (holding version HELD) and every Get with a value."""

    def answer(req: p.Message) -> p.Message:
        if req.op == p.Op.GET:
            return req.reply(p.Op.GET_REPLY, p.Status.OK, b"newer", epoch=HELD[0], ver=HELD[1])
        return req.reply(p.REPLY_OF[p.Op(req.op)], p.Status.STALE, epoch=HELD[0], ver=HELD[1])

    yield from fake_server(answer)


def test_sync_client_raises_stale_write(stale_server: tuple[str, int]) -> None:
    with Client([stale_server], timeout=1.0) as c:
        with pytest.raises(StaleWrite) as info:
            c.set(b"k", b"mine")
        assert (info.value.epoch, info.value.ver, info.value.status) == (*HELD, p.Status.STALE)
        assert isinstance(info.value, ServerError)
        with pytest.raises(StaleWrite):
            c.delete(b"k")
        assert c.get(b"k") == b"newer"
        outcomes = c.pipeline([Request("set", b"a", b"1"), Request("get", b"a")])
        assert isinstance(outcomes[0].error, StaleWrite)
        assert outcomes[1].error is None and outcomes[1].value == b"newer"


def test_async_client_raises_stale_write(stale_server: tuple[str, int]) -> None:
    async def run() -> None:
        async with await AsyncClient.connect([stale_server], timeout=1.0) as c:
            with pytest.raises(StaleWrite):
                await c.set(b"k", b"mine")
            with pytest.raises(StaleWrite):
                await c.delete(b"k")

    asyncio.run(run())
