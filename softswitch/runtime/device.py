"""The switch as the runtime servers see it: the loaded pipeline plus the state they share.

Both servers (P4Runtime and Thrift) and the packet loop share one :class:`Device`. Its lock is
held for each packet and for each control request (a whole P4Runtime batch), so a write is
applied between packets and a batch is never seen half done by the data plane.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from finsy.proto import p4i

from softswitch import Switch, SwitchError
from softswitch.frontend.bmv2_json import looks_like_bmv2_json
from softswitch.runtime.bundle import Bundle, embedded_bundle
from softswitch.runtime.p4info_index import P4InfoIndex, TableInfo
from softswitch.switch import load_json_program

# Engine match values: exact -> int, lpm -> (value, prefix_len), ternary -> (value, mask),
# range -> (low, high), optional -> int | None.
MatchValue = int | tuple[int, int] | None
KeyTuple = tuple[tuple[MatchValue, ...], int]  # (values in P4Info key order, priority)


class ControlError(Exception):
    """A control request refused; ``code`` is a google.rpc.Code name (INVALID_ARGUMENT, ...)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def no_pipeline() -> ControlError:
    # finsy recognises "no ... forwarding pipeline config" as the missing-pipeline condition.
    return ControlError("FAILED_PRECONDITION", "No forwarding pipeline config set for this device")


@dataclass
class EntryRecord:
    """One table entry as the runtimes know it (the engine holds the authoritative copy)."""

    handle: int
    key: KeyTuple
    action: str
    params: dict[str, int]


