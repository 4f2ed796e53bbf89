"""The controller's names (controller/names.py) exist in the program's P4Info with the shapes the
controller writes: tables with their match fields, actions with their parameters, registers and
direct counters; for the leaf (kvswitch.p4) and for the spine (kvswitch_spine.p4). A rename on
either side fails here, not in a running rack."""

from __future__ import annotations

from kvswitch.controller import names

from . import spine
from .base import HP_STAGES, SwitchTarget

TABLE_KEYS = {
    names.HOTKEY_TABLE: [names.MATCH_KEY],
    names.KEYINDEX_TABLE: [names.MATCH_KEY],
    names.SERVERMAP_TABLE: [names.MATCH_SLOT, names.MATCH_ORDINAL],
    names.SERVEROFFSET_TABLE: [names.MATCH_SERVER_IP],
    names.MULTIGROUP_TABLE: [names.MATCH_KEY],
    names.PORTTOSERVER_TABLE: [names.MATCH_PORT],
    names.LOADCOUNT_TABLE: [names.MATCH_DST],
    names.HOSTPORT_TABLE: [names.MATCH_SRC],
}

TABLE_ACTIONS = {
    names.HOTKEY_TABLE: (names.ACT_SET_HOT, [names.PARAM_SLOT, names.PARAM_HOLDERS]),
    names.KEYINDEX_TABLE: (
        names.ACT_SET_BASE,
        [names.PARAM_SLOT, names.PARAM_BASE, names.PARAM_FLOOR],
    ),
    names.SERVERMAP_TABLE: (
        names.ACT_SET_SERVER,
        [names.PARAM_VIDX, names.PARAM_IP, names.PARAM_MAC, names.PARAM_PORT],
    ),
    names.SERVEROFFSET_TABLE: (names.ACT_SET_OFFSET, [names.PARAM_OFFSET, names.PARAM_PORT]),
    names.MULTIGROUP_TABLE: (names.ACT_SET_GROUP, [names.PARAM_GROUP]),
    names.PORTTOSERVER_TABLE: (names.ACT_SET_REPLICA, [names.PARAM_IP, names.PARAM_MAC]),
    names.LOADCOUNT_TABLE: (names.ACT_COUNT_LOAD, []),
    names.HOSTPORT_TABLE: (names.ACT_SET_SOURCE, [names.PARAM_PORT, names.PARAM_SERVER]),
}


def test_tables_match_fields_and_actions(target: SwitchTarget) -> None:
    p4info = target.p4info
    tables = {t.preamble.alias: t for t in p4info.tables}
    actions = {a.preamble.id: a for a in p4info.actions}
    for table, keys in TABLE_KEYS.items():
        assert table in tables, table
        assert [m.name for m in tables[table].match_fields] == keys, table
        action, params = TABLE_ACTIONS[table]
        by_alias = {
            actions[ref.id].preamble.alias: actions[ref.id] for ref in tables[table].action_refs
        }
        assert action in by_alias, (table, action, sorted(by_alias))
        assert [p.name for p in by_alias[action].params] == params, (table, action)


def test_registers_and_counters(target: SwitchTarget) -> None:
    p4info = target.p4info
    registers = {r.preamble.alias for r in p4info.registers}
    for reg in (
        names.REG_RR,
        names.REG_SLOT_VER,
        names.REG_ORIGIN_VER,
        names.REG_VALID_VER,
        names.REG_GLOBAL_VER,
        names.REG_EPOCH,
    ):
        assert reg in registers, reg
    for stage in range(HP_STAGES):
        for word in range(names.HP_KEY_WORDS):
            assert names.reg_hp_key(stage, word) in registers
        assert names.reg_hp_cnt(stage) in registers
    counters = {c.preamble.alias for c in p4info.counters}
    assert names.HOTKEY_WRITES in counters
    counters = {c.preamble.alias: c for c in p4info.direct_counters}
    tables = {t.preamble.id: t.preamble.alias for t in p4info.tables}
    assert tables[counters[names.HOTKEY_COUNTER].direct_table_id] == names.HOTKEY_TABLE
    assert tables[counters[names.LOAD_COUNTER].direct_table_id] == names.LOADCOUNT_TABLE


# The spine (kvswitch_spine.p4, docs/fabric.md "Spine program"): the leaf's names but for the
# holders of each key in ServeroffsetTable and the copies' RidtoserverTable; no HashPipe.
SPINE_TABLE_KEYS = {
    **{t: k for t, k in TABLE_KEYS.items() if t != names.PORTTOSERVER_TABLE},
    names.SERVEROFFSET_TABLE: [names.MATCH_SLOT, names.MATCH_SERVER_IP],
    names.RIDTOSERVER_TABLE: [names.MATCH_RID],
    names.REPLYCOUNT_TABLE: [names.MATCH_SRC],
    names.DOWN_TABLE: [names.MATCH_DST],
}
SPINE_TABLE_ACTIONS = {
    **{t: a for t, a in TABLE_ACTIONS.items() if t != names.PORTTOSERVER_TABLE},
    names.RIDTOSERVER_TABLE: (names.ACT_SET_REPLICA, [names.PARAM_IP, names.PARAM_MAC]),
    names.REPLYCOUNT_TABLE: (names.ACT_COUNT_REPLY, []),
    names.DOWN_TABLE: (names.ACT_SET_DOWN, []),
    # a spine's HotkeyTable says whether the key's writes rotate (docs/protocol.md F7)
    names.HOTKEY_TABLE: (
        names.ACT_SET_HOT,
        [names.PARAM_SLOT, names.PARAM_HOLDERS, spine.PARAM_ROTATE],
    ),
}
# the TNA spine's constant table of the rotation's writer ordinals (replicas_tna.p4: no modulo on
# Tofino); its entries are the program's, the controller writes none
SPINE_TNA_TABLES = {"WriterTable"}


