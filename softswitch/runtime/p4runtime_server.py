"""P4Runtime (gRPC) server for the software switch, following the P4Runtime specification 1.4.

Arbitration, pipeline config, Write, Read, StreamChannel packet I/O and Capabilities. Every
request runs under the device lock, so the data plane sees a batch either not at all or whole.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Iterator
from concurrent import futures
from dataclasses import dataclass, field

import grpc
from finsy.proto import p4d, p4i, p4r, p4r_grpc, rpc_code, rpc_status

from softswitch import P4Error
from softswitch.runtime.bundle import BundleError
from softswitch.runtime.device import (
    ControlError,
    Device,
    EntryRecord,
    MatchValue,
    Pipeline,
    engine_call,
)
from softswitch.runtime.p4info_index import ArrayInfo, P4InfoIndex, TableInfo

LOG = logging.getLogger("softswitch.p4runtime")
API_VERSION = "1.4.0"
READ_CHUNK = 1000  # entities per ReadResponse

Undo = Callable[[], None]


# ---------------------------------------------------------------- byte strings


def decode_uint(data: bytes, bitwidth: int, what: str) -> int:
    """A P4Runtime byte string as an unsigned integer that must fit ``bitwidth`` bits."""
    if not data:
        raise ControlError("OUT_OF_RANGE", f"{what}: empty byte string")
    value = int.from_bytes(data, "big")
    if value >> bitwidth:
        raise ControlError(
            "OUT_OF_RANGE", f"{what}: value {data.hex()} does not fit in {bitwidth} bits"
        )
    return value


def encode_uint(value: int) -> bytes:
    """The canonical (shortest, at least one byte) byte string of an unsigned integer."""
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


def split_cell(reg: ArrayInfo, cell: int) -> list[int]:
    """A struct register's cell as its members' values, first member first."""
    out = []
    shift = reg.bitwidth
    for w in reg.members:
        shift -= w
        out.append(cell >> shift & ((1 << w) - 1))
    return out


def encode_cell(reg: ArrayInfo, cell: int) -> p4d.P4Data:
    """A register cell as P4Data: a bitstring, or a struct of bitstrings for a paired register."""
    if not reg.members:
        return p4d.P4Data(bitstring=encode_uint(cell))
    data = p4d.P4Data()
    for v in split_cell(reg, cell):
        data.struct.members.add(bitstring=encode_uint(v))
    return data


def decode_cell(reg: ArrayInfo, data: p4d.P4Data) -> int:
    """The cell a register write's P4Data stands for (the inverse of :func:`encode_cell`)."""
    if not reg.members:
        if data.WhichOneof("data") != "bitstring":
            raise ControlError("INVALID_ARGUMENT", f"{reg.name}: data must be a bitstring")
        return decode_uint(data.bitstring, reg.bitwidth, reg.name)
    if data.WhichOneof("data") != "struct" or len(data.struct.members) != len(reg.members):
        raise ControlError(
            "INVALID_ARGUMENT",
            f"{reg.name}: data must be a struct of {len(reg.members)} bitstrings",
        )
    cell = 0
    for m, w in zip(data.struct.members, reg.members, strict=True):
        if m.WhichOneof("data") != "bitstring":
            raise ControlError("INVALID_ARGUMENT", f"{reg.name}: struct members are bitstrings")
        cell = cell << w | decode_uint(m.bitstring, w, reg.name)
    return cell


def code_number(name: str) -> int:
    return int(rpc_code.Code.Value(name))


def grpc_code(name: str) -> grpc.StatusCode:
    return getattr(grpc.StatusCode, name)


# ---------------------------------------------------------------- translation


def decode_match(table: TableInfo, fields: list[p4r.FieldMatch]) -> dict[str, MatchValue]:
    """FieldMatch list -> engine match dict (omitted don't-care fields filled in)."""
    seen: dict[int, p4r.FieldMatch] = {}
    for fm in fields:
        if fm.field_id not in table.keys_by_id:
            raise ControlError(
                "INVALID_ARGUMENT", f"{table.name}: unknown match field id {fm.field_id}"
            )
        if fm.field_id in seen:
            raise ControlError("INVALID_ARGUMENT", f"{table.name}: match field {fm.field_id} twice")
        seen[fm.field_id] = fm
    match: dict[str, MatchValue] = {}
    for key in table.keys:
        fm = seen.get(key.id)
        what = f"{table.name} key {key.name}"
        kind = fm.WhichOneof("field_match_type") if fm is not None else None
        if fm is not None and kind != key.kind:
            raise ControlError(
                "INVALID_ARGUMENT", f"{what}: {kind} match given for a {key.kind} field"
            )
        if key.kind == "exact":
            if fm is None:
                raise ControlError("INVALID_ARGUMENT", f"{what}: exact field missing")
            match[key.name] = decode_uint(fm.exact.value, key.bitwidth, what)
        elif key.kind == "lpm":
            if fm is None:
                match[key.name] = (0, 0)
                continue
            plen = fm.lpm.prefix_len
            value = decode_uint(fm.lpm.value, key.bitwidth, what)
            if plen <= 0 or plen > key.bitwidth:
                raise ControlError("INVALID_ARGUMENT", f"{what}: bad prefix length {plen}")
            if value & ((1 << (key.bitwidth - plen)) - 1):
                raise ControlError("INVALID_ARGUMENT", f"{what}: bits set beyond the prefix")
            match[key.name] = (value, plen)
        elif key.kind == "ternary":
            if fm is None:
                match[key.name] = (0, 0)
                continue
            value = decode_uint(fm.ternary.value, key.bitwidth, what)
            mask = decode_uint(fm.ternary.mask, key.bitwidth, what)
            if mask == 0:
                raise ControlError("INVALID_ARGUMENT", f"{what}: zero mask must be omitted")
            if value & ~mask:
                raise ControlError("INVALID_ARGUMENT", f"{what}: value has bits outside the mask")
            match[key.name] = (value, mask)
        elif key.kind == "range":
            if fm is None:
                match[key.name] = (0, (1 << key.bitwidth) - 1)
                continue
            low = decode_uint(fm.range.low, key.bitwidth, what)
            high = decode_uint(fm.range.high, key.bitwidth, what)
            if low > high:
                raise ControlError("INVALID_ARGUMENT", f"{what}: low > high")
            match[key.name] = (low, high)
        else:  # optional
            match[key.name] = (
                None if fm is None else decode_uint(fm.optional.value, key.bitwidth, what)
            )
    return match


