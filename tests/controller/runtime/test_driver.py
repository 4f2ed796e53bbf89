"""The P4Runtime/Thrift driver against a switch on loopback gRPC and Thrift: the exact entries,
groups and registers a plan leaves, reads of counters and HashPipe, resets, and the BMv2 path
(registers over Thrift, one Write per run of table updates)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from kvswitch import protocol as p
from kvswitch.controller import names
from kvswitch.controller.ops import PushRequest, RegisterWrite
from kvswitch.controller.p4rt_driver import DriverError, P4RuntimeDriver, Program, SwitchAddress
from kvswitch.controller.plan import Plan, build_plan, diff, rack_setup
from kvswitch.controller.rackfile import Host, RackFile
from kvswitch.controller.startup import forwarding_ops, trust_ops
from kvswitch.paths import p4src_dir
from softswitch.runtime.bundle import Bundle
from tests.controller.runtime.conftest import DEFINES, LiveSwitch

HOT = p.pad_key(b"hot-key")
OTHER = p.pad_key(b"other-key")


def frame(rack: RackFile, src: Host, dst_ip: str, msg: p.Message) -> bytes:
    """A KVSwitch message over UDP from ``src`` through the switch."""
    return bytes(
        Ether(
            src=":".join(f"{src.mac:012x}"[i : i + 2] for i in range(0, 12, 2)),
            dst="02:00:00:00:00:fe",
        )
        / IP(src=src.ip_text, dst=dst_ip)
        / UDP(sport=40000, dport=p.KVS_PORT)
        / msg.encode()
    )


def get_frame(rack: RackFile, key: bytes, dst: int, seq: int = 1) -> bytes:
    """A client's Get of ``key`` addressed to server ``dst``."""
    msg = p.Message(p.Op.GET, key, cid=7, seq=seq)
    return frame(rack, rack.clients[0], rack.servers[dst].ip_text, msg)


def driver_for(live: LiveSwitch, program: Program, rack: RackFile) -> P4RuntimeDriver:
    return P4RuntimeDriver(live.address, program, rack.rack())


def test_plan_on_the_switch(live_switch: LiveSwitch, program: Program, rackfile: RackFile) -> None:
    rack = rackfile.rack()
    with driver_for(live_switch, program, rackfile) as drv:
        # the software switch takes registers over P4Runtime (BMv2: test_driver_bmv2.py)
        assert drv.registers == "p4runtime"
        assert live_switch.device.pipeline is not None  # the driver set the pipeline
        assert (drv.servers, drv.slots, drv.stages) == (3, 16, 2)
        drv.apply(forwarding_ops(rackfile) + trust_ops(rackfile) + rack_setup(rack, 7))
        empty = Plan(3, drv.slots)
        plan = build_plan([(HOT, (1, 0, 2)), (OTHER, (2,))], empty, 3, drv.slots)
        writes = drv.p4rt_writes
        drv.apply(diff(empty, plan, rack))
        assert drv.p4rt_writes - writes == 1  # registers in the same Write

        assert drv.read_register(names.REG_EPOCH) == [7]
        assert drv.read_plan()[0].keys == plan.keys
        # valid_ver in two parts of 32 cells (conftest's sizes): one register to the controller
        sw = live_switch.device.pipeline.switch  # type: ignore[union-attr]
        drv.apply([RegisterWrite(names.REG_VALID_VER, 30, 8, 4)])
        assert len(drv.read_register(names.REG_VALID_VER)) == 64
        assert drv.read_register(names.REG_VALID_VER)[29:35] == [0, 8, 8, 8, 8, 0]
        assert drv.read_register_cells(names.REG_VALID_VER, [31, 32, 34]) == {31: 8, 32: 8, 34: 0}
        parts = {r.preamble.alias: r.preamble.name for r in sw.p4info.registers}
        assert sw.register_read(parts["valid_ver"])[30:] == [8, 8]
        assert sw.register_read(parts["valid_ver_1"])[:3] == [8, 8, 0]
        drv.apply([RegisterWrite(names.REG_VALID_VER, 30, 0, 4)])
        hot = drv.read_entries(names.HOTKEY_TABLE)
        assert {(m[0][1], h.action, h.params["slot"], h.params["n"]) for m, h in hot.items()} == {
            (int.from_bytes(HOT, "big"), "set_hot", 0, 3),
            (int.from_bytes(OTHER, "big"), "set_hot", 1, 1),
        }
        keyindex = drv.read_entries(names.KEYINDEX_TABLE)
        assert sorted((h.params["slot"], h.params["base"]) for h in keyindex.values()) == [
            (0, 0),
            (1, 3),
        ]
        servermap = {
            (dict(m)["slot"], dict(m)["ordinal"]): h.params
            for m, h in drv.read_entries(names.SERVERMAP_TABLE).items()
        }
        assert servermap == {
            (slot, ordinal): {
                "vidx": slot * 3 + server,
                "ip": rackfile.servers[server].ip,
                "mac": rackfile.servers[server].mac,
                "port": rackfile.servers[server].port,
            }
            for slot, holders in ((0, (1, 0, 2)), (1, (2,)))
            for ordinal, server in enumerate(holders)
        }
        assert drv.read_groups() == {1: ((1, 1), (2, 0), (3, 2))}
        groups = drv.read_entries(names.MULTIGROUP_TABLE)
        assert [(h.action, h.params) for h in groups.values()] == [
            ("set_mcast_group", {"group": 1})
        ]
        lpm = drv.read_entries("ipv4_lpm")
        assert len(lpm) == 4
        assert lpm[(("dst_addr", (rackfile.servers[2].ip, 32)),)].params == {
            "port": 3,
            "dmac": rackfile.servers[2].mac,
            "smac": rackfile.switch_mac,
        }
        assert len(drv.read_entries(names.SERVEROFFSET_TABLE)) == 3
        assert len(drv.read_entries(names.PORTTOSERVER_TABLE)) == 3
        assert len(drv.read_entries(names.LOADCOUNT_TABLE)) == 3

        # traffic: HOT is hot (counted by HotkeyTable), OTHER too, a cold key goes to HashPipe
        dev = live_switch.device
        for i in range(5):
            dev.process(9, get_frame(rackfile, HOT, 1, seq=i))
        dev.process(9, get_frame(rackfile, OTHER, 2))
        cold = p.pad_key(b"cold")
        for i in range(3):
            assert [port for port, _ in dev.process(9, get_frame(rackfile, cold, 0, seq=i))] == [1]
        assert drv.read_hot_counters() == {HOT: 5, OTHER: 1}
        # no replica confirmed yet: every Get of HOT goes to its origin (server 1, port 2)
        assert drv.read_load_counters() == [3, 5, 1]
        # HashPipe keys are 32-bit words: readable over Thrift on both targets
        assert drv.read_hashpipe() == [(cold, 3)]
        drv.reset_counters()
        assert drv.read_hot_counters() == {HOT: 0, OTHER: 0}
        assert drv.read_load_counters() == [0, 0, 0]
        assert drv.read_hashpipe() == []

        # shrink HOT to its origin, drop OTHER: groups and entries go, registers of the row zeroed
        smaller = build_plan([(HOT, (1,))], plan, 3, drv.slots)
        drv.apply(diff(plan, smaller, rack))
        assert drv.read_plan()[0].keys == smaller.keys
        assert drv.read_groups() == {}
        assert drv.read_entries(names.MULTIGROUP_TABLE) == {}
        assert len(drv.read_entries(names.SERVERMAP_TABLE)) == 1
        assert drv.read_register(names.REG_VALID_VER)[0:3] == [0, 0, 0]


