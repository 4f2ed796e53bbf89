"""Look-ups over a P4Info message: objects by id and by name, with the widths the runtimes need."""

from __future__ import annotations

from dataclasses import dataclass, field

from finsy.proto import p4i

# p4.config.v1.MatchField.MatchType values, by name.
MATCH_KIND = {
    p4i.MatchField.EXACT: "exact",
    p4i.MatchField.LPM: "lpm",
    p4i.MatchField.TERNARY: "ternary",
    p4i.MatchField.RANGE: "range",
    p4i.MatchField.OPTIONAL: "optional",
}


@dataclass(frozen=True)
class KeyField:
    id: int
    name: str
    bitwidth: int
    kind: str  # exact | lpm | ternary | range | optional


@dataclass(frozen=True)
class Param:
    id: int
    name: str
    bitwidth: int


@dataclass
class ActionInfo:
    id: int
    name: str
    alias: str
    params: list[Param]
    params_by_id: dict[int, Param] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.params_by_id = {p.id: p for p in self.params}


@dataclass
class TableInfo:
    id: int
    name: str
    alias: str
    keys: list[KeyField]
    action_ids: list[int]
    default_only_ids: set[int]
    table_only_ids: set[int]
    size: int
    const_default_action_id: int
    direct_counter_id: int = 0
    keys_by_id: dict[int, KeyField] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.keys_by_id = {k.id: k for k in self.keys}

    @property
    def needs_priority(self) -> bool:
        return any(k.kind in ("ternary", "range", "optional") for k in self.keys)


@dataclass(frozen=True)
class ArrayInfo:
    """A counter, register or direct counter."""

    id: int
    name: str
    alias: str
    size: int
    bitwidth: int = 0  # registers
    unit: str = "both"  # counters: bytes | packets | both
    table_id: int = 0  # direct counters
    # registers of a struct of bit<> (TNA's paired registers): member widths, first first; a
    # cell is the members' bits concatenated (the first most significant), ``bitwidth`` in all
    members: tuple[int, ...] = ()


@dataclass(frozen=True)
class PacketMetadata:
    id: int
    name: str
    bitwidth: int


class P4InfoIndex:
    """Every object of a P4Info by id, and its id by fully-qualified name or alias."""

    def __init__(self, info: p4i.P4Info) -> None:
        self.info = info
        self.actions: dict[int, ActionInfo] = {}
        self.tables: dict[int, TableInfo] = {}
        self.counters: dict[int, ArrayInfo] = {}
        self.direct_counters: dict[int, ArrayInfo] = {}
        self.registers: dict[int, ArrayInfo] = {}
        self.packet_in: list[PacketMetadata] | None = None
        self.packet_out: list[PacketMetadata] | None = None
        self._names: dict[str, int] = {}
        for a in info.actions:
            self.actions[a.preamble.id] = ActionInfo(
                a.preamble.id,
                a.preamble.name,
                a.preamble.alias or a.preamble.name,
                [Param(p.id, p.name, p.bitwidth) for p in a.params],
            )
        for t in info.tables:
            refs = list(t.action_refs)
            self.tables[t.preamble.id] = TableInfo(
                id=t.preamble.id,
                name=t.preamble.name,
                alias=t.preamble.alias or t.preamble.name,
                keys=[
                    KeyField(m.id, m.name, m.bitwidth, MATCH_KIND.get(m.match_type, "exact"))
                    for m in t.match_fields
                ],
                action_ids=[r.id for r in refs],
                default_only_ids={r.id for r in refs if r.scope == p4i.ActionRef.DEFAULT_ONLY},
                table_only_ids={r.id for r in refs if r.scope == p4i.ActionRef.TABLE_ONLY},
                size=t.size,
                const_default_action_id=t.const_default_action_id,
                direct_counter_id=next(
                    (r for r in t.direct_resource_ids if r >> 24 == p4i.P4Ids.DIRECT_COUNTER), 0
                ),
            )
        unit_names = {p4i.CounterSpec.BYTES: "bytes", p4i.CounterSpec.PACKETS: "packets"}
        for c in info.counters:
            self.counters[c.preamble.id] = ArrayInfo(
                c.preamble.id,
                c.preamble.name,
                c.preamble.alias or c.preamble.name,
                c.size,
                unit=unit_names.get(c.spec.unit, "both"),
            )
        for c in info.direct_counters:
            self.direct_counters[c.preamble.id] = ArrayInfo(
                c.preamble.id,
                c.preamble.name,
                c.preamble.alias or c.preamble.name,
                0,
                unit=unit_names.get(c.spec.unit, "both"),
                table_id=c.direct_table_id,
            )
        for r in info.registers:
            width = r.type_spec.bitstring.bit.bitwidth or r.type_spec.bitstring.int.bitwidth
            members: tuple[int, ...] = ()
            if r.type_spec.HasField("struct"):
                st = info.type_info.structs[r.type_spec.struct.name]
                members = tuple(m.type_spec.bitstring.bit.bitwidth for m in st.members)
                width = sum(members)
            self.registers[r.preamble.id] = ArrayInfo(
                r.preamble.id,
                r.preamble.name,
                r.preamble.alias or r.preamble.name,
                r.size,
                width,
                members=members,
            )
        for cpm in info.controller_packet_metadata:
            fields = [PacketMetadata(m.id, m.name, m.bitwidth) for m in cpm.metadata]
            if cpm.preamble.name == "packet_in":
                self.packet_in = fields
            elif cpm.preamble.name == "packet_out":
                self.packet_out = fields
        for group in (
            self.actions,
            self.tables,
            self.counters,
            self.direct_counters,
            self.registers,
        ):
            for obj_id, obj in group.items():
                self._names.setdefault(obj.alias, obj_id)
                self._names[obj.name] = obj_id

    def table(self, name: str) -> TableInfo | None:
        """A table by fully-qualified name or alias."""
        return self.tables.get(self._names.get(name, 0))

    def action(self, name: str) -> ActionInfo | None:
        """An action by fully-qualified name or alias."""
        return self.actions.get(self._names.get(name, 0))

    def counter(self, name: str) -> ArrayInfo | None:
        return self.counters.get(self._names.get(name, 0))

    def register(self, name: str) -> ArrayInfo | None:
        return self.registers.get(self._names.get(name, 0))

    def table_direct_counter(self, table: TableInfo) -> ArrayInfo | None:
        if table.direct_counter_id:
            return self.direct_counters.get(table.direct_counter_id)
        return next((c for c in self.direct_counters.values() if c.table_id == table.id), None)
