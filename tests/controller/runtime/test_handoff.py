"""controller/elastic.py's handoff against real agents (in-process, control over Unix sockets):
the moving keys' data moves, nothing else does, a failure before the switch-over leaves every
agent on the old ring, and the admin socket answers bad requests with one line."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from kvswitch import protocol as p
from kvswitch.agent.backends import MemoryBackend
from kvswitch.agent.control import AgentControl, ControlError
from kvswitch.agent.core import AgentCore
from kvswitch.agent.server import AgentConfig, AgentServer
from kvswitch.client import Client
from kvswitch.controller.elastic import AdminServer, MembershipError, ask, handoff, moving_pairs

LOOP = "127.0.0.1"


@pytest.fixture
def rack(tmp_path: Path) -> Iterator[tuple[list[AgentServer], dict[int, AgentControl]]]:
    agents, controls = [], {}
    for i in range(4):
        path = str(tmp_path / f"s{i}.ctl")
        server = AgentServer(AgentCore(MemoryBackend()), AgentConfig(LOOP, 0, control_unix=path))
        server.start()
        agents.append(server)
        controls[i] = AgentControl.at(f"unix:{path}", 2.0)
    yield agents, controls
    for c in controls.values():
        c.close()
    for a in agents:
        a.stop()


def ring(agents: list[AgentServer], version: int, ids: set[int]) -> p.Ring:
    return p.Ring(version, tuple(p.Member(i, LOOP, agents[i].port) for i in sorted(ids)))


def test_moving_pairs() -> None:
    assert moving_pairs(frozenset({0, 1}), frozenset({0, 1, 2})) == [(0, 2), (1, 2)]
    assert moving_pairs(frozenset({0, 1, 2}), frozenset({0, 2})) == [(1, 0), (1, 2)]


def test_add_then_remove(rack: tuple[list[AgentServer], dict[int, AgentControl]]) -> None:
    agents, controls = rack
    v1, v2, v3 = (
        ring(agents, 1, {0, 1, 2}),
        ring(agents, 2, {0, 1, 2, 3}),
        ring(agents, 3, {0, 2, 3}),
    )
    for i, c in controls.items():
        c.ring_set(v1, i)
    keys = [b"key%d" % i for i in range(300)]
    with Client([(LOOP, a.port) for a in agents[:3]], timeout=0.5) as client:
        for k in keys:
            client.set(k, b"v-" + k)
        client.delete(keys[0])
        report = handoff(controls.get, controls, v1, v2)
        assert report.moved == sum(v1.origin(k) != v2.origin(k) for k in keys[1:]) > 0
        assert report.dropped == report.moved
        report = handoff(controls.get, controls, v2, v3)
        assert report.moved == sum(v2.origin(k) == 1 for k in keys[1:]) > 0
        assert client.get(keys[0]) is None
        for k in keys[1:]:
            assert client.get(k) == b"v-" + k
        assert client.ring == v3
    held = [set(controls[i].keys()) for i in range(4)]
    assert held[1] == set()  # the removed server dropped everything (it held no replica)
    for i in (0, 2, 3):
        assert held[i] == {p.pad_key(k) for k in keys[1:] if v3.origin(k) == i}
    assert controls[1].ring_state()["version"] == 3


def test_failure_before_the_switch_over_rolls_back(
    rack: tuple[list[AgentServer], dict[int, AgentControl]],
) -> None:
    agents, controls = rack
    v1, v2 = ring(agents, 1, {0, 1, 2}), ring(agents, 2, {0, 1, 2, 3})
    for i, c in controls.items():
        c.ring_set(v1, i)

    def broken(server: int) -> AgentControl:
        if server == 3:
            raise ControlError("agent 3 unreachable")
        return controls[server]

    with pytest.raises(ControlError):
        handoff(broken, controls, v1, v2)
    for i in range(3):
        state = controls[i].ring_state()
        assert (state["version"], state["next"], state["frozen"]) == (1, None, False)


def test_removal_of_a_dead_server_runs_without_it(
    rack: tuple[list[AgentServer], dict[int, AgentControl]],
) -> None:
    """``gone``: a server removed while down exports nothing and takes no step; the others move
    to the new ring and its keys' new owners serve what they hold (here: nothing)."""
    agents, controls = rack
    v1, v2 = ring(agents, 1, {0, 1, 2}), ring(agents, 2, {0, 2})
    for i, c in controls.items():
        c.ring_set(v1, i)
    keys = [b"key%d" % i for i in range(100)]
    with Client([(LOOP, a.port) for a in agents[:3]], timeout=0.5) as client:
        for k in keys:
            client.set(k, b"v-" + k)
    lost = [k for k in keys if v1.origin(k) == 1]
    assert lost
    agents[1].stop()
    live = {i: c for i, c in controls.items() if i != 1}
    with pytest.raises(ControlError, match=r"servers \[1\] have no reachable agent"):
        handoff(live.get, live, v1, v2)
    report = handoff(live.get, live, v1, v2, gone=frozenset({1}))
    assert (report.pairs, report.moved, report.dropped) == ([], 0, 0)
    for i in (0, 2):
        assert controls[i].ring_state()["version"] == 2
    with Client([(LOOP, a.port) for a in agents[:3]], timeout=0.5) as client:
        client.ring = v2
        for k in keys:
            assert client.get(k) == (None if k in lost else b"v-" + k)


def test_admin_socket_one_line_errors(tmp_path: Path) -> None:
    def handler(cmd: str, server: str | None) -> dict[str, object]:
        if cmd == "boom":
            raise RuntimeError("a bug")
        if server == "s0":
            raise MembershipError("s0 is already a member")
        return {"ok": True, "cmd": cmd}

    path = str(tmp_path / "admin")
    admin = AdminServer(path, handler)
    admin.start()
    try:
        assert ask(path, "ring") == {"ok": True, "cmd": "ring"}
        assert ask(path, "add", "s0") == {"ok": False, "error": "s0 is already a member"}
        assert ask(path, "boom")["error"].startswith("internal error")
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(5)
            s.connect(path)
            s.sendall(b"not json\n[1]\n")
            f = s.makefile()
            lines = f.readline(), f.readline()
        assert all('"ok": false' in line for line in lines), lines
    finally:
        admin.close()
