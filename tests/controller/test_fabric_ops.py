"""controller/fabric_ops.py, pure: plan.diff's operations in a spine's layout (a cell per
ordinal, ServeroffsetTable per (slot, holder), groups by replication id), the leaves' steering,
the MAX_HOLDERS cut, the read-back of a spine's plan, the holder pool's rows, and the fabric
file's errors."""

from __future__ import annotations

import re

import pytest

from kvswitch import protocol as p
from kvswitch.controller import names
from kvswitch.controller.fabric_ops import (
    HolderPool,
    SpineLayout,
    cap_plans,
    fit_pools,
    implied_spine_entries,
    spine_diff,
    spine_plan,
    steering_diff,
)
from kvswitch.controller.fabricfile import FabricFile, FabricFileError
from kvswitch.controller.ops import (
    EntryOp,
    HeldEntry,
    MulticastGroupSet,
    PushRequest,
    RegisterWrite,
    TableEntry,
)
from kvswitch.controller.plan import KeyPlan, Plan

KEY = p.pad_key(b"k")
ROW = 4


def fabric_dict() -> dict:
    def ends(name: str, port: int) -> dict:
        return {"name": name, "p4runtime": f"127.0.0.1:{port}", "thrift": f"127.0.0.1:{port + 1}"}

    return {
        "k": 8,
        "max_holders": ROW,
        "spines": [
            {**ends("sp1", 9000), "mac": "02:00:00:00:f0:01", "ports": [1, 2, 3]},
            {**ends("sp2", 9010), "mac": "02:00:00:00:f0:02", "ports": [11, 12, 13]},
        ],
        "racks": [
            {
                **ends(f"leaf{r + 1}", 9100 + 10 * r),
                "leaf_mac": f"02:00:00:00:{r + 1:02x}:fe",
                "subnet": f"10.{r + 1}.0.0/16",
                "uplinks": [5, 6],
                "servers": [f"10.{r + 1}.0.1", f"10.{r + 1}.0.2"],
            }
            for r in range(3)
        ],
    }


FABRIC = FabricFile.parse(fabric_dict())
LAYOUT = SpineLayout(FABRIC, 1)  # the second spine: its ports 11..13


def plan(holders: tuple[int, ...] | None, slot: int = 2, rotate: bool = False) -> Plan:
    out = Plan(FABRIC.total, 8)
    if holders is not None:
        out.keys[KEY] = KeyPlan(slot, holders, rotate)
    return out


def entries(ops, table: str) -> list[TableEntry]:
    return [op for op in ops if isinstance(op, TableEntry) and op.table == table]


def test_a_new_key_in_the_spines_layout() -> None:
    ops = spine_diff(plan(None), plan((0, 2, 5)), LAYOUT, floor=9)
    [reset] = [op for op in ops if isinstance(op, RegisterWrite) and op.name == names.REG_VALID_VER]
    assert (reset.index, reset.count) == (2 * ROW, ROW)  # the slot's MAX_HOLDERS cells
    [keyindex] = entries(ops, names.KEYINDEX_TABLE)
    assert keyindex.param_dict() == {"slot": 2, "base": 2 * ROW, "floor": 9}
    smap = {e.match_dict()["ordinal"]: e.param_dict() for e in entries(ops, names.SERVERMAP_TABLE)}
    assert smap == {
        o: {"vidx": 2 * ROW + o, "ip": FABRIC.server_ip(s), "mac": mac, "port": port}
        for o, s, mac, port in (
            (0, 0, 0x0200000001FE, 11),
            (1, 2, 0x0200000002FE, 12),
            (2, 5, 0x0200000003FE, 13),
        )
    }
    offsets = {
        e.match_dict()["server_ip"]: e.param_dict() for e in entries(ops, names.SERVEROFFSET_TABLE)
    }
    assert offsets == {
        FABRIC.server_ip(0): {"offset": 0, "port": 11},
        FABRIC.server_ip(2): {"offset": 1, "port": 12},
        FABRIC.server_ip(5): {"offset": 2, "port": 13},
    }
    [group] = [op for op in ops if isinstance(op, MulticastGroupSet)]
    assert group == MulticastGroupSet(3, ((11, 0), (12, names.spine_rid(2)), (13, 6)))
    # HotkeyTable last, then its slot's `rotated` cell (a reused slot's flag), then the push
    assert entries(ops, names.HOTKEY_TABLE) == [ops[-3]]
    assert ops[-2] == RegisterWrite(names.REG_ROTATED, 2, 0)
    assert ops[-1] == PushRequest(KEY, 0, (2, 5))


