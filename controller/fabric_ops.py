"""What the fabric controller writes to the spines and the leaves, pure (docs/fabric.md "Spine
program", "Leaf program", "Runtime"): :mod:`kvswitch.controller.fabric` plans each spine as a
rack of the fabric's servers (``plan.diff`` over ``FabricShape.addresses()``); this module turns
those operations into the spine's layout (the four translations of docs/fabric.md "How
controller/fabric.py's plan maps onto it"), and builds the static entries, the leaves' steering
and what a restarted controller reads back. :mod:`kvswitch.controller.fabric_runtime` applies
them."""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Mapping, Sequence

from kvswitch import protocol as p
from kvswitch.controller import names
from kvswitch.controller.fabricfile import FabricFile
from kvswitch.controller.ops import (
    DefaultAction,
    EntryOp,
    HeldEntry,
    Match,
    MulticastGroupSet,
    Operation,
    PushRequest,
    RegisterWrite,
    RemoveRequest,
    TableEntry,
)
from kvswitch.controller.plan import KeyPlan, Plan, assemble, build_plan, diff
from kvswitch.controller.rack import Rack

#: The spine's tables whose entries follow its hot keys (recovery deletes those of no hot key).
SPINE_DYNAMIC = (
    names.KEYINDEX_TABLE,
    names.SERVERMAP_TABLE,
    names.SERVEROFFSET_TABLE,
    names.MULTIGROUP_TABLE,
)


def _entry(op: EntryOp, table: str, match: dict, action: str = "", params: dict | None = None):
    return TableEntry(op, table, tuple(match.items()), action, tuple((params or {}).items()))


# -- static entries -------------------------------------------------------------------------------


def spine_static(fabric: FabricFile, spine: int, liveness: bool = True) -> list[Operation]:
    """A spine's static entries (docs/fabric.md "Spine program"): each rack's subnet routed to
    its leaf and trusted from that port only (HostportTable), each server's /32 a server from
    its leaf's port, RidtoserverTable, LoadcountTable (and ReplycountTable with liveness.p4)."""
    side = fabric.spines[spine]
    ops: list[Operation] = []
    for r, rack in enumerate(fabric.racks):
        port = side.ports[r]
        hop = {"port": port, "dmac": rack.leaf_mac, "smac": side.mac}
        ops.append(_entry(EntryOp.ADD, "ipv4_lpm", {"dst_addr": rack.subnet}, "set_next_hop", hop))
        ops.append(
            _entry(
                EntryOp.ADD,
                names.HOSTPORT_TABLE,
                {names.MATCH_SRC: rack.subnet},
                names.ACT_SET_SOURCE,
                {names.PARAM_PORT: port, names.PARAM_SERVER: 0},
            )
        )
    for s in range(fabric.total):
        rack = fabric.racks[fabric.rack_of(s)]
        ip, port = fabric.server_ip(s), side.ports[fabric.rack_of(s)]
        ops += [
            _entry(
                EntryOp.ADD,
                names.HOSTPORT_TABLE,
                {names.MATCH_SRC: (ip, 32)},
                names.ACT_SET_SOURCE,
                {names.PARAM_PORT: port, names.PARAM_SERVER: 1},
            ),
            _entry(
                EntryOp.ADD,
                names.RIDTOSERVER_TABLE,
                {names.MATCH_RID: names.spine_rid(s)},
                names.ACT_SET_REPLICA,
                {names.PARAM_IP: ip, names.PARAM_MAC: rack.leaf_mac},
            ),
            _entry(EntryOp.ADD, names.LOADCOUNT_TABLE, {names.MATCH_DST: ip}, names.ACT_COUNT_LOAD),
        ]
        if liveness:
            ops.append(
                _entry(
                    EntryOp.ADD,
                    names.REPLYCOUNT_TABLE,
                    {names.MATCH_SRC: ip},
                    names.ACT_COUNT_REPLY,
                )
            )
    return ops


