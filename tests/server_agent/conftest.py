"""Fixtures of the agent's tests (and the clients', tests/client_lib/conftest.py): real
memcached/redis-server processes and in-process agents."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import pytest

from kvswitch.agent.backend_procs import MEMCACHED, REDIS_SERVER, start_memcached, start_redis
from kvswitch.agent.backends import Backend, make_backend
from kvswitch.agent.core import AgentCore
from kvswitch.agent.server import AgentConfig, AgentServer


@pytest.fixture(scope="session")
def memcached_addr() -> Iterator[str]:
    if not MEMCACHED.is_file():
        pytest.skip(f"{MEMCACHED} is absent (Debian package memcached; `make test` installs it)")
    proc = start_memcached()
    yield proc.addr
    proc.stop()


@pytest.fixture(scope="session")
def redis_addr() -> Iterator[str]:
    if not REDIS_SERVER.is_file():
        pytest.skip(
            f"{REDIS_SERVER} is absent (Debian package redis-server; `make test` installs it)"
        )
    proc = start_redis()
    yield proc.addr
    proc.stop()


BACKENDS = [
    "memory",
    pytest.param("memcached", marks=pytest.mark.backend),
    pytest.param("redis", marks=pytest.mark.backend),
]


@pytest.fixture
def backend_factory(request: pytest.FixtureRequest) -> Iterator[Callable[[str], Backend]]:
    """Make backends by name, each under its own key prefix (tests share one memcached/redis)."""
    made: list[Backend] = []

    def make(kind: str) -> Backend:
        addr = None
        if kind == "memcached":
            addr = request.getfixturevalue("memcached_addr")
        elif kind == "redis":
            addr = request.getfixturevalue("redis_addr")
        backend = make_backend(kind, addr, prefix=f"t{uuid.uuid4().hex[:8]}:")
        made.append(backend)
        return backend

    yield make
    for backend in made:
        backend.close()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, backend_factory: Callable[[str], Backend]) -> Backend:
    """Each backend in turn (memory, memcached, redis)."""
    return backend_factory(request.param)


@pytest.fixture
def agent_factory() -> Iterator[Callable[..., AgentServer]]:
    """Start in-process agents on free loopback ports; stopped after the test."""
    started: list[AgentServer] = []

    def start(
        backend: Backend, switch: tuple[str, int] | None = None, **config: object
    ) -> AgentServer:
        core = AgentCore(backend, switch)
        cfg = AgentConfig(listen="127.0.0.1", port=0, **config)  # type: ignore[arg-type]
        server = AgentServer(core, cfg)
        server.start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
