"""Pushes of different keys run at once (issue 20: in a resend storm each push waited up to
3 x 0.5 s for a SYNC reflection, one key after another, and a period stretched to 13 s).

Real agents (in this process, Unix control sockets) and the controller's driver with its
:class:`AgentPool`; the switch's part of a push, the SYNC reflection, is played by
:class:`SyncSwitch`, which reflects SYNCs only once ``together`` of them wait at the same time.
A controller that pushes one key after another never gets there: each SYNC waits alone and times
out. No wall-clock figure is asserted, only how many SYNCs were outstanding at once and what each
push's outcome was."""

from __future__ import annotations

import json
import logging
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from kvswitch import protocol as p
from kvswitch.agent.backends import Item, MemoryBackend
from kvswitch.agent.core import AgentCore, RecentIds
from kvswitch.agent.server import AgentConfig, AgentServer
from kvswitch.controller.agents import AgentPool
from kvswitch.controller.ops import PushRequest
from kvswitch.controller.p4rt_driver import P4RuntimeDriver, Program
from kvswitch.controller.rackfile import RackFile
from tests.controller.runtime.conftest import RACK_JSON, LiveSwitch, datagrams

EPOCH = 3


class SyncSwitch:
    """The switch's rule 5 for the agents' SYNCs, on a loopback UDP socket: a SYNC is reflected
    stamped with a fresh version, but only once ``together`` SYNCs (of distinct keys) wait at
    the same time; then every waiting one is reflected. A SYNC waits until reflected or until
    its agent gave up on it (``agents``: an agent's pending SYNCs). ``refused`` keys are
    reflected with ``ver`` 0, as the switch does while a write of the key is pending: the agent
    asks again and its sync fails once its attempts are spent. ``most``: the largest number of
    SYNCs seen waiting at once."""

    def __init__(self, together: int, refused: frozenset[bytes] = frozenset()) -> None:
        self.together = together
        self.refused = refused
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.05)
        self.addr: tuple[str, int] = self.sock.getsockname()
        self.waiting: dict[bytes, tuple[str, int]] = {}
        self.most = 0
        self.ver = 100
        self.stamped: dict[bytes, int] = {}
        self.agents: list[AgentServer] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        for data, src in datagrams(self.sock, self.stop):
            msg = p.Message.decode(data)
            if msg.op != p.Op.SYNC:
                continue  # CONFIRM, SYNC_DONE: consumed
            by_port = {a.port: a for a in self.agents}
            self.waiting = {
                key: to
                for key, to in self.waiting.items()
                if to[1] in by_port and key in by_port[to[1]].core.pending_syncs
            }
            self.waiting[msg.key] = src
            self.most = max(self.most, len(self.waiting))
            if len(self.waiting) < self.together:
                continue
            for key, to in self.waiting.items():
                self.ver += 1
                ver = 0 if key in self.refused else self.ver
                if ver:
                    self.stamped[key] = ver
                self.sock.sendto(p.Message(p.Op.SYNC, key, epoch=EPOCH, ver=ver).encode(), to)
            self.waiting.clear()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=5)
        self.sock.close()


@pytest.fixture
def sync_rack(tmp_path: Path) -> Iterator[tuple[RackFile, list[AgentServer], SyncSwitch]]:
    """Three agents whose switch is a :class:`SyncSwitch` waiting for 3 SYNCs at once (a test
    may change ``together`` and ``refused`` before its pushes)."""
    switch = SyncSwitch(3)
    raw = json.loads(json.dumps(RACK_JSON))
    agents, threads = [], []
    for i, entry in enumerate(raw["servers"]):
        path = tmp_path / f"s{i}.ctl"
        entry["control"] = f"unix:{path}"
        core = AgentCore(MemoryBackend(), switch.addr, p.MAX_VALUE, RecentIds(16, 16))
        config = AgentConfig(
            "127.0.0.1", 0, control_unix=str(path), tcp=False, sync_timeout=5.0, sync_attempts=1
        )
        agents.append(AgentServer(core, config))
        threads.append(threading.Thread(target=agents[-1].serve_forever, daemon=True))
        threads[-1].start()
    switch.agents = agents
    yield RackFile.parse(raw), agents, switch
    for agent in agents:
        agent.request_stop()
    for thread in threads:
        thread.join(timeout=5)
    switch.close()