def test_spine_tables_registers_and_sizes(spine_target: SwitchTarget) -> None:
    p4info = spine_target.p4info
    tables = {t.preamble.alias: t for t in p4info.tables}
    actions = {a.preamble.id: a for a in p4info.actions}
    tna = SPINE_TNA_TABLES if p4info.pkg_info.arch == "tna" else set()
    # TcpFitsTable: KvsCheck's constant rows of a TCP segment's fill (shared/parser.p4)
    program = {"ipv4_lpm", "TcpFitsTable", names.SPINE_HOLD_TABLE}
    assert set(tables) == {*SPINE_TABLE_KEYS, *program, *tna}
    # the restart hold (spine_hold.p4): keyless, hold or NoAction, default hold
    hold = tables[names.SPINE_HOLD_TABLE]
    assert list(hold.match_fields) == []
    assert {actions[r.id].preamble.alias for r in hold.action_refs} == {
        names.ACT_HOLD,
        names.ACT_PASS,
    }
    for table, keys in SPINE_TABLE_KEYS.items():
        assert [m.name for m in tables[table].match_fields] == keys, table
        action, params = SPINE_TABLE_ACTIONS[table]
        by_alias = {
            actions[ref.id].preamble.alias: actions[ref.id] for ref in tables[table].action_refs
        }
        assert [p.name for p in by_alias[action].params] == params, (table, action)
    registers = {r.preamble.alias: r.size for r in p4info.registers}
    assert registers == {
        names.REG_RR: spine.HOT_KEYS,
        names.REG_SLOT_VER: spine.HOT_KEYS,
        names.REG_ORIGIN_VER: spine.HOT_KEYS,
        # the pool of rows (HOLDER_CELLS, "Holders per key"), in parts of 2^VALID_VER_PART_BITS
        **{
            names.REG_VALID_VER + (f"_{i}" if i else ""): part
            for i, part in enumerate(spine.valid_ver_parts())
        },
        names.REG_GLOBAL_VER: 1,
        names.REG_EPOCH: 1,
        spine.REG_DONE_BY: spine.HOT_KEYS,  # F7: the holder whose report last raised origin_ver
        spine.REG_ROTATED: spine.HOT_KEYS,  # F7: the last request's rotate flag, for replies
    }
    assert tables[names.SERVEROFFSET_TABLE].size == spine.HOLDER_CELLS
    assert tables[names.SERVERMAP_TABLE].size == spine.HOLDER_CELLS
    assert tables[names.RIDTOSERVER_TABLE].size == spine.MAX_SERVERS
    assert tables[names.LOADCOUNT_TABLE].size == spine.MAX_SERVERS
    assert {c.preamble.alias for c in p4info.counters} == {names.HOTKEY_WRITES}
    direct = {c.preamble.alias: c for c in p4info.direct_counters}
    by_id = {t.preamble.id: t.preamble.alias for t in p4info.tables}
    assert by_id[direct[names.HOTKEY_COUNTER].direct_table_id] == names.HOTKEY_TABLE
    assert by_id[direct[names.LOAD_COUNTER].direct_table_id] == names.LOADCOUNT_TABLE


def test_fabric_leaf_adds_the_steering_tables(leaf_target: SwitchTarget) -> None:
    """kvswitch_leaf.p4: the rack switch's names (above) and the two steering tables."""
    test_tables_match_fields_and_actions(leaf_target)
    test_registers_and_counters(leaf_target)
    p4info = leaf_target.p4info
    tables = {t.preamble.alias: t for t in p4info.tables}
    actions = {a.preamble.id: a.preamble.alias for a in p4info.actions}
    assert [m.name for m in tables[names.FABRIC_HOT_TABLE].match_fields] == [names.MATCH_KEY]
    assert [m.name for m in tables[names.UPLINK_TABLE].match_fields] == [names.MATCH_PORT]
    steer = {actions[r.id] for r in tables[names.FABRIC_HOT_TABLE].action_refs}
    assert steer == {names.ACT_SET_SPINE, names.ACT_HOLD, names.ACT_PASS}
    by_alias = {a.preamble.alias: a for a in p4info.actions}
    assert [p.name for p in by_alias[names.ACT_SET_SPINE].params] == [
        names.PARAM_PORT,
        names.PARAM_DMAC,
    ]