def test_a_holder_leaving_frees_its_ordinal_before_anyone_takes_it() -> None:
    """(0, 2, 4) -> (0, 4): server 4 moves from ordinal 2 to 1. Before any table names it at
    ordinal 1, the ServeroffsetTable entries of the old holders of ordinals 1 and 2 are gone
    and both cells are zeroed (server 2's late CONFIRM must not validate server 4), and server
    4 is pushed again (its cell starts at 0)."""
    ops = spine_diff(plan((0, 2, 4)), plan((0, 4)), LAYOUT, floor=5)
    ip2, ip4 = FABRIC.server_ip(2), FABRIC.server_ip(4)
    deletes = [
        i
        for i, op in enumerate(ops)
        if isinstance(op, TableEntry)
        and op.table == names.SERVEROFFSET_TABLE
        and op.op is EntryOp.DELETE
    ]
    zeros = [
        i
        for i, op in enumerate(ops)
        if isinstance(op, RegisterWrite) and op.name == names.REG_VALID_VER
    ]
    assert [ops[i].match_dict()["server_ip"] for i in deletes] == [ip2, ip4]
    assert [ops[i].index for i in zeros] == [2 * ROW + 1, 2 * ROW + 2]
    [moved] = [
        i
        for i, op in enumerate(ops)
        if isinstance(op, TableEntry)
        and op.table == names.SERVERMAP_TABLE
        and op.op is EntryOp.MODIFY
    ]
    assert max(deletes + zeros) < moved
    assert ops[moved].param_dict()["vidx"] == 2 * ROW + 1 and ops[moved].param_dict()["ip"] == ip4
    [readd] = [
        op
        for op in entries(ops, names.SERVEROFFSET_TABLE)
        if op.op is EntryOp.ADD and op.match_dict()["server_ip"] == ip4
    ]
    assert readd.param_dict() == {"offset": 1, "port": 13}
    assert PushRequest(KEY, 0, (4,)) in ops


def test_a_leaving_key_loses_its_serveroffset_entries() -> None:
    ops = spine_diff(plan((0, 3)), plan(None), LAYOUT)
    assert ops[0] == TableEntry(EntryOp.DELETE, names.HOTKEY_TABLE, ((names.MATCH_KEY, KEY),))
    gone = {e.match_dict()["server_ip"] for e in entries(ops, names.SERVEROFFSET_TABLE)}
    assert gone == {FABRIC.server_ip(0), FABRIC.server_ip(3)}


def test_the_cut_to_max_holders_keeps_the_origin_and_the_slot() -> None:
    before = plan((0, 2), slot=5)
    wide = plan((0, 2, 3, 4, 5, 1), slot=5)
    [cut], count = cap_plans([before], [wide], ROW)
    assert count == 1 and cut.keys[KEY] == KeyPlan(5, (0, 2, 3, 4))
    [same], count = cap_plans([before], [plan((0, 2, 3), slot=5)], ROW)
    assert count == 0 and same.keys[KEY].holders == (0, 2, 3)


def held(ops) -> dict:
    return {
        tuple(sorted(op.match)): HeldEntry(op.action, op.param_dict(), op.match)
        for op in ops
        if isinstance(op, TableEntry)
    }


