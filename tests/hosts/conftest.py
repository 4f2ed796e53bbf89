"""Fixtures of the hosts' tests: real memcached/redis-server processes and in-process agents."""

from __future__ import annotations

import os
import pwd
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kvswitch.agent.backends import Backend, make_backend
from kvswitch.agent.core import AgentCore
from kvswitch.agent.server import AgentConfig, AgentServer

MEMCACHED = "/usr/bin/memcached"
REDIS = "/usr/bin/redis-server"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_tcp(port: int, proc: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on {port}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()  # this very PID, started by the fixture
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="session")
def memcached_addr() -> Iterator[str]:
    if not Path(MEMCACHED).is_file():
        pytest.skip(f"{MEMCACHED} is absent (Debian package memcached; `make test` installs it)")
    port = free_port()
    proc = subprocess.Popen(
        # memcached refuses to run as root unless told which user to be (-u).
        [
            MEMCACHED,
            "-l",
            "127.0.0.1",
            "-p",
            str(port),
            "-U",
            "0",
            "-m",
            "64",
            "-t",
            "2",
            "-u",
            pwd.getpwuid(os.geteuid()).pw_name,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_tcp(port, proc, "memcached")
        yield f"127.0.0.1:{port}"
    finally:
        _stop(proc)


@pytest.fixture(scope="session")
def redis_addr(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if not Path(REDIS).is_file():
        pytest.skip(f"{REDIS} is absent (Debian package redis-server; `make test` installs it)")
    port = free_port()
    workdir = tmp_path_factory.mktemp("redis")
    proc = subprocess.Popen(
        [REDIS, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no",
         "--dir", str(workdir)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        _wait_tcp(port, proc, "redis-server")
        yield f"127.0.0.1:{port}"
    finally:
        _stop(proc)


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
