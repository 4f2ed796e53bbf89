"""Sizes are compile-time constants overridable with -D (p4src/shared/sizes.p4)."""

from __future__ import annotations

import os
from functools import cache

import pytest

from kvswitch.bench.kernel import hashpipe_width
from kvswitch.paths import p4src_dir

pytestmark = pytest.mark.skipif(
    os.environ.get("KVSWITCH_TARGET", "softswitch") != "softswitch",
    reason="builds the program in-process with the software switch's loader",
)


def _build(defines: dict[str, str], program: str = "kvswitch.p4"):
    from softswitch import Switch

    source = p4src_dir() / program
    return Switch.from_file(source, defines=defines, include_dirs=[source.parent])


@cache
def _default(program: str):
    """``program`` built without -D (loaded once per test run)."""
    return _build({}, program)


@pytest.mark.parametrize(
    ("keys", "servers", "stages", "width"),
    [(32, 4, 1, 32), (256, 16, 8, 32), (100, 4, 3, 64), (2500, 2, 4, 1024)],
)
def test_sizes_follow_defines(keys: int, servers: int, stages: int, width: int) -> None:
    """HashPipe's w: the smallest power of two >= K / d, in p4src and in the simulator."""
    assert hashpipe_width(keys, stages) == width
    sw = _build({"HOT_KEYS": str(keys), "MAX_SERVERS": str(servers), "HP_STAGES": str(stages)})
    registers = {r.preamble.alias: r.size for r in sw.p4info.registers}
    tables = {t.preamble.alias: t.size for t in sw.p4info.tables}
    prefix = "KvsEgress.hashpipe."  # HashPipe counts in the egress
    hashpipe = {
        r.preamble.name.removeprefix(prefix): r.size
        for r in sw.p4info.registers
        if r.preamble.name.startswith(prefix)
    }
    assert hashpipe == {
        f"hp_stage{s}.{kind}": hashpipe_width(keys, stages)
        for s in range(stages)
        for kind in ("hp_key0", "hp_key1", "hp_key2", "hp_key3", "hp_cnt")
    }
    assert registers["valid_ver"] == keys * servers
    assert registers["slot_ver"] == registers["origin_ver"] == registers["rr"] == keys
    assert tables["HotkeyTable"] == tables["KeyindexTable"] == tables["MultigroupTable"] == keys
    assert tables["ServeroffsetTable"] == tables["LoadcountTable"] == servers


def test_too_many_stages_refused() -> None:
    from softswitch import P4Error

    with pytest.raises(P4Error, match="HP_STAGES"):
        _build({"HP_STAGES": "9"})


def test_spine_sizes_default_to_a_fabric() -> None:
    """kvswitch_spine.p4 without -D: 1 024 slots, 1 024 servers, 64 holders per key (valid_ver
    and ServeroffsetTable per (slot, ordinal), not per (slot, server))."""
    sw = _build({}, "kvswitch_spine.p4")
    registers = {r.preamble.alias: r.size for r in sw.p4info.registers}
    tables = {t.preamble.alias: t.size for t in sw.p4info.tables}
    assert registers["valid_ver"] == tables["ServeroffsetTable"] == 1024 * 64
    assert tables["RidtoserverTable"] == tables["LoadcountTable"] == 1024
    assert tables["HostportTable"] == tables["ipv4_lpm"] == 1024 + 1024


def test_more_holders_than_an_ordinal_refused() -> None:
    from softswitch import P4Error

    with pytest.raises(P4Error, match="MAX_HOLDERS"):
        _build({"MAX_HOLDERS": "256"}, "kvswitch_spine.p4")


def test_a_hashpipe_width_not_a_power_of_two_is_refused() -> None:
    from softswitch.errors import P4Error

    with pytest.raises(P4Error, match="HP_SLOTS must be a power of two"):
        _build({"HP_SLOTS": "257"})
    assert _build({"HP_SLOTS": "512"}) is not None


@pytest.mark.parametrize("program", ["kvswitch.p4", "kvswitch_tna.p4"])
def test_valid_ver_in_parts_beyond_one_stage(program: str) -> None:
    """The paper's K = 10 000 at M = 32: valid_ver's 320 000 cells as three registers of at most
    2^17 (one Tofino stage's SRAM each), in both builds; the defaults keep one register."""
    sw = _build({"HOT_KEYS": "10000", "MAX_SERVERS": "32", "HP_STAGES": "4"}, program)
    registers = {r.preamble.alias: r.size for r in sw.p4info.registers}
    assert {r: n for r, n in registers.items() if r.startswith("valid_ver")} == {
        "valid_ver": 1 << 17,
        "valid_ver_1": 1 << 17,
        "valid_ver_2": 320_000 - (2 << 17),
    }
    default = {r.preamble.alias: r.size for r in _default(program).p4info.registers}
    assert [r for r in default if r.startswith("valid_ver")] == ["valid_ver"]
    assert default["valid_ver"] == 1024 * 32


@pytest.mark.parametrize(
    ("program", "stages", "width"), [("kvswitch.p4", 4, 256), ("kvswitch_tna.p4", 2, 512)]
)
def test_hashpipe_default_d_per_build(program: str, stages: int, width: int) -> None:
    """Without -D, d = 4 on v1model and d = 2 on TNA (HashPipe in Tofino 1's 12 egress stages,
    docs/tofino.md), w = 256 and 512 for K = 1 024; the controller takes d from the P4Info."""
    from kvswitch.controller.p4rt_driver import _Names

    info = _default(program).p4info
    counts = {
        r.preamble.name: r.size for r in info.registers if r.preamble.alias.endswith("hp_cnt")
    }
    assert counts == {f"KvsEgress.hashpipe.hp_stage{s}.hp_cnt": width for s in range(stages)}
    assert _Names(info).hashpipe_stages() == stages


def test_valid_ver_beyond_four_parts_is_refused() -> None:
    from softswitch.errors import P4Error

    with pytest.raises(P4Error, match="four parts"):
        _build({"HOT_KEYS": "64", "MAX_SERVERS": "8", "VALID_VER_PART_BITS": "6"})


def _spine_text(defines: dict[str, str], program: str = "kvswitch_spine.p4") -> str:
    """The spine's source after the preprocessor (cheap: no load)."""
    from softswitch.frontend.preprocessor import preprocess

    source = p4src_dir() / program
    return preprocess(source.read_text(), str(source), defines, [source.parent]).text


def test_a_spine_pool_holds_the_papers_scale_where_rows_per_slot_cannot() -> None:
    """K = 10 000 with 255 holders per key: rows of MAX_HOLDERS per slot are 2.55 M cells, more
    than valid_ver's four parts (both builds share sizes.p4, so both stop); a pool of 2^17
    cells (HOLDER_CELLS) is one part and sizes ServermapTable and ServeroffsetTable too; a pool
    of fewer cells than slots is refused."""
    from softswitch.errors import P4Error

    paper = {"HOT_KEYS": "10000", "MAX_HOLDERS": "255"}
    for program in ("kvswitch_spine.p4", "kvswitch_spine_tna.p4"):
        with pytest.raises(P4Error, match="four parts"):
            _spine_text(paper, program)
    text = _spine_text({**paper, "HOLDER_CELLS": str(1 << 17)})
    assert "register<bit<32>>(131072) valid_ver;" in text and "valid_ver_1" not in text
    assert text.count("size = 131072;") == 2  # ServermapTable, ServeroffsetTable
    with pytest.raises(P4Error, match="HOLDER_CELLS must give every hot-key slot"):
        _spine_text({"HOT_KEYS": "64", "HOLDER_CELLS": "63"})
