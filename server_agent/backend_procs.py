"""Start and stop real memcached, redis-server and agent processes on loopback (tests, benchmarks,
demo).

Each helper starts one process on a free port, waits until it serves and returns a
:class:`BackendProcess`; :meth:`BackendProcess.stop` ends exactly that PID. An agent binds port 0
itself and says the numbers it got, so no other socket can take them between a pick and its bind.
"""

from __future__ import annotations

import os
import pwd
import re
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

MEMCACHED = Path("/usr/bin/memcached")
REDIS_SERVER = Path("/usr/bin/redis-server")


def free_port() -> int:
    """A loopback port free for both UDP and TCP right now (a process that can bind port 0 itself
    and say what it got, like the agent, should: another socket can take this one first)."""
    for _ in range(50):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
            udp.bind(("127.0.0.1", 0))
            port = int(udp.getsockname()[1])
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as tcp:
                try:
                    tcp.bind(("127.0.0.1", port))
                except OSError:
                    continue
                return port
    raise RuntimeError("no loopback port free for both UDP and TCP")


@dataclass
class BackendProcess:
    kind: str
    port: int
    proc: subprocess.Popen[bytes]
    workdir: tempfile.TemporaryDirectory[str] | None = field(default=None, repr=False)
    control_port: int | None = None  # an agent's JSON-lines control API, when asked for

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def wait_ready(self, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.kind} exited with status {self.proc.returncode}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"{self.kind} did not accept connections on port {self.port}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.workdir is not None:
            self.workdir.cleanup()
            self.workdir = None


def memcached_command(port: int, binary: str | Path = "memcached") -> list[str]:
    """memcached serving 127.0.0.1:``port`` over TCP only (UDP off), 64 MiB, as the current user
    (memcached refuses to run as root without -u). The one command line of the tests, the
    benchmarks and the Mininet rack (kvsrack.launchers)."""
    user = pwd.getpwuid(os.geteuid()).pw_name
    return [str(binary), "-l", "127.0.0.1", "-p", str(port), "-U", "0", "-m", "64", "-u", user]


def redis_command(port: int, workdir: str | Path, binary: str | Path = "redis-server") -> list[str]:
    """redis-server serving 127.0.0.1:``port``, with no snapshots and no append-only file, its
    working folder ``workdir``. The one command line of the tests, the benchmarks and the Mininet
    rack (kvsrack.launchers)."""
    return [str(binary), "--bind", "127.0.0.1", "--port", str(port), "--save", "",
            "--appendonly", "no", "--dir", str(workdir)]  # fmt: skip


def start_memcached(port: int | None = None, binary: Path = MEMCACHED) -> BackendProcess:
    port = port or free_port()
    args = memcached_command(port, binary)
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    backend = BackendProcess("memcached", port, proc)
    backend.wait_ready()
    return backend


def start_redis(port: int | None = None, binary: Path = REDIS_SERVER) -> BackendProcess:
    port = port or free_port()
    workdir = tempfile.TemporaryDirectory(prefix="kvswitch-redis-")
    args = redis_command(port, workdir.name, binary)
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    backend = BackendProcess("redis", port, proc, workdir)
    backend.wait_ready()
    return backend


def start_agent(
    args: list[str] | tuple[str, ...] = (),
    *,
    control: bool = False,
    preexec_fn: Callable[[], object] | None = None,
) -> BackendProcess:
    """``kvswitch agent`` (plus ``args``) on 127.0.0.1, UDP and TCP port 0 (and a control port 0
    with ``control``); the ports are read from its "serving" line."""
    cmd = [sys.executable, "-m", "kvswitch", "agent", "--listen", "127.0.0.1", "--port", "0"]
    cmd += ["--control-port", "0"] if control else []
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([*cmd, *args], stdout=subprocess.PIPE, env=env, preexec_fn=preexec_fn)
    agent = BackendProcess("kvswitch agent", 0, proc)
    assert proc.stdout is not None
    line = proc.stdout.readline()  # printed once every port is bound; b"" if it exits first
    served = re.search(rb"serving \S+:(\d+)", line)
    controlled = re.search(rb"control on (\d+)", line)
    if served is None or (control and controlled is None):
        agent.stop()
        raise RuntimeError(f"the agent did not start (status {proc.returncode}): {line!r}")
    agent.port = int(served.group(1))
    agent.control_port = int(controlled.group(1)) if controlled else None
    return agent
