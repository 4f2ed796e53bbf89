"""The rack starts each server's backend (``--backend memcached|redis``) inside the server's host
with the agent package's command line (kvswitch.agent.backend_procs), on the backend's usual
port; a backend that is not installed is one line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kvsrack import launchers
from kvswitch.agent.backend_procs import memcached_command, redis_command


class Started:
    """Stands in for kvsrack.procs.Procs: records what it is asked to start, starts nothing."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, list[str], Path]] = []

    def start_in(self, host: Any, args: list[str], log: Path) -> object:
        self.calls.append((host, args, log))
        return object()


@pytest.mark.parametrize("kind, port", [("memcached", 11211), ("redis", 6379)])
def test_backend_command_line_is_the_agent_packages(
    kind: str, port: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    waited: list[tuple[str, int]] = []
    monkeypatch.setattr(launchers.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(
        launchers, "wait_tcp_in", lambda h, where, p, proc: waited.append((where, p))
    )
    procs, out = Started(), tmp_path / "out"
    addr = launchers.start_backend(procs, "h-s1", "s1", kind, tmp_path, out)  # type: ignore[arg-type]
    want = memcached_command(port) if kind == "memcached" else redis_command(port, tmp_path)
    assert procs.calls == [("h-s1", want, out / f"s1-{kind}.log")]
    assert waited == [("s1", port)] and addr == f"127.0.0.1:{port}"


def test_memory_backend_starts_nothing(tmp_path: Path) -> None:
    procs = Started()
    assert launchers.start_backend(procs, "h", "s1", "memory", tmp_path, tmp_path) is None  # type: ignore[arg-type]
    assert procs.calls == []


def test_backend_not_installed_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(launchers.shutil, "which", lambda name: None)
    with pytest.raises(RuntimeError, match=r"^--backend redis: redis-server is not installed$"):
        launchers.start_backend(Started(), "h", "s1", "redis", tmp_path, tmp_path)  # type: ignore[arg-type]