def _keys(origins: list[int], agents: list[AgentServer]) -> list[PushRequest]:
    """One key per entry of ``origins``, held by that origin, pushed to the two other servers."""
    ops = []
    for i, origin in enumerate(origins):
        key = p.pad_key(b"par-%d" % i)
        agents[origin].core.backend.put(key, Item(b"value %d" % i, 0, 0))
        ops.append(PushRequest(key, origin, tuple(s for s in range(3) if s != origin)))
    return ops


def test_pushes_of_different_keys_wait_for_their_syncs_at_once(
    live_switch: LiveSwitch,
    program: Program,
    sync_rack: tuple[RackFile, list[AgentServer], SyncSwitch],
) -> None:
    """Six keys, three of them with one origin, pushed in one batch by a driver with a pool of
    three: the SYNCs wait three at a time (never more), and every replica gets its key at the
    version stamped. The same batch one key after another (``agent_workers=1``, the controller
    before issue 20) fails every push: each SYNC waits alone."""
    rack, agents, switch = sync_rack
    ops = _keys([0, 0, 0, 1, 1, 2], agents)
    pool = AgentPool(rack)
    try:
        with P4RuntimeDriver(
            live_switch.address, program, rack.rack(), pool, agent_workers=3
        ) as drv:
            drv.apply(ops)
            assert drv.agent_errors == 0 and not drv.failed_pushes, drv.failed_pushes
        assert switch.most == 3  # bounded by the pool, and reached
        for op in ops:
            for s in op.replicas:
                held = agents[s].core.backend.get(op.key)
                assert held is not None and (held.epoch, held.ver) == (
                    EPOCH,
                    switch.stamped[op.key],
                )
        # the one-at-a-time controller: each SYNC alone, never reflected; every push reported
        switch.most = 0
        for agent in agents:
            agent.config.sync_timeout = 0.2
        with P4RuntimeDriver(
            live_switch.address, program, rack.rack(), pool, agent_workers=1
        ) as drv:
            drv.apply(ops)
            assert drv.agent_errors == len(ops) and set(drv.failed_pushes) == {o.key for o in ops}
        assert switch.most == 1
    finally:
        pool.close()


def test_each_outcome_of_parallel_pushes_is_reported(
    live_switch: LiveSwitch,
    program: Program,
    sync_rack: tuple[RackFile, list[AgentServer], SyncSwitch],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Ten keys pushed at once by the driver's default pool (four workers per server: 12), eight
    of them with one origin (eight control connections to it opened at once: more than a
    listening socket's default backlog of 5): one whose SYNC the switch refuses (a write
    pending: reflected with ver 0, the origin's sync fails), one its origin does not hold
    (NotHeld), eight that succeed. The refused push is counted, logged and kept for a retry, its
    replicas get nothing; the one not held is logged and not retried; the others are done, and
    nothing else is logged as failed."""
    caplog.set_level(logging.INFO, logger="kvswitch.controller")
    rack, agents, switch = sync_rack
    ops = _keys([0] * 8 + [1, 2], agents)
    refused, absent = ops[1], ops[8]
    agents[absent.origin].core.backend.drop(absent.key)
    switch.together = 9  # the nine keys that send a SYNC, the refused one among them
    switch.refused = frozenset({refused.key})
    for agent in agents:
        agent.config.sync_timeout = 1.0
    pool = AgentPool(rack)
    try:
        with P4RuntimeDriver(live_switch.address, program, rack.rack(), pool) as drv:
            drv.apply(ops)
            assert drv.agent_errors == 1
            assert drv.failed_pushes == {refused.key: refused}
            assert drv.not_held == {absent.key}
            assert drv.agent_workers == 12
        assert switch.most == 9
        failed = [r.getMessage() for r in caplog.records if "failed" in r.getMessage()]
        assert len(failed) == 1 and refused.key.hex() in failed[0], failed
        assert "SYNC reflected unstamped" in failed[0]
        assert f"push of {absent.key.hex()}: its origin holds no copy" in caplog.text
        for op in ops:
            for s in op.replicas:
                held = agents[s].core.backend.get(op.key)
                if op in (refused, absent):
                    assert held is None
                else:
                    assert held is not None and held.ver == switch.stamped[op.key]
        # the eight keys of server 0 waited for their SYNCs at once, each on its own connection
        assert len(pool.connections(0)) >= 8
    finally:
        pool.close()
