"""Tables: exact, lpm, ternary (larger priority wins), optional, range, default actions, const
entries, action_run switch, hit/miss, direct counters, modify/delete."""

from __future__ import annotations

import pytest

from softswitch import Switch, SwitchError

HEADERS = "header k_t { bit<8> a; bit<16> b; bit<8> res; bit<8> how; }"
PARSER = "state start { pkt.extract(hdr.k); transition accept; }"

INGRESS = """
direct_counter(CounterType.packets_and_bytes) ex_counter;
action set(bit<8> v) { hdr.k.res = v; }
action other(bit<8> v) { hdr.k.res = v + 8w100; }
action miss_action() { hdr.k.res = 8w0xee; }
table ex {
    key = { hdr.k.a: exact; hdr.k.b: exact @name("bee"); }
    actions = { set; other; @defaultonly miss_action; }
    default_action = miss_action();
    counters = ex_counter;
    size = 8;
}
table lp {
    key = { hdr.k.b: lpm; }
    actions = { set; NoAction; }
}
table tern {
    key = { hdr.k.a: ternary; hdr.k.b: optional; }
    actions = { set; }
    const default_action = set(8w1);
}
table rng {
    key = { hdr.k.a: range; }
    actions = { set; }
    default_action = set(8w2);
}
table mixed {
    key = { hdr.k.a: exact; hdr.k.b: lpm; }
    actions = { set; }
}
table tlpm {
    key = { hdr.k.a: ternary; hdr.k.b: lpm; }
    actions = { set; }
}
table fixed {
    key = { hdr.k.a: exact; }
    actions = { set; other; }
    const entries = {
        8w1: set(8w11);
        8w2: other(8w12);
    }
}
apply {
    if (hdr.k.how == 0) {
        switch (ex.apply().action_run) {
            set: { hdr.k.how = 8w0x51; }
            other: { hdr.k.how = 8w0x52; }
            default: { hdr.k.how = 8w0x5d; }
        }
    } else if (hdr.k.how == 1) {
        if (lp.apply().hit) { hdr.k.how = 8w0x61; } else { hdr.k.how = 8w0x60; }
    } else if (hdr.k.how == 2) {
        tern.apply();
    } else if (hdr.k.how == 3) {
        rng.apply();
    } else if (hdr.k.how == 5) {
        mixed.apply();
    } else if (hdr.k.how == 6) {
        tlpm.apply();
    } else {
        if (fixed.apply().miss) { hdr.k.how = 8w0x70; }
    }
    sm.egress_spec = 1;
}
"""

DEPARSER = "apply { pkt.emit(hdr.k); }"


@pytest.fixture
def sw(v1) -> Switch:
    return Switch.from_source(
        v1(HEADERS, PARSER, INGRESS, deparser=DEPARSER, hdr_fields="k_t k;"), "tables.p4"
    )


def send(sw: Switch, a: int, b: int, how: int) -> tuple[int, int]:
    out = sw.process(0, bytes([a]) + b.to_bytes(2, "big") + bytes([0, how]))
    o = out[0][1]
    return o[3], o[4]


def test_exact_two_keys_action_run_and_direct_counter(sw: Switch) -> None:
    h = sw.table_add("ex", {"a": 1, "bee": 0x203}, "set", {"v": 7})
    sw.table_add("I.ex", {"hdr.k.a": 2, "bee": 0x203}, "other", {"v": 7})
    assert send(sw, 1, 0x203, 0) == (7, 0x51)
    assert send(sw, 2, 0x203, 0) == (107, 0x52)
    assert send(sw, 3, 0x203, 0) == (0xEE, 0x5D)
    assert sw.direct_counter_read("ex", h) == (5, 1)
    sw.table_modify("ex", h, "other", {"v": 1})
    assert send(sw, 1, 0x203, 0) == (101, 0x52)
    sw.table_delete("ex", h)
    assert send(sw, 1, 0x203, 0) == (0xEE, 0x5D)
    assert [e.action for e in sw.table_entries("ex")] == ["I.other"]
    with pytest.raises(SwitchError):
        sw.table_add("ex", {"a": 5, "bee": 1}, "miss_action", {})  # @defaultonly
    with pytest.raises(SwitchError):
        sw.table_add("ex", {"a": 256, "bee": 1}, "set", {"v": 1})  # does not fit bit<8>
    sw.direct_counter_reset("ex")
    assert all(e.packets == 0 for e in sw.table_entries("ex"))


def test_lpm_longest_prefix_and_hit_miss(sw: Switch) -> None:
    sw.table_add("lp", {"hdr.k.b": (0x1200, 8)}, "set", {"v": 1})
    sw.table_add("lp", {"hdr.k.b": (0x1230, 12)}, "set", {"v": 2})
    sw.table_add("lp", {"hdr.k.b": (0, 0)}, "set", {"v": 3})
    assert send(sw, 0, 0x1234, 1) == (2, 0x61)
    assert send(sw, 0, 0x1254, 1) == (1, 0x61)
    assert send(sw, 0, 0x9999, 1) == (3, 0x61)
    sw.table_clear("lp")
    assert send(sw, 0, 0x9999, 1) == (0, 0x60)


