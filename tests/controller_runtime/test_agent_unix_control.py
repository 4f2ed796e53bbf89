"""The agent's control API on a Unix socket (how the controller reaches agents in Mininet hosts)."""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path

import pytest

from kvswitch import protocol as p
from kvswitch.agent.backends import MemoryBackend
from kvswitch.agent.control import AgentControl, ControlError, SyncedItem
from kvswitch.agent.core import AgentCore, RecentIds
from kvswitch.agent.server import AgentConfig, AgentServer


def _agent(path: Path) -> AgentServer:
    core = AgentCore(MemoryBackend(), None, p.MAX_VALUE, RecentIds(16, 16))
    return AgentServer(core, AgentConfig("127.0.0.1", 0, control_unix=str(path), tcp=False))


def test_unix_control_endpoint(tmp_path: Path) -> None:
    path = tmp_path / "s1.ctl"
    path.touch()  # a stale non-socket file is not removed: binding fails clearly
    with pytest.raises(OSError):
        _agent(path)
    path.unlink()
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(path))  # a stale socket of an earlier run is replaced
    stale.close()
    agent = _agent(path)
    thread = threading.Thread(target=agent.serve_forever, daemon=True)
    thread.start()
    try:
        with AgentControl.at(f"unix:{path}") as ctl:
            assert ctl.ping() == agent.port
            assert ctl.incarnation() == agent.incarnation > 0
            assert ctl.keys() == {}
            assert ctl.item(b"absent") is None
            agent.core.push_item(p.pad_key(b"k"), b"value", 3, 9)
            assert ctl.item(b"k") == SyncedItem(b"value", 3, 9)
            assert ctl.remove(b"absent") is False
    finally:
        agent.request_stop()
        thread.join(timeout=5)
    assert not os.path.exists(path)
    with pytest.raises(ControlError):
        AgentControl.at(f"unix:{path}", timeout=0.5).ping()


@pytest.mark.parametrize("endpoint", ["unix:", "nohost", ":80", "h:0", "h:x", "h:70000"])
def test_bad_endpoints(endpoint: str) -> None:
    with pytest.raises(ValueError):
        AgentControl.at(endpoint)


def test_hostport_endpoint() -> None:
    ctl = AgentControl.at("10.0.0.1:8901")
    assert ctl.addr == ("10.0.0.1", 8901)