def test_bad_batch_is_an_error(
    live_switch: LiveSwitch, program: Program, rackfile: RackFile
) -> None:
    rack = rackfile.rack()
    with driver_for(live_switch, program, rackfile) as drv:
        ops = rack_setup(rack, 1)
        drv.apply(ops)
        with pytest.raises(DriverError, match="P4Runtime"):
            drv.apply(ops)  # the same entries again: ALREADY_EXISTS


def test_unreachable_switch(program: Program, rackfile: RackFile) -> None:
    from tests.softswitch.runtime.conftest import free_port

    address = SwitchAddress(f"127.0.0.1:{free_port()}", 0, "127.0.0.1", free_port(), timeout=3)
    with pytest.raises(DriverError):
        P4RuntimeDriver(address, program, rackfile.rack())


def test_a_refused_pipeline_is_an_error_naming_the_switchs_answer(
    live_switch: LiveSwitch, program: Program, rackfile: RackFile
) -> None:
    """finsy raises only SwitchFailFastError when the pipeline is refused; the driver's error
    carries what the switch answered, and nothing is installed."""
    other = Bundle.from_file(p4src_dir() / "kvswitch_tna.p4", DEFINES).compile().p4info
    with pytest.raises(DriverError, match=r"INVALID_ARGUMENT.*p4info does not match"):
        P4RuntimeDriver(live_switch.address, Program(other, program.device_config), rackfile.rack())
    assert live_switch.device.pipeline is None


def test_a_restarted_controller_connects_while_its_old_stream_lingers(
    live_switch: LiveSwitch, program: Program, rackfile: RackFile
) -> None:
    """A driver closed and another opened at once, with the same election id: the switch may not
    have dropped the first stream yet and refuses the id (INVALID_ARGUMENT); the driver tries
    again until its timeout. Without that, about 1 in 40 reconnections here failed."""
    for _ in range(100):
        P4RuntimeDriver(live_switch.address, program, rackfile.rack()).close()


