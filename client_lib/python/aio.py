"""The asyncio KVSwitch client: as many requests in flight as there are tasks.

Same semantics as :class:`kvswitch.client.Client` (origins by consistent hashing over a versioned
ring that follows MOVED/RETRY and RING_GET, docs/protocol.md "Membership"; replies matched by (key,
seq) from any address, retries resending the same request id, typed errors, ``get`` → None for a
missing key) over one UDP endpoint of the running event loop. Writes go over UDP only.

    async with await AsyncClient.connect([("10.0.0.1", 8900)]) as kv:
        await kv.set("k", b"v")
        values = await asyncio.gather(*(kv.get("k") for _ in range(100)))
"""

from __future__ import annotations

import asyncio
import itertools
import random
import socket
from collections.abc import Sequence

from kvswitch import protocol as p
from kvswitch.client.client import (
    Addr,
    Follow,
    Step,
    client_identity,
    get_result,
    write_result,
)
from kvswitch.client.errors import ClientClosed

_Waiter = tuple[int, "asyncio.Future[p.Message]"]


class _Endpoint(asyncio.DatagramProtocol):
    def __init__(self, client: AsyncClient) -> None:
        self.client = client

    def datagram_received(self, data: bytes, addr: Addr) -> None:
        self.client._deliver(data)

    def error_received(self, exc: Exception) -> None:  # e.g. ICMP unreachable: retries handle it
        pass


class AsyncClient:
    """An asyncio client; build it with :meth:`connect` inside a running loop."""

    def __init__(
        self,
        servers: Sequence[Addr],
        cid: int | None = None,
        timeout: float = 0.5,
        retries: int = 3,
        vnodes: int = p.DEFAULT_VNODES,
    ) -> None:
        self.servers, self.cid = client_identity(servers, cid)
        self.timeout = timeout
        self.retries = retries
        self.ring = p.Ring.of_servers(self.servers, vnodes)
        self.ring_refreshes = 0
        self.stray_replies = 0
        self._seq = itertools.count(random.randrange(1, 1 << 31))
        self._waiting: dict[tuple[bytes, int], _Waiter] = {}
        self._transport: asyncio.DatagramTransport | None = None

    @classmethod
    async def connect(cls, servers: Sequence[Addr], **kwargs: object) -> AsyncClient:
        client = cls(servers, **kwargs)  # type: ignore[arg-type]
        loop = asyncio.get_running_loop()
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        # Room for a burst of replies: thousands of requests may be in flight.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        sock.bind(("0.0.0.0", 0))
        sock.setblocking(False)
        transport, _ = await loop.create_datagram_endpoint(lambda: _Endpoint(client), sock=sock)
        client._transport = transport
        return client

    async def get(self, key: bytes | str) -> bytes | None:
        return get_result(await self._call(p.Op.GET, p.pad_key(key)))

    async def set(self, key: bytes | str, value: bytes) -> None:
        write_result(await self._call(p.Op.SET, p.pad_key(key), p.check_value(value)))

    async def delete(self, key: bytes | str) -> bool:
        return write_result(await self._call(p.Op.DEL, p.pad_key(key)))

    async def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
            self._transport = None
        for _, fut in self._waiting.values():
            fut.cancel()
        self._waiting.clear()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _call(self, op: p.Op, key16: bytes, value: bytes = b"") -> p.Message:
        """Send and resend until a reply, following the membership rules (``Follow``)."""
        if self._transport is None:
            raise ClientClosed("client is closed (or not connected)")
        seq = next(self._seq) & 0xFFFFFFFF
        raw = p.Message(op, key16, value, cid=self.cid, seq=seq).encode()
        loop = asyncio.get_running_loop()
        follow = Follow(loop.time() + self.timeout * (self.retries + 1), self.retries)
        while True:
            addr = self.ring.address(key16)
            follow.attempts += 1
            reply = await self._exchange(raw, (key16, seq), int(p.REPLY_OF[op]), addr)
            step = follow.step(reply, addr, self.ring.version, loop.time())
            if step is Step.ELSEWHERE:
                others = [(m.ip, m.port) for m in self.ring.members if (m.ip, m.port) != addr]
                refreshed = bool(others) and await self.refresh_ring(random.choice(others))
                if refreshed and self.ring.address(key16) != addr:
                    continue  # a newer ring names another origin: try it now
                step = follow.after_elsewhere(reply, addr)
            if step is Step.REFRESH:
                await self.refresh_ring(addr)
            elif step is Step.WAIT:
                await asyncio.sleep(follow.waited)
            elif step is Step.DONE:
                assert reply is not None
                return reply

    async def refresh_ring(self, server: Addr) -> bool:
        """Ask ``server`` for its ring (RING_GET); adopt it if newer. True if adopted."""
        seq = next(self._seq) & 0xFFFFFFFF
        zero = bytes(p.KEY_LEN)
        raw = p.pack(p.Op.RING_GET, zero, b"", 0, self.cid, seq)
        reply = await self._exchange(raw, (zero, seq), int(p.Op.RING_REPLY), server)
        if reply is None or reply.status != p.Status.OK:
            return False
        try:
            ring = p.Ring.decode(reply.value)
        except p.MalformedMessage:
            return False
        if ring.version <= self.ring.version:
            return False
        self.ring = ring
        self.ring_refreshes += 1
        return True

    async def _exchange(
        self, raw: bytes, ident: tuple[bytes, int], expect: int, addr: Addr
    ) -> p.Message | None:
        """One attempt: send, wait ``timeout`` for the reply (None: no reply)."""
        if self._transport is None:
            raise ClientClosed("client is closed")
        fut: asyncio.Future[p.Message] = asyncio.get_running_loop().create_future()
        self._waiting[ident] = (expect, fut)
        try:
            self._transport.sendto(raw, addr)
            try:
                return await asyncio.wait_for(fut, self.timeout)
            except TimeoutError:
                return None
        finally:
            if self._waiting.get(ident, (0, None))[1] is fut:
                del self._waiting[ident]

    def _deliver(self, data: bytes) -> None:
        try:
            msg = p.Message.decode(data)
        except p.MalformedMessage:
            self.stray_replies += 1
            return
        waiter = self._waiting.get((msg.key, msg.seq))
        if waiter is None or msg.cid != self.cid or msg.op != waiter[0] or waiter[1].done():
            self.stray_replies += 1
            return
        waiter[1].set_result(msg)
