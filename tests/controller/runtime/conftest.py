"""Fixtures of the controller-runtime tests: the KVSwitch program at test sizes and a switch with
its P4Runtime and Thrift servers on free loopback ports, in this process (packets are injected
with ``Device.process``) or as a ``kvswitch switch`` process."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from kvswitch.bench.fabric_runtime_bench import LiveSwitch, start_switch
from kvswitch.controller.p4rt_driver import Program
from kvswitch.controller.rackfile import RackFile
from kvswitch.paths import p4src_dir
from softswitch.runtime.bundle import Bundle
from tests.controller import fabric_net as fn
from tests.controller.runtime.test_freeze_recovery import Agents

# valid_ver's 64 cells in two parts of 32 (p4src/shared/sizes.p4): the driver reads and writes
# them as one register
DEFINES = {"HOT_KEYS": "16", "MAX_SERVERS": "4", "HP_STAGES": "2", "VALID_VER_PART_BITS": "5"}
SERVERS = 3

RACK_JSON = {
    "kvs_port": 8900,
    "switch": {"ip": "10.0.0.254", "mac": "02:00:00:00:00:fe"},
    "servers": [
        {
            "name": f"s{i + 1}",
            "ip": f"10.0.0.{i + 1}",
            "mac": f"02:00:00:00:00:0{i + 1}",
            "port": i + 1,
        }
        for i in range(SERVERS)
    ],
    "clients": [{"name": "c1", "ip": "10.0.1.1", "mac": "02:00:00:00:01:01", "port": 9}],
}


@pytest.fixture(scope="session")
def program() -> Program:
    bundle = Bundle.from_file(p4src_dir() / "kvswitch.p4", DEFINES)
    return Program(bundle.compile().p4info, bundle.to_bytes())


@pytest.fixture
def rackfile(tmp_path: Path) -> RackFile:
    path = tmp_path / "rack.json"
    path.write_text(json.dumps(RACK_JSON))
    return RackFile.load(path)


@pytest.fixture
def live_switch() -> Iterator[LiveSwitch]:
    """An empty device (no pipeline) behind real P4Runtime and Thrift servers on loopback."""
    live = start_switch("live")
    try:
        yield live
    finally:
        live.stop()


def datagrams(
    sock: socket.socket, stop: threading.Event
) -> Iterator[tuple[bytes, tuple[str, int]]]:
    """What ``sock`` (a UDP socket with a timeout) receives, until ``stop`` is set."""
    while not stop.is_set():
        try:
            data, src = sock.recvfrom(65535)
        except TimeoutError:
            continue
        yield data, src


@pytest.fixture
def agents(agent_factory, backend_factory) -> Iterator[Agents]:
    """One in-process agent (memory backend) per server of tests/controller/fabric_net.py's
    fabric, and a controller's AgentPool over them (test_freeze_recovery.Agents)."""
    a = Agents(agent_factory, backend_factory, fn.RACKS * fn.SERVERS)
    try:
        yield a
    finally:
        a.sock.close()
