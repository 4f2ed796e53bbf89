"""What the controller writes at start-up (docs/controller_runtime.md "Start-up"), pure: the
epoch, the rack's static entries, the entries a recovered plan implies, and which agents' copies
go. The runtime (:meth:`kvswitch.controller.runtime.Runtime.start`) reads the switch and the
agents and applies what these return."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from kvswitch.controller import names
from kvswitch.controller.ops import (
    EntryOp,
    MulticastGroupSet,
    Operation,
    RegisterWrite,
    TableEntry,
)
from kvswitch.controller.plan import KeyPlan, Plan, diff, rack_setup
from kvswitch.controller.rack import Rack
from kvswitch.controller.rackfile import RackFile

EPOCH_MAX = 0xFFFF  # the epoch register is bit<16>; 0 is never used
#: The tables whose entries follow the hot keys (recovery deletes those of no hot key).
DYNAMIC_TABLES = (names.KEYINDEX_TABLE, names.SERVERMAP_TABLE, names.MULTIGROUP_TABLE)


#: A fabric's spines take their epochs from here up and its leaves' rack controllers below it,
#: so that a version one serializer stamped never carries another's epoch (docs/fabric.md
#: "Runtime"): a spine counts an origin's report only in its own epoch (rule 2), and a leaf's
#: version of a key that has just moved to a spine, in an origin's reply steered up, raised the
#: spine's origin_ver above every version it had stamped, so that no replica was ever valid.
SPINE_EPOCH_BASE = 0x8000


def next_epoch(*seen: int, low: int = 1, high: int = EPOCH_MAX) -> int:
    """One more than the largest epoch seen within [low, high], wrapping from high to low (the
    epochs seen outside it do not count)."""
    top = max((e for e in seen if low <= e <= high), default=low - 1)
    return top + 1 if top < high else low


def forwarding_ops(rack: RackFile) -> list[Operation]:
    """An ``ipv4_lpm`` /32 per host of the rack: its port, its MAC, the switch's MAC as source."""
    return [
        TableEntry(
            EntryOp.ADD,
            "ipv4_lpm",
            (("dst_addr", h.ip),),
            "set_next_hop",
            (("port", h.port), ("dmac", h.mac), ("smac", rack.switch_mac)),
        )
        for h in rack.servers + rack.clients
    ]


def trust_ops(rack: RackFile) -> list[Operation]:
    """A ``HostportTable`` /32 per host of the rack (p4src/features/trust.p4): the port its source
    address may arrive on, and whether it is a server (only servers may send replies, PUSH, REMOVE,
    CONFIRM, SYNC, SYNC_DONE)."""
    return [
        TableEntry(
            EntryOp.ADD,
            names.HOSTPORT_TABLE,
            ((names.MATCH_SRC, h.ip),),
            names.ACT_SET_SOURCE,
            ((names.PARAM_PORT, h.port), (names.PARAM_SERVER, int(server))),
        )
        for server, hosts in ((True, rack.servers), (False, rack.clients))
        for h in hosts
    ]


def static_ops(
    rack: RackFile, addresses: Rack, epoch: int, liveness: bool
) -> tuple[list[Operation], list[Operation]]:
    """The rack's static state: (table entries and groups, to reconcile with what the switch
    holds; register writes (the epoch)). Without liveness.p4 its tables are left out."""
    ops = forwarding_ops(rack) + trust_ops(rack) + rack_setup(addresses, epoch)
    if not liveness:
        ops = [op for op in ops if not _liveness_op(op)]
    return [op for op in ops if _switch_op(op)], [op for op in ops if not _switch_op(op)]


def broken_entries(broken: list[bytes]) -> list[Operation]:
    """Deletes of HotkeyTable entries that are no whole hot key (their Gets go to the origin)."""
    return [TableEntry(EntryOp.DELETE, names.HOTKEY_TABLE, ((names.MATCH_KEY, k),)) for k in broken]


def implied_entries(plan: Plan, addresses: Rack, floor: int) -> list[Operation]:
    """The entries and groups a recovered ``plan`` implies besides its HotkeyTable entries
    (KeyindexTable with ``floor``, ServermapTable, MultigroupTable, multicast groups)."""
    empty = Plan(plan.servers, plan.slots)
    return [
        op
        for op in diff(empty, plan, addresses, floor)
        if isinstance(op, MulticastGroupSet)
        or (isinstance(op, TableEntry) and op.table != names.HOTKEY_TABLE)
    ]


def stale_copies(
    plan: Plan, origin_of: Callable[[bytes], int], holdings: Mapping[int, Mapping[bytes, object]]
) -> list[tuple[int, bytes]]:
    """(server, key) of every copy an agent holds of a key it neither originates nor replicates
    in ``plan``."""
    return [
        (server, key)
        for server, keys in holdings.items()
        for key in keys
        if origin_of(key) != server
        and ((kp := plan.keys.get(key)) is None or server not in kp.holders)
    ]


def missing_copies(
    plan: Mapping[bytes, KeyPlan], servers: int, held: Mapping[int, Mapping[bytes, object]]
) -> list[Operation]:
    """``valid_ver`` zeroed for each replica whose agent answered but holds no live copy of its
    key (it restarted while no controller watched)."""
    return [
        RegisterWrite(names.REG_VALID_VER, names.valid_base(kp.slot, servers) + s, 0)
        for key, kp in plan.items()
        for s in kp.replicas
        if s in held and key not in held[s]
    ]


def _liveness_op(op: Operation) -> bool:
    return isinstance(op, TableEntry) and op.table in (names.REPLYCOUNT_TABLE, names.DOWN_TABLE)


def _switch_op(op: Operation) -> bool:
    return isinstance(op, TableEntry | MulticastGroupSet)