def encode_match(table: TableInfo, values: tuple[MatchValue, ...]) -> list[p4r.FieldMatch]:
    out = []
    for key, value in zip(table.keys, values, strict=True):
        fm = p4r.FieldMatch(field_id=key.id)
        if key.kind == "exact":
            assert isinstance(value, int)
            fm.exact.value = encode_uint(value)
        elif key.kind == "lpm":
            assert isinstance(value, tuple)
            if value[1] == 0:
                continue
            fm.lpm.value, fm.lpm.prefix_len = encode_uint(value[0]), value[1]
        elif key.kind == "ternary":
            assert isinstance(value, tuple)
            if value[1] == 0:
                continue
            fm.ternary.value, fm.ternary.mask = encode_uint(value[0]), encode_uint(value[1])
        elif key.kind == "range":
            assert isinstance(value, tuple)
            if value == (0, (1 << key.bitwidth) - 1):
                continue
            fm.range.low, fm.range.high = encode_uint(value[0]), encode_uint(value[1])
        else:
            if value is None:
                continue
            assert isinstance(value, int)
            fm.optional.value = encode_uint(value)
        out.append(fm)
    return out


def decode_action(
    index: P4InfoIndex, table: TableInfo, action: p4r.Action, default: bool
) -> tuple[str, dict[str, int]]:
    info = index.actions.get(action.action_id)
    if info is None or action.action_id not in table.action_ids:
        raise ControlError(
            "INVALID_ARGUMENT",
            f"{table.name}: action id {action.action_id} is not one of its actions",
        )
    if default and action.action_id in table.table_only_ids:
        raise ControlError("PERMISSION_DENIED", f"{info.name} cannot be a default action")
    if not default and action.action_id in table.default_only_ids:
        raise ControlError("PERMISSION_DENIED", f"{info.name} is a default-only action")
    params: dict[str, int] = {}
    for p in action.params:
        spec = info.params_by_id.get(p.param_id)
        if spec is None:
            raise ControlError("INVALID_ARGUMENT", f"{info.name}: unknown param id {p.param_id}")
        if spec.name in params:
            raise ControlError("INVALID_ARGUMENT", f"{info.name}: param {spec.name} twice")
        params[spec.name] = decode_uint(p.value, spec.bitwidth, f"{info.name} param {spec.name}")
    missing = [p.name for p in info.params if p.name not in params]
    if missing:
        raise ControlError("INVALID_ARGUMENT", f"{info.name}: missing params {missing}")
    return info.name, params


def encode_action(index: P4InfoIndex, name: str, params: dict[str, int]) -> p4r.TableAction:
    info = index.action(name)
    if info is None:
        return p4r.TableAction()
    return p4r.TableAction(
        action=p4r.Action(
            action_id=info.id,
            params=[
                p4r.Action.Param(param_id=p.id, value=encode_uint(params.get(p.name, 0)))
                for p in info.params
            ],
        )
    )


# ---------------------------------------------------------------- arbitration


@dataclass(eq=False)
class Stream:
    """One StreamChannel: its arbitration state and the queue of messages to send it."""

    out: queue.Queue[p4r.StreamMessageResponse | None] = field(default_factory=queue.Queue)
    role: str | None = None  # None until the first arbitration message
    election_id: int | None = None


@dataclass
class RoleState:
    streams: list[Stream] = field(default_factory=list)
    primary: Stream | None = None
    highest: int | None = None


def uint128(value: int) -> p4r.Uint128:
    return p4r.Uint128(high=value >> 64, low=value & 0xFFFFFFFFFFFFFFFF)


def from_uint128(value: p4r.Uint128) -> int:
    return (value.high << 64) | value.low


# ---------------------------------------------------------------- the servicer


