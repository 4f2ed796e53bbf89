"""Plan building and the ordered diff (make-before-use, break-before-delete)."""

from __future__ import annotations

import pytest

from kvswitch.controller import names
from kvswitch.controller.ops import (
    EntryOp,
    MulticastGroupDelete,
    MulticastGroupSet,
    OpCounts,
    PushRequest,
    RegisterWrite,
    RemoveRequest,
    TableEntry,
)
from kvswitch.controller.plan import Plan, build_plan, diff, rack_setup
from kvswitch.controller.rack import Rack

M = 8
RACK = Rack.synthetic(M)
A, B, C = b"a".ljust(16, b"\0"), b"b".ljust(16, b"\0"), b"c".ljust(16, b"\0")


def plan(holders: dict[bytes, tuple[int, ...]], previous: Plan | None = None) -> Plan:
    return build_plan(list(holders.items()), previous, M, 16)


def position(ops: list, pred) -> int:
    return next(i for i, op in enumerate(ops) if pred(op))


def is_entry(table: str, op: EntryOp | None = None):
    return lambda x: isinstance(x, TableEntry) and x.table == table and (op is None or x.op is op)


def test_slots_are_kept_and_reused() -> None:
    p1 = plan({A: (0,), B: (1,)})
    p2 = plan({B: (1,), C: (2,)}, p1)
    assert p2.keys[B].slot == p1.keys[B].slot
    assert p2.keys[C].slot == p1.keys[A].slot  # the freed slot, lowest first
    with pytest.raises(ValueError):
        plan({A: (0, 0)})
    with pytest.raises(ValueError):
        build_plan([(bytes([i]), (0,)) for i in range(17)], None, M, 16)


def test_figure5_valid_index_is_base_plus_offset() -> None:
    p = plan({A: (5, 1, 3)})
    ops = diff(Plan(M, 16), p, RACK)
    slot = p.keys[A].slot
    keyindex = next(op for op in ops if is_entry(names.KEYINDEX_TABLE)(op))
    base = keyindex.param_dict()[names.PARAM_BASE]
    assert base == slot * M
    smap = {
        op.match_dict()[names.MATCH_ORDINAL]: op.param_dict()
        for op in ops
        if is_entry(names.SERVERMAP_TABLE)(op)
    }
    for ordinal, server in enumerate((5, 1, 3)):
        assert smap[ordinal][names.PARAM_VIDX] == base + server  # offset(server) = server
        assert smap[ordinal][names.PARAM_IP] == RACK.servers[server].ip
        assert smap[ordinal][names.PARAM_PORT] == RACK.servers[server].port


def test_new_key_make_before_use() -> None:
    p = plan({A: (2, 4, 6)})
    ops = diff(Plan(M, 16), p, RACK)
    reset = position(ops, lambda x: isinstance(x, RegisterWrite) and x.name == names.REG_VALID_VER)
    hot = position(ops, is_entry(names.HOTKEY_TABLE, EntryOp.ADD))
    group = position(ops, lambda x: isinstance(x, MulticastGroupSet))
    push = position(ops, lambda x: isinstance(x, PushRequest))
    assert reset < group < hot < push
    assert hot == max(i for i, op in enumerate(ops) if isinstance(op, TableEntry))
    members = ops[group].members
    assert members == (
        (RACK.servers[2].port, 0),
        (RACK.servers[4].port, 1),
        (RACK.servers[6].port, 2),
    )
    assert ops[push] == PushRequest(A, 2, (4, 6))
    hot_op = ops[hot]
    assert hot_op.param_dict() == {names.PARAM_SLOT: p.keys[A].slot, names.PARAM_HOLDERS: 3}


def test_leaving_key_break_before_delete() -> None:
    p1 = plan({A: (2, 4, 6)})
    ops = diff(p1, Plan(M, 16), RACK)
    assert ops[0] == TableEntry(EntryOp.DELETE, names.HOTKEY_TABLE, ((names.MATCH_KEY, A),))
    assert isinstance(ops[-1], RemoveRequest) and ops[-1].servers == (4, 6)
    assert any(isinstance(op, MulticastGroupDelete) for op in ops)
    assert all(op.op is EntryOp.DELETE for op in ops if isinstance(op, TableEntry))


def test_changed_replicas_invalidate_first_and_push_everyone() -> None:
    p1 = plan({A: (0, 1, 2)})
    p2 = plan({A: (0, 1, 5, 6)}, p1)
    ops = diff(p1, p2, RACK, floor=41)
    base = p1.keys[A].slot * M
    zeroed = [
        op.index for op in ops if isinstance(op, RegisterWrite) and op.name == names.REG_VALID_VER
    ]
    assert sorted(zeroed) == [base + 2, base + 5, base + 6]  # leaving and new, not the staying one
    # the floor comes first (no confirm of an earlier membership may count after the reset),
    # then the resets, then every other entry
    floor = position(ops, is_entry(names.KEYINDEX_TABLE, EntryOp.MODIFY))
    assert ops[floor].param_dict()[names.PARAM_FLOOR] == 41
    first_other = position(
        ops, lambda x: isinstance(x, TableEntry) and x.table != names.KEYINDEX_TABLE
    )
    assert all(
        floor < i < first_other
        for i, op in enumerate(ops)
        if isinstance(op, RegisterWrite) and op.name == names.REG_VALID_VER
    )
    assert PushRequest(A, 0, (1, 5, 6)) in ops
    assert ops[-1] == RemoveRequest(A, (2,))
    # growing: the ServermapTable entries exist before HotkeyTable says n = 4
    smap = position(ops, is_entry(names.SERVERMAP_TABLE, EntryOp.ADD))
    hot = position(ops, is_entry(names.HOTKEY_TABLE, EntryOp.MODIFY))
    assert smap < hot


def test_shrinking_lowers_n_before_deleting_ordinals() -> None:
    p1 = plan({A: (0, 1, 2, 3)})
    p2 = plan({A: (0, 1)}, p1)
    ops = diff(p1, p2, RACK)
    hot = position(ops, is_entry(names.HOTKEY_TABLE, EntryOp.MODIFY))
    delete = position(ops, is_entry(names.SERVERMAP_TABLE, EntryOp.DELETE))
    assert hot < delete
    assert not any(isinstance(op, PushRequest) for op in ops)
    assert ops[-1] == RemoveRequest(A, (2, 3))


def test_unchanged_plan_is_a_no_op_and_counts() -> None:
    p1 = plan({A: (0, 1), B: (3,)})
    assert diff(p1, plan({A: (0, 1), B: (3,)}, p1), RACK) == []
    counts = OpCounts.of(diff(Plan(M, 16), p1, RACK))
    assert counts.by_table[names.SERVERMAP_TABLE] == 3
    assert counts.multicast == 1 and counts.agent == 1


def test_rack_setup_installs_every_server() -> None:
    ops = rack_setup(RACK, epoch=3)
    assert ops[0] == RegisterWrite(names.REG_EPOCH, 0, 3)
    tables = [op.table for op in ops if isinstance(op, TableEntry)]
    for table in (names.SERVEROFFSET_TABLE, names.PORTTOSERVER_TABLE, names.LOADCOUNT_TABLE):
        assert tables.count(table) == M
    with pytest.raises(ValueError):
        diff(Plan(M, 16), Plan(M, 16), Rack.synthetic(4))
