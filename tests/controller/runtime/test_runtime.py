"""The period loop on a switch behind loopback P4Runtime/Thrift: injected Gets make a key hot, it
is replicated (the agents' part played with SYNC/CONFIRM/SYNC_DONE packets) and its Gets are
redirected; a restarted controller rebuilds the same state from the switch and the agents."""

from __future__ import annotations

import io
import json
import logging
import threading
from collections.abc import Iterator, Sequence
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
from kvswitch.controller.ops import EntryOp, MulticastGroupSet, Operation, PushRequest, TableEntry
from kvswitch.controller.p4rt_driver import DriverError, P4RuntimeDriver, Program
from kvswitch.controller.period import ControllerConfig
from kvswitch.controller.rackfile import RackFile
from kvswitch.controller.runtime import Runtime
from kvswitch.controller.startup import next_epoch
from softswitch.runtime.device import Device
from softswitch.runtime.thrift_server import ThriftServer
from tests.controller.runtime.conftest import RACK_JSON, LiveSwitch
from tests.controller.runtime.test_driver import frame, get_frame

HOT = p.pad_key(b"the-hot-key")
COLD = [p.pad_key(b"cold-%d" % i) for i in range(3)]
SWITCH_IP = "10.0.0.254"


class PacketAgents:
    """The agents' side of a push, as packets on the in-process switch: the origin's SYNC is
    reflected with a new version, each replica CONFIRMs it, the origin sends SYNC_DONE."""

    def __init__(self, device: Device, rack: RackFile) -> None:
        self.device = device
        self.rack = rack
        self.pushes: list[tuple[bytes, int, tuple[int, ...]]] = []
        self.removals: list[tuple[bytes, int]] = []
        self.lost_confirms = 0  # pushes whose first replica's CONFIRM is lost (UDP)

    def _send(self, server: int, op: int, key: bytes, epoch: int = 0, ver: int = 0) -> list:
        host = self.rack.servers[server]
        msg = p.Message(op, key, epoch=epoch, ver=ver)
        return self.device.process(host.port, frame(self.rack, host, SWITCH_IP, msg))

    def push(self, key: bytes, origin: int, replicas: tuple[int, ...]) -> None:
        self.pushes.append((key, origin, replicas))
        [(port, raw)] = self._send(origin, p.Op.SYNC, key)
        assert port == self.rack.servers[origin].port
        stamped = p.Message.decode(bytes(Ether(raw)[UDP].payload))
        assert stamped.ver > 0
        lost = replicas[:1] if self.lost_confirms else ()
        self.lost_confirms -= bool(lost)
        for server in replicas:
            if server not in lost:
                assert self._send(server, p.Op.CONFIRM, key, stamped.epoch, stamped.ver) == []
        assert self._send(origin, p.Op.SYNC_DONE, key, stamped.epoch, stamped.ver) == []

    def remove(self, key: bytes, server: int) -> None:
        self.removals.append((key, server))


def traffic(live: LiveSwitch, rack: RackFile, ring: p.HashRing, hot: int) -> list[tuple[int, str]]:
    """``hot`` Gets of HOT and 5 of each cold key, each to its origin; (port, dst ip) of each Get
    that left towards a server."""
    out = []
    for i in range(hot):
        for port, raw in live.device.process(9, get_frame(rack, HOT, ring.origin(HOT), seq=i)):
            out.append((port, Ether(raw)[IP].dst))
    for key in COLD:
        for i in range(5):
            live.device.process(9, get_frame(rack, key, ring.origin(key), seq=i))
    return out