def leaf_static(fabric: FabricFile, rack: int) -> list[Operation]:
    """A leaf's static entries of the fabric: UplinkTable (its ports to the spines) and a route
    to every other rack's subnet through one spine (rack ``o`` through spine ``(rack + o) % S``:
    a fixed spread standing in for ECMP). The rack's own hosts are its rack controller's."""
    side = fabric.racks[rack]
    ops: list[Operation] = [
        _entry(EntryOp.ADD, names.UPLINK_TABLE, {names.MATCH_PORT: port}, names.ACT_SET_UPLINK)
        for port in side.uplinks
    ]
    for o, other in enumerate(fabric.racks):
        if o == rack:
            continue
        s = (rack + o) % len(fabric.spines)
        hop = {"port": side.uplinks[s], "dmac": fabric.spines[s].mac, "smac": side.leaf_mac}
        ops.append(_entry(EntryOp.ADD, "ipv4_lpm", {"dst_addr": other.subnet}, "set_next_hop", hop))
    return ops


# -- steering -------------------------------------------------------------------------------------


def steering_entry(fabric: FabricFile, rack: int, key: bytes, spine: int) -> TableEntry:
    params = {
        names.PARAM_PORT: fabric.racks[rack].uplinks[spine],
        names.PARAM_DMAC: fabric.spines[spine].mac,
    }
    return _entry(
        EntryOp.ADD, names.FABRIC_HOT_TABLE, {names.MATCH_KEY: key}, names.ACT_SET_SPINE, params
    )


def steering(fabric: FabricFile, rack: int, spine_of: Mapping[bytes, int]) -> list[Operation]:
    """Every fabric-hot key's FabricHotTable entry on leaf ``rack`` (recovery reconciles these)."""
    return [steering_entry(fabric, rack, key, s) for key, s in spine_of.items()]


def steering_diff(
    fabric: FabricFile, rack: int, old: Mapping[bytes, int], new: Mapping[bytes, int]
) -> tuple[list[Operation], list[Operation]]:
    """(deletes, adds and modifies) that take leaf ``rack``'s FabricHotTable from ``old`` to
    ``new``: the deletes follow the spines' break, the adds their make (docs/fabric.md "Moving a
    key between levels")."""
    gone = [
        _entry(EntryOp.DELETE, names.FABRIC_HOT_TABLE, {names.MATCH_KEY: key})
        for key in old
        if key not in new
    ]
    made: list[Operation] = []
    for key, s in new.items():
        entry = steering_entry(fabric, rack, key, s)
        if key not in old:
            made.append(entry)
        elif old[key] != s:
            made.append(
                TableEntry(EntryOp.MODIFY, entry.table, entry.match, entry.action, entry.params)
            )
    return gone, made


def steering_ready() -> DefaultAction:
    """FabricHotTable's default from ``hold`` to ``NoAction``: the leaf forwards KVSwitch packets
    again (written once its steering entries are in)."""
    return DefaultAction(names.FABRIC_HOT_TABLE, names.ACT_PASS)


def spine_ready() -> DefaultAction:
    """SpineHoldTable's default from ``hold`` to ``NoAction``: the spine forwards KVSwitch
    packets again (written once it is reinstalled and its rotated keys are gathered into their
    origins; p4src/features/spine_hold.p4)."""
    return DefaultAction(names.SPINE_HOLD_TABLE, names.ACT_PASS)


# -- the holders cap ------------------------------------------------------------------------------


def cap_plans(
    previous: Sequence[Plan], plans: Sequence[Plan], max_holders: int
) -> tuple[list[Plan], int]:
    """``plans`` with every key's holders cut to the spine's ``max_holders`` (origin first, then
    the holders ``place_fabric`` chose first: last period's before new ones), slots kept as
    :func:`build_plan` keeps them; and how many keys were cut."""
    out, cut = [], 0
    for before, plan in zip(previous, plans, strict=True):
        if all(len(kp.holders) <= max_holders for kp in plan.keys.values()):
            out.append(plan)
            continue
        cut += sum(1 for kp in plan.keys.values() if len(kp.holders) > max_holders)
        held = sorted(plan.keys.items(), key=lambda item: item[1].slot)
        out.append(
            build_plan(
                [(key, kp.holders[:max_holders]) for key, kp in held],
                before,
                plan.servers,
                plan.slots,
                {key for key, kp in held if kp.rotate},
            )
        )
    return out, cut


def unrotated(plan: Plan) -> Plan:
    """``plan`` with no key rotating its writes (a spine whose program has no rotation)."""
    if not any(kp.rotate for kp in plan.keys.values()):
        return plan
    keys = {key: KeyPlan(kp.slot, kp.holders) for key, kp in plan.keys.items()}
    return Plan(plan.servers, plan.slots, keys)


# -- the spine's holder pool ---------------------------------------------------------------------

#: A key's row in a spine's ``valid_ver``: (base, cells); ordinal o's cell is base + o.
Row = tuple[int, int]


