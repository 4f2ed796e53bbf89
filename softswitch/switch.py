"""The in-process switch: load a P4-16 program (v1model or TNA), control it, push packets through it.

``Switch`` is the device state and its control API (tables, PRE, mirroring sessions, registers,
counters, meters, digests: BMv2's bm_sim); the packet path is the program's architecture's
(softswitch/arch/: BMv2's simple_switch for v1model, one Tofino pipe for TNA)."""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from softswitch.arch.tna import Tna
from softswitch.arch.v1model import V1Model
from softswitch.engine.codegen import TableInfo, eval_const
from softswitch.engine.program import DROP_PORT, Architecture, Builder, Program
from softswitch.engine.tables import Entry, Table
from softswitch.errors import P4Error, SwitchError
from softswitch.frontend.bmv2_json import Bmv2JsonError, bmv2_json_to_p4
from softswitch.frontend.checker import Checker
from softswitch.frontend.parser import parse
from softswitch.frontend.preprocessor import Preprocessor

log = logging.getLogger(__name__)

DIGEST_QUEUE_MAX = 65536  # digests beyond this wait in no queue: they are counted and dropped
# the architectures a program can be written for, recognised by main's package
ARCHITECTURES: tuple[type[Architecture], ...] = (V1Model, Tna)


def load_program(
    text: str,
    filename: str,
    defines: Mapping[str, str | int] | None = None,
    include_dirs: Iterable[str | Path] | None = None,
) -> Program:
    pre = Preprocessor(defines, include_dirs).run(text, filename)
    tree = parse(pre)
    ck = Checker(tree, pre, eval_const, [a.package for a in ARCHITECTURES])
    ck.collect()
    return Builder(ck, ARCHITECTURES).build()


def load_json_program(data: bytes | str, filename: str, p4info: Any = None) -> Program:
    """A BMv2 JSON (p4c-bm2-ss) loaded into the same :class:`Program` as P4 source.

    ``p4info``, when given, supplies the control-plane ids and counter units (BMv2's JSON has
    neither). Anything the engine cannot run raises :class:`Bmv2JsonError`."""
    source = bmv2_json_to_p4(data, filename, p4info)
    try:
        return load_program(source, filename + ".p4")
    except P4Error as exc:
        line = source.splitlines()[exc.line - 1].strip() if exc.line > 0 else ""
        raise Bmv2JsonError(f"cannot run this JSON: {exc.msg} (in: {line})", filename) from None