class P4RuntimeServicer(p4r_grpc.P4RuntimeServicer):
    def __init__(self, device: Device) -> None:
        self.device = device
        self.roles: dict[str, RoleState] = {}
        self.arb_lock = threading.Lock()
        self.saved: tuple[Pipeline, p4i.P4Info] | None = None  # VERIFY_AND_SAVE
        self.client_p4info: p4i.P4Info | None = None  # as the client sent it
        device.packet_in = self.send_packet_in

    # ---- helpers ----

    def check_device(self, device_id: int) -> None:
        if device_id != self.device.device_id:
            raise ControlError("NOT_FOUND", f"unknown device id {device_id}")

    def check_primary(self, role: str, election_id: p4r.Uint128 | None) -> None:
        with self.arb_lock:
            state = self.roles.get(role)
            if state is None and role:
                raise ControlError("NOT_FOUND", f"unknown role {role!r}")
            primary = state.primary if state else None
            if (
                primary is None
                or election_id is None
                or primary.election_id != from_uint128(election_id)
            ):
                raise ControlError("PERMISSION_DENIED", f"not the primary client for role {role!r}")

    @staticmethod
    def abort(context: grpc.ServicerContext, err: ControlError) -> None:
        context.abort(grpc_code(err.code), err.message)

    # ---- Capabilities ----

    def Capabilities(
        self, request: p4r.CapabilitiesRequest, context: grpc.ServicerContext
    ) -> p4r.CapabilitiesResponse:
        return p4r.CapabilitiesResponse(p4runtime_api_version=API_VERSION)

    # ---- pipeline ----

    def SetForwardingPipelineConfig(
        self, request: p4r.SetForwardingPipelineConfigRequest, context: grpc.ServicerContext
    ) -> p4r.SetForwardingPipelineConfigResponse:
        try:
            self.check_device(request.device_id)
            self.check_primary(
                request.role, request.election_id if request.HasField("election_id") else None
            )
            self.set_pipeline(request)
        except ControlError as err:
            self.abort(context, err)
        return p4r.SetForwardingPipelineConfigResponse()

    def set_pipeline(self, request: p4r.SetForwardingPipelineConfigRequest) -> None:
        action = request.action
        acts = p4r.SetForwardingPipelineConfigRequest
        if action == acts.COMMIT:
            if request.HasField("config"):
                raise ControlError("INVALID_ARGUMENT", "COMMIT takes no config")
            if self.saved is None:
                raise ControlError("NOT_FOUND", "COMMIT without a saved config")
            pipe, info = self.saved
            self.saved = None
            self.commit(pipe, info, reconcile=False)
            return
        if action not in (
            acts.VERIFY,
            acts.VERIFY_AND_SAVE,
            acts.VERIFY_AND_COMMIT,
            acts.RECONCILE_AND_COMMIT,
        ):
            raise ControlError("INVALID_ARGUMENT", f"unsupported action {action}")
        config = request.config
        if not config.HasField("p4info") or not config.p4_device_config:
            raise ControlError("INVALID_ARGUMENT", "config needs both p4info and p4_device_config")
        try:
            pipe = self.device.load_config(
                config.p4_device_config, config.p4info, config.cookie.cookie
            )
        except BundleError as exc:
            raise ControlError("INVALID_ARGUMENT", str(exc)) from None
        except P4Error as exc:
            raise ControlError("INVALID_ARGUMENT", f"P4 program does not load: {exc}") from None
        pipe.device_config = bytes(config.p4_device_config)
        mismatch = p4info_mismatch(pipe.p4info, config.p4info)
        if mismatch:
            raise ControlError("INVALID_ARGUMENT", f"p4info does not match the program: {mismatch}")
        if action == acts.VERIFY:
            return
        if action == acts.VERIFY_AND_SAVE:
            self.saved = (pipe, config.p4info)
            return
        self.commit(pipe, config.p4info, reconcile=action == acts.RECONCILE_AND_COMMIT)

    def commit(self, pipe: Pipeline, info: p4i.P4Info, reconcile: bool) -> None:
        with self.device.lock:
            old = self.device.pipeline
            if reconcile and old is not None:
                carry_over(old, pipe)
            self.device.install(pipe)
            self.client_p4info = info
        LOG.info("pipeline installed (cookie %#x, %d tables)", pipe.cookie, len(pipe.index.tables))

    def GetForwardingPipelineConfig(
        self, request: p4r.GetForwardingPipelineConfigRequest, context: grpc.ServicerContext
    ) -> p4r.GetForwardingPipelineConfigResponse:
        try:
            self.check_device(request.device_id)
            pipe = self.device.require()
        except ControlError as err:
            self.abort(context, err)
            raise  # unreachable: abort raises
        types = p4r.GetForwardingPipelineConfigRequest
        config = p4r.ForwardingPipelineConfig()
        config.cookie.cookie = pipe.cookie
        rt = request.response_type
        if rt in (types.ALL, types.P4INFO_AND_COOKIE):
            config.p4info.CopyFrom(self.client_p4info or pipe.p4info)
        if rt in (types.ALL, types.DEVICE_CONFIG_AND_COOKIE):
            config.p4_device_config = pipe.device_config
        return p4r.GetForwardingPipelineConfigResponse(config=config)

    # ---- Write ----

    def Write(self, request: p4r.WriteRequest, context: grpc.ServicerContext) -> p4r.WriteResponse:
        try:
            self.check_device(request.device_id)
            self.check_primary(
                request.role, request.election_id if request.HasField("election_id") else None
            )
            with self.device.lock:
                pipe = self.device.require()
                errors = self.apply_batch(pipe, request)
        except ControlError as err:
            self.abort(context, err)
            raise
        if any(e.canonical_code != 0 for e in errors):
            status = rpc_status.Status(
                code=code_number("UNKNOWN"),
                message="one or more updates failed",
            )
            for err in errors:
                status.details.add().Pack(err)
            context.set_trailing_metadata(
                (("grpc-status-details-bin", status.SerializeToString()),)
            )
            context.abort(grpc.StatusCode.UNKNOWN, status.message)
        return p4r.WriteResponse()

    def apply_batch(self, pipe: Pipeline, request: p4r.WriteRequest) -> list[p4r.Error]:
        atomic = request.atomicity != p4r.WriteRequest.CONTINUE_ON_ERROR
        errors: list[p4r.Error] = []
        undos: list[Undo] = []
        for update in request.updates:
            try:
                undo = self.apply_update(pipe, update)
            except ControlError as err:
                errors.append(p4r.Error(canonical_code=code_number(err.code), message=err.message))
                if atomic:
                    for u in reversed(undos):
                        u()
                    aborted = p4r.Error(
                        canonical_code=code_number("ABORTED"), message="batch rolled back"
                    )
                    errors = [aborted] * (len(errors) - 1) + [errors[-1]]
                    errors += [aborted] * (len(request.updates) - len(errors))
                    return errors
                continue
            undos.append(undo)
            errors.append(p4r.Error(canonical_code=0))
        return errors

    def apply_update(self, pipe: Pipeline, update: p4r.Update) -> Undo:
        kind = update.entity.WhichOneof("entity")
        op = update.type
        if op == p4r.Update.UNSPECIFIED:
            raise ControlError("INVALID_ARGUMENT", "update type unspecified")
        if kind == "table_entry":
            return self.write_table_entry(pipe, op, update.entity.table_entry)
        if kind == "packet_replication_engine_entry":
            pre = update.entity.packet_replication_engine_entry
            if pre.WhichOneof("type") != "multicast_group_entry":
                raise ControlError("UNIMPLEMENTED", "clone sessions are not supported")
            return self.write_mc_group(pipe, op, pre.multicast_group_entry)
        if kind == "register_entry":
            return self.write_register(pipe, op, update.entity.register_entry)
        if kind == "counter_entry":
            return self.write_counter(pipe, op, update.entity.counter_entry)
        if kind == "direct_counter_entry":
            return self.write_direct_counter(pipe, op, update.entity.direct_counter_entry)
        if kind is None:
            raise ControlError("INVALID_ARGUMENT", "update without an entity")
        raise ControlError("UNIMPLEMENTED", f"writing {kind} is not supported")

    def table_of(self, pipe: Pipeline, table_id: int) -> TableInfo:
        table = pipe.index.tables.get(table_id)
        if table is None:
            raise ControlError(
                "NOT_FOUND" if table_id else "INVALID_ARGUMENT", f"unknown table id {table_id}"
            )
        return table

    def write_table_entry(self, pipe: Pipeline, op: int, te: p4r.TableEntry) -> Undo:
        table = self.table_of(pipe, te.table_id)
        if te.HasField("meter_config") or te.HasField("meter_counter_data") or te.idle_timeout_ns:
            raise ControlError("UNIMPLEMENTED", "meters and idle timeouts are not supported")
        if te.is_default_action:
            return self.write_default(pipe, table, op, te)
        match = decode_match(table, list(te.match))
        if table.needs_priority and te.priority <= 0:
            raise ControlError("INVALID_ARGUMENT", f"{table.name}: entries need a priority > 0")
        if not table.needs_priority and te.priority != 0:
            raise ControlError("INVALID_ARGUMENT", f"{table.name}: entries take no priority")
        key = pipe.key_of(table, match, te.priority)
        rec = pipe.lookup(table, key)
        if op == p4r.Update.DELETE:
            if rec is None:
                raise ControlError("NOT_FOUND", f"{table.name}: no such entry")
            engine_call(pipe.delete, table, rec)
            old = rec
            return lambda: (
                engine_call(pipe.add, table, match, old.action, old.params, te.priority) and None
            )
        if te.action.WhichOneof("type") != "action":
            raise ControlError(
                "UNIMPLEMENTED" if te.HasField("action") else "INVALID_ARGUMENT",
                f"{table.name}: entry needs a direct action",
            )
        action, params = decode_action(pipe.index, table, te.action.action, default=False)
        counters = te.counter_data if te.HasField("counter_data") else None
        if counters is not None and pipe.index.table_direct_counter(table) is None:
            raise ControlError("INVALID_ARGUMENT", f"{table.name} has no direct counter")
        if op == p4r.Update.INSERT:
            if rec is not None:
                raise ControlError("ALREADY_EXISTS", f"{table.name}: entry already exists")
            if table.size and len(pipe.entries.get(table.id, {})) >= table.size:
                raise ControlError("RESOURCE_EXHAUSTED", f"{table.name}: table full ({table.size})")
            new = engine_call(pipe.add, table, match, action, params, te.priority)
            if counters is not None:
                self.set_direct_counters(pipe, table, [new], counters)
            return lambda: engine_call(pipe.delete, table, new)
        if rec is None:
            raise ControlError("NOT_FOUND", f"{table.name}: no such entry")
        prev_action, prev_params = rec.action, dict(rec.params)
        undo_counters = (
            self.set_direct_counters(pipe, table, [rec], counters) if counters is not None else None
        )
        engine_call(pipe.modify, table, rec, action, params)

        def undo() -> None:
            engine_call(pipe.modify, table, rec, prev_action, prev_params)
            if undo_counters is not None:
                undo_counters()

        return undo

    def write_default(self, pipe: Pipeline, table: TableInfo, op: int, te: p4r.TableEntry) -> Undo:
        if op != p4r.Update.MODIFY:
            raise ControlError("INVALID_ARGUMENT", "the default entry can only be modified")
        if te.match or te.priority:
            raise ControlError("INVALID_ARGUMENT", "the default entry has no match and no priority")
        if table.const_default_action_id:
            raise ControlError("PERMISSION_DENIED", f"{table.name}: default action is const")
        if te.HasField("action"):
            action, params = decode_action(pipe.index, table, te.action.action, default=True)
        else:  # no action: back to the program's own default
            action, params = pipe.initial_defaults[table.id]
        prev = engine_call(pipe.switch.table_get_default, table.name)
        engine_call(pipe.set_default, table, action, params)
        return lambda: engine_call(pipe.set_default, table, *prev)

    def write_mc_group(self, pipe: Pipeline, op: int, mge: p4r.MulticastGroupEntry) -> Undo:
        gid = mge.multicast_group_id
        if gid == 0:
            raise ControlError("INVALID_ARGUMENT", "multicast group id 0 is reserved")
        prev = pipe.mc_groups.get(gid)
        if op == p4r.Update.DELETE:
            if prev is None:
                raise ControlError("NOT_FOUND", f"multicast group {gid} does not exist")
            old_meta = pipe.mc_metadata.get(gid, b"")
            old_fields = pipe.mc_port_fields.get(gid)
            engine_call(pipe.mc_delete, gid)
            return lambda: engine_call(pipe.mc_set, gid, prev, old_meta, old_fields)
        if op == p4r.Update.INSERT and prev is not None:
            raise ControlError("ALREADY_EXISTS", f"multicast group {gid} exists")
        if op == p4r.Update.MODIFY and prev is None:
            raise ControlError("NOT_FOUND", f"multicast group {gid} does not exist")
        replicas = []
        fields = []
        for r in mge.replicas:
            kind = r.WhichOneof("port_kind") or "egress_port"
            port = decode_uint(r.port, 32, "replica port") if kind == "port" else r.egress_port
            if (port, r.instance) in replicas:
                raise ControlError("INVALID_ARGUMENT", f"replica ({port}, {r.instance}) twice")
            replicas.append((port, r.instance))
            fields.append(kind)
        prev_meta = pipe.mc_metadata.get(gid, b"")
        prev_fields = pipe.mc_port_fields.get(gid)
        engine_call(pipe.mc_set, gid, replicas, mge.metadata, fields)
        if prev is None:
            return lambda: engine_call(pipe.mc_delete, gid)
        return lambda: engine_call(pipe.mc_set, gid, prev, prev_meta, prev_fields)

    def array_of(self, group: dict[int, ArrayInfo], obj_id: int, what: str) -> ArrayInfo:
        obj = group.get(obj_id)
        if obj is None:
            raise ControlError(
                "NOT_FOUND" if obj_id else "INVALID_ARGUMENT", f"unknown {what} id {obj_id}"
            )
        return obj

    def write_register(self, pipe: Pipeline, op: int, entry: p4r.RegisterEntry) -> Undo:
        reg = self.array_of(pipe.index.registers, entry.register_id, "register")
        if op != p4r.Update.MODIFY:
            raise ControlError("INVALID_ARGUMENT", "register entries can only be modified")
        value = decode_cell(reg, entry.data)
        sw = pipe.switch
        if entry.HasField("index"):
            idx = self.check_index(reg, entry.index.index)
            prev = engine_call(sw.register_read, reg.name, idx)
            engine_call(sw.register_write, reg.name, idx, value)
            return lambda: engine_call(sw.register_write, reg.name, idx, prev)
        prev_all = engine_call(sw.register_read, reg.name)
        for i in range(reg.size):
            engine_call(sw.register_write, reg.name, i, value)

        def undo() -> None:
            for i, v in enumerate(prev_all):
                engine_call(sw.register_write, reg.name, i, v)

        return undo

    @staticmethod
    def check_index(obj: ArrayInfo, index: int) -> int:
        if not 0 <= index < obj.size:
            raise ControlError(
                "OUT_OF_RANGE", f"{obj.name}: index {index} out of range 0..{obj.size - 1}"
            )
        return index

    def write_counter(self, pipe: Pipeline, op: int, entry: p4r.CounterEntry) -> Undo:
        ctr = self.array_of(pipe.index.counters, entry.counter_id, "counter")
        if op != p4r.Update.MODIFY:
            raise ControlError("INVALID_ARGUMENT", "counter entries can only be modified")
        sw = pipe.switch
        if not entry.HasField("data"):
            return lambda: None  # no data: the counter is left as it is
        if entry.HasField("index"):
            indices = [self.check_index(ctr, entry.index.index)]
        else:
            indices = list(range(ctr.size))
        prev = [engine_call(sw.counter_read, ctr.name, i) for i in indices]
        data = entry.data
        for i in indices:
            engine_call(sw.counter_write, ctr.name, i, data.byte_count, data.packet_count)

        def undo() -> None:
            for i, (nbytes, npackets) in zip(indices, prev, strict=True):
                engine_call(sw.counter_write, ctr.name, i, nbytes, npackets)

        return undo

    def write_direct_counter(self, pipe: Pipeline, op: int, entry: p4r.DirectCounterEntry) -> Undo:
        if op != p4r.Update.MODIFY:
            raise ControlError("INVALID_ARGUMENT", "direct counter entries can only be modified")
        te = entry.table_entry
        table = self.table_of(pipe, te.table_id)
        if pipe.index.table_direct_counter(table) is None:
            raise ControlError("INVALID_ARGUMENT", f"{table.name} has no direct counter")
        key = pipe.key_of(table, decode_match(table, list(te.match)), te.priority)
        rec = pipe.lookup(table, key)
        if rec is None:
            raise ControlError("NOT_FOUND", f"{table.name}: no such entry")
        if not entry.HasField("data"):
            return lambda: None  # no data: the counter is left as it is
        return self.set_direct_counters(pipe, table, [rec], entry.data)

    @staticmethod
    def set_direct_counters(
        pipe: Pipeline, table: TableInfo, records: list[EntryRecord], data: p4r.CounterData
    ) -> Undo:
        sw = pipe.switch
        prev = [engine_call(sw.direct_counter_read, table.name, r.handle) for r in records]
        for r in records:
            engine_call(
                sw.direct_counter_write, table.name, r.handle, data.byte_count, data.packet_count
            )

        def undo() -> None:
            for r, (nbytes, npackets) in zip(records, prev, strict=True):
                if pipe.by_handle_of(table, r.handle) is r:
                    engine_call(sw.direct_counter_write, table.name, r.handle, nbytes, npackets)

        return undo

    # ---- Read ----

    def Read(
        self, request: p4r.ReadRequest, context: grpc.ServicerContext
    ) -> Iterator[p4r.ReadResponse]:
        try:
            self.check_device(request.device_id)
            with self.device.lock:
                pipe = self.device.require()
                entities: list[p4r.Entity] = []
                for ent in request.entities:
                    entities += self.read_entity(pipe, ent)
        except ControlError as err:
            self.abort(context, err)
            raise
        for start in range(0, max(1, len(entities)), READ_CHUNK):
            yield p4r.ReadResponse(entities=entities[start : start + READ_CHUNK])

    def read_entity(self, pipe: Pipeline, ent: p4r.Entity) -> list[p4r.Entity]:
        kind = ent.WhichOneof("entity")
        if kind == "table_entry":
            return [p4r.Entity(table_entry=te) for te in self.read_table(pipe, ent.table_entry)]
        if kind == "packet_replication_engine_entry":
            pre = ent.packet_replication_engine_entry
            if pre.WhichOneof("type") != "multicast_group_entry":
                raise ControlError("UNIMPLEMENTED", "clone sessions are not supported")
            gid = pre.multicast_group_entry.multicast_group_id
            groups = sorted(pipe.mc_groups) if gid == 0 else [gid] if gid in pipe.mc_groups else []
            return [
                p4r.Entity(
                    packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(
                        multicast_group_entry=p4r.MulticastGroupEntry(
                            multicast_group_id=g,
                            metadata=pipe.mc_metadata.get(g, b""),
                            replicas=[
                                replica_as_written(port, rid, kind)
                                for (port, rid), kind in zip(
                                    pipe.mc_groups[g], pipe.mc_port_fields[g], strict=True
                                )
                            ],
                        )
                    )
                )
                for g in groups
            ]
        if kind == "counter_entry":
            return self.read_counters(pipe, ent.counter_entry)
        if kind == "register_entry":
            return self.read_registers(pipe, ent.register_entry)
        if kind == "direct_counter_entry":
            return self.read_direct_counters(pipe, ent.direct_counter_entry)
        if kind is None:
            raise ControlError("INVALID_ARGUMENT", "an empty Entity is not a wildcard read")
        raise ControlError("UNIMPLEMENTED", f"reading {kind} is not supported")

    def selected_tables(self, pipe: Pipeline, table_id: int) -> list[TableInfo]:
        if table_id == 0:
            return list(pipe.index.tables.values())
        return [self.table_of(pipe, table_id)]

    def read_table(self, pipe: Pipeline, req: p4r.TableEntry) -> list[p4r.TableEntry]:
        want_counters = req.HasField("counter_data")
        out = []
        for table in self.selected_tables(pipe, req.table_id):
            if req.is_default_action:
                default = engine_call(pipe.switch.table_get_default, table.name)
                te = p4r.TableEntry(table_id=table.id, is_default_action=True)
                te.action.CopyFrom(encode_action(pipe.index, *default))
                out.append(te)
                continue
            records: list[EntryRecord] = list(pipe.entries.get(table.id, {}).values())
            if req.match:
                key = pipe.key_of(table, decode_match(table, list(req.match)), req.priority)
                rec = pipe.lookup(table, key)
                records = [rec] if rec is not None else []
            elif req.priority:
                records = [r for r in records if r.key[1] == req.priority]
            if req.action.WhichOneof("type") == "action" and req.action.action.action_id:
                wanted = pipe.index.actions.get(req.action.action.action_id)
                records = [r for r in records if wanted is not None and r.action == wanted.name]
            for rec in records:
                out.append(self.entry_message(pipe, table, rec, want_counters))
        return out

    def entry_message(
        self, pipe: Pipeline, table: TableInfo, rec: EntryRecord, counters: bool
    ) -> p4r.TableEntry:
        te = p4r.TableEntry(
            table_id=table.id, match=encode_match(table, rec.key[0]), priority=rec.key[1]
        )
        te.action.CopyFrom(encode_action(pipe.index, rec.action, rec.params))
        if counters and pipe.index.table_direct_counter(table) is not None:
            nbytes, npackets = engine_call(pipe.switch.direct_counter_read, table.name, rec.handle)
            te.counter_data.byte_count, te.counter_data.packet_count = nbytes, npackets
        return te

    def read_counters(self, pipe: Pipeline, req: p4r.CounterEntry) -> list[p4r.Entity]:
        group = pipe.index.counters
        ctrs = (
            list(group.values())
            if req.counter_id == 0
            else [self.array_of(group, req.counter_id, "counter")]
        )
        out = []
        for ctr in ctrs:
            indices = (
                [self.check_index(ctr, req.index.index)]
                if req.HasField("index")
                else range(ctr.size)
            )
            for i in indices:
                nbytes, npackets = engine_call(pipe.switch.counter_read, ctr.name, i)
                entry = p4r.CounterEntry(counter_id=ctr.id, index=p4r.Index(index=i))
                entry.data.byte_count, entry.data.packet_count = nbytes, npackets
                out.append(p4r.Entity(counter_entry=entry))
        return out

    def read_registers(self, pipe: Pipeline, req: p4r.RegisterEntry) -> list[p4r.Entity]:
        group = pipe.index.registers
        regs = (
            list(group.values())
            if req.register_id == 0
            else [self.array_of(group, req.register_id, "register")]
        )
        out = []
        for reg in regs:
            if req.HasField("index"):
                i = self.check_index(reg, req.index.index)
                values = {i: engine_call(pipe.switch.register_read, reg.name, i)}
            else:
                values = dict(enumerate(engine_call(pipe.switch.register_read, reg.name)))
            for i, v in values.items():
                entry = p4r.RegisterEntry(
                    register_id=reg.id, index=p4r.Index(index=i), data=encode_cell(reg, v)
                )
                out.append(p4r.Entity(register_entry=entry))
        return out

    def read_direct_counters(self, pipe: Pipeline, req: p4r.DirectCounterEntry) -> list[p4r.Entity]:
        sel = p4r.TableEntry()
        sel.CopyFrom(req.table_entry)
        sel.counter_data.SetInParent()
        out = []
        found = self.read_table(pipe, sel)
        if sel.match and not found:
            raise ControlError("NOT_FOUND", "no table entry with this key")
        for te in found:
            table = pipe.index.tables[te.table_id]
            if pipe.index.table_direct_counter(table) is None:
                continue
            data = p4r.CounterData()
            data.CopyFrom(te.counter_data)
            te.ClearField("counter_data")
            out.append(
                p4r.Entity(direct_counter_entry=p4r.DirectCounterEntry(table_entry=te, data=data))
            )
        return out

    # ---- StreamChannel ----

    def StreamChannel(
        self, request_iterator: Iterator[p4r.StreamMessageRequest], context: grpc.ServicerContext
    ) -> Iterator[p4r.StreamMessageResponse]:
        stream = Stream()
        failure: list[ControlError] = []

        def reader() -> None:
            try:
                for msg in request_iterator:
                    self.on_stream_message(stream, msg)
            except ControlError as err:
                failure.append(err)
            except grpc.RpcError:
                pass
            finally:
                stream.out.put(None)

        thread = threading.Thread(target=reader, name="p4rt-stream", daemon=True)
        thread.start()
        try:
            while True:
                msg = stream.out.get()
                if msg is None:
                    break
                yield msg
        finally:
            self.drop_stream(stream)
        if failure:
            self.abort(context, failure[0])

    def on_stream_message(self, stream: Stream, msg: p4r.StreamMessageRequest) -> None:
        kind = msg.WhichOneof("update")
        if kind == "arbitration":
            self.arbitrate(stream, msg.arbitration)
        elif kind == "packet":
            self.packet_out(stream, msg.packet)
        else:
            stream.out.put(
                p4r.StreamMessageResponse(
                    error=p4r.StreamError(
                        canonical_code=code_number("UNIMPLEMENTED"), message=f"{kind} not supported"
                    )
                )
            )

    def arbitrate(self, stream: Stream, arb: p4r.MasterArbitrationUpdate) -> None:
        if arb.device_id != self.device.device_id:
            code = "NOT_FOUND" if stream.role is None else "FAILED_PRECONDITION"
            raise ControlError(code, f"unknown device id {arb.device_id}")
        role = arb.role.name
        election = from_uint128(arb.election_id) if arb.HasField("election_id") else None
        with self.arb_lock:
            if stream.role is not None and stream.role != role:
                raise ControlError("FAILED_PRECONDITION", "a stream cannot change its role")
            state = self.roles.setdefault(role, RoleState())
            if election is not None and any(
                s is not stream and s.election_id == election for s in state.streams
            ):
                raise ControlError(
                    "INVALID_ARGUMENT", f"election id {election} is in use for role {role!r}"
                )
            if stream not in state.streams:
                state.streams.append(stream)
            stream.role, stream.election_id = role, election
            changed = False
            if election is not None and (state.highest is None or election >= state.highest):
                state.highest = election
                changed = state.primary is not stream
                state.primary = stream
            elif state.primary is stream:  # the primary lowered its own id
                state.primary = None
                changed = True
            targets = state.streams if changed else [stream]
            for s in targets:
                s.out.put(self.arbitration_message(state, s, role))

    def arbitration_message(
        self, state: RoleState, stream: Stream, role: str
    ) -> p4r.StreamMessageResponse:
        if state.primary is stream:
            code, text = "OK", "primary"
        elif state.primary is not None:
            code, text = "ALREADY_EXISTS", "backup: another client is primary"
        else:
            code, text = "NOT_FOUND", "no primary client"
        arb = p4r.MasterArbitrationUpdate(device_id=self.device.device_id)
        arb.role.name = role
        if state.highest is not None:
            arb.election_id.CopyFrom(uint128(state.highest))
        arb.status.code, arb.status.message = code_number(code), text
        return p4r.StreamMessageResponse(arbitration=arb)

    def drop_stream(self, stream: Stream) -> None:
        with self.arb_lock:
            if stream.role is None:
                return
            state = self.roles[stream.role]
            if stream in state.streams:
                state.streams.remove(stream)
            if state.primary is stream:
                state.primary = None
                for s in state.streams:
                    s.out.put(self.arbitration_message(state, s, stream.role))

    def packet_out(self, stream: Stream, pkt: p4r.PacketOut) -> None:
        def error(code: str, text: str) -> None:
            stream.out.put(
                p4r.StreamMessageResponse(
                    error=p4r.StreamError(
                        canonical_code=code_number(code),
                        message=text,
                        packet_out=p4r.PacketOutError(packet_out=pkt),
                    )
                )
            )

        with self.arb_lock:
            state = self.roles.get(stream.role or "")
            is_primary = state is not None and state.primary is stream
        if not is_primary:
            return error("PERMISSION_DENIED", "only the primary client may send packets")
        pipe = self.device.pipeline
        if pipe is None or self.device.cpu_port is None:
            return error("FAILED_PRECONDITION", "no pipeline or no CPU port")
        try:
            header = pack_metadata(pipe.index.packet_out, list(pkt.metadata))
        except ControlError as err:
            return error(err.code, err.message)
        try:
            self.device.process(self.device.cpu_port, header + pkt.payload)
        except Exception as exc:  # the pipeline failed on this frame: report it, keep the stream
            LOG.exception("packet-out failed")
            return error("INTERNAL", f"packet-out failed: {exc}")
        return None

    def send_packet_in(self, frame: bytes) -> None:
        pipe = self.device.pipeline
        if pipe is None:
            return
        try:
            metadata, payload = unpack_metadata(pipe.index.packet_in, frame)
        except ControlError as err:
            LOG.debug("packet-in dropped: %s", err.message)
            return
        with self.arb_lock:
            state = self.roles.get("")
            primary = state.primary if state else None
        if primary is not None:
            primary.out.put(
                p4r.StreamMessageResponse(packet=p4r.PacketIn(payload=payload, metadata=metadata))
            )