def row_cells(holders: int) -> int:
    """A row's cells for ``holders`` holders: the smallest power of two >= ``holders``."""
    return 1 << max(0, holders - 1).bit_length()


class HolderPool:
    """The free cells of a spine's ``valid_ver`` pool of ``cells`` cells (HOLDER_CELLS), as
    blocks of a power of two cells aligned to their size (a buddy allocator): a row is taken
    from the lowest free block of the smallest size that holds it, split in halves down to it;
    a row given back merges with its free buddy. Power-of-two rows keep a freed row whole for
    the next key of its size or less, and a row's size follows from its key's holders, so a
    restarted controller recovers every row from its base and the key's HotkeyTable ``n``."""

    def __init__(self, cells: int) -> None:
        self.cells = cells
        self.free: dict[int, list[int]] = {}  # block size -> sorted bases
        self.free_cells = 0
        base = 0
        while base < cells:  # the pool as maximal aligned blocks
            size = base & -base if base else 1 << (cells.bit_length() - 1)
            while base + size > cells:
                size >>= 1
            self._add(base, size)
            base += size

    def copy(self) -> HolderPool:
        out = HolderPool.__new__(HolderPool)
        out.cells, out.free_cells = self.cells, self.free_cells
        out.free = {size: list(bases) for size, bases in self.free.items()}
        return out

    def _add(self, base: int, size: int) -> None:
        insort(self.free.setdefault(size, []), base)
        self.free_cells += size

    def _remove(self, base: int, size: int) -> bool:
        bases = self.free.get(size, [])
        i = bisect_left(bases, base)
        if i == len(bases) or bases[i] != base:
            return False
        del bases[i]
        self.free_cells -= size
        return True

    def take(self, size: int) -> int | None:
        """The base of a free row of ``size`` cells (a power of two), or None."""
        fits = [s for s, bases in self.free.items() if s >= size and bases]
        if not fits:
            return None
        block = min(fits)
        base = self.free[block][0]
        self._remove(base, block)
        while block > size:  # keep the low half, free the high one
            block >>= 1
            self._add(base + block, block)
        return base

    def reserve(self, base: int, size: int) -> bool:
        """Take the row (base, size) if it is aligned, inside the pool and free."""
        if size < 1 or size & (size - 1) or base % size or base + size > self.cells:
            return False
        block = size
        while block <= self.cells:
            start = base - base % block
            if self._remove(start, block):
                while block > size:  # free the halves that do not hold the row
                    block >>= 1
                    other = start + block if base < start + block else start
                    start = start if base < start + block else start + block
                    self._add(other, block)
                return True
            block <<= 1
        return False

    def release(self, base: int, size: int) -> None:
        """Give back the row (base, size), merged with its free buddies."""
        while self._remove(base ^ size, size):
            base = min(base, base ^ size)
            size <<= 1
        self._add(base, size)


# -- the spine's layout ---------------------------------------------------------------------------