@dataclass
class Pipeline:
    """A loaded program with the state that lives and dies with it."""

    switch: Switch
    index: P4InfoIndex
    device_config: bytes
    cookie: int = 0
    bundle: Bundle | None = None
    # table id -> key -> entry; table id -> handle -> key
    entries: dict[int, dict[KeyTuple, EntryRecord]] = field(default_factory=dict)
    by_handle: dict[int, dict[int, KeyTuple]] = field(default_factory=dict)
    # table id -> (action name, params) of a default action set at run time
    defaults: dict[int, tuple[str, dict[str, int]]] = field(default_factory=dict)
    mc_groups: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    mc_metadata: dict[int, bytes] = field(default_factory=dict)  # P4Runtime's opaque metadata
    # per group, per replica: "port" (bytes) or "egress_port" (uint32), as the client wrote it;
    # a read answers in the same field, as BMv2's P4Runtime server does
    mc_port_fields: dict[int, list[str]] = field(default_factory=dict)
    # meter rates as the Thrift client set them ((meter or table, index or handle) -> rates)
    meter_rates: dict[tuple[str, int], list[Any]] = field(default_factory=dict)
    # table id -> the program's own default action, for resets
    initial_defaults: dict[int, tuple[str, dict[str, int]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for table in self.index.tables.values():
            self.initial_defaults[table.id] = self.switch.table_get_default(table.name)

    @property
    def p4info(self) -> p4i.P4Info:
        return self.index.info

    @property
    def json_md5(self) -> bytes:
        return hashlib.md5(self.device_config).digest()

    # ---- table entries (names resolved, values already checked by the caller) ----

    def key_of(self, table: TableInfo, match: dict[str, MatchValue], priority: int) -> KeyTuple:
        return (tuple(match.get(k.name) for k in table.keys), priority)

    def lookup(self, table: TableInfo, key: KeyTuple) -> EntryRecord | None:
        return self.entries.get(table.id, {}).get(key)

    def by_handle_of(self, table: TableInfo, handle: int) -> EntryRecord | None:
        key = self.by_handle.get(table.id, {}).get(handle)
        return None if key is None else self.entries[table.id][key]

    def add(
        self,
        table: TableInfo,
        match: dict[str, MatchValue],
        action: str,
        params: dict[str, int],
        priority: int,
    ) -> EntryRecord:
        key = self.key_of(table, match, priority)
        if key in self.entries.get(table.id, {}):
            raise ControlError("ALREADY_EXISTS", f"{table.name}: entry with this key exists")
        handle = engine_call(
            self.switch.table_add,
            table.name,
            dict(match),
            action,
            dict(params),
            priority=priority or None,
        )
        rec = EntryRecord(handle, key, action, dict(params))
        self.entries.setdefault(table.id, {})[key] = rec
        self.by_handle.setdefault(table.id, {})[handle] = key
        return rec

    def modify(
        self, table: TableInfo, rec: EntryRecord, action: str, params: dict[str, int]
    ) -> None:
        engine_call(self.switch.table_modify, table.name, rec.handle, action, dict(params))
        rec.action, rec.params = action, dict(params)

    def delete(self, table: TableInfo, rec: EntryRecord) -> None:
        engine_call(self.switch.table_delete, table.name, rec.handle)
        del self.entries[table.id][rec.key]
        del self.by_handle[table.id][rec.handle]

    def set_default(self, table: TableInfo, action: str, params: dict[str, int]) -> None:
        engine_call(self.switch.table_set_default, table.name, action, dict(params))
        self.defaults[table.id] = (action, dict(params))

    def clear(self, table: TableInfo) -> None:
        engine_call(self.switch.table_clear, table.name)
        self.entries.pop(table.id, None)
        self.by_handle.pop(table.id, None)

    # ---- multicast groups ----

    def mc_set(
        self,
        group: int,
        replicas: list[tuple[int, int]],
        metadata: bytes = b"",
        port_fields: list[str] | None = None,
    ) -> None:
        engine_call(self.switch.mc_group_set, group, list(replicas))
        self.mc_groups[group] = list(replicas)
        self.mc_metadata[group] = metadata
        self.mc_port_fields[group] = list(port_fields or ["port"] * len(replicas))

    def mc_delete(self, group: int) -> None:
        engine_call(self.switch.mc_group_delete, group)
        self.mc_groups.pop(group, None)
        self.mc_metadata.pop(group, None)
        self.mc_port_fields.pop(group, None)


PacketSink = Callable[[int, bytes], None]


class Device:
    """One switch: its id, its CPU port, the current pipeline and the lock that orders them."""

    def __init__(self, device_id: int = 0, cpu_port: int | None = None) -> None:
        self.device_id = device_id
        self.cpu_port = cpu_port
        self.lock = threading.RLock()
        self.pipeline: Pipeline | None = None
        # Called with (port, frame) for every frame the pipeline emits on a port; set by the I/O.
        self.transmit: PacketSink | None = None
        # Called with the raw bytes of every frame sent to the CPU port (packet-in); set by P4Runtime.
        self.packet_in: Callable[[bytes], None] | None = None

    def require(self) -> Pipeline:
        pipe = self.pipeline
        if pipe is None:
            raise no_pipeline()
        return pipe

    def load(self, bundle: Bundle, cookie: int = 0) -> Pipeline:
        """Compile a bundle into a new pipeline (not yet installed)."""
        switch = bundle.compile()
        return Pipeline(switch, P4InfoIndex(switch.p4info), bundle.to_bytes(), cookie, bundle)

    def load_json(
        self,
        data: bytes,
        p4info: p4i.P4Info | None = None,
        cookie: int = 0,
        name: str = "device config (BMv2 JSON)",
    ) -> Pipeline:
        """A pipeline from p4c-bm2-ss's BMv2 JSON; ``p4info`` gives the control-plane ids."""
        switch = Switch(load_json_program(data, name, p4info))
        return Pipeline(switch, P4InfoIndex(switch.p4info), bytes(data), cookie)

    def load_config(
        self, data: bytes, p4info: p4i.P4Info | None = None, cookie: int = 0
    ) -> Pipeline:
        """A pipeline from a device config: BMv2 JSON (as for simple_switch_grpc) or a source
        bundle (raises BundleError, P4Error)."""
        inner = embedded_bundle(data)  # kvswitch p4c -o: BMv2-style JSON around the source
        if inner is not None:
            pipe = self.load(inner, cookie)
            pipe.device_config = bytes(data)
            return pipe
        if looks_like_bmv2_json(data):
            return self.load_json(data, p4info, cookie)
        return self.load(Bundle.from_bytes(data), cookie)

    def install(self, pipe: Pipeline | None) -> None:
        with self.lock:
            self.pipeline = pipe

    def process(self, port: int, frame: bytes) -> list[tuple[int, bytes]]:
        """Run one frame through the pipeline; deliver the copies; return them for callers."""
        with self.lock:
            pipe = self.pipeline
            if pipe is None:
                return []
            out = pipe.switch.process(port, frame)
        for eport, data in out:
            if self.cpu_port is not None and eport == self.cpu_port:
                if self.packet_in is not None:
                    self.packet_in(data)
            elif self.transmit is not None:
                self.transmit(eport, data)
        return out


def engine_call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call the engine, turning its control errors into INVALID_ARGUMENT."""
    try:
        return fn(*args, **kwargs)
    except SwitchError as exc:
        raise ControlError("INVALID_ARGUMENT", str(exc)) from None