# ---------------------------------------------------------------- packet metadata


def pack_metadata(fields: list | None, given: list[p4r.PacketMetadata]) -> bytes:
    """The packet_out header (fields in P4Info order, big-endian bit packing) before the payload."""
    if not fields:
        return b""
    values = {m.metadata_id: m.value for m in given}
    acc, width = 0, 0
    for f in fields:
        raw = values.get(f.id)
        value = decode_uint(raw, f.bitwidth, f"packet_out {f.name}") if raw else 0
        acc, width = (acc << f.bitwidth) | value, width + f.bitwidth
    if width % 8:
        raise ControlError(
            "FAILED_PRECONDITION", "packet_out header is not a whole number of bytes"
        )
    return acc.to_bytes(width // 8, "big")


def unpack_metadata(fields: list | None, frame: bytes) -> tuple[list[p4r.PacketMetadata], bytes]:
    if not fields:
        return [], frame
    width = sum(f.bitwidth for f in fields)
    if width % 8 or len(frame) < width // 8:
        raise ControlError("INVALID_ARGUMENT", "frame shorter than the packet_in header")
    acc = int.from_bytes(frame[: width // 8], "big")
    out, shift = [], width
    for f in fields:
        shift -= f.bitwidth
        value = (acc >> shift) & ((1 << f.bitwidth) - 1)
        out.append(p4r.PacketMetadata(metadata_id=f.id, value=encode_uint(value)))
    return out, frame[width // 8 :]


# ---------------------------------------------------------------- pipeline helpers


def p4info_mismatch(ours: p4i.P4Info, theirs: p4i.P4Info) -> str:
    """'' when the client's P4Info describes the same objects, ids and widths as the program."""

    def shape(info: p4i.P4Info) -> dict[str, object]:
        return {
            "tables": sorted(
                (
                    t.preamble.id,
                    t.preamble.name,
                    tuple((m.id, m.name, m.bitwidth, m.match_type) for m in t.match_fields),
                )
                for t in info.tables
            ),
            "actions": sorted(
                (
                    a.preamble.id,
                    a.preamble.name,
                    tuple((p.id, p.name, p.bitwidth) for p in a.params),
                )
                for a in info.actions
            ),
            "counters": sorted((c.preamble.id, c.preamble.name, c.size) for c in info.counters),
            "registers": sorted((r.preamble.id, r.preamble.name, r.size) for r in info.registers),
        }

    a, b = shape(ours), shape(theirs)
    for kind in a:
        if a[kind] != b[kind]:
            return f"{kind} differ"
    return ""


def carry_over(old: Pipeline, new: Pipeline) -> None:
    """RECONCILE_AND_COMMIT: move entries, defaults, groups and registers to the new program."""
    try:
        for table_id, records in old.entries.items():
            told = old.index.tables[table_id]
            tnew = new.index.table(told.name)
            if tnew is None:
                raise ControlError("INVALID_ARGUMENT", f"table {told.name} is gone")
            for rec in records.values():
                match = {k.name: v for k, v in zip(told.keys, rec.key[0], strict=True)}
                engine_call(new.add, tnew, match, rec.action, rec.params, rec.key[1])
        for table_id, (action, params) in old.defaults.items():
            tnew = new.index.table(old.index.tables[table_id].name)
            if tnew is not None:
                engine_call(new.set_default, tnew, action, params)
        for gid, replicas in old.mc_groups.items():
            engine_call(
                new.mc_set,
                gid,
                replicas,
                old.mc_metadata.get(gid, b""),
                old.mc_port_fields.get(gid),
            )
        for reg in old.index.registers.values():
            if new.index.register(reg.name) is not None:
                for i, v in enumerate(engine_call(old.switch.register_read, reg.name)):
                    if v:
                        engine_call(new.switch.register_write, reg.name, i, v)
    except ControlError as err:
        raise ControlError("INVALID_ARGUMENT", f"cannot reconcile: {err.message}") from None


# ---------------------------------------------------------------- server


def replica_as_written(port: int, rid: int, kind: str) -> p4r.Replica:
    """A replica in the field its writer used: ``egress_port`` (uint32, P4Runtime before 1.4,
    p4runtime-shell 0.0.6) or ``port`` (bytes)."""
    if kind == "egress_port":
        return p4r.Replica(egress_port=port, instance=rid)
    return p4r.Replica(port=encode_uint(port), instance=rid)


class P4RuntimeServer:
    """A gRPC server on ``address`` serving P4Runtime for ``device``."""

    def __init__(self, device: Device, address: str = "0.0.0.0:9559", workers: int = 16) -> None:
        self.servicer = P4RuntimeServicer(device)
        self.server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="p4rt"),
            options=[
                ("grpc.max_receive_message_length", 256 << 20),
                ("grpc.max_send_message_length", 256 << 20),
            ],
        )
        p4r_grpc.add_P4RuntimeServicer_to_server(self.servicer, self.server)
        self.port = self.server.add_insecure_port(address)
        if self.port == 0:
            raise OSError(f"cannot listen on {address}")
        self.address = address

    def start(self) -> None:
        self.server.start()
        LOG.info("P4Runtime server listening on %s", self.address)

    def stop(self, grace: float = 0.5) -> None:
        with self.servicer.arb_lock:
            for state in self.servicer.roles.values():
                for s in state.streams:
                    s.out.put(None)
        self.server.stop(grace).wait()


__all__ = ["P4RuntimeServer", "P4RuntimeServicer"]
