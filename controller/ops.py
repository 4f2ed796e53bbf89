"""Typed operations that take the switch (and the agents) from one plan to the next.

A period's changes are a list of these, in the order they must be applied: the planner produces
them, a driver executes them (one batch per period), nothing in between reorders them.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any


class EntryOp(enum.Enum):
    ADD = "add"
    MODIFY = "modify"
    DELETE = "delete"


@dataclass(frozen=True)
class TableEntry:
    """Add, modify or delete one exact-match entry. ``action``/``params`` are empty for deletes."""

    op: EntryOp
    table: str
    match: tuple[tuple[str, int | bytes | tuple[int, int]], ...]  # lpm: (address, length)
    action: str = ""
    params: tuple[tuple[str, int], ...] = ()

    def match_dict(self) -> dict[str, int | bytes | tuple[int, int]]:
        return dict(self.match)

    def param_dict(self) -> dict[str, int]:
        return dict(self.params)


Match = tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class HeldEntry:
    """A table entry as a switch holds it (action alias, params, match as TableEntry takes it):
    what a driver's ``read_entries`` returns."""

    action: str
    params: dict[str, int]
    raw_match: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class DefaultAction:
    """Set the default action of ``table`` (a fabric's leaf: FabricHotTable's ``hold`` ->
    ``NoAction`` once its entries are in, docs/fabric.md "Leaf program")."""

    table: str
    action: str
    params: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class MulticastGroupSet:
    """Create or replace multicast group ``group``: one copy per (egress port, replication id)."""

    group: int
    members: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class MulticastGroupDelete:
    group: int


@dataclass(frozen=True)
class RegisterWrite:
    """Write ``value`` to ``count`` consecutive cells of register ``name`` from ``index``."""

    name: str
    index: int
    value: int
    count: int = 1


@dataclass(frozen=True)
class PushRequest:
    """Ask the origin to refresh the key's version (SYNC) and push it to the new replicas."""

    key: bytes
    origin: int
    replicas: tuple[int, ...]


@dataclass(frozen=True)
class RemoveRequest:
    """Ask replicas to drop their copy; only issued after the tables stopped using them."""

    key: bytes
    servers: tuple[int, ...]


@dataclass(frozen=True)
class RebaseRequest:
    """Ask ``servers`` to forget their copies' (epoch, version), keeping the values: the key
    changes serializer (docs/fabric.md "Moving a key between levels"); only after the old
    serializer stopped stamping it (break, drain)."""

    key: bytes
    servers: tuple[int, ...]


Operation = (
    TableEntry
    | DefaultAction
    | MulticastGroupSet
    | MulticastGroupDelete
    | RegisterWrite
    | PushRequest
    | RemoveRequest
    | RebaseRequest
)


@dataclass
class OpCounts:
    """How many switch updates a batch holds (the paper's 'table updates per period')."""

    table: int = 0
    multicast: int = 0
    register: int = 0
    agent: int = 0
    by_table: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, ops: list[Operation]) -> OpCounts:
        counts = cls()
        for op in ops:
            if isinstance(op, TableEntry | DefaultAction):
                counts.table += 1
                counts.by_table[op.table] = counts.by_table.get(op.table, 0) + 1
            elif isinstance(op, MulticastGroupSet | MulticastGroupDelete):
                counts.multicast += 1
            elif isinstance(op, RegisterWrite):
                counts.register += 1
            else:
                counts.agent += 1
        return counts