def test_a_spines_set_hot_carries_the_rotation_flag_and_a_flag_change_is_a_modify() -> None:
    """docs/protocol.md F7: a spine's HotkeyTable ``set_hot(slot, n, rotate)``; a new key's
    slot reset zeroes its ``done_by`` cell; a change of the flag alone is a MODIFY of the entry
    and the slot's ``rotated`` cell set to the new flag right after it (no other register, no
    push); a new key's entry is followed by its cell too (a reused slot keeps no flag of its
    previous key); a spine program without the rotation gets two parameters and refuses a plan
    that rotates."""
    ops = spine_diff(plan(None), plan((0, 2), rotate=True), LAYOUT)
    [hot] = entries(ops, names.HOTKEY_TABLE)
    assert hot.op is EntryOp.ADD and hot.param_dict() == {"slot": 2, "n": 2, "rotate": 1}
    assert RegisterWrite(names.REG_DONE_BY, 2, 0) in ops
    assert ops[ops.index(hot) + 1] == RegisterWrite(names.REG_ROTATED, 2, 1)
    for before, after, flag in ((False, True, 1), (True, False, 0)):
        ops = spine_diff(plan((0, 2), rotate=before), plan((0, 2), rotate=after), LAYOUT)
        hot, cell = ops
        assert hot.op is EntryOp.MODIFY and hot.param_dict() == {"slot": 2, "n": 2, "rotate": flag}
        assert cell == RegisterWrite(names.REG_ROTATED, 2, flag)
    assert spine_diff(plan((0, 2), rotate=True), plan((0, 2), rotate=True), LAYOUT) == []
    # holders and flag change together (same count): one MODIFY with the new flag, after the
    # ServermapTable change; more holders: the MODIFY that raises n carries it
    for new in ((0, 3), (0, 2, 3)):
        ops = spine_diff(plan((0, 2)), plan(new, rotate=True), LAYOUT)
        [hot] = entries(ops, names.HOTKEY_TABLE)
        assert hot.param_dict() == {"slot": 2, "n": len(new), "rotate": 1}
        smap = max(i for i, op in enumerate(ops) if op in entries(ops, names.SERVERMAP_TABLE))
        assert ops.index(hot) > smap
    bare = SpineLayout(FABRIC, 1, rotation=False)
    [hot] = entries(spine_diff(plan(None), plan((0, 2)), bare), names.HOTKEY_TABLE)
    assert hot.param_dict() == {"slot": 2, "n": 2}
    with pytest.raises(ValueError, match="no write rotation"):
        spine_diff(plan(None), plan((0, 2), rotate=True), bare)
    # a rotated key keeps its flag through the MAX_HOLDERS cut
    [cut], _ = cap_plans([plan(None)], [plan((0, 2, 3, 4, 5), rotate=True)], ROW)
    assert cut.keys[KEY].rotate


def test_the_rack_plans_set_hot_keeps_two_parameters() -> None:
    """plan.diff (a ToR's or a leaf's switch) never writes ``rotate``."""
    from kvswitch.controller.plan import diff

    rack = FABRIC.shape.addresses()
    for op in diff(plan(None), plan((0, 2)), rack) + diff(plan((0, 2)), plan((0, 2, 3)), rack):
        if isinstance(op, TableEntry) and op.table == names.HOTKEY_TABLE:
            assert set(op.param_dict()) == {"slot", "n"}


def test_the_spines_plan_read_back() -> None:
    want = plan((1, 2, 4), slot=3)
    ops = spine_diff(plan(None), want, LAYOUT)
    hot, smap = held(entries(ops, names.HOTKEY_TABLE)), held(entries(ops, names.SERVERMAP_TABLE))
    got, broken = spine_plan(hot, smap, LAYOUT, 8)
    assert (got.keys, broken) == (want.keys, [])
    # a ServermapTable entry in another spine's layout (spine 0's port) is no whole hot key
    other = held(
        entries(spine_diff(plan(None), want, SpineLayout(FABRIC, 0)), names.SERVERMAP_TABLE)
    )
    got, broken = spine_plan(hot, other, LAYOUT, 8)
    assert (got.keys, broken) == ({}, [KEY])
    # the recovered plan implies exactly its entries (without HotkeyTable)
    implied = implied_spine_entries(want, LAYOUT, 0)
    assert held(entries(implied, names.SERVERMAP_TABLE)) == smap
    assert entries(implied, names.HOTKEY_TABLE) == []
    # the rotation flag is read back from set_hot's third parameter
    rotated = plan((1, 2, 4), slot=3, rotate=True)
    ops = spine_diff(plan(None), rotated, LAYOUT)
    got, broken = spine_plan(held(entries(ops, names.HOTKEY_TABLE)), smap, LAYOUT, 8)
    assert (got.keys, broken) == (rotated.keys, [])


def test_steering_deletes_then_adds() -> None:
    other = p.pad_key(b"other")
    gone, made = steering_diff(FABRIC, 2, {KEY: 0}, {other: 1})
    assert gone == [TableEntry(EntryOp.DELETE, names.FABRIC_HOT_TABLE, ((names.MATCH_KEY, KEY),))]
    assert [e.param_dict() for e in made] == [{"port": 6, "dmac": 0x02000000F002}]
    assert steering_diff(FABRIC, 2, {KEY: 0}, {KEY: 0}) == ([], [])


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["racks"][0]["servers"].pop(), "same number"),
        (lambda d: d["spines"][0]["ports"].pop(), "one port per rack"),
        (lambda d: d["racks"][1].update(uplinks=[5]), "one port per spine"),
        (lambda d: d["racks"][1].update(subnet="10.9.0.0/16"), "outside its rack's subnet"),
        (lambda d: d["spines"][1].update(mac="nope"), "spines[1].mac"),
        (lambda d: d.update(max_holders=300), "max_holders"),
        (lambda d: d.update(holder_cells=7), "holder_cells"),  # fewer cells than k = 8 slots
        (lambda d: d["spines"][1].update(name="leaf1"), "share a name"),
    ],
)
def test_a_bad_fabric_file_is_one_line(change, message: str) -> None:
    raw = fabric_dict()
    change(raw)
    with pytest.raises(FabricFileError, match=re.escape(message)) as err:
        FabricFile.parse(raw)
    assert "\n" not in str(err.value)


