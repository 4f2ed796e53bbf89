"""The agent's control API on a Unix socket (how the controller reaches agents in Mininet hosts)."""

from __future__ import annotations

import json
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
    assert path.stat().st_mode & 0o777 == 0o600  # it writes the store: the agent's user only
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
            assert ctl.rebase(b"k") is True  # the value stays, its version goes
            assert ctl.item(b"k") == SyncedItem(b"value", 0, 0)
            assert ctl.rebase(b"absent") is False
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


def test_tcp_control_endpoint_is_not_on_the_kvs_address() -> None:
    """The TCP control API writes the store: it listens on --control-listen (loopback by default),
    not on the address clients send requests to (docs/protocol.md "Trust")."""
    core = AgentCore(MemoryBackend(), None)
    agent = AgentServer(core, AgentConfig("127.0.0.2", 0, control_port=0, tcp=False))
    agent.start()
    try:
        assert agent.udp.getsockname()[0] == "127.0.0.2"
        assert agent._control is not None
        assert agent._control.server_address[0] == "127.0.0.1"
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.2", agent.control_port or 0), timeout=1).close()
    finally:
        agent.stop()


def test_a_burst_of_control_connections_waits_to_be_accepted(tmp_path: Path) -> None:
    """The controller opens one control connection per key it pushes at once (up to four per
    server of the rack, docs/controller_runtime.md "A period"): twenty connect to an agent that
    has not accepted any yet and are then served. With socketserver's default backlog (5) the
    sixth connect to the Unix socket fails at once (EAGAIN)."""
    path = tmp_path / "s1.ctl"
    agent = _agent(path)  # listening, not accepting yet
    conns: list[socket.socket] = []
    thread = threading.Thread(target=agent.serve_forever, daemon=True)
    try:
        for _ in range(20):  # as AgentControl connects: with a timeout (a non-blocking connect)
            conns.append(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
            conns[-1].settimeout(5.0)
            conns[-1].connect(str(path))
        thread.start()
        for conn in conns:
            conn.sendall(b'{"cmd": "ping"}\n')
            assert json.loads(conn.makefile("rb").readline())["port"] == agent.port
    finally:
        for conn in conns:
            conn.close()
        agent.request_stop()
        if thread.is_alive():
            thread.join(timeout=5)
