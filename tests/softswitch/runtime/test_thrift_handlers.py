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
from tests.softswitch.runtime.conftest import CPU_PORT, PROGRAM


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


def test_calls_bmv2_has_and_this_target_answers_as_bmv2(handler: StandardHandler) -> None:
    """Calls simple_switch_CLI cannot send for this program (it checks its JSON first) still
    get BMv2's error codes, never an internal error; table_reset_default restores the default."""
    from bm_runtime.standard.ttypes import (
        InvalidDevMgrOperation,
        InvalidLearnOperation,
        InvalidSwapOperation,
        LearnOperationErrorCode,
        SwapOperationErrorCode,
    )

    exact = BmMatchParam(type=BmMatchParamType.EXACT, exact=BmMatchParamExact(b"\x00\x01"))
    handle = handler.bm_mt_add_entry(0, "l2", [exact], "forward", [b"\x00\x02"], None)
    assert handle == 0
    codes = TableOperationErrorCode
    for call, want in [
        (lambda: handler.bm_mt_set_entry_ttl(0, "l2", handle, 1000), codes.AGEING_DISABLED),
        (lambda: handler.bm_mt_set_entry_ttl(0, "l2", 7, 1000), codes.INVALID_HANDLE),
        (lambda: handler.bm_mt_indirect_delete_entry(0, "l2", 0), codes.WRONG_TABLE_TYPE),
        (lambda: handler.bm_mt_indirect_delete_entry(0, "nope", 0), codes.INVALID_TABLE_NAME),
        (lambda: handler.bm_mt_act_prof_get_members(0, "p"), codes.INVALID_ACTION_PROFILE_NAME),
        (lambda: handler.bm_mt_get_meter_rates(0, "l2", handle), codes.METERS_DISABLED),
    ]:
        with pytest.raises(InvalidTableOperation) as exc:
            call()
        assert exc.value.code == want
    with pytest.raises(InvalidLearnOperation) as learn:
        handler.bm_learning_ack(0, 1, 0, [])
    assert learn.value.code == LearnOperationErrorCode.INVALID_LIST_ID
    with pytest.raises(InvalidDevMgrOperation):
        handler.bm_dev_mgr_add_port("veth0", 3, "")
    with pytest.raises(InvalidSwapOperation) as swap:
        handler.bm_swap_configs()
    assert swap.value.code == SwapOperationErrorCode.NO_ONGOING_SWAP

    handler.bm_mt_set_default_action(0, "l2", "drop", [])
    assert handler.bm_mt_get_default_entry(0, "l2").action_name.endswith("drop")
    handler.bm_mt_reset_default_entry(0, "l2")
    assert handler.bm_mt_get_default_entry(0, "l2").action_name == "NoAction"
    handler.bm_mt_set_default_action(0, "l2", "drop", [])
    handler.bm_mt_clear_entries(0, "l2", True)  # reset_default_entry
    assert handler.bm_mt_get_default_entry(0, "l2").action_name == "NoAction"