class Switch:
    """A software switch for one P4 program: v1model (BMv2 simple_switch semantics) or TNA (one
    Tofino pipe), chosen by the program's ``main`` package."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self._lock = threading.RLock()
        self.mc_groups: dict[int, list[tuple[int, int]]] = {}
        self._p4info: Any = None
        self._aliases: dict[str, dict[str, str]] = {}
        self.internal_errors = 0
        self.mirror_sessions: dict[int, tuple[int | None, int]] = {}
        self.digest_queue: deque[tuple[str, dict[str, int]]] = deque()
        self.digests_dropped = 0
        # called (under the switch lock, from the packet's thread) when digests were queued
        self.digest_callback: Callable[[], None] | None = None
        # the packet path of the program's architecture, over the state above (softswitch/arch/)
        self.path = program.architecture.packet_path(self)

    # ------------------------------------------------------------------ loading
    @classmethod
    def from_file(
        cls,
        path: str | Path,
        defines: Mapping[str, str | int] | None = None,
        include_dirs: Iterable[str | Path] | None = None,
    ) -> Switch:
        p = Path(path)
        try:
            text = p.read_text()
        except OSError as e:
            raise P4Error(f"cannot read {p}: {e.strerror}", str(p), 0, 0) from None
        return cls(load_program(text, str(p), defines, include_dirs))

    @classmethod
    def from_json(cls, path: str | Path, p4info: Any = None) -> Switch:
        """A switch running the BMv2 JSON that p4c-bm2-ss wrote (``p4info``: optional ids)."""
        p = Path(path)
        try:
            data = p.read_bytes()
        except OSError as e:
            raise Bmv2JsonError(f"cannot read: {e.strerror}", str(p)) from None
        return cls(load_json_program(data, str(p), p4info))

    @classmethod
    def from_source(
        cls,
        text: str,
        filename: str = "<input>.p4",
        defines: Mapping[str, str | int] | None = None,
        include_dirs: Iterable[str | Path] | None = None,
    ) -> Switch:
        return cls(load_program(text, filename, defines, include_dirs))

    @property
    def p4info(self) -> Any:
        if self._p4info is None:
            from softswitch.p4info import build_p4info

            self._p4info = build_p4info(self.program)
        return self._p4info

    # ------------------------------------------------------------------ names
    def _resolve(self, kind: str, names: Iterable[str], name: str) -> str:
        names = list(names)
        if name in names:
            return name
        cands = [n for n in names if n.endswith("." + name)]
        if len(cands) == 1:
            return cands[0]
        if len(cands) > 1:
            raise SwitchError(f"{kind} name {name!r} is ambiguous: {sorted(cands)}")
        # @name annotations of the local declaration
        raise SwitchError(f"unknown {kind} {name!r}")

    def _table(self, name: str) -> Table:
        tables = self.program.tables
        full = (
            self._resolve("table", tables.keys(), name)
            if name not in self._local_table_names()
            else self._local_table_names()[name]
        )
        return tables[full].runtime

    def _local_table_names(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for full, ti in self.program.tables.items():
            out.setdefault(ti.local, full)
        return out

    def _extern(self, name: str, kinds: tuple[str, ...]) -> Any:
        ex = {n: x for n, x in self.program.externs.items() if x.kind in kinds}
        return ex[self._resolve("/".join(kinds), ex.keys(), name)]

    def table_info(self, name: str) -> TableInfo:
        return self.program.tables[self._table(name).name]

    # ------------------------------------------------------------------ tables
    def table_add(
        self,
        table: str,
        match: Mapping[str, Any],
        action: str,
        params: Mapping[str, int] | None = None,
        priority: int | None = None,
    ) -> int:
        with self._lock:
            t = self._table(table)
            return t.add(dict(match), self._action_name(t, action), dict(params or {}), priority)

    def _action_name(self, t: Table, action: str) -> str:
        """An action of ``t`` by its P4Info name or a unique dotted suffix of it."""
        for a in t.actions:
            if a.name == action:
                return a.name
        cands = [a.name for a in t.actions if a.name.endswith("." + action)]
        if len(cands) == 1:
            return cands[0]
        if cands:
            raise SwitchError(f"table {t.name}: action name {action!r} is ambiguous: {cands}")
        raise SwitchError(f"table {t.name}: unknown action {action!r}")

    def table_modify(
        self, table: str, handle: int, action: str, params: Mapping[str, int] | None = None
    ) -> None:
        with self._lock:
            t = self._table(table)
            t.modify(handle, self._action_name(t, action), dict(params or {}))

    def table_delete(self, table: str, handle: int) -> None:
        with self._lock:
            self._table(table).delete(handle)

    def table_clear(self, table: str) -> None:
        with self._lock:
            self._table(table).clear()

    def table_set_default(
        self, table: str, action: str, params: Mapping[str, int] | None = None
    ) -> None:
        with self._lock:
            t = self._table(table)
            t.set_default(self._action_name(t, action), dict(params or {}))

    def table_get_default(self, table: str) -> tuple[str, dict[str, int]]:
        with self._lock:
            t = self._table(table)
            a = t.actions[t.default_action]
            return a.name, {n: v for (n, _w), v in zip(a.params, t.default_params, strict=True)}

    def table_entries(self, table: str) -> list[Entry]:
        with self._lock:
            return list(self._table(table).entries.values())

    def table_entry(self, table: str, handle: int) -> Entry:
        with self._lock:
            return self._table(table).get(handle)

    # ------------------------------------------------------------------ PRE
    def mc_group_set(self, group_id: int, members: Iterable[tuple[int, int]]) -> None:
        if not 0 < group_id < 1 << 16:
            raise SwitchError(f"multicast group id {group_id} out of range 1..65535")
        ms = []
        for port, rid in members:
            if not (0 <= port < DROP_PORT and 0 <= rid < 1 << 16):
                raise SwitchError(f"bad multicast member (port={port}, rid={rid})")
            ms.append((int(port), int(rid)))
        with self._lock:
            self.mc_groups[group_id] = ms

    def mc_group_delete(self, group_id: int) -> None:
        with self._lock:
            if group_id not in self.mc_groups:
                raise SwitchError(f"no multicast group {group_id}")
            del self.mc_groups[group_id]

    def mc_group_get(self, group_id: int) -> list[tuple[int, int]]:
        with self._lock:
            if group_id not in self.mc_groups:
                raise SwitchError(f"no multicast group {group_id}")
            return list(self.mc_groups[group_id])

    # ------------------------------------------------------------------ TNA port metadata
    def port_metadata_set(self, port: int, data: bytes) -> None:
        """TNA: the PORT_METADATA_SIZE bits (8 bytes on Tofino 1) the ingress parser reads after
        the intrinsic metadata of packets from ``port`` (zero unless set)."""
        with self._lock:
            self.path.set_port_metadata(port, bytes(data))

    # ------------------------------------------------------------------ meters
    def meter_set_rates(
        self, name: str, index: int, committed: tuple[float, int], peak: tuple[float, int]
    ) -> None:
        """Configure meter ``name[index]``: (rate per microsecond, burst) committed, then peak
        (BMv2's ``meter_set_rates`` units: packets or bytes per microsecond)."""
        with self._lock:
            x = self._extern(name, ("meter",))
            self._check_index(x, index)
            if committed[0] > peak[0]:
                raise SwitchError(f"{x.name}: the committed rate exceeds the peak rate")
            if min(committed[0], committed[1], peak[0], peak[1]) < 0:
                raise SwitchError(f"{x.name}: rates and bursts must not be negative")
            self.program.ns[x.pyname].set_rates(index, committed, peak)

    def meter_size(self, name: str) -> int:
        with self._lock:
            return int(self._extern(name, ("meter",)).size)

    def meter_reset(self, name: str, index: int | None = None) -> None:
        """Back to unconfigured (every packet GREEN), one index or all."""
        with self._lock:
            x = self._extern(name, ("meter",))
            m = self.program.ns[x.pyname]
            for i in range(x.size) if index is None else [index]:
                self._check_index(x, i)
                m.state[i] = None

    def _direct_meter(self, table: str) -> tuple[Table, Any]:
        t = self._table(table)
        ti = self.program.tables[t.name]
        if ti.meter is None:
            raise SwitchError(f"table {t.name} has no direct meter")
        return t, self.program.ns[ti.meter.pyname]

    def direct_meter_set_rates(
        self, table: str, handle: int, committed: tuple[float, int], peak: tuple[float, int]
    ) -> None:
        """Configure the direct meter of one entry (same units as meter_set_rates)."""
        with self._lock:
            t, dm = self._direct_meter(table)
            t.get(handle)
            if committed[0] > peak[0]:
                raise SwitchError(f"{t.name}: the committed rate exceeds the peak rate")
            dm.set_entry_rates(handle, committed, peak)

    def direct_meter_reset(self, table: str) -> None:
        with self._lock:
            self._direct_meter(table)[1].by_handle.clear()

    # ------------------------------------------------------------------ digests
    def deliver_digests(self, items: list[tuple[str, tuple[Any, ...]]]) -> None:
        """Queue the digests a packet sent (packet paths, under the lock)."""
        for name, values in items:
            t = self.program.digests[name]
            msg = {f: int(v) for (f, _t), v in zip(t.fields, values, strict=True)}
            if len(self.digest_queue) >= DIGEST_QUEUE_MAX:
                self.digests_dropped += 1
                continue
            self.digest_queue.append((name, msg))
        if self.digest_callback is not None:
            self.digest_callback()

    def digests_pop(self, max_items: int | None = None) -> list[tuple[str, dict[str, int]]]:
        """Take the digests sent by ``digest()`` (oldest first): (struct type name, field values)."""
        with self._lock:
            n = (
                len(self.digest_queue)
                if max_items is None
                else min(max_items, len(self.digest_queue))
            )
            return [self.digest_queue.popleft() for _ in range(n)]

    # ------------------------------------------------------------------ parser value sets
    def value_set_set(self, name: str, members: Iterable[int | tuple[int, int]]) -> None:
        """Replace the members of a parser value set: values, or (value, mask) pairs."""
        with self._lock:
            vs = self.program.value_sets[self._resolve("value set", self.program.value_sets, name)]
            full = (1 << vs.width) - 1
            entries = []
            for m in members:
                value, mask = (m, full) if isinstance(m, int) else m
                if not (0 <= value <= full and 0 <= mask <= full) or value & ~mask:
                    raise SwitchError(f"value set {vs.name}: bad member {m!r} for bit<{vs.width}>")
                entries.append((value, mask))
            if len(entries) > vs.size:
                raise SwitchError(f"value set {vs.name} holds at most {vs.size} members")
            vs.entries = entries

    def value_set_width(self, name: str) -> int:
        with self._lock:
            return self.program.value_sets[
                self._resolve("value set", self.program.value_sets, name)
            ].width

    def value_set_get(self, name: str) -> list[tuple[int, int]]:
        with self._lock:
            vs = self.program.value_sets[self._resolve("value set", self.program.value_sets, name)]
            return list(vs.entries)

    # ------------------------------------------------------------------ registers / counters
    def register_read(self, name: str, index: int | None = None) -> Any:
        with self._lock:
            x = self._extern(name, ("register",))
            arr = self.program.ns[x.pyname]
            if index is None:
                return list(arr)
            self._check_index(x, index)
            return arr[index]

    def direct_register_read(self, table: str, handle: int) -> int:
        """TNA: the DirectRegister value of one entry of ``table`` (its initial value until an
        action of the entry runs a DirectRegisterAction)."""
        with self._lock:
            x, t = self._direct_register(table)
            t.get(handle)
            return int(self.program.ns[x.pyname].get(handle, getattr(x, "init", 0)))

    def direct_register_write(self, table: str, handle: int, value: int) -> None:
        with self._lock:
            x, t = self._direct_register(table)
            t.get(handle)
            if not isinstance(value, int) or value < 0 or value >> x.width:
                raise SwitchError(f"{x.name}: value {value!r} does not fit bit<{x.width}>")
            self.program.ns[x.pyname][handle] = value

    def _direct_register(self, table: str) -> tuple[Any, Table]:
        t = self._table(table)
        regs = [
            x
            for x in self.program.externs.values()
            if x.kind == "direct_register" and x.table == t.name
        ]
        if not regs:
            raise SwitchError(f"table {t.name} has no direct register")
        return regs[0], t

    def _check_index(self, x: Any, index: int) -> None:
        if not isinstance(index, int) or not 0 <= index < x.size:
            raise SwitchError(f"{x.name}: index {index!r} out of range 0..{x.size - 1}")

    def register_write(self, name: str, index: int, value: int) -> None:
        with self._lock:
            x = self._extern(name, ("register",))
            self._check_index(x, index)
            if not isinstance(value, int) or value < 0 or value >> x.width:
                raise SwitchError(f"{x.name}: value {value!r} does not fit bit<{x.width}>")
            self.program.ns[x.pyname][index] = value

    def register_reset(self, name: str) -> None:
        with self._lock:
            x = self._extern(name, ("register",))
            arr = self.program.ns[x.pyname]
            arr[:] = [0] * len(arr)

    def counter_read(self, name: str, index: int) -> tuple[int, int]:
        with self._lock:
            x = self._extern(name, ("counter",))
            self._check_index(x, index)
            return self.program.ns[x.pyname + "_b"][index], self.program.ns[x.pyname + "_p"][index]

    def counter_write(self, name: str, index: int, byte_count: int, packet_count: int) -> None:
        with self._lock:
            x = self._extern(name, ("counter",))
            self._check_index(x, index)
            self.program.ns[x.pyname + "_b"][index] = byte_count
            self.program.ns[x.pyname + "_p"][index] = packet_count

    def counter_reset(self, name: str) -> None:
        with self._lock:
            x = self._extern(name, ("counter",))
            for suffix in ("_b", "_p"):
                arr = self.program.ns[x.pyname + suffix]
                arr[:] = [0] * len(arr)

    def _direct_table(self, name: str) -> Table:
        try:
            t = self._table(name)
        except SwitchError:
            x = self._extern(name, ("direct_counter",))
            t = self.program.tables[x.table].runtime
        if not t.has_counters:
            raise SwitchError(f"table {t.name} has no direct counter")
        return t

    def direct_counter_read(self, table: str, handle: int) -> tuple[int, int]:
        with self._lock:
            e = self._direct_table(table).get(handle)
            return e.bytes, e.packets

    def direct_counter_write(
        self, table: str, handle: int, byte_count: int, packet_count: int
    ) -> None:
        with self._lock:
            e = self._direct_table(table).get(handle)
            e.bytes, e.packets = byte_count, packet_count

    def direct_counter_reset(self, table: str) -> None:
        with self._lock:
            for e in self._direct_table(table).entries.values():
                e.bytes = e.packets = 0

    # ------------------------------------------------------------------ data plane
    def process(self, ingress_port: int, packet: bytes) -> list[tuple[int, bytes]]:
        """Run one packet through the pipeline; returns (egress_port, bytes) in PRE order."""
        if not 0 <= ingress_port < DROP_PORT:
            raise SwitchError(f"ingress port {ingress_port} out of range")
        with self._lock:
            try:
                data = packet if type(packet) is bytes else bytes(packet)
                return self.path.process(ingress_port, data)
            except Exception:  # a bug of the engine must not take the switch down: drop, log
                self.internal_errors += 1
                log.exception("softswitch: packet dropped after an internal error")
                return []

    # ------------------------------------------------------------------ mirroring (clone sessions)
    def mirroring_session_set(
        self, session: int, port: int | None = None, mc_group: int | None = None
    ) -> None:
        """Create or replace a clone session: copies go to ``port`` and/or multicast group."""
        if not 0 < session < 1 << 32:
            raise SwitchError(f"mirroring session id {session} out of range")
        if port is None and not mc_group:
            raise SwitchError("a mirroring session needs a port or a multicast group")
        if port is not None and not 0 <= port < DROP_PORT:
            raise SwitchError(f"mirroring session port {port} out of range")
        with self._lock:
            self.mirror_sessions[session] = (port, mc_group or 0)

    def mirroring_session_delete(self, session: int) -> None:
        with self._lock:
            if self.mirror_sessions.pop(session, None) is None:
                raise SwitchError(f"no mirroring session {session}")

    def session_ports(self, session: int) -> list[tuple[int, int]]:
        """(port, rid) of each copy of a mirroring session (packet paths, under the lock)."""
        cfg = self.mirror_sessions.get(session)
        if cfg is None:
            return []
        port, grp = cfg
        ports = list(self.mc_groups.get(grp, [])) if grp else []
        if port is not None:
            ports.append((port, 0))
        return ports

    def mirroring_session_get(self, session: int) -> tuple[int | None, int]:
        with self._lock:
            if session not in self.mirror_sessions:
                raise SwitchError(f"no mirroring session {session}")
            return self.mirror_sessions[session]