class SpineLayout:
    """One spine's view of the fabric's servers: address, its leaf's MAC, its port to that
    leaf; its hot keys' ``valid_ver`` rows (one cell per ordinal). Without ``holder_cells`` in
    the fabric file, slot i's row is ``max_holders`` cells at i x ``max_holders``; with it, each
    key's row comes from a :class:`HolderPool` of that many cells (``rows``: the rows of the
    plan the spine was last given, by key). ``rotation``: the spine's program has the write
    rotation (docs/protocol.md F7: ``set_hot``'s ``rotate`` parameter, the ``done_by``
    register); without it no key of this spine may rotate."""

    def __init__(self, fabric: FabricFile, spine: int, rotation: bool = True) -> None:
        self.fabric = fabric
        self.spine = spine
        self.rotation = rotation
        self.row = fabric.max_holders
        self.total = fabric.total
        # plan.diff's view of the same servers (FabricController.addresses)
        self.addresses: Rack = fabric.shape.addresses()
        self.pool = None if fabric.holder_cells is None else HolderPool(fabric.holder_cells)
        self.rows: dict[bytes, Row] = {}

    def ip(self, server: int) -> int:
        return self.fabric.server_ip(server)

    def mac(self, server: int) -> int:
        return self.fabric.racks[self.fabric.rack_of(server)].leaf_mac

    def port(self, server: int) -> int:
        return self.fabric.spines[self.spine].ports[self.fabric.rack_of(server)]

    def row_of(self, key: bytes, kp: KeyPlan) -> Row | None:
        """``key``'s row in the plan the spine was last given; None for a pooled key of a plan
        it was not given (a batch the spine refused: its recovery adopts the rows it holds)."""
        return (kp.slot * self.row, self.row) if self.pool is None else self.rows.get(key)

    def place(self, new: Plan) -> tuple[dict[bytes, Row], HolderPool | None, dict[bytes, int]]:
        """The rows of ``new``'s keys from :attr:`rows`, the pool after them, and the keys that
        do not fit (their most holders: a row of fewer cells than they have, 0 for none), pure.

        A key keeps its row while its holders fit it (the high halves it no longer needs are
        given back); a new key, or one whose holders outgrow its row, takes a row of its
        holders' size (largest first, then by slot), or a smaller one when the pool has no
        such row, keeping one cell per unused slot for the keys to come (a key that outgrows
        its row and finds no larger one keeps its own). The rows of keys that leave are free
        at once (their entries go first in the batch); the cells a staying key gives back or
        moves from only after every row is placed: its ServermapTable entries may still point
        at them until the make step of this batch (docs/fabric.md "Holders per key")."""
        if self.pool is None:
            rows = {key: (kp.slot * self.row, self.row) for key, kp in new.keys.items()}
            over = {key: self.row for key, kp in new.keys.items() if len(kp.holders) > self.row}
            return rows, None, over
        pool = self.pool.copy()
        rows: dict[bytes, Row] = {}
        later: list[Row] = []
        for key, (base, size) in self.rows.items():
            if key not in new.keys:
                pool.release(base, size)
        for key, (base, size) in self.rows.items():
            kp = new.keys.get(key)
            if kp is None:
                continue
            want = row_cells(len(kp.holders))
            if want <= size:
                rows[key] = (base, want)
                while size > want:
                    size >>= 1
                    later.append((base + size, size))
        pending = sorted(
            (key for key in new.keys if key not in rows),
            key=lambda k: (-row_cells(len(new.keys[k].holders)), new.keys[k].slot),
        )
        waiting = sum(1 for key in pending if key not in self.rows)
        spare = new.slots - len(new.keys)
        over: dict[bytes, int] = {}
        for key in pending:
            kp, old = new.keys[key], self.rows.get(key)
            if old is None:
                waiting -= 1
            size, got = row_cells(len(kp.holders)), None
            while got is None and size >= (1 if old is None else old[1] * 2):
                if pool.free_cells - size >= spare + waiting:
                    got = pool.take(size)
                if got is None:
                    size >>= 1
            if got is not None:
                rows[key] = (got, size)
                if old is not None:
                    later.append(old)
            elif old is not None:
                rows[key] = old
            if key not in rows or rows[key][1] < len(kp.holders):
                over[key] = rows[key][1] if key in rows else 0
        for base, size in later:
            pool.release(base, size)
        return rows, pool, over

    def adopt(self, rows: dict[bytes, Row], pool: HolderPool | None) -> None:
        """The rows of the plan the spine is given now (from :meth:`place` or a recovery)."""
        self.rows = dict(rows) if pool is not None else {}
        if pool is not None:
            self.pool = pool

    def servermap(self, op: EntryOp, slot: int, ordinal: int, server: int, base: int) -> TableEntry:
        params = {
            names.PARAM_VIDX: base + ordinal,
            names.PARAM_IP: self.ip(server),
            names.PARAM_MAC: self.mac(server),
            names.PARAM_PORT: self.port(server),
        }
        match = {names.MATCH_SLOT: slot, names.MATCH_ORDINAL: ordinal}
        return _entry(op, names.SERVERMAP_TABLE, match, names.ACT_SET_SERVER, params)

    def serveroffset(self, op: EntryOp, slot: int, ordinal: int, server: int) -> TableEntry:
        match = {names.MATCH_SLOT: slot, names.MATCH_SERVER_IP: self.ip(server)}
        if op is EntryOp.DELETE:
            return _entry(op, names.SERVEROFFSET_TABLE, match)
        params = {names.PARAM_OFFSET: ordinal, names.PARAM_PORT: self.port(server)}
        return _entry(op, names.SERVEROFFSET_TABLE, match, names.ACT_SET_OFFSET, params)

    def group(self, group: int, kp: KeyPlan) -> MulticastGroupSet:
        """The origin's leaf port with rid 0, each replica's leaf port with its server's rid."""
        members = [(self.port(kp.origin), 0)]
        members += [(self.port(s), names.spine_rid(s)) for s in kp.replicas]
        return MulticastGroupSet(group, tuple(members))