# -- the holder pool (docs/fabric.md "Holders per key") ------------------------------------------

OTHER = p.pad_key(b"other")


def pooled(cells: int) -> SpineLayout:
    """Spine 1 with a ``valid_ver`` pool of ``cells`` cells, up to 6 holders per key."""
    return SpineLayout(
        FabricFile.parse({**fabric_dict(), "max_holders": 6, "holder_cells": cells}), 1
    )


def keys(*held_keys: tuple[bytes, int, tuple[int, ...]]) -> Plan:
    return Plan(FABRIC.total, 8, {key: KeyPlan(slot, hs) for key, slot, hs in held_keys})


def cells(ops) -> list[tuple[int, int]]:
    return [
        (op.index, op.count)
        for op in ops
        if isinstance(op, RegisterWrite) and op.name == names.REG_VALID_VER
    ]


def test_the_pool_takes_first_fit_power_of_two_rows_and_merges_what_is_given_back() -> None:
    pool = HolderPool(16)
    assert [pool.take(4), pool.take(1), pool.take(2), pool.take(8)] == [0, 4, 6, 8]
    assert (pool.free_cells, pool.take(4), pool.take(2)) == (1, None, None)
    pool.release(0, 4)
    assert pool.take(2) == 0  # the freed row, split
    for base, size in ((0, 2), (4, 1), (6, 2), (8, 8)):
        pool.release(base, size)
    assert (pool.free_cells, {s: b for s, b in pool.free.items() if b}) == (16, {16: [0]})
    odd = HolderPool(12)  # not a power of two: blocks 0..7 and 8..11
    assert odd.reserve(4, 4) and not odd.reserve(4, 4)  # taken
    assert not odd.reserve(2, 4) and not odd.reserve(12, 4) and not odd.reserve(8, 3)
    assert odd.reserve(8, 4) and odd.free_cells == 4 and odd.take(8) is None


def test_a_key_gets_a_row_of_its_own_and_a_leaving_keys_row_is_reused() -> None:
    lay = pooled(16)
    ops = spine_diff(keys(), keys((KEY, 2, (0, 2, 5)), (OTHER, 5, (1, 3))), lay)
    assert lay.rows == {KEY: (0, 4), OTHER: (4, 2)}
    assert cells(ops) == [(0, 4), (4, 2)]  # each new key's whole row zeroed
    bases = {e.param_dict()["slot"]: e.param_dict()["base"] for e in entries(ops, "KeyindexTable")}
    assert bases == {2: 0, 5: 4}
    vidx = {
        tuple(e.match_dict().values()): e.param_dict()["vidx"]
        for e in entries(ops, names.SERVERMAP_TABLE)
    }
    assert vidx == {(2, 0): 0, (2, 1): 1, (2, 2): 2, (5, 0): 4, (5, 1): 5}
    # KEY leaves, a new key takes its row in the same batch (KEY's entries go first)
    new = p.pad_key(b"new")
    ops = spine_diff(lay_plan := keys((KEY, 2, (0, 2, 5)), (OTHER, 5, (1, 3))), keys(
        (OTHER, 5, (1, 3)), (new, 0, (4, 0, 1, 2))), lay)  # fmt: skip
    assert lay_plan and lay.rows == {OTHER: (4, 2), new: (0, 4)}
    assert cells(ops) == [(0, 4)]
    # fewer holders: the row shrinks in place, its high half free for the next key
    spine_diff(
        keys((OTHER, 5, (1, 3)), (new, 0, (4, 0, 1, 2))),
        keys((OTHER, 5, (1, 3)), (new, 0, (4, 0))),
        lay,
    )
    assert lay.rows[new] == (0, 2) and lay.pool is not None and lay.pool.free_cells == 12


