"""The asyncio KVSwitch client: as many requests in flight as there are tasks.

Same semantics as :class:`kvswitch.client.Client` (origins by consistent hashing, replies matched by
(key, seq) from any address, retries resending the same request id, typed errors, ``get`` → None for
a missing key) over one UDP endpoint of the running event loop. Writes go over UDP only.

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
from kvswitch.client.client import Addr, client_identity, get_result, write_result
from kvswitch.client.errors import ClientClosed, Timeout

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
        self.ring = p.HashRing(len(self.servers), vnodes)
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
        if self._transport is None:
            raise ClientClosed("client is closed (or not connected)")
        seq = next(self._seq) & 0xFFFFFFFF
        raw = p.Message(op, key16, value, cid=self.cid, seq=seq).encode()
        addr = self.servers[self.ring.origin(key16)]
        fut: asyncio.Future[p.Message] = asyncio.get_running_loop().create_future()
        self._waiting[(key16, seq)] = (p.REPLY_OF[op], fut)
        try:
            for _ in range(self.retries + 1):
                if self._transport is None:
                    raise ClientClosed("client is closed")
                self._transport.sendto(raw, addr)
                try:
                    return await asyncio.wait_for(asyncio.shield(fut), self.timeout)
                except TimeoutError:
                    continue
            raise Timeout(f"no reply from {addr} after {self.retries + 1} attempts")
        finally:
            self._waiting.pop((key16, seq), None)
            if not fut.done():
                fut.cancel()

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