def fit_pools(
    previous: Sequence[Plan], plans: Sequence[Plan], layouts: Sequence[SpineLayout]
) -> tuple[list[Plan], int]:
    """``plans`` with every key's holders cut to the row its spine's pool can give it
    (:meth:`SpineLayout.place`; a key that gets no cell is not made this period), slots kept;
    and how many keys were cut."""
    out, cut = [], 0
    for before, plan, layout in zip(previous, plans, layouts, strict=True):
        counted: set[bytes] = set()
        for _ in range(8):  # each round cuts some key's holders: a few rounds settle
            over = layout.place(plan)[2]
            if not over:
                break
            counted |= set(over)
            held = sorted(plan.keys.items(), key=lambda item: item[1].slot)
            plan = build_plan(
                [(key, kp.holders[: over.get(key, len(kp.holders))]) for key, kp in held
                 if over.get(key, 1)],
                before,
                plan.servers,
                plan.slots,
                {key for key, kp in held if kp.rotate},
            )  # fmt: skip
        else:
            plan = Plan(before.servers, before.slots, dict(before.keys))
        cut += len(counted)
        out.append(plan)
    return out, cut


def spine_batch(
    ops: Sequence[Operation], old: Plan, new: Plan, layout: SpineLayout
) -> list[Operation]:
    """``plan.diff(old, new, layout.addresses)`` in the spine's layout, same order:

    1. ServermapTable: vidx = the key's row base + ordinal, the holder's leaf MAC and port;
       KeyindexTable's base = the row's base; a new key's ``valid_ver`` reset covers its row
       (rows from :meth:`SpineLayout.place`, adopted by the layout: a plan that does not fit
       them is refused, ValueError; :func:`fit_pools` cuts it first);
    1a. a key that moves to another row (its holders outgrew its pooled row) has the new row
       zeroed before its KeyindexTable entry names it, then, with its break, the
       ServermapTable entries of its unchanged ordinals point at their new (zeroed) cells: its
       Gets go to the origin until its replicas, all pushed again, confirm there;
    2. ServeroffsetTable (slot, holder address) -> (ordinal, leaf port) with each ServermapTable
       entry; a staying key whose holder at some ordinal changes loses, in its break step, the
       ServeroffsetTable entries of those ordinals' old holders and then their ``valid_ver``
       cells (a cell belongs to an ordinal: a confirm of the old holder must not validate the
       new one); a staying replica moved to another ordinal is pushed again (its cell restarts
       at 0);
    3. multicast groups: (holder's leaf port, 0 for the origin, ``names.spine_rid`` else);
    4. with ``layout.rotation``: every HotkeyTable ``set_hot`` gets its ``rotate`` parameter
       (the key's flag in ``new``), followed by the slot's ``rotated`` cell set to that flag
       (a reply before the key's next request is judged by it), and a new key's slot reset
       zeroes its ``done_by`` cell.
    A plan that rotates a key on a spine without the rotation is refused (ValueError).
    """
    if not layout.rotation and any(kp.rotate for kp in new.keys.values()):
        raise ValueError(f"spine {layout.spine} has no write rotation: no key of it may rotate")
    total = layout.total
    rows, pool, over = layout.place(new)
    if over:
        raise ValueError(f"spine {layout.spine}: {len(over)} keys do not fit its holder pool")
    before = {key: layout.row_of(key, kp) for key, kp in old.keys.items()}
    moved = {  # a row not known: as a moved one (a new row zeroed, every replica pushed)
        key
        for key, row in before.items()
        if key in new.keys and (row is None or rows[key][0] != row[0])
    }
    at_old = {kp.slot: key for key, kp in old.keys.items()}
    at_new = {kp.slot: key for key, kp in new.keys.items()}
    pushed = {op.key for op in ops if isinstance(op, PushRequest)}
    repush: list[Operation] = []
    out: list[Operation] = []
    for op in ops:
        if isinstance(op, RegisterWrite) and op.name == names.REG_VALID_VER:
            if op.count == total:  # a new key's slot reset
                slot = op.index // total
                base, cells = rows[at_new[slot]]
                out.append(RegisterWrite(names.REG_VALID_VER, base, 0, cells))
                if layout.rotation:
                    out.append(RegisterWrite(names.REG_DONE_BY, slot, 0))
            continue  # single cells of a changing key: at its rr reset below, by ordinal
        if isinstance(op, RegisterWrite) and op.name == names.REG_RR and op.count == 1:
            key = at_new.get(op.index)
            if (
                key is not None
                and key in old.keys
                and old.keys[key].holders != new.keys[key].holders
            ):
                shifted = _ordinal_break(old.keys[key], new.keys[key], layout, before[key], out)
                if key in moved:
                    kp = new.keys[key]
                    out += [
                        layout.servermap(EntryOp.MODIFY, kp.slot, o, h, rows[key][0])
                        for o, h in enumerate(old.keys[key].holders)
                        if o < len(kp.holders) and kp.holders[o] == h
                    ]
                if (shifted or key in moved) and key not in pushed:
                    kp = new.keys[key]
                    repush.append(PushRequest(key, kp.origin, kp.replicas))
            out.append(op)
            continue
        if (
            isinstance(op, TableEntry)
            and op.table == names.KEYINDEX_TABLE
            and op.op is not EntryOp.DELETE
        ):
            params = dict(op.params)
            key = at_new[params[names.PARAM_SLOT]]
            base, cells = rows[key]
            if key in moved:  # its new row zeroed before anything names it
                out.append(RegisterWrite(names.REG_VALID_VER, base, 0, cells))
            params[names.PARAM_BASE] = base
            out.append(TableEntry(op.op, op.table, op.match, op.action, tuple(params.items())))
            continue
        if isinstance(op, TableEntry) and op.table == names.SERVERMAP_TABLE:
            match = op.match_dict()
            slot, ordinal = int(match[names.MATCH_SLOT]), int(match[names.MATCH_ORDINAL])
            if op.op is EntryOp.DELETE:
                out.append(op)
                key = at_old.get(slot)
                if key is not None and (key not in new.keys or new.keys[key].slot != slot):
                    out.append(
                        layout.serveroffset(
                            EntryOp.DELETE, slot, ordinal, old.keys[key].holders[ordinal]
                        )
                    )
                continue
            key = at_new[slot]
            server = new.keys[key].holders[ordinal]
            out.append(layout.servermap(op.op, slot, ordinal, server, rows[key][0]))
            out.append(layout.serveroffset(EntryOp.ADD, slot, ordinal, server))
            continue
        if isinstance(op, MulticastGroupSet):
            out.append(layout.group(op.group, new.keys[at_new[names.slot_of_group(op.group)]]))
            continue
        if (
            isinstance(op, TableEntry)
            and op.table == names.HOTKEY_TABLE
            and op.op is not EntryOp.DELETE
            and layout.rotation
        ):
            kp = new.keys[_key_bytes(op.match_dict()[names.MATCH_KEY])]  # type: ignore[arg-type]
            params = (*op.params, (names.PARAM_ROTATE, int(kp.rotate)))
            out.append(TableEntry(op.op, op.table, op.match, op.action, params))
            # the slot's `rotated` cell takes the entry's flag at once: a reply, CONFIRM or SYNC
            # reaching the spine before the key's next request is judged by the key's flag, not
            # by a reused slot's previous key's or the flag from before a change in the freeze
            out.append(RegisterWrite(names.REG_ROTATED, kp.slot, int(kp.rotate)))
            continue
        if isinstance(op, RemoveRequest) and repush:
            out += repush
            repush = []
        out.append(op)
    layout.adopt(rows, pool)
    return out + repush