def test_a_key_that_outgrows_its_row_moves_break_before_make() -> None:
    """(0, 2, 5) in row (0, 4) -> five holders: a row of 8 at 8. The new row is zeroed before
    KeyindexTable names it; the old row's cells of changed ordinals are zeroed (ServermapTable
    still points there); the unchanged ordinals' ServermapTable entries point at their new,
    zeroed cells in the break step; every replica is pushed again; the old row is free after."""
    lay = pooled(32)
    old = keys((KEY, 2, (0, 2, 5)))
    spine_diff(keys(), old, lay)
    ops = spine_diff(old, keys((KEY, 2, (0, 2, 5, 1, 3))), lay)
    assert lay.rows == {KEY: (8, 8)}
    zero = ops.index(RegisterWrite(names.REG_VALID_VER, 8, 0, 8))
    [keyindex] = entries(ops, names.KEYINDEX_TABLE)
    assert keyindex.param_dict()["base"] == 8 and ops.index(keyindex) == zero + 1
    assert RegisterWrite(names.REG_VALID_VER, 3, 0) in ops  # ordinal 3: in the old row
    assert RegisterWrite(names.REG_VALID_VER, 4, 0) not in ops  # past it: another key's
    smap = entries(ops, names.SERVERMAP_TABLE)
    assert {e.match_dict()["ordinal"]: e.param_dict()["vidx"] for e in smap} == {
        o: 8 + o for o in range(5)
    }
    assert all(ops.index(e) > zero for e in smap)
    pushes = [op for op in ops if isinstance(op, PushRequest)]
    assert pushes == [PushRequest(KEY, 0, (2, 5, 1, 3))]
    assert lay.pool is not None and lay.pool.take(4) == 0  # the old row, free again


def test_a_full_pool_cuts_holders_and_keeps_a_cell_for_each_empty_slot() -> None:
    lay = pooled(12)  # 8 slots: 7 empty ones keep 7 cells, so one key gets a row of 4
    want = keys((KEY, 2, (0, 2, 5, 1, 3)))
    assert lay.place(want)[2] == {KEY: 4}
    with pytest.raises(ValueError, match="do not fit its holder pool"):
        spine_diff(keys(), want, lay)
    [fitted], cut = fit_pools([keys()], [want], [lay])
    assert (fitted.keys[KEY].holders, cut) == ((0, 2, 5, 1), 1)
    spine_diff(keys(), fitted, lay)
    assert lay.rows == {KEY: (8, 4)}  # the smallest free block that holds it: 8..11, not 0..7
    # a growing key that finds no larger row keeps its own, cut to it
    grown = keys((KEY, 2, (0, 2, 5, 1, 3)))
    assert lay.place(grown)[2] == {KEY: 4} and lay.place(grown)[0] == {KEY: (8, 4)}
    # the default (no holder_cells): a row of max_holders per slot, as before the pool
    assert LAYOUT.place(want)[0] == {KEY: (2 * ROW, ROW)}


def test_a_restarted_controller_recovers_the_rows() -> None:
    lay = pooled(16)
    want = keys((KEY, 2, (0, 2, 5)), (OTHER, 5, (1, 3)))
    ops = spine_diff(keys(), want, lay)
    hot, smap = held(entries(ops, names.HOTKEY_TABLE)), held(entries(ops, names.SERVERMAP_TABLE))
    fresh = pooled(16)
    got, broken = spine_plan(hot, smap, fresh, 8)
    assert (got.keys, broken, fresh.rows) == (want.keys, [], lay.rows)
    assert fresh.pool is not None and fresh.pool.free_cells == 10
    # OTHER's row moved onto KEY's cells (1 + ordinal): it overlaps, so it is no whole hot key
    bad = {
        m: HeldEntry(e.action, {**e.params, "vidx": e.params["vidx"] - 3}, e.raw_match)
        if dict(m)["slot"] == 5
        else e
        for m, e in smap.items()
    }
    got, broken = spine_plan(hot, bad, pooled(16), 8)
    assert (list(got.keys), broken) == ([KEY], [OTHER])


def test_a_key_whose_row_the_layout_does_not_know_is_moved_to_a_zeroed_row() -> None:
    """A plan the spine was not given through this layout (a refused batch, before recovery
    adopts the spine's rows): the key's next change takes a new row, zeroed before
    KeyindexTable names it, every ServermapTable entry re-pointed and every replica pushed;
    no cell of an unknown old row is written."""
    lay = pooled(32)
    old = keys((KEY, 2, (0, 2, 5)))
    ops = spine_diff(old, keys((KEY, 2, (0, 2, 5, 1))), lay)
    assert lay.rows == {KEY: (0, 4)}
    assert cells(ops) == [(0, 4)]  # the new row whole, nothing of the old one
    smap = entries(ops, names.SERVERMAP_TABLE)
    assert sorted(e.param_dict()["vidx"] for e in smap) == [0, 1, 2, 3]
    assert [op for op in ops if isinstance(op, PushRequest)] == [PushRequest(KEY, 0, (2, 5, 1))]
