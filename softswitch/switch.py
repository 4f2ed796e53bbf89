"""The in-process switch: load a P4-16 v1model program, control it, push packets through it."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from softswitch.engine.codegen import Exit, TableInfo
from softswitch.engine.program import Builder, Program
from softswitch.engine.runtime import AssertFailed
from softswitch.engine.tables import Entry, Table
from softswitch.errors import P4Error, SwitchError
from softswitch.frontend.checker import Checker
from softswitch.frontend.parser import parse
from softswitch.frontend.preprocessor import Preprocessor

log = logging.getLogger(__name__)

DROP_PORT = 511
INSTANCE_NORMAL = 0
INSTANCE_RECIRC = 4
INSTANCE_REPLICATION = 5
INSTANCE_RESUBMIT = 6
MAX_PASSES = 16  # resubmit/recirculate loops end here (the packet is dropped)


def load_program(
    text: str,
    filename: str,
    defines: Mapping[str, str | int] | None = None,
    include_dirs: Iterable[str | Path] | None = None,
) -> Program:
    pre = Preprocessor(defines, include_dirs).run(text, filename)
    tree = parse(pre)
    ck = Checker(tree, pre)
    ck.collect()
    return Builder(ck).build()


class Switch:
    """A v1model software switch (BMv2 simple_switch semantics) for one P4 program."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self._lock = threading.RLock()
        self.mc_groups: dict[int, list[tuple[int, int]]] = {}
        self._p4info: Any = None
        self._aliases: dict[str, dict[str, str]] = {}
        self._start = time.monotonic()
        self._objs = (program.hdr_cls(), program.meta_cls(), program.sm_cls())
        self.internal_errors = 0
        self._field_lists: dict[int, list[str]] = {}

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
        for a in t.actions:
            if a.name == action or a.name.rsplit(".", 1)[-1] == action:
                return a.name
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

    # ------------------------------------------------------------------ registers / counters
    def register_read(self, name: str, index: int | None = None) -> Any:
        with self._lock:
            x = self._extern(name, ("register",))
            arr = self.program.ns[x.pyname]
            if index is None:
                return list(arr)
            self._check_index(x, index)
            return arr[index]

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
                return self._process(ingress_port, bytes(packet))
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
        ctx.resubmit = ctx.recirculate = None
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
        if ctx.resubmit is not None:
            # BMv2: the original packet goes through the parser and ingress again, nothing leaves
            return [(data, INSTANCE_RESUBMIT, self._preserved(meta, ctx.resubmit))]
        copies: list[tuple[Any, Any, Any]] = []
        grp = sm.mcast_grp
        if grp:
            members = self.mc_groups.get(grp, [])
            for i, (eport, rid) in enumerate(members):
                if i == len(members) - 1:
                    h, m, s = hdr, meta, sm
                else:
                    h, m, s = hdr._copy(), meta._copy(), sm._copy()
                s.egress_port = eport
                s.egress_rid = rid
                s.instance_type = INSTANCE_REPLICATION
                copies.append((h, m, s))
        elif sm.egress_spec == DROP_PORT:
            return None
        else:
            sm.egress_port = sm.egress_spec
            copies.append((hdr, meta, sm))
        again: list[tuple[bytes, int, list[tuple[str, Any]]]] = []
        for h, m, s in copies:
            s.egress_spec = 0
            s.egress_global_timestamp = now
            ctx.sm = s
            ctx.recirculate = None
            try:
                try:  # noqa: SIM105 - cheaper than contextlib.suppress per packet
                    p.egress(h, m, s)
                except Exit:
                    pass
                if s.egress_spec == DROP_PORT:
                    continue
                try:  # noqa: SIM105 - cheaper than contextlib.suppress per packet
                    p.compute(h, m)
                except Exit:
                    pass
            except AssertFailed:
                continue
            parts: list[bytes] = []
            p.deparser(parts, h)
            parts.append(payload)
            if ctx.recirculate is not None:
                # BMv2: the deparsed packet enters the parser again instead of leaving
                again.append(
                    (b"".join(parts), INSTANCE_RECIRC, self._preserved(m, ctx.recirculate))
                )
                continue
            out.append((s.egress_port, b"".join(parts)))
        return again or None