def _ordinal_break(
    before: KeyPlan, after: KeyPlan, layout: SpineLayout, row: Row | None, out: list[Operation]
) -> bool:
    """The break step of a staying key whose holders change (see :func:`spine_batch`), appended
    to ``out`` (``row``: its row before the change; a cell past it is another key's, and a key
    that moves has its whole new row zeroed); whether a holder that stays moved to another
    ordinal."""
    old = dict(enumerate(before.holders))
    new = dict(enumerate(after.holders))
    changed = sorted(o for o in set(old) | set(new) if old.get(o) != new.get(o))
    slot = after.slot
    for o in changed:
        if o in old:
            out.append(layout.serveroffset(EntryOp.DELETE, slot, o, old[o]))
    for o in changed:
        if row is not None and o < row[1]:
            out.append(RegisterWrite(names.REG_VALID_VER, row[0] + o, 0))
    return any(new[o] in before.holders for o in changed if o in new)


def spine_diff(old: Plan, new: Plan, layout: SpineLayout, floor: int = 0) -> list[Operation]:
    """The ordered operations from ``old`` to ``new`` on a spine."""
    return spine_batch(diff(old, new, layout.addresses, floor), old, new, layout)


def implied_spine_entries(plan: Plan, layout: SpineLayout, floor: int) -> list[Operation]:
    """The entries and groups a recovered ``plan`` implies besides its HotkeyTable entries."""
    return [
        op
        for op in spine_diff(Plan(plan.servers, plan.slots), plan, layout, floor)
        if isinstance(op, MulticastGroupSet)
        or (isinstance(op, TableEntry) and op.table != names.HOTKEY_TABLE)
    ]


