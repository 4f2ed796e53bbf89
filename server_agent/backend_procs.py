"""Start and stop real memcached and redis-server processes on loopback (tests, benchmarks, demo).

Each helper starts one process by absolute path on a free port, waits until it accepts connections
and returns a :class:`BackendProcess`; :meth:`BackendProcess.stop` ends exactly that PID.
"""

from __future__ import annotations

import os
import pwd
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

MEMCACHED = Path("/usr/bin/memcached")
REDIS_SERVER = Path("/usr/bin/redis-server")


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class BackendProcess:
    kind: str
    port: int
    proc: subprocess.Popen[bytes]
    workdir: tempfile.TemporaryDirectory[str] | None = field(default=None, repr=False)

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


def start_memcached(port: int | None = None, binary: Path = MEMCACHED) -> BackendProcess:
    port = port or free_port()
    user = pwd.getpwuid(os.geteuid()).pw_name  # memcached refuses to run as root without -u
    args = [str(binary), "-l", "127.0.0.1", "-p", str(port), "-U", "0", "-m", "64", "-u", user]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    backend = BackendProcess("memcached", port, proc)
    backend.wait_ready()
    return backend


def start_redis(port: int | None = None, binary: Path = REDIS_SERVER) -> BackendProcess:
    port = port or free_port()
    workdir = tempfile.TemporaryDirectory(prefix="kvswitch-redis-")
    args = [str(binary), "--bind", "127.0.0.1", "--port", str(port), "--save", "",
            "--appendonly", "no", "--dir", workdir.name]  # fmt: skip
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    backend = BackendProcess("redis", port, proc, workdir)
    backend.wait_ready()
    return backend
