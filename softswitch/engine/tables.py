"""Match-action tables at run time: exact (dict), LPM (per-prefix dicts), ternary/optional/range
(priority-ordered list; the larger priority wins, as in P4Runtime)."""

from __future__ import annotations

import bisect
import heapq
from dataclasses import dataclass, field
from typing import Any

from softswitch.errors import SwitchError


@dataclass
class KeyField:
    name: str
    match_kind: str  # exact | lpm | ternary | optional | range
    width: int


@dataclass
class TableAction:
    name: str  # fully-qualified
    index: int
    params: list[tuple[str, int]]  # (name, width)
    scope: str = ""  # "" | "tableonly" | "defaultonly"


@dataclass(eq=False)
class Entry:
    handle: int
    match: dict[str, Any]
    action: str
    params: dict[str, int]
    priority: int | None
    a: int = 0  # action index
    p: tuple[int, ...] = ()
    bytes: int = 0
    packets: int = 0
    # normalised key: tuple of (value, mask) or (lo, hi) per field
    norm: tuple[Any, ...] = ()


@dataclass(eq=False)
class Table:
    name: str
    keys: list[KeyField]
    actions: list[TableAction]
    size: int
    default_action: int = 0
    default_params: tuple[int, ...] = ()
    default_const: bool = False
    has_counters: bool = False
    const_entries: bool = False
    entries: dict[int, Entry] = field(default_factory=dict)
    # lookup structures (identity stable: generated code keeps references)
    exact: dict[Any, Entry] = field(default_factory=dict)
    lpm: list[tuple[int, int, dict[Any, Entry]]] = field(default_factory=list)
    ternary: list[Entry] = field(default_factory=list)
    # (normalised key, priority or None) -> handle: the duplicate check of an insert, in O(1)
    by_key: dict[tuple[Any, int | None], int] = field(default_factory=dict)
    # Handles as BMv2's match units give them: the lowest free slot index, with the slot's
    # version (bumped by each delete) in bits 24-31; the first entry gets 0.
    next_slot: int = 0
    free_slots: list[int] = field(default_factory=list)
    slot_versions: dict[int, int] = field(default_factory=dict)
    default_bytes: int = 0
    default_packets: int = 0
    kind: str = "empty"
    lpm_index: int = -1
    single: bool = False

    def __post_init__(self) -> None:
        kinds = {k.match_kind for k in self.keys}
        if not self.keys:
            self.kind = "empty"
        elif kinds <= {"exact"}:
            self.kind = "exact"
        elif kinds <= {"exact", "lpm"} and sum(k.match_kind == "lpm" for k in self.keys) == 1:
            self.kind = "lpm"
        else:
            self.kind = "ternary"
        self.lpm_index = next((i for i, k in enumerate(self.keys) if k.match_kind == "lpm"), -1)
        self.single = len(self.keys) == 1

    def needs_priority(self) -> bool:
        return self.kind == "ternary"

    # --------------------------------------------------------------- control plane
    def action_by_name(self, name: str) -> TableAction:
        for a in self.actions:
            if a.name == name or a.name.rsplit(".", 1)[-1] == name:
                return a
        raise SwitchError(f"table {self.name}: action {name!r} is not in the table's action list")

    def _params(self, act: TableAction, params: dict[str, int] | None) -> tuple[int, ...]:
        params = dict(params or {})
        out = []
        for pname, width in act.params:
            if pname not in params:
                raise SwitchError(f"action {act.name}: missing parameter {pname!r}")
            v = params.pop(pname)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0 or v >> width:
                raise SwitchError(
                    f"action {act.name}: parameter {pname}={v!r} does not fit bit<{width}>"
                )
            out.append(v)
        if params:
            raise SwitchError(f"action {act.name}: unknown parameter(s) {sorted(params)}")
        return tuple(out)

    def key_field(self, name: str) -> KeyField:
        """A key field by its P4Info name or a unique dotted suffix of it."""
        for k in self.keys:
            if k.name == name:
                return k
        cands = [k for k in self.keys if k.name.endswith("." + name)]
        if len(cands) == 1:
            return cands[0]
        if cands:
            raise SwitchError(f"table {self.name}: match field {name!r} is ambiguous")
        raise SwitchError(f"table {self.name}: unknown match field {name!r}")

    def _normalise(self, match: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        given: dict[str, Any] = {}
        for n, v in match.items():
            given[self.key_field(n).name] = v
        norm = []
        for k in self.keys:
            full = (1 << k.width) - 1
            v = given.get(k.name)
            if k.match_kind == "exact":
                if v is None:
                    raise SwitchError(f"table {self.name}: exact field {k.name} needs a value")
                self._fits(k, v)
                norm.append(v)
            elif k.match_kind == "lpm":
                if v is None:
                    v = (0, 0)
                if isinstance(v, int):
                    v = (v, k.width)
                val, plen = v
                self._fits(k, val)
                if not 0 <= plen <= k.width:
                    raise SwitchError(f"table {self.name}: prefix length {plen} out of range")
                mask = full ^ ((1 << (k.width - plen)) - 1)
                if val & ~mask:
                    raise SwitchError(f"table {self.name}: {k.name} has bits set beyond the prefix")
                norm.append((val, plen))
            elif k.match_kind in ("ternary", "optional"):
                if v is None:
                    v = (0, 0)
                elif isinstance(v, int):
                    v = (v, full)
                elif k.match_kind == "optional":
                    raise SwitchError(
                        f"table {self.name}: optional field {k.name} takes an int or None"
                    )
                val, mask = v
                self._fits(k, val)
                self._fits(k, mask)
                if val & ~mask:
                    raise SwitchError(
                        f"table {self.name}: {k.name} value has bits outside the mask"
                    )
                norm.append((val, mask))
            elif k.match_kind == "range":
                if v is None:
                    v = (0, full)
                lo, hi = v
                self._fits(k, lo)
                self._fits(k, hi)
                if lo > hi:
                    raise SwitchError(f"table {self.name}: empty range for {k.name}")
                norm.append((lo, hi))
            else:
                raise SwitchError(f"table {self.name}: match kind {k.match_kind} not supported")
        return tuple(norm), given

    def _fits(self, k: KeyField, v: Any) -> None:
        if not isinstance(v, int) or isinstance(v, bool) or v < 0 or v >> k.width:
            raise SwitchError(
                f"table {self.name}: value {v!r} for {k.name} does not fit bit<{k.width}>"
            )

    def _exact_key(self, norm: tuple[Any, ...]) -> Any:
        return norm[0] if len(norm) == 1 else norm

    def add(
        self,
        match: dict[str, Any],
        action: str,
        params: dict[str, int] | None,
        priority: int | None = None,
        const: bool = False,
    ) -> int:
        if self.const_entries and not const:
            raise SwitchError(f"table {self.name} has const entries; it cannot be modified")
        if len(self.entries) >= self.size:
            raise SwitchError(f"table {self.name} is full ({self.size} entries)")
        act = self.action_by_name(action)
        if act.scope == "defaultonly":
            raise SwitchError(f"action {act.name} is @defaultonly in table {self.name}")
        args = self._params(act, params)
        norm, given = self._normalise(match)
        if self.needs_priority():
            if priority is None:
                raise SwitchError(f"table {self.name} needs a priority for each entry")
        elif priority is not None and not const:
            raise SwitchError(
                f"table {self.name} takes no priority (no ternary/range/optional key)"
            )
        ident = self._ident(norm, priority)
        if ident in self.by_key:
            raise SwitchError(f"table {self.name}: duplicate entry for this key")
        if self.free_slots:
            slot = heapq.heappop(self.free_slots)
        else:
            slot, self.next_slot = self.next_slot, self.next_slot + 1
        h = (self.slot_versions.get(slot, 0) << 24) | slot
        e = Entry(h, given, act.name, dict(params or {}), priority, act.index, args, norm=norm)
        self.entries[h] = e
        self.by_key[ident] = h
        self._insert(e)
        return h

    def _ident(self, norm: tuple[Any, ...], priority: int | None) -> tuple[Any, int | None]:
        return (norm, priority if self.needs_priority() else None)

    def _insert(self, e: Entry) -> None:
        kind = self.kind
        if kind == "exact":
            self.exact[self._exact_key(e.norm)] = e
        elif kind == "lpm":
            li = self.lpm_index
            plen = e.norm[li][1]
            w = self.keys[li].width
            mask = ((1 << w) - 1) ^ ((1 << (w - plen)) - 1)
            key = tuple(n[0] if i == li else n for i, n in enumerate(e.norm))
            for pl, _m, d in self.lpm:
                if pl == plen:
                    d[self._exact_key(key)] = e
                    break
            else:
                self.lpm.append((plen, mask, {self._exact_key(key): e}))
                self.lpm.sort(key=lambda x: -x[0])
        else:
            # After the entries of equal priority: the order a stable sort would give.
            bisect.insort_right(self.ternary, e, key=lambda x: -(x.priority or 0))

    def _remove(self, e: Entry) -> None:
        kind = self.kind
        if kind == "exact":
            del self.exact[self._exact_key(e.norm)]
        elif kind == "lpm":
            li = self.lpm_index
            key = self._exact_key(tuple(n[0] if i == li else n for i, n in enumerate(e.norm)))
            for i, (pl, _m, d) in enumerate(self.lpm):
                if pl == e.norm[li][1]:
                    del d[key]
                    if not d:
                        del self.lpm[i]
                    break
        else:
            self.ternary.remove(e)

    def get(self, handle: int) -> Entry:
        try:
            return self.entries[handle]
        except KeyError:
            raise SwitchError(f"table {self.name}: no entry with handle {handle}") from None

    def modify(self, handle: int, action: str, params: dict[str, int] | None) -> None:
        if self.const_entries:
            raise SwitchError(f"table {self.name} has const entries; it cannot be modified")
        e = self.get(handle)
        act = self.action_by_name(action)
        if act.scope == "defaultonly":
            raise SwitchError(f"action {act.name} is @defaultonly in table {self.name}")
        e.p = self._params(act, params)
        e.a = act.index
        e.action = act.name
        e.params = dict(params or {})

    def delete(self, handle: int) -> None:
        if self.const_entries:
            raise SwitchError(f"table {self.name} has const entries; it cannot be modified")
        e = self.get(handle)
        self._remove(e)
        del self.entries[handle]
        del self.by_key[self._ident(e.norm, e.priority)]
        self._release(handle)

    def _release(self, handle: int) -> None:
        slot = handle & 0xFFFFFF
        self.slot_versions[slot] = ((handle >> 24) + 1) & 0xFF
        heapq.heappush(self.free_slots, slot)

    def clear(self) -> None:
        if self.const_entries:
            raise SwitchError(f"table {self.name} has const entries; it cannot be modified")
        # BMv2 resets the match unit: handles start again from 0, version 0
        self.next_slot = 0
        self.free_slots.clear()
        self.slot_versions.clear()
        self.entries.clear()
        self.by_key.clear()
        self.exact.clear()
        self.lpm.clear()
        self.ternary.clear()

    def set_default(self, action: str, params: dict[str, int] | None) -> None:
        act = self.action_by_name(action)
        if self.default_const:
            raise SwitchError(f"table {self.name} has a const default action")
        if act.scope == "tableonly":
            raise SwitchError(f"action {act.name} is @tableonly in table {self.name}")
        self.default_params = self._params(act, params)
        self.default_action = act.index

    # --------------------------------------------------------------- data plane
    def lookup(self, key: Any) -> Entry | None:
        """Lookup for non-exact tables (exact tables are inlined as dict.get)."""
        if self.kind == "lpm":
            if self.single:
                for _pl, mask, d in self.lpm:
                    e = d.get(key & mask)
                    if e is not None:
                        return e
                return None
            li = self.lpm_index
            for _pl, mask, d in self.lpm:
                e = d.get(tuple(v & mask if i == li else v for i, v in enumerate(key)))
                if e is not None:
                    return e
            return None
        keys = (key,) if self.single else key
        for e in self.ternary:
            for k, v, n in zip(self.keys, keys, e.norm, strict=True):
                mk = k.match_kind
                if mk == "ternary" or mk == "optional":
                    if v & n[1] != n[0]:
                        break
                elif mk == "exact":
                    if v != n:
                        break
                elif mk == "range":
                    if not n[0] <= v <= n[1]:
                        break
                else:  # lpm inside a ternary table
                    m = ((1 << k.width) - 1) ^ ((1 << (k.width - n[1])) - 1)
                    if v & m != n[0]:
                        break
            else:
                return e
        return None
