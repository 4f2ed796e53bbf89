"""Thrift handlers in-process: BMv2 priority order (smaller wins), BMv2 error codes."""

from __future__ import annotations

import pytest
from bm_runtime.standard.ttypes import (
    BmAddEntryOptions,
    BmMatchParam,
    BmMatchParamExact,
    BmMatchParamTernary,
    BmMatchParamType,
    InvalidRegisterOperation,
    InvalidTableOperation,
    RegisterOperationErrorCode,
    TableOperationErrorCode,
)
from scapy.layers.inet import IP
from scapy.layers.l2 import Ether

from softswitch.runtime.bundle import Bundle
from softswitch.runtime.device import Device
from softswitch.runtime.thrift_server import StandardHandler
from tests.runtime.conftest import CPU_PORT, PROGRAM


@pytest.fixture
def handler() -> StandardHandler:
    device = Device(cpu_port=None)
    device.install(device.load(Bundle.from_file(PROGRAM)))
    return StandardHandler(device)


def ternary(value: int, mask: int) -> BmMatchParam:
    return BmMatchParam(
        type=BmMatchParamType.TERNARY,
        ternary=BmMatchParamTernary(value.to_bytes(2, "big"), mask.to_bytes(2, "big")),
    )


@pytest.mark.parametrize(("drop_prio", "punt_prio", "punted"), [(1, 2, False), (2, 1, True)])
def test_smaller_bmv2_priority_wins(
    handler: StandardHandler, drop_prio: int, punt_prio: int, punted: bool
) -> None:
    handler.bm_mt_add_entry(
        0, "acl", [ternary(0x0800, 0xFF00)], "drop", [], BmAddEntryOptions(priority=drop_prio)
    )
    handler.bm_mt_add_entry(
        0, "acl", [ternary(0x0800, 0xFFFF)], "punt", [], BmAddEntryOptions(priority=punt_prio)
    )
    out = handler.device.process(1, bytes(Ether() / IP()))
    assert [p for p, _ in out] == ([CPU_PORT] if punted else [])


def test_bmv2_error_codes(handler: StandardHandler) -> None:
    def code(fn: object, *args: object) -> int:
        with pytest.raises(InvalidTableOperation) as exc:
            fn(*args)  # type: ignore[operator]
        return int(exc.value.code)

    exact = BmMatchParam(type=BmMatchParamType.EXACT, exact=BmMatchParamExact(b"\x00\x01"))
    wide = BmMatchParam(
        type=BmMatchParamType.EXACT, exact=BmMatchParamExact(b"\x02\x00")
    )  # > bit<9>
    opts = BmAddEntryOptions(priority=0)
    assert (
        code(handler.bm_mt_add_entry, 0, "nope", [exact], "drop", [], opts)
        == TableOperationErrorCode.INVALID_TABLE_NAME
    )
    assert (
        code(handler.bm_mt_add_entry, 0, "l2", [exact], "punt", [], opts)
        == TableOperationErrorCode.INVALID_ACTION_NAME
    )
    assert (
        code(handler.bm_mt_add_entry, 0, "l2", [wide], "drop", [], opts)
        == TableOperationErrorCode.BAD_MATCH_KEY
    )
    assert (
        code(handler.bm_mt_add_entry, 0, "l2", [exact], "forward", [], opts)
        == TableOperationErrorCode.BAD_ACTION_DATA
    )
    handle = handler.bm_mt_add_entry(0, "l2", [exact], "forward", [b"\x00\x02"], opts)
    assert (
        code(handler.bm_mt_add_entry, 0, "l2", [exact], "drop", [], opts)
        == TableOperationErrorCode.DUPLICATE_ENTRY
    )
    assert (
        code(handler.bm_mt_delete_entry, 0, "l2", handle + 100)
        == TableOperationErrorCode.INVALID_HANDLE
    )
    assert [p for p, _ in handler.device.process(1, bytes(Ether() / IP()))] == [2]
    handler.bm_mt_delete_entry(0, "l2", handle)
    assert handler.bm_mt_get_num_entries(0, "l2") == 0


def test_wide_register_cells_refused_over_thrift(handler: StandardHandler) -> None:
    handler.device.pipeline.switch.register_write("wide", 1, 1 << 100)  # type: ignore[union-attr]
    assert handler.bm_register_read(0, "wide", 0) == 0  # fits i64: returned as is
    with pytest.raises(InvalidRegisterOperation) as exc:
        handler.bm_register_read(0, "wide", 1)
    assert exc.value.code == RegisterOperationErrorCode.ERROR
