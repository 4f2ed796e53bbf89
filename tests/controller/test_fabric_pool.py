"""The fabric runtime with a spine's ``valid_ver`` pool (the fabric file's ``holder_cells``;
docs/fabric.md "Holders per key") on fabric_net.py's software switches: a period gives the hot
key a row of the pool, cut to what the pool can give (one cell kept per empty slot), written as
KeyindexTable's base and ServermapTable's vidx; a restarted runtime recovers the same row."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from kvswitch.controller import names
from kvswitch.controller.ops import EntryOp, TableEntry
from kvswitch.controller.p4rt_driver import Program
from tests.controller.fabric_net import Net
from tests.controller.test_fabric_runtime import HOT, ORIGIN, Fabric, inputs


def test_a_pooled_spine_gets_its_row_from_the_pool_and_a_restart_recovers_it(
    net: Net, progs: tuple[Program, Program], tmp_path: Path
) -> None:
    # k = 16 slots, 18 cells: the 15 empty slots keep 15, HOT gets a row of 2 (not MAX_HOLDERS)
    net.fabric = dataclasses.replace(net.fabric, holder_cells=18)
    state = tmp_path / "state.json"
    f = Fabric(net, progs, state)
    try:
        rt = f.runtime
        rt.start()
        m = rt.period(inputs())
        assert m.errors == [] and m.capped >= 1
        s = rt.spine_of[HOT]
        holders = rt.plans[s].keys[HOT].holders
        assert holders[0] == ORIGIN and len(holders) == 2
        base, cells = rt.layouts[s].rows[HOT]
        assert cells == 2 and 0 <= base <= 16 and base % 2 == 0
        [keyindex] = f.spines[s].read_entries(names.KEYINDEX_TABLE).values()
        assert keyindex.params[names.PARAM_BASE] == base
        smap = f.spines[s].read_entries(names.SERVERMAP_TABLE).values()
        assert sorted(e.params[names.PARAM_VIDX] for e in smap) == [base, base + 1]
        assert f.agents.pushes == [(HOT, ORIGIN, holders[1:])]
        # the row somewhere else in the pool (as a controller before a move left it): the
        # restarted runtime takes the spine's row, not one it would choose itself
        kp, moved = rt.plans[s].keys[HOT], 4 if base != 4 else 6
        lay = rt.layouts[s]
        f.spines[s].apply(
            [
                TableEntry(
                    EntryOp.MODIFY,
                    names.KEYINDEX_TABLE,
                    keyindex.raw_match,
                    keyindex.action,
                    tuple({**keyindex.params, names.PARAM_BASE: moved}.items()),
                ),
                *(
                    lay.servermap(EntryOp.MODIFY, kp.slot, o, h, moved)
                    for o, h in enumerate(holders)
                ),
            ]
        )
    finally:
        f.close()
    g = Fabric(net, progs, state)
    try:
        g.runtime.start()
        assert g.runtime.layouts[s].rows == {HOT: (moved, cells)}
        assert g.runtime.plans[s].keys[HOT].holders == holders
    finally:
        g.close()