def test_ternary_priority_larger_wins_and_optional(sw: Switch) -> None:
    sw.table_add("tern", {"a": (0x10, 0xF0), "b": None}, "set", {"v": 5}, priority=10)
    sw.table_add("tern", {"a": (0x12, 0xFF), "b": None}, "set", {"v": 6}, priority=20)
    sw.table_add("tern", {"a": (0x12, 0xFF), "b": 7}, "set", {"v": 9}, priority=30)
    assert send(sw, 0x12, 0, 2)[0] == 6
    assert send(sw, 0x12, 7, 2)[0] == 9
    assert send(sw, 0x13, 0, 2)[0] == 5
    assert send(sw, 0x23, 0, 2)[0] == 1  # const default action
    with pytest.raises(SwitchError):
        sw.table_set_default("tern", "set", {"v": 3})
    with pytest.raises(SwitchError):
        sw.table_add("tern", {"a": (1, 0xFF)}, "set", {"v": 1})  # priority required


def test_range_and_default_params(sw: Switch) -> None:
    sw.table_add("rng", {"a": (10, 20)}, "set", {"v": 1}, priority=1)
    assert send(sw, 15, 0, 3)[0] == 1
    assert send(sw, 21, 0, 3)[0] == 2
    sw.table_set_default("rng", "set", {"v": 4})
    assert send(sw, 21, 0, 3)[0] == 4
    assert sw.table_get_default("rng") == ("I.set", {"v": 4})


def test_const_entries(sw: Switch) -> None:
    assert send(sw, 1, 0, 4) == (11, 4)
    assert send(sw, 2, 0, 4) == (112, 4)
    assert send(sw, 3, 0, 4) == (0, 0x70)
    with pytest.raises(SwitchError):
        sw.table_add("fixed", {"a": 3}, "set", {"v": 1})
    info = sw.p4info
    t = next(t for t in info.tables if t.preamble.name == "I.fixed")
    assert t.is_const_table


def test_lpm_with_exact_keys_and_lpm_in_a_ternary_table(sw: Switch) -> None:
    sw.table_add("mixed", {"a": 1, "b": (0x1200, 8)}, "set", {"v": 1})
    sw.table_add("mixed", {"a": 1, "b": (0x1234, 16)}, "set", {"v": 2})
    sw.table_add("mixed", {"a": 2, "b": (0x0000, 0)}, "set", {"v": 3})
    assert send(sw, 1, 0x1234, 5)[0] == 2
    assert send(sw, 1, 0x1299, 5)[0] == 1
    assert send(sw, 2, 0x9999, 5)[0] == 3
    assert send(sw, 3, 0x1234, 5)[0] == 0
    sw.table_add("tlpm", {"a": (0, 0), "b": (0x1200, 8)}, "set", {"v": 7}, priority=1)
    sw.table_add("tlpm", {"a": (5, 0xFF), "b": (0, 0)}, "set", {"v": 8}, priority=2)
    assert send(sw, 5, 0x1234, 6)[0] == 8
    assert send(sw, 4, 0x1234, 6)[0] == 7
    assert send(sw, 4, 0x1334, 6)[0] == 0


def test_action_arguments_bound_in_the_action_list(v1) -> None:
    sw = Switch.from_source(
        v1(
            "header k_t { bit<8> a; bit<8> b; }",
            "state start { pkt.extract(hdr.k); transition accept; }",
            """
            action put(inout bit<8> dst, bit<8> v) { dst = v; }
            table t {
                key = { hdr.k.a: exact; }
                actions = { put(hdr.k.b); }
                default_action = put(hdr.k.b, 8w9);
            }
            apply { t.apply(); sm.egress_spec = 1; }
            """,
            deparser="apply { pkt.emit(hdr.k); }",
            hdr_fields="k_t k;",
        ),
        "bound.p4",
    )
    sw.table_add("t", {"hdr.k.a": 1}, "put", {"v": 5})
    assert sw.process(0, b"\x01\x00")[0][1] == b"\x01\x05"
    assert sw.process(0, b"\x02\x00")[0][1] == b"\x02\x09"
    params = [p.name for a in sw.p4info.actions if a.preamble.name == "I.put" for p in a.params]
    assert params == ["v"]  # the bound inout parameter is not a control-plane parameter


def test_switch_labels_name_actions_renamed_by_at_name() -> None:
    """``switch (t.apply().action_run)`` labels are the actions' P4 names, whatever @name says."""
    from softswitch import Switch

    sw = Switch.from_source(
        """
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; }
struct H { h_t h; }
struct M { }
parser P(packet_in p, out H hdr, inout M m, inout standard_metadata_t sm) {
    state start { p.extract(hdr.h); transition accept; }
}
control V(inout H h, inout M m) { apply { } }
control I(inout H hdr, inout M m, inout standard_metadata_t sm) {
    @name("renamed") action act() { sm.egress_spec = 2; }
    table t { key = { hdr.h.b: exact; } actions = { act; NoAction; } default_action = NoAction(); }
    apply { switch (t.apply().action_run) { act: { hdr.h.a = 7; } } }
}
control E(inout H h, inout M m, inout standard_metadata_t sm) { apply { } }
control C(inout H h, inout M m) { apply { } }
control D(packet_out p, in H h) { apply { p.emit(h.h); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""
    )
    sw.table_add("t", {"hdr.h.b": 1}, "renamed", {})
    assert sw.process(1, bytes([0, 1])) == [(2, bytes([7, 1]))]
    assert sw.process(1, bytes([0, 2])) == [(0, bytes([0, 2]))]
