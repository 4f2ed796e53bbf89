"""The driver against BMv2's ``simple_switch_grpc`` itself (skipped where it or p4c-bm2-ss is not
on PATH): every P4Runtime and Thrift call the controller makes, on the target users run. BMv2's
P4Runtime server refuses registers, so the driver finds that out and takes them over Thrift."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kvswitch import protocol as p
from kvswitch.agent.backend_procs import free_port
from kvswitch.controller import names
from kvswitch.controller.ops import RegisterWrite
from kvswitch.controller.p4rt_driver import DriverError, P4RuntimeDriver, Program, SwitchAddress
from kvswitch.controller.plan import Plan, build_plan, diff, rack_setup
from kvswitch.controller.rackfile import RackFile
from kvswitch.controller.startup import forwarding_ops, trust_ops
from kvswitch.paths import p4src_dir
from tests.controller.runtime.conftest import DEFINES
from tests.p4c_bmv2.tools import need, p4c_compile, start_grpc_switch, stop

HOT = p.pad_key(b"hot-key")
OTHER = p.pad_key(b"other-key")


@pytest.fixture(scope="module")
def bmv2_program(tmp_path_factory: pytest.TempPathFactory) -> Program:
    source = p4src_dir() / "kvswitch.p4"
    json_path, info = p4c_compile(source, tmp_path_factory.mktemp("p4c"), DEFINES, [source.parent])
    return Program(info, json_path.read_bytes())


@pytest.fixture
def bmv2() -> Iterator[SwitchAddress]:
    """simple_switch_grpc with no program, on free loopback ports."""
    binary = need("simple_switch_grpc")
    grpc_port, thrift_port = free_port(), free_port()
    proc = start_grpc_switch(binary, grpc_port, thrift_port)
    try:
        yield SwitchAddress(f"127.0.0.1:{grpc_port}", 0, "127.0.0.1", thrift_port, timeout=5)
    finally:
        stop(proc)


def test_plan_on_bmv2(bmv2: SwitchAddress, bmv2_program: Program, rackfile: RackFile) -> None:
    rack = rackfile.rack()
    with P4RuntimeDriver(bmv2, bmv2_program, rack) as drv:
        assert drv.registers == "thrift"  # BMv2's P4Runtime answered UNIMPLEMENTED
        assert (drv.servers, drv.slots, drv.stages) == (3, 16, 2)
        drv.apply(forwarding_ops(rackfile) + trust_ops(rackfile) + rack_setup(rack, 7))
        assert drv.read_register(names.REG_EPOCH) == [7]
        empty = Plan(3, drv.slots)
        plan = build_plan([(HOT, (1, 0, 2)), (OTHER, (2,))], empty, 3, drv.slots)
        drv.apply(diff(empty, plan, rack))
        assert drv.read_plan() == (plan, [])
        assert drv.read_groups() == {1: ((1, 1), (2, 0), (3, 2))}
        assert len(drv.read_entries("ipv4_lpm")) == 4
        assert len(drv.read_entries(names.LOADCOUNT_TABLE)) == 3
        # counters read over P4Runtime (direct and indirect), HashPipe over Thrift
        assert drv.read_hot_counters() == {HOT: 0, OTHER: 0}
        assert drv.read_hot_writes() == [0] * drv.slots
        assert drv.read_load_counters() == [0, 0, 0]
        assert drv.read_hashpipe() == []
        assert drv.read_version() == 0
        drv.reset_counters()

        # one cell, a row: exactly those cells (BMv2's range ends before its end index)
        drv.apply([RegisterWrite(names.REG_ORIGIN_VER, 1, 5)])
        drv.apply([RegisterWrite(names.REG_VALID_VER, 3, 9, 3)])
        assert drv.read_register(names.REG_ORIGIN_VER)[:3] == [0, 5, 0]
        assert drv.read_register(names.REG_VALID_VER)[2:7] == [0, 9, 9, 9, 0]
        assert drv.read_register_cells(names.REG_VALID_VER, [4, 6]) == {4: 9, 6: 0}
        # a run across valid_ver's two parts (32 cells each at these sizes)
        drv.apply([RegisterWrite(names.REG_VALID_VER, 30, 8, 4)])
        assert len(drv.read_register(names.REG_VALID_VER)) == 64
        assert drv.read_register(names.REG_VALID_VER)[29:35] == [0, 8, 8, 8, 8, 0]
        assert drv.read_register_cells(names.REG_VALID_VER, [31, 32, 34]) == {31: 8, 32: 8, 34: 0}

        smaller = build_plan([(HOT, (1,))], plan, 3, drv.slots)
        drv.apply(diff(plan, smaller, rack))
        assert drv.read_plan()[0].keys == smaller.keys
        assert drv.read_groups() == {}
        assert drv.read_register(names.REG_VALID_VER)[0:3] == [0, 0, 0]


def test_refused_write_is_an_error_on_bmv2(
    bmv2: SwitchAddress, bmv2_program: Program, rackfile: RackFile
) -> None:
    """A register write BMv2 refuses (a cell out of range) and a table write it refuses (an
    entry twice) raise; nothing is reported as done."""
    rack = rackfile.rack()
    with P4RuntimeDriver(bmv2, bmv2_program, rack) as drv:
        with pytest.raises(DriverError, match="bm_register_write_range"):
            drv.apply([RegisterWrite(names.REG_ORIGIN_VER, drv.slots, 1)])
        drv.apply(forwarding_ops(rackfile))
        with pytest.raises(DriverError):
            drv.apply(forwarding_ops(rackfile)[:1])


def test_pipeline_kept_on_reconnect(
    bmv2: SwitchAddress, bmv2_program: Program, rackfile: RackFile
) -> None:
    """A second connection (a restarted controller) finds the registers where it left them."""
    rack = rackfile.rack()
    with P4RuntimeDriver(bmv2, bmv2_program, rack) as drv:
        drv.apply(rack_setup(rack, 11))
    with P4RuntimeDriver(bmv2, bmv2_program, rack) as drv:
        assert drv.registers == "thrift"
        assert drv.read_register(names.REG_EPOCH) == [11]
