"""Process supervision: every process a run starts is recorded by PID (``OUT/pids.txt``, which
the tests check after teardown) and stopped by PID, in reverse order of start, SIGTERM then
SIGKILL after a grace period. Nothing is found or stopped by name."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from kvswitch.ports import listens


class InHost(Protocol):
    """What of a Mininet host supervision uses: a process started inside its namespace."""

    def popen(self, *args: Any, **kwargs: Any) -> subprocess.Popen[Any]: ...


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen[Any]
    log: Path | None = None


@dataclass
class Procs:
    """Every process this run started, stopped by PID in reverse order of start."""

    items: list[Proc] = field(default_factory=list)
    record: Path | None = None  # every PID started, one per line (checked after teardown)

    def add(self, name: str, popen: subprocess.Popen[Any], log: Path | None = None) -> Proc:
        proc = Proc(name, popen, log)
        self.items.append(proc)
        self.note(popen.pid)
        return proc

    def start_in(self, host: InHost, args: list[str], log: Path) -> Proc:
        """``args`` inside ``host``'s namespace, stdout and stderr to ``log`` (named after it)."""
        with log.open("wb") as f:
            p = host.popen(args, stdout=f, stderr=subprocess.STDOUT)
        return self.add(log.name, p, log)

    def note(self, pid: int) -> None:
        if self.record is not None:
            with self.record.open("a") as f:
                f.write(f"{pid}\n")

    @staticmethod
    def stop_one(proc: Proc, grace: float = 5.0) -> int | None:
        p = proc.popen
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p.pid, signal.SIGTERM)
            Procs.wait_or_kill(p, grace)
        return p.returncode

    @staticmethod
    def wait_or_kill(p: subprocess.Popen[Any], grace: float) -> None:
        """Until ``p`` exits; SIGKILL if it still runs after ``grace`` seconds."""
        try:
            p.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p.pid, signal.SIGKILL)
            p.wait()

    def kill(self, proc: Proc) -> None:
        """SIGKILL ``proc`` (by its PID) and forget it: no goodbye."""
        os.kill(proc.popen.pid, signal.SIGKILL)
        proc.popen.wait()
        self.remove(proc)

    def stop_all(self, grace: float = 5.0) -> None:
        """SIGTERM to every process still running, in reverse order of start, then wait for
        them together: SIGKILL to any still running ``grace`` seconds after (one after the other,
        a rack's dozen took a second, 2026-11-26)."""
        items, self.items = self.items[::-1], []
        for proc in items:
            if proc.popen.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.popen.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for proc in items:
            self.wait_or_kill(proc.popen, max(0.0, deadline - time.monotonic()))

    def remove(self, proc: Proc) -> None:
        self.items.remove(proc)


def wait_tcp(port: int, proc: subprocess.Popen[Any], what: str, timeout: float = 60) -> None:
    """Until something listens on loopback ``port`` (in this namespace), while ``proc`` runs."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with status {proc.returncode} (see its log)")
        if listens("127.0.0.1", port, 0.2):
            return
        time.sleep(0.1)
    raise RuntimeError(f"{what}: nothing listens on port {port} after {timeout:.0f} s")


def wait_tcp_in(host: InHost, where: str, port: int, proc: Proc, timeout: float = 20) -> None:
    """Until something listens on loopback ``port`` inside ``host`` (named ``where``), while
    ``proc`` runs (a probe process in the host's namespace)."""
    probe = (
        "import socket,sys,time\n"
        f"end=time.time()+{timeout}\n"
        "while time.time()<end:\n"
        "  try:\n"
        f"    socket.create_connection(('127.0.0.1',{port}),0.2).close(); sys.exit(0)\n"
        "  except OSError: time.sleep(0.1)\n"
        "sys.exit(1)\n"
    )
    done = host.popen([sys.executable, "-c", probe]).wait()
    if done != 0 or proc.popen.poll() is not None:
        raise RuntimeError(f"{proc.name}: not ready in {where} (see {proc.log})")