@pytest.fixture
def agents_dir(tmp_path: Path) -> Iterator[tuple[list[AgentServer], RackFile]]:
    """Three real agents with Unix control sockets, and the rack file naming them."""
    servers, threads = [], []
    raw = json.loads(json.dumps(RACK_JSON))
    for i, entry in enumerate(raw["servers"]):
        path = tmp_path / f"s{i}.ctl"
        core = AgentCore(MemoryBackend(), None, p.MAX_VALUE, RecentIds(16, 16))
        agent = AgentServer(core, AgentConfig("127.0.0.1", 0, control_unix=str(path), tcp=False))
        entry["control"] = f"unix:{path}"
        thread = threading.Thread(target=agent.serve_forever, daemon=True)
        thread.start()
        servers.append(agent)
        threads.append(thread)
    yield servers, RackFile.parse(raw)
    for agent in servers:
        agent.request_stop()
    for thread in threads:
        thread.join(timeout=5)


def test_loop_replicates_and_redirects_then_restart(
    live_switch: LiveSwitch, program: Program, rackfile: RackFile
) -> None:
    rack = rackfile.rack()
    agents = PacketAgents(live_switch.device, rackfile)
    metrics = io.StringIO()
    config = ControllerConfig(k=8, t0=20.0, policy="ring")
    drv = P4RuntimeDriver(live_switch.address, program, rack, agents)
    runtime = Runtime(drv, rackfile, config, metrics=metrics)
    runtime.start()
    assert runtime.epoch == 1
    ring = runtime.ring
    origin = ring.origin(HOT)

    traffic(live_switch, rackfile, ring, 60)
    first = runtime.period()
    assert first.loads[origin] >= 60 and first.error == ""
    kp = runtime.controller.plan.keys[HOT]
    assert kp.origin == origin and len(kp.replicas) >= 1
    assert agents.pushes == [(HOT, origin, kp.replicas)]
    assert first.hot_keys == len(runtime.controller.plan.keys) and first.updates > 0

    # Gets of HOT now go round-robin over its holders: the replicas' are redirected
    sent = traffic(live_switch, rackfile, ring, 30)
    holders = {rackfile.servers[s].port: rackfile.servers[s].ip_text for s in kp.holders}
    assert len(sent) == 30 and all(holders[port] == ip for port, ip in sent)
    per_port = {port: sum(1 for q, _ in sent if q == port) for port in holders}
    assert all(count >= 30 // len(holders) for count in per_port.values()), per_port

    second = runtime.period()
    assert all(second.loads[s] >= 30 // len(kp.holders) for s in kp.holders)
    assert second.lambda_ < first.lambda_
    kp = runtime.controller.plan.keys[HOT]  # still hot; a changed holder set is pushed again
    assert kp.origin == origin
    assert agents.pushes[-1] == (HOT, origin, kp.replicas)
    holders = {rackfile.servers[s].port: rackfile.servers[s].ip_text for s in kp.holders}
    records = [json.loads(line) for line in metrics.getvalue().splitlines()]
    assert [r["period"] for r in records] == [1, 2]
    assert set(records[0]) >= {"period", "time", "lambda", "max_mean", "threshold", "hot_keys"}
    assert records[1]["loads"] == second.loads

    # restart: the controller dies; stray entries appear; a new one takes over
    before = {t: drv.read_entries(t) for t in (names.HOTKEY_TABLE, names.KEYINDEX_TABLE)}
    before_groups = drv.read_groups()
    plan_before = runtime.controller.plan.keys
    stray_key = p.pad_key(b"stray")
    drv.apply(
        [
            TableEntry(
                EntryOp.ADD,
                names.KEYINDEX_TABLE,
                ((names.MATCH_KEY, stray_key),),
                names.ACT_SET_BASE,
                ((names.PARAM_SLOT, 15), (names.PARAM_BASE, 45), (names.PARAM_FLOOR, 0)),
            ),
            MulticastGroupSet(16, ((1, 0), (2, 1))),
            TableEntry(  # a hot key whose ServermapTable entries never made it
                EntryOp.ADD,
                names.HOTKEY_TABLE,
                ((names.MATCH_KEY, stray_key),),
                names.ACT_SET_HOT,
                ((names.PARAM_SLOT, 14), (names.PARAM_HOLDERS, 2)),
            ),
        ]
    )
    drv.close()
    drv2 = P4RuntimeDriver(live_switch.address, program, rack, agents)
    runtime2 = Runtime(drv2, rackfile, config)
    runtime2.start()
    try:
        assert runtime2.epoch == 2
        assert runtime2.controller.plan.keys == plan_before
        after = {t: drv2.read_entries(t) for t in before}
        # the strays are gone; the recovered keys' floors rose to the version the switch had
        # handed out at the takeover (no confirm sent before it counts), nothing else changed
        floor = drv2.read_version()
        assert {e.params[names.PARAM_FLOOR] for e in after[names.KEYINDEX_TABLE].values()} == {
            floor
        }
        for entries in (after, before):
            for e in entries[names.KEYINDEX_TABLE].values():
                e.params[names.PARAM_FLOOR] = None
        assert after == before
        assert drv2.read_groups() == before_groups
        sent = traffic(live_switch, rackfile, ring, 30)  # still redirected after the restart
        assert {port for port, _ in sent} == set(holders)
        third = runtime2.period()
        assert third.error == "" and runtime2.controller.plan.keys[HOT].origin == origin
    finally:
        drv2.close()


def test_observe_only_removes_and_installs_nothing(
    live_switch: LiveSwitch, program: Program, rackfile: RackFile
) -> None:
    agents = PacketAgents(live_switch.device, rackfile)
    config = ControllerConfig(k=8, t0=20.0)
    with P4RuntimeDriver(live_switch.address, program, rackfile.rack(), agents) as drv:
        runtime = Runtime(drv, rackfile, config)
        runtime.start()
        traffic(live_switch, rackfile, runtime.ring, 60)
        runtime.period()
        assert HOT in runtime.controller.plan.keys
        observer = Runtime(drv, rackfile, config, observe_only=True)
        observer.start()  # takes the hot keys off the switch
        assert drv.read_entries(names.HOTKEY_TABLE) == {} and drv.read_groups() == {}
        traffic(live_switch, rackfile, runtime.ring, 60)
        m = observer.period()
        assert m.loads[runtime.ring.origin(HOT)] >= 60 and m.hot_keys == 0 and m.updates == 0
        assert drv.read_entries(names.HOTKEY_TABLE) == {}


def test_stale_copies_dropped_at_start(
    live_switch: LiveSwitch, program: Program, agents_dir: tuple[list[AgentServer], RackFile]
) -> None:
    """An agent's copy of a key it neither originates nor replicates is removed over the Unix
    control socket; copies of keys it originates stay."""
    agents, rack = agents_dir
    ring = p.HashRing(len(rack.servers))
    keys = [p.pad_key(b"key-%d" % i) for i in range(20)]
    own = next(k for k in keys if ring.origin(k) == 0)
    foreign = next(k for k in keys if ring.origin(k) != 0)
    for key in (own, foreign):
        agents[0].core.backend.put(key, Item(b"v", 1, 1))
    pool = AgentPool(rack)
    with P4RuntimeDriver(live_switch.address, program, rack.rack(), pool) as drv:
        Runtime(drv, rack, ControllerConfig(k=8), agents=pool).start()
    pool.close()
    assert set(dict(agents[0].core.snapshot())) == {own}


def test_ring_state_file(
    live_switch: LiveSwitch, program: Program, rackfile: RackFile, tmp_path: Path
) -> None:
    """A restarted controller serves the ring it last activated (docs/protocol.md "Membership");
    a malformed saved ring is ignored (the rack file's first ring)."""
    state = tmp_path / "state.json"
    state.write_text('{"epoch": 1, "ring": {"version": 5, "members": [0, 2]}}')
    with P4RuntimeDriver(live_switch.address, program, rackfile.rack()) as drv:
        runtime = Runtime(drv, rackfile, ControllerConfig(k=8), state_file=state)
        runtime.start()
        assert (runtime.ring_version, runtime.members) == (5, frozenset({0, 2}))
        assert {runtime.ring.origin(b"k%d" % i) for i in range(100)} == {0, 2}
        assert json.loads(state.read_text())["ring"] == {"version": 5, "members": [0, 2]}
        state.write_text('{"epoch": 1, "ring": {"version": 5, "members": [0, 99]}}')
        runtime = Runtime(drv, rackfile, ControllerConfig(k=8), state_file=state)
        runtime.start()
        assert runtime.ring_version == 1 and runtime.members == set(range(len(rackfile.servers)))
        # stopped during a switch-over (past the copy): the change is finished
        state.write_text(
            '{"epoch": 1, "ring": {"version": 5, "members": [0, 2]},'
            ' "ring_next": {"version": 6, "members": [0, 1, 2]}}'
        )
        runtime = Runtime(drv, rackfile, ControllerConfig(k=8), state_file=state)
        runtime.start()
        assert (runtime.ring_version, runtime.members) == (6, frozenset({0, 1, 2}))
        assert "ring_next" not in json.loads(state.read_text())


def test_epoch_state_file(
    live_switch: LiveSwitch, program: Program, rackfile: RackFile, tmp_path: Path
) -> None:
    state = tmp_path / "state.json"
    state.write_text('{"epoch": 41}')
    with P4RuntimeDriver(live_switch.address, program, rackfile.rack()) as drv:
        runtime = Runtime(drv, rackfile, ControllerConfig(k=8), state_file=state)
        runtime.start()
        assert runtime.epoch == 42 and drv.read_register(names.REG_EPOCH) == [42]
        saved = json.loads(state.read_text())
        assert saved == {"epoch": 42, "ring": {"version": 1, "members": saved["ring"]["members"]}}
        assert saved["ring"]["members"] == list(range(len(rackfile.servers)))
        state.write_text("not json")
        Runtime(drv, rackfile, ControllerConfig(k=8), state_file=state).start()
        assert drv.read_register(names.REG_EPOCH) == [43]  # from the switch
        # the threshold survives a restart through the state file
        state.write_text('{"epoch": 2, "threshold": 33.5}')
        runtime = Runtime(drv, rackfile, ControllerConfig(k=8), state_file=state)
        runtime.start()
        assert runtime.epoch == 44 and runtime.controller.threshold.value == 33.5
        runtime.period()
        saved = json.loads(state.read_text())
        assert saved["epoch"] == 44 and saved["threshold"] == 33.5
        # and last period's counts: the restarted predictor goes on from them
        traffic(live_switch, rackfile, runtime.ring, 60)
        runtime.period()
        saved = json.loads(state.read_text())["observed"]
        assert saved[HOT.hex()] == 60.0 and len(saved) == 1 + len(COLD)
        saved["zz"] = 1  # malformed entries are ignored
        saved[p.pad_key(b"x").hex()] = "many"
        state.write_text(json.dumps({"epoch": 1, "observed": saved}))
        runtime = Runtime(drv, rackfile, ControllerConfig(k=8), state_file=state)
        runtime.start()
        assert runtime.controller.predictor.prev[HOT] == 60.0
        assert len(runtime.controller.predictor.prev) == 1 + len(COLD)
    assert next_epoch(0xFFFF) == 1 and next_epoch(3, 9) == 10


def test_failed_period_reads_the_plan_back(
    live_switch: LiveSwitch, program: Program, rackfile: RackFile, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch the switch refuses, or a bug in planning, ends the period with an error line; the
    plan is read back from the switch and the next period goes on from there."""
    agents = PacketAgents(live_switch.device, rackfile)
    with P4RuntimeDriver(live_switch.address, program, rackfile.rack(), agents) as drv:
        runtime = Runtime(drv, rackfile, ControllerConfig(k=8, t0=20.0))
        runtime.start()
        real_apply = drv.apply

        def refuse(ops: object) -> None:
            raise DriverError("P4Runtime: refused (test)")

        monkeypatch.setattr(drv, "apply", refuse)
        traffic(live_switch, rackfile, runtime.ring, 60)
        failed = runtime.period()
        assert failed.error == "P4Runtime: refused (test)" and failed.hot_keys == 0
        assert runtime.controller.plan.keys == {}  # what the switch holds: nothing
        monkeypatch.setattr(drv, "apply", real_apply)

        def broken(*args: object) -> None:
            raise RuntimeError("planning bug (test)")

        monkeypatch.setattr(runtime.controller, "decide", broken)
        traffic(live_switch, rackfile, runtime.ring, 60)
        assert runtime.period().error.startswith("internal error: RuntimeError")
        monkeypatch.undo()

        traffic(live_switch, rackfile, runtime.ring, 60)
        ok = runtime.period()
        assert ok.error == "" and HOT in runtime.controller.plan.keys
        assert drv.read_plan()[0].keys == runtime.controller.plan.keys


def test_thrift_connection_lost_and_back(
    live_switch: LiveSwitch, program: Program, rackfile: RackFile
) -> None:
    """The Thrift server goes away: periods fail with an error line; once it is back the runtime
    reconnects both connections and starts again (new epoch), keeping the hot keys."""
    agents = PacketAgents(live_switch.device, rackfile)
    with P4RuntimeDriver(live_switch.address, program, rackfile.rack(), agents) as drv:
        runtime = Runtime(drv, rackfile, ControllerConfig(k=8, t0=20.0))
        runtime.start()
        traffic(live_switch, rackfile, runtime.ring, 60)
        assert runtime.period().error == ""
        plan = dict(runtime.controller.plan.keys)
        assert HOT in plan
        live_switch.thrift.stop()
        assert runtime.period().error.startswith("Thrift")
        assert not drv.connected
        live_switch.thrift = ThriftServer(
            live_switch.device, live_switch.address.thrift_port, host="127.0.0.1"
        )
        live_switch.thrift.start()
        back = runtime.period()  # fails, reconnects, starts again
        assert runtime.epoch == 2 and drv.connected
        assert runtime.controller.plan.keys == plan
        traffic(live_switch, rackfile, runtime.ring, 60)
        assert runtime.period().error == "", back


def test_restart_pushes_what_was_never_pushed(
    live_switch: LiveSwitch, program: Program, rackfile: RackFile
) -> None:
    """A controller dies between its batch and its pushes (here: it has no agents): the replicas
    never become valid. The next controller pushes those keys again at start-up."""
    config = ControllerConfig(k=8, t0=20.0)
    with P4RuntimeDriver(live_switch.address, program, rackfile.rack()) as drv:
        runtime = Runtime(drv, rackfile, config)
        runtime.start()
        traffic(live_switch, rackfile, runtime.ring, 60)
        assert runtime.period().agent_errors >= 1
        kp = runtime.controller.plan.keys[HOT]
        assert kp.replicas
    sent = traffic(live_switch, rackfile, runtime.ring, 6)
    assert {port for port, _ in sent} == {rackfile.servers[kp.origin].port}  # none valid
    agents = PacketAgents(live_switch.device, rackfile)
    with P4RuntimeDriver(live_switch.address, program, rackfile.rack(), agents) as drv:
        restarted = Runtime(drv, rackfile, config)
        restarted.start()
        assert agents.pushes == [(HOT, kp.origin, kp.replicas)]
        sent = traffic(live_switch, rackfile, runtime.ring, 3 * len(kp.holders))
        assert {port for port, _ in sent} == {rackfile.servers[s].port for s in kp.holders}
        Runtime(drv, rackfile, config).start()  # all valid now: nothing pushed again
        assert len(agents.pushes) == 1


def test_failed_push_retried_next_period(
    live_switch: LiveSwitch,
    program: Program,
    rackfile: RackFile,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An agent that refuses a push (down, busy): the key's replicas stay invalid and Gets go to
    the origin; the next period pushes it again, and then its Gets are spread."""
    caplog.set_level(logging.INFO, logger="kvswitch.controller")
    agents = PacketAgents(live_switch.device, rackfile)
    refusals = [1]
    real_push = agents.push

    def flaky_push(key: bytes, origin: int, replicas: tuple[int, ...]) -> None:
        if refusals[0]:
            refusals[0] -= 1
            raise ConnectionRefusedError("agent down (test)")
        real_push(key, origin, replicas)

    agents.push = flaky_push  # type: ignore[method-assign]
    with P4RuntimeDriver(live_switch.address, program, rackfile.rack(), agents) as drv:
        # fixed threshold (bound 10), no smoothing: the same traffic keeps the same holders
        config = ControllerConfig(k=8, t0=20.0, bound=10.0, alpha=1.0)
        runtime = Runtime(drv, rackfile, config)
        runtime.start()
        traffic(live_switch, rackfile, runtime.ring, 60)
        first = runtime.period()
        before = runtime.controller.plan.keys[HOT]
        assert first.agent_errors == 1 and HOT in drv.failed_pushes and agents.pushes == []
        traffic(live_switch, rackfile, runtime.ring, 60)
        batches: list[list[Operation]] = []
        real_apply = drv.apply

        def recording_apply(ops: Sequence[Operation]) -> None:
            batches.append(list(ops))
            real_apply(ops)

        drv.apply = recording_apply  # type: ignore[method-assign]
        second = runtime.period()
        kp = runtime.controller.plan.keys[HOT]
        assert kp == before and "retrying 1 pushes" in caplog.text  # not a push of the diff
        # in the period's batch, after the plan's operations (here none): the driver runs it
        # beside the plan's pushes, not after them
        assert batches[0] == [PushRequest(HOT, kp.origin, kp.replicas)], batches
        assert second.agent_errors == 0 and not drv.failed_pushes
        assert agents.pushes[-1] == (HOT, kp.origin, kp.replicas)
        sent = traffic(live_switch, rackfile, runtime.ring, 3 * len(kp.holders))
        assert {port for port, _ in sent} == {rackfile.servers[s].port for s in kp.holders}


def test_replicas_whose_confirm_was_lost_are_pushed_again(
    live_switch: LiveSwitch,
    program: Program,
    rackfile: RackFile,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Two hot keys whose pushes succeed at the agents but one replica's CONFIRM of each is lost:
    those replicas stay out of the read sets (no Gets), and no write comes to repair them. They
    are seen behind at the end of two periods with the same ``origin_ver``, so both keys are
    pushed again; then Gets reach every holder."""
    caplog.set_level(logging.INFO, logger="kvswitch.controller")
    agents = PacketAgents(live_switch.device, rackfile)
    agents.lost_confirms = 2
    second = COLD[0]

    def gets() -> dict[bytes, set[int]]:
        """60 Gets of each hot key (and the cold ones); the ports each hot key's Gets left by."""
        hot = {HOT: {port for port, _ in traffic(live_switch, rackfile, runtime.ring, 60)}}
        origin = runtime.ring.origin(second)
        out = (
            live_switch.device.process(9, get_frame(rackfile, second, origin, seq=i))
            for i in range(60)
        )
        hot[second] = {port for sent in out for port, _ in sent}
        return hot

    with P4RuntimeDriver(live_switch.address, program, rackfile.rack(), agents) as drv:
        # fixed threshold (bound 10), no smoothing: the same traffic keeps the same holders
        config = ControllerConfig(k=8, t0=20.0, bound=10.0, alpha=1.0)
        runtime = Runtime(drv, rackfile, config)
        runtime.start()
        gets()
        assert runtime.period().agent_errors == 0
        plan = {key: runtime.controller.plan.keys[key] for key in (HOT, second)}
        assert len(agents.pushes) == 2 and all(len(kp.replicas) >= 2 for kp in plan.values())
        origin_ver = drv.read_register(names.REG_ORIGIN_VER)
        assert runtime.lagging == {
            (key, kp.replicas[0]): origin_ver[kp.slot] for key, kp in plan.items()
        }
        ports = {key: {rackfile.servers[s].port for s in kp.holders} for key, kp in plan.items()}
        sent = gets()
        for key, kp in plan.items():  # all but the replica whose CONFIRM was lost
            assert sent[key] == ports[key] - {rackfile.servers[kp.replicas[0]].port}
        runtime.period()
        assert {key: runtime.controller.plan.keys[key] for key in plan} == plan
        assert gets() == ports
        assert sorted(agents.pushes[2:]) == sorted(
            (k, kp.origin, kp.replicas) for k, kp in plan.items()
        )
        assert "pushing 2 hot keys again" in caplog.text
        runtime.period()  # all valid: nothing pushed again
        assert len(agents.pushes) == 4 and runtime.lagging == {} and runtime.repushes == {}


def test_replicas_ahead_of_a_silent_origin_leave_the_read_set(
    live_switch: LiveSwitch, program: Program, rackfile: RackFile
) -> None:
    """A hot Set is stamped and copied, the replicas CONFIRM it, but its origin never reports it
    (it answered a re-sent write with its first result): the replicas stay in the read set with a
    version above ``origin_ver``, so rule 6 would drop every reply they send, and the switch
    refuses a push while that write is pending. Two periods later with ``origin_ver`` unchanged
    their cells are zeroed (Gets go to the origin alone, nothing is pushed); the key's next
    write brings them back."""
    agents = PacketAgents(live_switch.device, rackfile)
    with P4RuntimeDriver(live_switch.address, program, rackfile.rack(), agents) as drv:
        config = ControllerConfig(k=8, t0=20.0, bound=10.0, alpha=1.0)
        runtime = Runtime(drv, rackfile, config)
        runtime.start()
        traffic(live_switch, rackfile, runtime.ring, 60)
        runtime.period()
        kp = runtime.controller.plan.keys[HOT]
        assert kp.replicas and len(agents.pushes) == 1
        m, origin, client = len(rackfile.servers), rackfile.servers[kp.origin], rackfile.clients[0]

        def versions() -> tuple[int, list[int]]:
            valid = drv.read_register(names.REG_VALID_VER)
            base = names.valid_base(kp.slot, m)
            ov = drv.read_register(names.REG_ORIGIN_VER)[kp.slot]
            return ov, [valid[base + s] for s in kp.replicas]

        def write(seq: int, reported: bool) -> int:
            """A client's Set through the switch; the replicas confirm it; the origin's reply
            crosses the switch only if ``reported``. Returns the version stamped."""
            msg = p.Message(p.Op.SET, HOT, b"x%d" % seq, cid=7, seq=seq)
            out = live_switch.device.process(9, frame(rackfile, client, origin.ip_text, msg))
            (ver,) = {p.Message.decode(bytes(Ether(raw)[UDP].payload)).ver for _, raw in out}
            for s in kp.replicas:
                agents._send(s, p.Op.CONFIRM, HOT, runtime.epoch, ver)
            if reported:
                reply = p.Message(p.Op.SET_REPLY, HOT, cid=7, seq=seq, epoch=runtime.epoch, ver=ver)
                live_switch.device.process(
                    origin.port, frame(rackfile, origin, client.ip_text, reply)
                )
            return ver

        def holders_reached() -> set[int]:
            sent = traffic(live_switch, rackfile, runtime.ring, 60)
            return {port for port, _ in sent}

        before, _ = versions()
        ver = write(99, reported=False)
        assert versions() == (before, [ver] * len(kp.replicas))
        everyone = {rackfile.servers[s].port for s in kp.holders}
        assert holders_reached() == everyone  # the replicas' replies would all be dropped
        runtime.period()
        assert holders_reached() == everyone
        runtime.period()
        assert runtime.controller.plan.keys[HOT] == kp
        assert versions() == (before, [0] * len(kp.replicas)) and len(agents.pushes) == 1
        assert holders_reached() == {origin.port}
        runtime.period()
        ver = write(100, reported=True)
        assert versions() == (ver, [ver] * len(kp.replicas))
        assert holders_reached() == everyone
        runtime.period()
        assert runtime.lagging == {} and len(agents.pushes) == 1
