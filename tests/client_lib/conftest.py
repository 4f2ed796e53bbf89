"""Fixtures of the clients' tests: the agent's (real memcached/redis-server processes and
in-process agents, tests/server_agent/conftest.py) and a fake server that answers as it is told."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator

from kvswitch import protocol as p
from tests.server_agent.conftest import (  # noqa: F401 (fixtures, found by pytest by name)
    agent_factory,
    backend,
    backend_factory,
    memcached_addr,
    redis_addr,
)


def fake_server(answer: Callable[[p.Message], p.Message | None]) -> Iterator[tuple[str, int]]:
    """A UDP server on loopback that answers each request with ``answer(request)`` (None: no
    answer); yields its address, for the clients' typed-error tests."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(0.1)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                data, src = sock.recvfrom(65535)
            except TimeoutError:
                continue
            reply = answer(p.Message.decode(data))
            if reply is not None:
                sock.sendto(reply.encode(), src)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield sock.getsockname()
    stop.set()
    thread.join()
    sock.close()