def test_rack_too_large_for_program(program: Program, live_switch: LiveSwitch) -> None:
    servers = [
        {
            "name": f"s{i}",
            "ip": f"10.0.0.{i + 1}",
            "mac": f"02:00:00:00:00:{i + 1:02x}",
            "port": i + 1,
        }
        for i in range(5)  # the test build has MAX_SERVERS = 4
    ]
    rack = RackFile.parse(
        {"switch": {"ip": "10.0.0.254", "mac": "02:00:00:00:00:fe"}, "servers": servers}
    )
    with pytest.raises(DriverError, match="MAX_SERVERS"):
        P4RuntimeDriver(live_switch.address, program, rack.rack())


class RecordingAgents:
    def __init__(self) -> None:
        self.calls: list[tuple[str, bytes, int]] = []

    def push(self, key: bytes, origin: int, replicas: tuple[int, ...]) -> None:
        self.calls.append(("push", key, origin))

    def remove(self, key: bytes, server: int) -> None:
        self.calls.append(("remove", key, server))


@contextmanager
def _replica_2_removed(
    live_switch: LiveSwitch, program: Program, rackfile: RackFile
) -> Iterator[tuple[P4RuntimeDriver, RecordingAgents, Plan]]:
    """A driver whose last batch took server 2 out of HOT's replicas (its removal deferred),
    the agents' calls cleared after that batch, and the plan it left."""
    rack = rackfile.rack()
    agents = RecordingAgents()
    a = live_switch.address
    address = SwitchAddress(a.grpc_addr, a.device_id, a.thrift_host, a.thrift_port)
    with P4RuntimeDriver(address, program, rack, agents) as drv:
        drv.apply(forwarding_ops(rackfile) + trust_ops(rackfile) + rack_setup(rack, 7))
        empty = Plan(3, drv.slots)
        p1 = build_plan([(HOT, (1, 0, 2))], empty, 3, drv.slots)
        drv.apply(diff(empty, p1, rack))
        p2 = build_plan([(HOT, (1, 0))], p1, 3, drv.slots)
        agents.calls.clear()
        drv.apply(diff(p1, p2, rack))
        yield drv, agents, p2


def test_removals_wait_one_batch(
    live_switch: LiveSwitch, program: Program, rackfile: RackFile
) -> None:
    """A replica leaves the tables in one batch and is told to drop its copy at the start of the
    next one (a Get routed to it just before may still be on its way), before that batch's tables
    could point at it again."""
    with _replica_2_removed(live_switch, program, rackfile) as (drv, agents, p2):
        assert [c for c in agents.calls if c[0] == "remove"] == []
        assert drv.deferred_removals and drv.deferred_removals[0].servers == (2,)
        p3 = build_plan([(HOT, (1, 0, 2))], p2, 3, drv.slots)  # server 2 comes back at once
        drv.apply(diff(p2, p3, rackfile.rack()))
        assert agents.calls[0] == ("remove", HOT, 2)  # first, then the new batch and its push
        assert agents.calls[-1] == ("push", HOT, 1)
        assert drv.deferred_removals == []


def test_a_repair_in_the_same_period_leaves_the_deferred_removals_waiting(
    live_switch: LiveSwitch, program: Program, rackfile: RackFile
) -> None:
    """A push made again later in the period (the runtime's repair of replicas out of step)
    does not run the removals the period's batch deferred: Gets routed to those servers just
    before may still be on their way. The next period's batch runs them."""
    with _replica_2_removed(live_switch, program, rackfile) as (drv, agents, _):
        agents.calls.clear()
        drv.repair([PushRequest(HOT, 1, (0,))])
        assert agents.calls == [("push", HOT, 1)]
        assert [op.servers for op in drv.deferred_removals] == [(2,)]
        drv.apply([])
        assert agents.calls[-1] == ("remove", HOT, 2)
        assert drv.deferred_removals == []


def test_reset_clears_every_hashpipe_register_of_the_tna_build(
    live_switch: LiveSwitch, rackfile: RackFile
) -> None:
    """The reset takes a stage's registers from P4Info: on TNA the later stages' hp_tag too."""
    bundle = Bundle.from_file(p4src_dir() / "kvswitch_tna.p4", DEFINES)
    tna = Program(bundle.compile().p4info, bundle.to_bytes())
    with driver_for(live_switch, tna, rackfile) as drv:
        drv.apply(forwarding_ops(rackfile) + trust_ops(rackfile) + rack_setup(rackfile.rack(), 7))
        for i in range(60):
            key = p.pad_key(b"cold-%d" % (i % 30))
            live_switch.device.process(9, get_frame(rackfile, key, i % 3, seq=i))
        pipeline = live_switch.device.pipeline
        assert pipeline is not None
        sw = pipeline.switch
        regs = [r.preamble.name for r in sw.p4info.registers if ".hp_stage" in r.preamble.name]
        tags = [r for r in regs if r.endswith(".hp_tag")]
        assert len(regs) == 11 and len(tags) == 1  # 2 stages x 5, and stage 1's pair
        assert any(sw.register_read(tags[0])) and drv.read_hashpipe()
        drv.reset_counters()
        assert all(not any(sw.register_read(r)) for r in regs)
        assert drv.read_hashpipe() == []
