"""The controller with real agents: the switch (in this process, behind loopback P4Runtime and
Thrift) is bridged to agent processes' UDP sockets on loopback addresses 127.0.0.2.. , so that a
push runs the agents' real SYNC → stamped reflection → PUSH → CONFIRM / SYNC_DONE flow through the
P4 pipeline, driven over the agents' Unix control sockets. Then Gets of the key are redirected."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from kvswitch import protocol as p
from kvswitch.agent.backends import Item, MemoryBackend
from kvswitch.agent.core import AgentCore, RecentIds
from kvswitch.agent.server import AgentConfig, AgentServer
from kvswitch.controller import names
from kvswitch.controller.agents import AgentPool
from kvswitch.controller.p4rt_driver import P4RuntimeDriver, Program
from kvswitch.controller.period import ControllerConfig
from kvswitch.controller.rackfile import RackFile
from kvswitch.controller.runtime import Runtime
from softswitch.runtime.device import Device
from tests.controller_runtime.conftest import LiveSwitch
from tests.controller_runtime.test_driver import get_frame

SWITCH_IP = "127.0.0.254"
SERVERS = 3
HOT = p.pad_key(b"e2e-hot-key")


def _mac(i: int) -> str:
    return f"02:00:00:00:00:{i:02x}"


class Bridge:
    """Datagrams to the switch address become frames on the sender's switch port; frames the
    switch sends towards a server become datagrams from the switch address (KVS port 8900 on the
    wire is the rack's ``kvs_port`` on loopback)."""

    def __init__(self, device: Device, rack: RackFile) -> None:
        self.device = device
        self.rack = rack
        self.by_ip = {h.ip_text: h for h in rack.servers}
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((SWITCH_IP, rack.kvs_port))
        self.sock.settimeout(0.1)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while not self.stop.is_set():
            try:
                data, (ip, port) = self.sock.recvfrom(65535)
            except TimeoutError:
                continue
            host = self.by_ip.get(ip)
            if host is None or port != self.rack.kvs_port:
                continue
            frame = (
                Ether(src=_mac(host.port), dst="02:00:00:00:00:fe")
                / IP(src=ip, dst=SWITCH_IP)
                / UDP(sport=p.KVS_PORT, dport=p.KVS_PORT)
                / data
            )
            for _, raw in self.device.process(host.port, bytes(frame)):
                self.deliver(raw)

    def deliver(self, raw: bytes) -> None:
        pkt = Ether(raw)
        if UDP in pkt and pkt[IP].dst in self.by_ip and pkt[UDP].dport == p.KVS_PORT:
            self.sock.sendto(bytes(pkt[UDP].payload), (pkt[IP].dst, self.rack.kvs_port))

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=5)
        self.sock.close()


@pytest.fixture
def loopback_rack(tmp_path: Path) -> Iterator[tuple[RackFile, list[AgentServer]]]:
    from tests.runtime.conftest import free_port

    kvs_port = free_port()
    raw = {
        "kvs_port": kvs_port,
        "switch": {"ip": SWITCH_IP, "mac": "02:00:00:00:00:fe"},
        "servers": [
            {
                "name": f"s{i}",
                "ip": f"127.0.0.{i + 2}",
                "mac": _mac(i + 1),
                "port": i + 1,
                "control": f"unix:{tmp_path / f's{i}.ctl'}",
            }
            for i in range(SERVERS)
        ],
        "clients": [{"name": "c1", "ip": "10.0.1.1", "mac": "02:00:00:00:01:01", "port": 9}],
    }
    rack = RackFile.parse(raw)
    agents, threads = [], []
    try:
        for host in rack.servers:
            core = AgentCore(MemoryBackend(), (SWITCH_IP, kvs_port), p.MAX_VALUE, RecentIds(16, 16))
            config = AgentConfig(
                host.ip_text,
                kvs_port,
                control_unix=host.control[5:] if host.control else None,
                tcp=False,
            )
            agent = AgentServer(core, config)
            agents.append(agent)
            threads.append(threading.Thread(target=agent.serve_forever, daemon=True))
            threads[-1].start()
    except OSError as exc:
        pytest.skip(f"loopback addresses 127.0.0.x not usable here: {exc}")
    yield rack, agents
    for agent in agents:
        agent.request_stop()
    for thread in threads:
        thread.join(timeout=5)


def test_push_through_the_switch_with_real_agents(
    live_switch: LiveSwitch, program: Program, loopback_rack: tuple[RackFile, list[AgentServer]]
) -> None:
    rack, agents = loopback_rack
    bridge = Bridge(live_switch.device, rack)
    pool = AgentPool(rack, timeout=5.0)
    try:
        with P4RuntimeDriver(live_switch.address, program, rack.rack(), pool) as drv:
            runtime = Runtime(drv, rack, ControllerConfig(k=8, t0=20.0), agents=pool)
            runtime.start()
            origin = runtime.ring.origin(HOT)
            agents[origin].core.backend.put(HOT, Item(b"hot value", 0, 0))
            for i in range(60):
                out = live_switch.device.process(9, get_frame(rack, HOT, origin, seq=i))
                assert [port for port, _ in out] == [rack.servers[origin].port]
            m = runtime.period()
            assert m.error == "" and m.agent_errors == 0, m
            kp = runtime.controller.plan.keys[HOT]
            assert kp.replicas, m
            # the replicas got the value with the switch's version; their CONFIRMs made them valid
            stamped = agents[origin].core.backend.get(HOT)
            assert stamped is not None and stamped.ver > 0 and stamped.epoch == runtime.epoch
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                valid = drv.read_register(names.REG_VALID_VER)
                if all(valid[kp.slot * SERVERS + s] == stamped.ver for s in kp.replicas):
                    break
                time.sleep(0.05)
            for s in kp.replicas:
                item = agents[s].core.backend.get(HOT)
                assert item is not None and (item.value, item.ver) == (b"hot value", stamped.ver)
            assert drv.read_register(names.REG_ORIGIN_VER)[kp.slot] == stamped.ver
            ports = set()
            for i in range(3 * len(kp.holders)):
                out = live_switch.device.process(9, get_frame(rack, HOT, origin, seq=100 + i))
                ports |= {port for port, _ in out}
            assert ports == {rack.servers[s].port for s in kp.holders}
    finally:
        pool.close()
        bridge.close()
