"""The replication plan of one period and the ordered operations from one plan to the next.

A plan maps each hot key to a slot (its index in the per-slot registers and tables) and its
holders (origin first). ``diff`` turns (old plan, new plan) into operations ordered so that no Get
ever reaches a server without a current copy:

1. break: leaving keys lose their HotkeyTable entry first (Gets go to the origin), then their other
   entries and multicast group; replicas that leave a staying key get their ``valid_ver`` cell
   zeroed (no Get is redirected there any more) before the key's entries change;
2. make: a new key's slot registers are reset, its KeyindexTable/ServermapTable/multicast entries
   are installed, and its HotkeyTable entry comes last. New replicas start with ``valid_ver`` = 0;
3. agents: pushes to new replicas (the origin SYNCs, pushes, replicas CONFIRM: only then do they
   serve) and removals of replicas that no table refers to any more.

``floor`` is the switch's ``global_ver`` read before the plan was made: a key that gains holders
gets it as its KeyindexTable floor (before the new holders' cells are reset), so a confirm a
replica sent during an earlier membership, however late it arrives, cannot validate the new one.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from kvswitch.controller import names
from kvswitch.controller.ops import (
    EntryOp,
    MulticastGroupDelete,
    MulticastGroupSet,
    Operation,
    PushRequest,
    RegisterWrite,
    RemoveRequest,
    TableEntry,
)
from kvswitch.controller.rack import Rack


@dataclass(frozen=True)
class KeyPlan:
    slot: int
    holders: tuple[int, ...]  # origin first
    # the key's writes rotate over its holders (docs/protocol.md F7): a spine's HotkeyTable
    # ``set_hot``'s third parameter; never set for a rack (its switches have no such parameter)
    rotate: bool = False

    @property
    def origin(self) -> int:
        return self.holders[0]

    @property
    def replicas(self) -> tuple[int, ...]:
        return self.holders[1:]


@dataclass
class Plan:
    servers: int
    slots: int
    keys: dict[bytes, KeyPlan] = field(default_factory=dict)

    def replicas_per_server(self) -> list[int]:
        counts = [0] * self.servers
        for kp in self.keys.values():
            for s in kp.replicas:
                counts[s] += 1
        return counts

    def replicated_keys(self) -> int:
        return sum(1 for kp in self.keys.values() if len(kp.holders) > 1)

    def without(self, keys: Collection[bytes]) -> Plan:
        """This plan with ``keys`` taken out (a new plan; this one unchanged)."""
        return Plan(self.servers, self.slots, {k: v for k, v in self.keys.items() if k not in keys})


def build_plan(
    holders: Sequence[tuple[bytes, tuple[int, ...]]],
    previous: Plan | None,
    servers: int,
    slots: int,
    rotated: Collection[bytes] = (),
) -> Plan:
    """A plan for ``holders`` that keeps the slot of every key already hot; new keys take the lowest
    free slots. At most ``slots`` keys. ``rotated``: the keys whose writes rotate (a spine's)."""
    if len(holders) > slots:
        raise ValueError(f"{len(holders)} hot keys do not fit in {slots} slots")
    old = previous.keys if previous is not None else {}
    wanted = {key for key, _ in holders}
    taken = {kp.slot for key, kp in old.items() if key in wanted}
    free = (s for s in range(slots) if s not in taken)
    keys: dict[bytes, KeyPlan] = {}
    for key, members in holders:
        if not members or any(not 0 <= s < servers for s in members):
            raise ValueError(f"bad holders {members} for key {key!r}")
        if len(set(members)) != len(members):
            raise ValueError(f"duplicate holder in {members} for key {key!r}")
        slot = old[key].slot if key in old else next(free)
        keys[key] = KeyPlan(slot, tuple(members), key in rotated)
    return Plan(servers, slots, keys)


def assemble(
    hot: Iterable[tuple[bytes, int, int]],
    ordinals: Mapping[tuple[int, int], int],
    servers: int,
    slots: int,
    most: int,
    rotated: Collection[bytes] = (),
) -> tuple[Plan, list[bytes]]:
    """The plan a switch holds, from its HotkeyTable entries (key, slot, n) and what its
    ServermapTable's (slot, ordinal) entries name (a server, or -1 for an entry that names no
    server of the layout); and the keys that cannot be in one: an ordinal missing or -1, a
    holder twice, more than ``most`` holders, a slot out of range or taken by an earlier key.
    ``rotated``: the keys whose entry says their writes rotate (a spine's)."""
    plan = Plan(servers, slots)
    broken: list[bytes] = []
    taken: set[int] = set()
    for key, slot, n in hot:
        holders = tuple(ordinals.get((slot, o), -1) for o in range(n))
        if (
            not 1 <= n <= most
            or -1 in holders
            or len(set(holders)) != n
            or not 0 <= slot < slots
            or slot in taken
        ):
            broken.append(key)
            continue
        taken.add(slot)
        plan.keys[key] = KeyPlan(slot, holders, key in rotated)
    return plan, broken


def _entry(op: EntryOp, table: str, match: dict, action: str = "", params: dict | None = None):
    return TableEntry(op, table, tuple(match.items()), action, tuple((params or {}).items()))


def _servermap(op: EntryOp, slot: int, ordinal: int, server: int, rack: Rack) -> TableEntry:
    """(slot, ordinal) -> the server's valid_ver index (offset = server number) and address."""
    addr = rack.servers[server]
    params = {
        names.PARAM_VIDX: names.valid_base(slot, len(rack)) + server,
        names.PARAM_IP: addr.ip,
        names.PARAM_MAC: addr.mac,
        names.PARAM_PORT: addr.port,
    }
    match = {names.MATCH_SLOT: slot, names.MATCH_ORDINAL: ordinal}
    return _entry(op, names.SERVERMAP_TABLE, match, names.ACT_SET_SERVER, params)


def _keyindex(op: EntryOp, key: bytes, kp: KeyPlan, rack: Rack, floor: int) -> TableEntry:
    params = {
        names.PARAM_SLOT: kp.slot,
        names.PARAM_BASE: names.valid_base(kp.slot, len(rack)),
        names.PARAM_FLOOR: floor,
    }
    return _entry(op, names.KEYINDEX_TABLE, {names.MATCH_KEY: key}, names.ACT_SET_BASE, params)


def _key_entries(
    op: EntryOp, key: bytes, kp: KeyPlan, rack: Rack, floor: int = 0
) -> list[TableEntry]:
    """KeyindexTable and ServermapTable (one per ordinal) entries of a key."""
    entries = [_keyindex(op, key, kp, rack, floor)]
    entries += [
        _servermap(op, kp.slot, ordinal, server, rack) for ordinal, server in enumerate(kp.holders)
    ]
    return entries


def _group(kp: KeyPlan, rack: Rack) -> MulticastGroupSet:
    """The origin's port with rid 0, each replica's port with rid = its ordinal."""
    members = tuple((rack.servers[s].port, ordinal) for ordinal, s in enumerate(kp.holders))
    return MulticastGroupSet(names.multicast_group(kp.slot), members)


def rack_setup(rack: Rack, epoch: int) -> list[Operation]:
    """Static entries of a rack (ServeroffsetTable, PorttoserverTable, LoadcountTable,
    ReplycountTable; offset = server number) and the epoch register; installed once when the
    controller starts."""
    ops: list[Operation] = [RegisterWrite(names.REG_EPOCH, 0, epoch)]
    for s, addr in enumerate(rack.servers):
        ops += [
            _entry(
                EntryOp.ADD,
                names.SERVEROFFSET_TABLE,
                {names.MATCH_SERVER_IP: addr.ip},
                names.ACT_SET_OFFSET,
                {names.PARAM_OFFSET: s, names.PARAM_PORT: addr.port},
            ),
            _entry(
                EntryOp.ADD,
                names.PORTTOSERVER_TABLE,
                {names.MATCH_PORT: addr.port},
                names.ACT_SET_REPLICA,
                {names.PARAM_IP: addr.ip, names.PARAM_MAC: addr.mac},
            ),
            _entry(
                EntryOp.ADD, names.LOADCOUNT_TABLE, {names.MATCH_DST: addr.ip}, names.ACT_COUNT_LOAD
            ),
            _entry(
                EntryOp.ADD,
                names.REPLYCOUNT_TABLE,
                {names.MATCH_SRC: addr.ip},
                names.ACT_COUNT_REPLY,
            ),
        ]
    return ops


def down_entry(op: EntryOp, rack: Rack, server: int) -> TableEntry:
    """The DownTable entry of a server declared dead (ADD) or back (DELETE): liveness.p4 answers
    UDP requests addressed to it with UNAVAILABLE, except hot Gets a valid replica serves."""
    match = {names.MATCH_DST: rack.servers[server].ip}
    if op is EntryOp.DELETE:
        return _entry(op, names.DOWN_TABLE, match)
    return _entry(op, names.DOWN_TABLE, match, names.ACT_SET_DOWN)


def _hot_entry(op: EntryOp, key: bytes, kp: KeyPlan | None) -> TableEntry:
    if kp is None:
        return _entry(op, names.HOTKEY_TABLE, {names.MATCH_KEY: key})
    return _entry(
        op,
        names.HOTKEY_TABLE,
        {names.MATCH_KEY: key},
        names.ACT_SET_HOT,
        {names.PARAM_SLOT: kp.slot, names.PARAM_HOLDERS: len(kp.holders)},
    )


def _group_entry(op: EntryOp, key: bytes, kp: KeyPlan) -> TableEntry:
    return _entry(
        op,
        names.MULTIGROUP_TABLE,
        {names.MATCH_KEY: key},
        names.ACT_SET_GROUP,
        {names.PARAM_GROUP: names.multicast_group(kp.slot)},
    )


def _deletes(entries: list[TableEntry]) -> list[TableEntry]:
    return [TableEntry(EntryOp.DELETE, e.table, e.match) for e in entries]


def _reset_slot(slot: int, servers: int) -> list[RegisterWrite]:
    return [
        RegisterWrite(names.REG_SLOT_VER, slot, 0),
        RegisterWrite(names.REG_ORIGIN_VER, slot, 0),
        RegisterWrite(names.REG_RR, slot, 0),
        RegisterWrite(names.REG_VALID_VER, names.valid_base(slot, servers), 0, servers),
    ]


def diff(old: Plan, new: Plan, rack: Rack, floor: int = 0) -> list[Operation]:
    """Ordered operations that turn the switch state of ``old`` into that of ``new``; ``floor``:
    the switch's ``global_ver`` read before this plan (module docstring)."""
    if old.servers != new.servers or old.slots != new.slots or len(rack) != new.servers:
        raise ValueError("plans of different racks")
    m = new.servers
    brk: list[Operation] = []
    make: list[Operation] = []
    hot_last: list[Operation] = []
    agents: list[Operation] = []
    removals: list[Operation] = []
    for key, kp in old.keys.items():
        if key in new.keys:
            continue
        brk.append(_hot_entry(EntryOp.DELETE, key, None))
        if kp.replicas:
            brk.append(_deletes([_group_entry(EntryOp.ADD, key, kp)])[0])
            brk.append(MulticastGroupDelete(names.multicast_group(kp.slot)))
            removals.append(RemoveRequest(key, kp.replicas))
        brk += _deletes(_key_entries(EntryOp.ADD, key, kp, rack))
    for key, kp in new.keys.items():
        before = old.keys.get(key)
        group = names.multicast_group(kp.slot)
        if before is None:
            make += _reset_slot(kp.slot, m)
            make += _key_entries(EntryOp.ADD, key, kp, rack, floor)
            if kp.replicas:
                make.append(_group(kp, rack))
                make.append(_group_entry(EntryOp.ADD, key, kp))
                agents.append(PushRequest(key, kp.origin, kp.replicas))
            hot_last.append(_hot_entry(EntryOp.ADD, key, kp))
            continue
        if before.holders == kp.holders:
            if before.rotate != kp.rotate:  # the writer map alone (docs/protocol.md F7)
                make.append(_hot_entry(EntryOp.MODIFY, key, kp))
            continue
        gone = tuple(s for s in before.replicas if s not in kp.holders)
        added = tuple(s for s in kp.replicas if s not in before.holders)
        base = names.valid_base(kp.slot, m)
        # break first: the leaving and the new replicas must not serve until confirmed, and no
        # confirm of an earlier membership may count for the new one (floor before the reset)
        if added:
            brk.append(_keyindex(EntryOp.MODIFY, key, kp, rack, floor))
        brk += [RegisterWrite(names.REG_VALID_VER, base + s, 0) for s in gone + added]
        brk.append(RegisterWrite(names.REG_RR, kp.slot, 0))
        old_ords = dict(enumerate(before.holders))
        new_ords = dict(enumerate(kp.holders))
        shrinking = len(kp.holders) < len(before.holders)
        if shrinking:  # fewer holders: stop picking the high ordinals before deleting them
            make.append(_hot_entry(EntryOp.MODIFY, key, kp))
        for ordinal in sorted(set(old_ords) | set(new_ords)):
            match = {names.MATCH_SLOT: kp.slot, names.MATCH_ORDINAL: ordinal}
            if ordinal not in new_ords:
                make.append(_entry(EntryOp.DELETE, names.SERVERMAP_TABLE, match))
            elif old_ords.get(ordinal) != new_ords[ordinal]:
                op = EntryOp.MODIFY if ordinal in old_ords else EntryOp.ADD
                make.append(_servermap(op, kp.slot, ordinal, new_ords[ordinal], rack))
        if kp.replicas:
            make.append(_group(kp, rack))
            if not before.replicas:
                make.append(_group_entry(EntryOp.ADD, key, kp))
        else:
            make.append(_deletes([_group_entry(EntryOp.ADD, key, kp)])[0])
            make.append(MulticastGroupDelete(group))
        # more holders: entries exist before use; as many: the rotation flag may change
        growing = len(kp.holders) > len(before.holders)
        if growing or (not shrinking and before.rotate != kp.rotate):
            make.append(_hot_entry(EntryOp.MODIFY, key, kp))
        if added:  # the SYNC makes a new version: every replica is pushed it, not only new ones
            agents.append(PushRequest(key, kp.origin, kp.replicas))
        if gone:
            removals.append(RemoveRequest(key, gone))
    return brk + make + hot_last + agents + removals
