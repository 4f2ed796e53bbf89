"""What the fabric controller writes to the spines and the leaves, pure (docs/fabric.md "Spine
program", "Leaf program", "Runtime"): :mod:`kvswitch.controller.fabric` plans each spine as a
rack of the fabric's servers (``plan.diff`` over ``FabricShape.addresses()``); this module turns
those operations into the spine's layout (the four translations of docs/fabric.md "How
controller/fabric.py's plan maps onto it"), and builds the static entries, the leaves' steering
and what a restarted controller reads back. :mod:`kvswitch.controller.fabric_runtime` applies
them."""

from __future__ import annotations

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


# -- the spine's layout ---------------------------------------------------------------------------


class SpineLayout:
    """One spine's view of the fabric's servers: address, its leaf's MAC, its port to that
    leaf; ``valid_ver`` rows of ``max_holders`` cells (one per ordinal). ``rotation``: the
    spine's program has the write rotation (docs/protocol.md F7: ``set_hot``'s ``rotate``
    parameter, the ``done_by`` register); without it no key of this spine may rotate."""

    def __init__(self, fabric: FabricFile, spine: int, rotation: bool = True) -> None:
        self.fabric = fabric
        self.spine = spine
        self.rotation = rotation
        self.row = fabric.max_holders
        self.total = fabric.total
        # plan.diff's view of the same servers (FabricController.addresses)
        self.addresses: Rack = fabric.shape.addresses()

    def ip(self, server: int) -> int:
        return self.fabric.server_ip(server)

    def mac(self, server: int) -> int:
        return self.fabric.racks[self.fabric.rack_of(server)].leaf_mac

    def port(self, server: int) -> int:
        return self.fabric.spines[self.spine].ports[self.fabric.rack_of(server)]

    def servermap(self, op: EntryOp, slot: int, ordinal: int, server: int) -> TableEntry:
        params = {
            names.PARAM_VIDX: slot * self.row + ordinal,
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


def spine_batch(
    ops: Sequence[Operation], old: Plan, new: Plan, layout: SpineLayout
) -> list[Operation]:
    """``plan.diff(old, new, layout.addresses)`` in the spine's layout, same order:

    1. ServermapTable: vidx = slot x ``max_holders`` + ordinal, the holder's leaf MAC and port;
       KeyindexTable's base = slot x ``max_holders``; a new slot's ``valid_ver`` reset covers its
       ``max_holders`` cells;
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
    total, row = layout.total, layout.row
    at_old = {kp.slot: key for key, kp in old.keys.items()}
    at_new = {kp.slot: key for key, kp in new.keys.items()}
    pushed = {op.key for op in ops if isinstance(op, PushRequest)}
    repush: list[Operation] = []
    out: list[Operation] = []
    for op in ops:
        if isinstance(op, RegisterWrite) and op.name == names.REG_VALID_VER:
            if op.count == total:  # a new key's slot reset
                slot = op.index // total
                out.append(RegisterWrite(names.REG_VALID_VER, slot * row, 0, row))
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
                moved = _ordinal_break(old.keys[key], new.keys[key], layout, out)
                if moved and key not in pushed:
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
            params[names.PARAM_BASE] = params[names.PARAM_SLOT] * row
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
            server = new.keys[at_new[slot]].holders[ordinal]
            out.append(layout.servermap(op.op, slot, ordinal, server))
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
    return out + repush


def _ordinal_break(
    before: KeyPlan, after: KeyPlan, layout: SpineLayout, out: list[Operation]
) -> bool:
    """The break step of a staying key whose holders change (see :func:`spine_batch`), appended
    to ``out``; whether a holder that stays moved to another ordinal."""
    old = dict(enumerate(before.holders))
    new = dict(enumerate(after.holders))
    changed = sorted(o for o in set(old) | set(new) if old.get(o) != new.get(o))
    slot = after.slot
    for o in changed:
        if o in old:
            out.append(layout.serveroffset(EntryOp.DELETE, slot, o, old[o]))
    for o in changed:
        out.append(RegisterWrite(names.REG_VALID_VER, slot * layout.row + o, 0))
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
    ``max_holders``, a slot out of range or taken by an earlier key."""
    server_of_ip = layout.fabric.server_of_ip()
    ordinals: dict[tuple[int, int], int] = {}
    for entry in servermap.values():
        match = dict(entry.raw_match)
        slot, ordinal = int(match[names.MATCH_SLOT]), int(match[names.MATCH_ORDINAL])
        server = server_of_ip.get(entry.params.get(names.PARAM_IP, -1), -1)
        if (
            server >= 0
            and layout.servermap(EntryOp.ADD, slot, ordinal, server).param_dict() != entry.params
        ):
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
    return assemble(hot, ordinals, layout.total, slots, layout.row, rotated)


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
