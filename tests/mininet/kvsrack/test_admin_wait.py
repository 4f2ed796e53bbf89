"""Membership events of a scenario wait for a restarted controller's admin socket: it binds the
socket only after its start-up, and a --remove planned for that moment must not fail on it."""

from __future__ import annotations

import socket
import threading
from pathlib import Path
from typing import Any

import pytest

from kvsrack import scenarios
from kvswitch.controller.elastic import AdminServer


def _stale_socket(path: Path) -> None:
    """The socket file a crashed controller leaves: bound, nobody listening (connect refused)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(path))
    s.close()


def test_an_event_waits_for_the_restarted_controller(tmp_path: Path) -> None:
    path = tmp_path / "controller.admin"
    _stale_socket(path)
    with pytest.raises(ConnectionRefusedError):  # what the event got before
        scenarios.ask(str(path), "remove", "s3")
    asked: list[tuple[str, str | None]] = []

    def handler(cmd: str, server: str | None) -> dict[str, Any]:
        asked.append((cmd, server))
        return {"ok": True}

    servers: list[AdminServer] = []

    def restart() -> None:
        servers.append(AdminServer(str(path), handler))
        servers[0].start()

    timer = threading.Timer(0.5, restart)
    timer.start()
    try:
        assert scenarios.ask_when_listening(str(path), "remove", "s3") == {"ok": True}
    finally:
        timer.join()
        for s in servers:
            s.close()
    assert asked == [("remove", "s3")]


def test_an_event_gives_up_when_no_controller_comes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scenarios, "ADMIN_WAIT", 0.3)
    with pytest.raises(FileNotFoundError):
        scenarios.ask_when_listening(str(tmp_path / "none.admin"), "add", "s9")
