"""The in-process switch: load a P4-16 v1model program, control it, push packets through it."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from softswitch.arch.tna_path import TnaPipeline
from softswitch.engine.codegen import Exit, TableInfo, eval_const
from softswitch.engine.program import Builder, Program
from softswitch.engine.runtime import AssertFailed
from softswitch.engine.tables import Entry, Table
from softswitch.errors import P4Error, SwitchError
from softswitch.frontend.bmv2_json import Bmv2JsonError, bmv2_json_to_p4
from softswitch.frontend.checker import Checker
from softswitch.frontend.parser import parse
from softswitch.frontend.preprocessor import Preprocessor

log = logging.getLogger(__name__)

DROP_PORT = 511
INSTANCE_NORMAL = 0
INSTANCE_INGRESS_CLONE = 1
INSTANCE_EGRESS_CLONE = 2
INSTANCE_RECIRC = 4
INSTANCE_REPLICATION = 5
INSTANCE_RESUBMIT = 6
CLONE_I2E, CLONE_E2E = 0, 1  # CloneType members in this target's v1model.p4
MAX_PASSES = 16
DIGEST_QUEUE_MAX = 65536  # digests beyond this wait in no queue: they are counted and dropped  # resubmit/recirculate loops end here (the packet is dropped)


def load_program(
    text: str,
    filename: str,
    defines: Mapping[str, str | int] | None = None,
    include_dirs: Iterable[str | Path] | None = None,
) -> Program:
    pre = Preprocessor(defines, include_dirs).run(text, filename)
    tree = parse(pre)
    ck = Checker(tree, pre, eval_const, ("V1Switch", "Switch"))
    ck.collect()
    return Builder(ck).build()


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
        self._start = time.monotonic()
        # the packet path: v1model's below, or TNA's (softswitch/arch/tna_path.py)
        self._tna = TnaPipeline(self) if program.arch == "tna" else None
        if self._tna is None:
            self._objs = (program.hdr_cls(), program.meta_cls(), program.sm_cls())
        self.internal_errors = 0
        self._field_lists: dict[int, list[str]] = {}
        self.mirror_sessions: dict[int, tuple[int | None, int]] = {}
        self._clone_depth = 0
        self._ingress_truncate: int | None = None
        self.digest_queue: deque[tuple[str, dict[str, int]]] = deque()
        self.digests_dropped = 0
        # called (under the switch lock, from the packet's thread) when digests were queued
        self.digest_callback: Callable[[], None] | None = None

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
        if self._tna is None:
            raise SwitchError("port metadata is a TNA feature; this program is v1model")
        if not 0 <= port < DROP_PORT or len(data) > 8:
            raise SwitchError("port metadata: a port 0..510 and at most 8 bytes")
        with self._lock:
            self._tna.set_port_metadata(port, bytes(data))

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
    def _deliver_digests(self, items: list[tuple[str, tuple[Any, ...]]]) -> None:
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
                if self._tna is not None:
                    return self._tna.process(ingress_port, data)
                return self._process(ingress_port, data)
            except Exception:  # a bug of the engine must not take the switch down: drop, log
                self.internal_errors += 1
                log.exception("softswitch: packet dropped after an internal error")
                return []

    def _process(self, port: int, data: bytes) -> list[tuple[int, bytes]]:
        out: list[tuple[int, bytes]] = []
        again = self._pipeline(port, data, INSTANCE_NORMAL, None, out)
        passes = 1
        while again:
            if passes >= MAX_PASSES:
                log.warning(
                    "softswitch: packet dropped after %d resubmit/recirculate passes", passes
                )
                break
            passes += 1
            nxt = []
            for data2, itype, keep in again:
                nxt += self._pipeline(port, data2, itype, keep, out) or []
            again = nxt
        return out

    def _preserved(self, meta: Any, index: int) -> list[tuple[str, Any]]:
        """The user-metadata fields annotated @field_list(index) and their values."""
        names = self._field_lists.get(index)
        if names is None:
            t = self.program.meta_type
            names = [
                n
                for n, anns in (t.field_annotations.items() if t is not None else [])
                if index in anns.get("field_list", [])
            ]
            self._field_lists[index] = names
        return [(n, getattr(meta, n)) for n in names]

    def _pipeline(
        self,
        port: int,
        data: bytes,
        itype: int,
        keep: list[tuple[str, Any]] | None,
        out: list[tuple[int, bytes]],
    ) -> list[tuple[bytes, int, list[tuple[str, Any]]]] | None:
        """One pass: parser to deparser. Appends outputs to ``out``; returns the packets to run again
        (resubmitted or recirculated) with their instance type and preserved metadata."""
        p = self.program
        ctx = p.ctx
        # the objects of the previous packet are reused: resetting is cheaper than allocating
        hdr, meta, sm = self._objs
        hdr._reset()
        meta._reset()
        sm._reset()
        if keep:
            for n, v in keep:
                setattr(meta, n, v)
        ctx.sm = sm
        ctx.plen = len(data)
        ctx.resubmit = ctx.recirculate = ctx.clone = ctx.truncate = None
        if ctx.digests:
            ctx.digests = []  # digest() is an ingress extern: calls from egress send nothing
        now = int((time.monotonic() - self._start) * 1e6)
        sm.ingress_port = port
        sm.instance_type = itype
        sm.packet_length = len(data)
        sm.ingress_global_timestamp = now
        off = p.parser(data, hdr, meta, sm)
        payload = data[off:]
        ctx.payload = payload
        try:
            try:  # noqa: SIM105 - cheaper than contextlib.suppress per packet
                p.verify(hdr, meta)
            except Exit:
                pass
            try:  # noqa: SIM105 - cheaper than contextlib.suppress per packet
                p.ingress(hdr, meta, sm)
            except Exit:
                pass
        except AssertFailed:
            return None
        again: list[tuple[bytes, int, list[tuple[str, Any]]]] = []
        self._ingress_truncate = ctx.truncate
        clone = ctx.clone
        if clone is not None and clone[0] == CLONE_I2E:
            self._ingress_clone(port, data, now, clone, meta, out, again)
        if ctx.digests:
            self._deliver_digests(ctx.digests)
            ctx.digests = []
        if ctx.resubmit is not None:
            # BMv2: the original packet goes through the parser and ingress again, nothing leaves
            again.append((data, INSTANCE_RESUBMIT, self._preserved(meta, ctx.resubmit)))
            return again
        grp = sm.mcast_grp
        if grp:
            members = self.mc_groups.get(grp, [])
            last = len(members) - 1
            for i, (eport, rid) in enumerate(members):
                if i == last:
                    h, m, s = hdr, meta, sm
                else:
                    h, m, s = hdr._copy(), meta._copy(), sm._copy()
                s.egress_rid = rid
                s.instance_type = INSTANCE_REPLICATION
                self._egress(h, m, s, eport, payload, now, out, again)
        elif sm.egress_spec != DROP_PORT:
            sm.instance_type = INSTANCE_NORMAL
            self._egress(hdr, meta, sm, sm.egress_spec, payload, now, out, again)
        return again or None

    def _egress(
        self,
        h: Any,
        m: Any,
        s: Any,
        eport: int,
        payload: bytes,
        now: int,
        out: list[tuple[int, bytes]],
        again: list[tuple[bytes, int, list[tuple[str, Any]]]],
    ) -> None:
        """Egress, egress cloning, drop check, checksum update, deparser, recirculation."""
        p = self.program
        ctx = p.ctx
        s.egress_port = eport
        s.egress_spec = 0
        s.egress_global_timestamp = now
        ctx.sm = s
        ctx.payload = payload
        ctx.recirculate = ctx.clone = None
        ctx.truncate = self._ingress_truncate
        try:
            try:  # noqa: SIM105 - cheaper than contextlib.suppress per packet
                p.egress(h, m, s)
            except Exit:
                pass
            clone = ctx.clone
            if clone is not None and clone[0] == CLONE_E2E:
                self._egress_clone(h, m, s, payload, now, clone, out, again)
                ctx.sm, ctx.payload = s, payload
            if s.egress_spec == DROP_PORT:
                return
            try:  # noqa: SIM105 - cheaper than contextlib.suppress per packet
                p.compute(h, m)
            except Exit:
                pass
        except AssertFailed:
            return
        parts: list[bytes] = []
        p.deparser(parts, h)
        parts.append(payload)
        if ctx.recirculate is not None:
            # BMv2: the deparsed packet enters the parser again instead of leaving
            again.append((b"".join(parts), INSTANCE_RECIRC, self._preserved(m, ctx.recirculate)))
            return
        data = b"".join(parts)
        if ctx.truncate is not None:
            data = data[: ctx.truncate]
        out.append((eport, data))

    def _session_ports(self, session: int) -> list[tuple[int, int]]:
        cfg = self.mirror_sessions.get(session)
        if cfg is None:
            return []
        port, grp = cfg
        ports = list(self.mc_groups.get(grp, [])) if grp else []
        if port is not None:
            ports.append((port, 0))
        return ports

    def _ingress_clone(
        self,
        port: int,
        data: bytes,
        now: int,
        clone: tuple[int, int, int],
        meta: Any,
        out: list[tuple[int, bytes]],
        again: list[tuple[bytes, int, list[tuple[str, Any]]]],
    ) -> None:
        """I2E: the original packet, parsed again (ingress port kept), goes to the session's egress."""
        p = self.program
        keep = self._preserved(meta, clone[2]) if clone[2] else []
        for eport, rid in self._session_ports(clone[1]):
            h, m, s = p.hdr_cls(), p.meta_cls(), p.sm_cls()
            s.ingress_port = port
            s.packet_length = len(data)
            saved = p.ctx.sm
            p.ctx.sm = s
            off = p.parser(data, h, m, s)
            p.ctx.sm = saved
            for n, v in keep:
                setattr(m, n, v)
            s.instance_type = INSTANCE_INGRESS_CLONE
            s.egress_rid = rid
            self._egress(h, m, s, eport, data[off:], now, out, again)

    def _egress_clone(
        self,
        h: Any,
        m: Any,
        s: Any,
        payload: bytes,
        now: int,
        clone: tuple[int, int, int],
        out: list[tuple[int, bytes]],
        again: list[tuple[bytes, int, list[tuple[str, Any]]]],
    ) -> None:
        """E2E: the packet as egress left it, metadata reset but the field list, runs egress again
        on the session's port."""
        keep = self._preserved(m, clone[2]) if clone[2] else []
        if self._clone_depth >= MAX_PASSES:
            log.warning("softswitch: egress clone of a clone %d deep dropped", self._clone_depth)
            return
        self._clone_depth += 1
        try:
            for eport, rid in self._session_ports(clone[1]):
                self._egress_clone_one(h, s, keep, eport, rid, payload, now, out, again)
        finally:
            self._clone_depth -= 1

    def _egress_clone_one(
        self,
        h: Any,
        s: Any,
        keep: list[tuple[str, Any]],
        eport: int,
        rid: int,
        payload: bytes,
        now: int,
        out: list[tuple[int, bytes]],
        again: list[tuple[bytes, int, list[tuple[str, Any]]]],
    ) -> None:
        p = self.program
        h2, m2, s2 = h._copy(), p.meta_cls(), p.sm_cls()
        for n, v in keep:
            setattr(m2, n, v)
        s2.packet_length = s.packet_length
        s2.ingress_port = s.ingress_port
        s2.instance_type = INSTANCE_EGRESS_CLONE
        s2.egress_rid = rid
        self._egress(h2, m2, s2, eport, payload, now, out, again)

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

    def mirroring_session_get(self, session: int) -> tuple[int | None, int]:
        with self._lock:
            if session not in self.mirror_sessions:
                raise SwitchError(f"no mirroring session {session}")
            return self.mirror_sessions[session]
