"""The controller with real agents: the switch (in this process, behind loopback P4Runtime and
Thrift) is bridged to agent processes' UDP sockets on loopback addresses 127.0.0.2.. , so that a
push runs the agents' real SYNC → stamped reflection → PUSH → CONFIRM / SYNC_DONE flow through the
P4 pipeline, driven over the agents' Unix control sockets. Then Gets of the key are redirected."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
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
from kvswitch.controller.elastic import MembershipError
from kvswitch.controller.metrics import Metrics
from kvswitch.controller.p4rt_driver import P4RuntimeDriver, Program
from kvswitch.controller.period import ControllerConfig
from kvswitch.controller.plan import KeyPlan
from kvswitch.controller.rackfile import RackFile
from kvswitch.controller.runtime import Runtime
from softswitch.runtime.device import Device
from tests.controller.runtime.conftest import LiveSwitch, datagrams
from tests.controller.runtime.test_driver import get_frame

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
        for data, (ip, port) in datagrams(self.sock, self.stop):
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
    from tests.softswitch.runtime.conftest import free_port

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
    for agent in agents:  # (a test may have replaced some: those are the ones running)
        agent.request_stop()
    for thread in threads:
        thread.join(timeout=5)


def _start_agent(rack: RackFile, server: int) -> AgentServer:
    """A new agent process for ``server`` (an empty memory backend, a new incarnation)."""
    host = rack.servers[server]
    core = AgentCore(MemoryBackend(), (SWITCH_IP, rack.kvs_port), p.MAX_VALUE, RecentIds(16, 16))
    control = host.control[5:] if host.control else None
    agent = AgentServer(
        core, AgentConfig(host.ip_text, rack.kvs_port, control_unix=control, tcp=False)
    )
    threading.Thread(target=agent.serve_forever, daemon=True).start()
    return agent


def _stop_agent(agent: AgentServer, pool: AgentPool) -> None:
    """Stop an agent as if its process died: wait until its control socket is gone, and close the
    pool's connections to it (a dead process's connections die with it; a stopped in-process
    agent would go on answering on them)."""
    agent.request_stop()
    path = agent.config.control_unix
    deadline = time.monotonic() + 5
    while path is not None and Path(path).exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    opened = [c for s in pool.controls for c in pool.connections(s)]
    for control in (*opened, *pool.probes.values()):
        if control.addr == path:
            control.close()


@contextlib.contextmanager
def _control(
    live_switch: LiveSwitch, rack: RackFile, probe_timeout: float = 0.5
) -> Iterator[tuple[AgentPool, Bridge]]:
    """The agents' control pool, and the switch bridged to the agents' sockets meanwhile."""
    bridge = Bridge(live_switch.device, rack)
    pool = AgentPool(rack, timeout=5.0, probe_timeout=probe_timeout)
    try:
        yield pool, bridge
    finally:
        pool.close()
        bridge.close()


def _started(drv: P4RuntimeDriver, rack: RackFile, pool: AgentPool, t0: float = 20.0) -> Runtime:
    runtime = Runtime(drv, rack, ControllerConfig(k=8, t0=t0), agents=pool)
    runtime.start()
    return runtime


def _replicate_hot(
    live_switch: LiveSwitch, drv: P4RuntimeDriver, runtime: Runtime, agents: list[AgentServer]
) -> tuple[KeyPlan, int]:
    """HOT made hot with Gets, replicated by one period, every replica valid: (its plan, its
    version)."""
    rack = runtime.rack
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
    return kp, stamped.ver


@contextlib.contextmanager
def _hot_rack(
    live_switch: LiveSwitch, program: Program, rack: RackFile, agents: list[AgentServer]
) -> Iterator[tuple[Runtime, KeyPlan, int, Callable[[int], Metrics]]]:
    """A runtime (T0 10, probe timeout 0.3 s) with HOT replicated: (runtime, HOT's plan, its
    version, a period preceded by 60 Gets of HOT addressed to a given server)."""
    with (
        _control(live_switch, rack, 0.3) as (pool, bridge),
        P4RuntimeDriver(live_switch.address, program, rack.rack(), pool) as drv,
    ):
        runtime = _started(drv, rack, pool, 10.0)
        kp, ver = _replicate_hot(live_switch, drv, runtime, agents)

        def period(dst: int) -> Metrics:  # the agents answer the Gets; then one period
            for i in range(60):
                for _, raw in live_switch.device.process(9, get_frame(rack, HOT, dst, i)):
                    bridge.deliver(raw)
            time.sleep(0.2)  # the replies cross the switch (ReplycountTable)
            return runtime.period()

        yield runtime, kp, ver, period


def test_push_through_the_switch_with_real_agents(
    live_switch: LiveSwitch, program: Program, loopback_rack: tuple[RackFile, list[AgentServer]]
) -> None:
    rack, agents = loopback_rack
    with (
        _control(live_switch, rack) as (pool, _),
        P4RuntimeDriver(live_switch.address, program, rack.rack(), pool) as drv,
    ):
        runtime = _started(drv, rack, pool)
        origin = runtime.ring.origin(HOT)
        kp, _ = _replicate_hot(live_switch, drv, runtime, agents)
        ports = set()
        for i in range(3 * len(kp.holders)):
            out = live_switch.device.process(9, get_frame(rack, HOT, origin, seq=100 + i))
            ports |= {port for port, _ in out}
        assert ports == {rack.servers[s].port for s in kp.holders}


def test_dead_replica_refused_and_restarted_origin_restored(
    live_switch: LiveSwitch, program: Program, loopback_rack: tuple[RackFile, list[AgentServer]]
) -> None:
    """docs/controller_runtime.md "Failure detection" with real agents: a replica's agent stops ->
    one missed period is nothing, the second declares it down (DownTable: its cold keys are
    answered UNAVAILABLE by the switch; it leaves the hot key's holders, its valid_ver cell is 0);
    the origin's agent restarts empty -> its new incarnation is seen at the next period and the
    hot key is restored into it from the valid replica; the dead agent comes back -> up again."""
    rack, agents = loopback_rack
    with _hot_rack(live_switch, program, rack, agents) as (runtime, kp, ver, gets_period):
        drv, pool = runtime.driver, runtime.agents
        assert pool is not None
        dead, alive = kp.replicas[0], kp.replicas[-1]
        assert dead != alive, kp
        _stop_agent(agents[dead], pool)

        def period() -> Metrics:  # HOT stays hot: 60 Gets a period, answered by the agents
            return gets_period(kp.origin)

        assert period().events == []  # one missed period: suspect only
        m = period()
        assert m.events == [f"s{dead}:down"] and m.down == [dead], m
        assert drv.read_down() == {dead}
        assert dead not in runtime.controller.plan.keys[HOT].holders
        assert drv.read_register(names.REG_VALID_VER)[kp.slot * SERVERS + dead] == 0
        cold = next(
            k for i in range(1000) if runtime.ring.origin(k := p.pad_key(b"c%d" % i)) == dead
        )
        out = live_switch.device.process(9, get_frame(rack, cold, dead, seq=5))
        assert [port for port, _ in out] == [rack.clients[0].port]
        reply = p.Message.decode(bytes(Ether(out[0][1])[UDP].payload))
        assert (reply.op, reply.status, reply.seq) == (p.Op.GET_REPLY, p.Status.UNAVAILABLE, 5)

        origin = kp.origin
        _stop_agent(agents[origin], pool)
        agents[origin] = _start_agent(rack, origin)
        m = period()
        assert m.events == [f"s{origin}:restart"], m
        item = agents[origin].core.backend.get(HOT)
        assert item is not None and (item.value, item.ver) == (b"hot value", ver)

        agents[dead] = _start_agent(rack, dead)
        m = period()
        assert m.events == [f"s{dead}:up-restarted"] and m.down == [], m
        assert drv.read_down() == set()
        out = live_switch.device.process(9, get_frame(rack, cold, dead, seq=6))
        assert [port for port, _ in out] == [rack.servers[dead].port]


def test_restarted_controller_repushes_a_replica_that_lost_its_copy(
    live_switch: LiveSwitch, program: Program, loopback_rack: tuple[RackFile, list[AgentServer]]
) -> None:
    """A replica's agent restarted while no controller ran (no incarnation change seen): the next
    controller finds it holds no copy, zeroes its valid_ver cell and pushes the key again."""
    rack, agents = loopback_rack
    with _control(live_switch, rack) as (pool, _):
        with P4RuntimeDriver(live_switch.address, program, rack.rack(), pool) as drv:
            runtime = _started(drv, rack, pool)
            kp, ver = _replicate_hot(live_switch, drv, runtime, agents)
            lost = kp.replicas[0]
            assert agents[lost].core.remove_local(HOT)
        with P4RuntimeDriver(live_switch.address, program, rack.rack(), pool) as drv:
            again = _started(drv, rack, pool)
            for _ in range(3):  # a push can time out on a loaded machine: retried, as periods do
                if agents[lost].core.backend.get(HOT) is not None:
                    break
                again.push_unconfirmed()
            item = agents[lost].core.backend.get(HOT)
            assert item is not None and item.value == b"hot value" and item.ver > ver
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                if drv.read_register(names.REG_VALID_VER)[kp.slot * SERVERS + lost] == item.ver:
                    break
                time.sleep(0.05)
            assert drv.read_register(names.REG_VALID_VER)[kp.slot * SERVERS + lost] == item.ver


def test_dead_origin_removed_then_added_back(
    live_switch: LiveSwitch, program: Program, loopback_rack: tuple[RackFile, list[AgentServer]]
) -> None:
    """docs/protocol.md "Membership": a hot key's origin dies and is declared down; removing it
    is allowed (other changes are not while it is down): the hot key is restored at its new
    origin from a valid replica with its version before it leaves the hot set, a copy the new
    owner held of its cold key is dropped (nothing proves it current), its DownTable entry stays.
    Added back while its agent is still dead: refused in one line; restarted: taken as up
    (DownTable entry deleted) and the add's handoff gives it its keys back."""
    rack, agents = loopback_rack
    with _hot_rack(live_switch, program, rack, agents) as (runtime, kp, ver, gets_period):
        drv, pool = runtime.driver, runtime.agents
        assert pool is not None
        dead = kp.origin
        v1 = runtime.ring
        v2 = p.HashRing.of(set(range(SERVERS)) - {dead})
        cold = next(
            k
            for i in range(1000)
            if v1.origin(k := p.pad_key(b"c%d" % i)) == dead and v2.origin(k) != v2.origin(HOT)
        )
        heir, cold_heir = v2.origin(HOT), v2.origin(cold)
        agents[dead].core.backend.put(cold, Item(b"cold value", 0, 0))
        agents[cold_heir].core.backend.put(cold, Item(b"old copy", 1, 1))  # e.g. a kept replica
        _stop_agent(agents[dead], pool)

        def period() -> Metrics:  # Gets of HOT, to its origin under v1 (a client's old ring)
            return gets_period(dead)

        period()
        assert period().down == [dead]
        with pytest.raises(MembershipError, match=rf"servers \[{dead}\] are down: no change"):
            runtime.handle_admin("remove", f"s{heir}")  # another server: not while it is down
        answer = runtime.handle_admin("remove", f"s{dead}")
        assert answer["ok"] and answer["version"] == 2, answer
        handoff = answer["handoff"]
        assert handoff["was_down"] and handoff["hot_keys_restored"] == [HOT.hex()], handoff
        assert handoff["hot_keys_lost"] == [] and handoff["moved"] == 0, handoff
        assert runtime.members == frozenset(range(SERVERS)) - {dead}
        item = agents[heir].core.backend.get(HOT)
        assert item is not None and (item.value, item.ver) == (b"hot value", ver)
        assert agents[cold_heir].core.backend.get(cold) is None  # lost with it, not served stale
        assert drv.read_down() == {dead}
        for i, ctl in pool.controls.items():
            if i != dead:
                assert ctl.ring_state()["version"] == 2
        m = period()  # not a member: not watched, still held down, no event
        assert m.error == "" and m.events == [f"s{dead}:removed"] and m.down == [dead], m

        with pytest.raises(MembershipError, match=rf"s{dead} is down and its agent does not"):
            runtime.handle_admin("add", f"s{dead}")
        agents[dead] = _start_agent(rack, dead)
        answer = runtime.handle_admin("add", f"s{dead}")
        assert answer["ok"] and answer["version"] == 3, answer
        assert answer["handoff"]["moved"] > 0, answer
        assert drv.read_down() == set() and runtime.membership.down == frozenset()
        item = agents[dead].core.backend.get(HOT)
        assert item is not None and item.value == b"hot value"
        assert agents[dead].core.backend.get(cold) is None  # the memory backend's loss stands
        m = period()
        assert m.error == "" and m.down == [], m
        assert f"s{dead}:added" in m.events and f"s{dead}:up-restarted" in m.events, m