def spine_plan(
    hot_entries: Mapping[Match, HeldEntry],
    servermap: Mapping[Match, HeldEntry],
    layout: SpineLayout,
    slots: int,
) -> tuple[Plan, list[bytes]]:
    """The hot keys a spine holds (its HotkeyTable and ServermapTable entries) as a plan, and the
    HotkeyTable keys that are no whole hot key: an ordinal missing or naming no server of the
    fabric in this spine's layout (vidx, leaf MAC and port), a holder twice, more holders than
    ``max_holders``, a slot out of range or taken by an earlier key; with a holder pool, also a
    row (base: ordinal 0's vidx; cells: the power of two its holders need) that is not aligned,
    not inside the pool or overlaps an earlier key's. The layout adopts the rows of the plan."""
    server_of_ip = layout.fabric.server_of_ip()
    entries = [(dict(e.raw_match), e.params) for e in servermap.values()]
    bases = {
        int(m[names.MATCH_SLOT]): int(params.get(names.PARAM_VIDX, -1))
        for m, params in entries
        if int(m[names.MATCH_ORDINAL]) == 0
    }
    if layout.pool is None:
        bases = {slot: slot * layout.row for slot in bases}
    ordinals: dict[tuple[int, int], int] = {}
    for match, params in entries:
        slot, ordinal = int(match[names.MATCH_SLOT]), int(match[names.MATCH_ORDINAL])
        server = server_of_ip.get(params.get(names.PARAM_IP, -1), -1)
        wanted = layout.servermap(EntryOp.ADD, slot, ordinal, max(server, 0), bases.get(slot, 0))
        if server >= 0 and (slot not in bases or wanted.param_dict() != params):
            server = -1
        ordinals[(slot, ordinal)] = server
    hot = [
        (
            _key_bytes(dict(e.raw_match)[names.MATCH_KEY]),
            e.params.get(names.PARAM_SLOT, -1),
            e.params.get(names.PARAM_HOLDERS, 0),
        )
        for e in hot_entries.values()
    ]
    rotated = {
        _key_bytes(dict(e.raw_match)[names.MATCH_KEY])
        for e in hot_entries.values()
        if layout.rotation and e.params.get(names.PARAM_ROTATE, 0)
    }
    plan, broken = assemble(hot, ordinals, layout.total, slots, layout.row, rotated)
    if layout.pool is None:
        layout.adopt({}, None)
        return plan, broken
    pool = HolderPool(layout.pool.cells)
    rows: dict[bytes, Row] = {}
    for key, kp in sorted(plan.keys.items(), key=lambda item: item[1].slot):
        row = (bases[kp.slot], row_cells(len(kp.holders)))
        if pool.reserve(*row):
            rows[key] = row
        else:
            broken.append(key)
            del plan.keys[key]
    layout.adopt(rows, pool)
    return plan, broken


def steering_of(held: Mapping[Match, HeldEntry], fabric: FabricFile, rack: int) -> dict[bytes, int]:
    """The fabric-hot keys leaf ``rack`` steers, by spine (entries that name no spine's port and
    MAC are left out: recovery replaces them)."""
    side = fabric.racks[rack]
    out: dict[bytes, int] = {}
    for entry in held.values():
        key = _key_bytes(dict(entry.raw_match)[names.MATCH_KEY])
        for s, spine in enumerate(fabric.spines):
            if entry.params == {names.PARAM_PORT: side.uplinks[s], names.PARAM_DMAC: spine.mac}:
                out[key] = s
    return out


def _key_bytes(value: int | bytes) -> bytes:
    return value if isinstance(value, bytes) else int(value).to_bytes(p.KEY_LEN, "big")
