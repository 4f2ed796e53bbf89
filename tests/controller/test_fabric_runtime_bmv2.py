"""The fabric runtime on BMv2 itself: one ``simple_switch_grpc`` per spine and leaf (fabric_net.py's
fabric, without links: BMv2 takes packets on interfaces only), the programs compiled by
p4c-bm2-ss. What BMv2 does differently from the software switch is all on the control path:
registers (the spines' epochs) over Thrift, the /16 routes and HostportTable prefixes, groups with
replication ids, FabricHotTable's default written over P4Runtime. A period makes a key fabric-hot
(the pushes are recorded, not played); a restarted runtime finds the same state and epochs.
Skipped where simple_switch_grpc or p4c-bm2-ss is not on PATH."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from kvswitch.agent.backend_procs import free_port
from kvswitch.controller import names
from kvswitch.controller.fabric_runtime import FabricRuntime
from kvswitch.controller.fabricfile import FabricFile
from kvswitch.controller.p4rt_driver import P4RuntimeDriver, Program, SwitchAddress
from kvswitch.controller.program import compiled_for_bmv2
from kvswitch.controller.rackfile import RackFile
from kvswitch.controller.startup import static_ops
from kvswitch.paths import p4src_dir
from tests.controller.fabric_net import (
    LEAF_DEFINES,
    LEAF_EPOCH,
    MAX_HOLDERS,
    RACKS,
    SPINE_DEFINES,
    SPINES,
    fabric_json,
    rack_json,
)
from tests.controller.test_fabric_runtime import HOT, config, inputs, origin_of
from tests.p4c_bmv2.tools import need, start_grpc_switch, stop

pytestmark = pytest.mark.bmv2


@dataclass
class Bmv2:
    name: str
    address: SwitchAddress
    proc: subprocess.Popen[bytes]


class Recorder:
    def __init__(self) -> None:
        self.pushes: list[tuple[bytes, int, tuple[int, ...]]] = []
        self.rebased: list[tuple[bytes, int]] = []

    def push(self, key: bytes, origin: int, replicas: tuple[int, ...]) -> None:
        self.pushes.append((key, origin, replicas))

    def remove(self, key: bytes, server: int) -> None:
        pass

    def rebase(self, key: bytes, server: int) -> None:
        self.rebased.append((key, server))


@pytest.fixture(scope="module")
def bmv2_programs() -> tuple[Program, Program]:
    need("simple_switch_grpc")
    need("p4c-bm2-ss")
    src = p4src_dir()
    return (
        compiled_for_bmv2(src / "kvswitch_spine.p4", SPINE_DEFINES),
        compiled_for_bmv2(src / "kvswitch_leaf.p4", LEAF_DEFINES),
    )


@pytest.fixture
def switches() -> Iterator[list[Bmv2]]:
    binary = need("simple_switch_grpc")
    out: list[Bmv2] = []
    try:
        for name in [f"spine{s + 1}" for s in range(SPINES)] + [
            f"leaf{r + 1}" for r in range(RACKS)
        ]:
            grpc_port, thrift_port = free_port(), free_port()
            proc = start_grpc_switch(binary, grpc_port, thrift_port)
            address = SwitchAddress(f"127.0.0.1:{grpc_port}", 0, "127.0.0.1", thrift_port)
            out.append(Bmv2(name, address, proc))
        yield out
    finally:
        for sw in out:
            stop(sw.proc)


def connect(fabric: FabricFile, switches: list[Bmv2], programs, agents: Recorder, state: Path):
    spines = [
        P4RuntimeDriver(sw.address, programs[0], fabric.spine_rack(), agents, row=MAX_HOLDERS)
        for sw in switches[:SPINES]
    ]
    leaves = []
    for r, sw in enumerate(switches[SPINES:]):
        rack = RackFile.parse(rack_json(r))
        drv = P4RuntimeDriver(sw.address, programs[1], rack.rack())
        if not drv.read_entries("ipv4_lpm"):  # the rack controller's entries, once
            entries, registers = static_ops(rack, rack.rack(), LEAF_EPOCH, drv.has_liveness)
            drv.apply(entries + registers)
        leaves.append(drv)
    return spines, leaves, FabricRuntime(fabric, spines, leaves, config(), origin_of, state)


def test_the_fabric_runtime_on_bmv2(
    switches: list[Bmv2], bmv2_programs: tuple[Program, Program], tmp_path: Path
) -> None:
    path = tmp_path / "fabric.json"
    path.write_text(json.dumps(fabric_json(switches[:SPINES], switches[SPINES:])))  # type: ignore[arg-type]
    fabric = FabricFile.load(path)
    state = tmp_path / "state.json"
    agents = Recorder()
    spines, leaves, rt = connect(fabric, switches, bmv2_programs, agents, state)
    try:
        assert spines[0].registers == "thrift"  # BMv2's P4Runtime refuses registers
        rt.start()
        m = rt.period(inputs())
        assert m.errors == [] and HOT in rt.spine_of
        s = rt.spine_of[HOT]
        holders = rt.plans[s].keys[HOT].holders
        assert agents.pushes == [(HOT, holders[0], holders[1:])]
        assert sorted(agents.rebased) == sorted((HOT, h) for h in holders)
        assert spines[s].read_register(names.REG_EPOCH) == [rt.epochs[s]]
        groups = spines[s].read_groups()
        assert list(groups.values()) == [
            tuple(sorted([(fabric.spines[s].ports[0], 0)] + [
                (fabric.spines[s].ports[h // 2], names.spine_rid(h)) for h in holders[1:]
            ]))
        ]  # fmt: skip
        for r, drv in enumerate(leaves):
            [entry] = drv.read_entries(names.FABRIC_HOT_TABLE).values()
            assert entry.params[names.PARAM_PORT] == fabric.racks[r].uplinks[s]
        tables = (names.HOTKEY_TABLE, names.SERVERMAP_TABLE, names.SERVEROFFSET_TABLE, "ipv4_lpm")
        before = {t: [d.read_entries(t) for d in spines] for t in tables}
        epochs, plans = list(rt.epochs), [dict(pl.keys) for pl in rt.plans]
    finally:
        rt.close()
        for d in spines + leaves:
            d.close()
    spines, leaves, rt = connect(fabric, switches, bmv2_programs, agents, state)
    try:
        rt.start()
        assert rt.epochs == epochs and [dict(pl.keys) for pl in rt.plans] == plans
        assert {t: [d.read_entries(t) for d in spines] for t in tables} == before
        m = rt.period(inputs())
        assert m.errors == [] and m.updates == 0
    finally:
        rt.close()
        for d in spines + leaves:
            d.close()
