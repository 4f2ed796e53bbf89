"""The software switch's TNA mode rejects what p4c's Tofino back end (p4c-barefoot) rejects (issue
19; softswitch/arch/tna_rules.py). Each case is a small TNA program that the compiler rejected and
its fixed twin that the compiler accepted (both verified with p4c-barefoot of p4c main 34b86e9,
`--target tofino --arch tna`); ``compiler`` is the compiler's message. The tests need no compiler;
``test_the_compiler_agrees`` repeats the compiles where one is on PATH and is skipped elsewhere."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from softswitch import P4Error, Switch
from tests.softswitch.conftest import tna_program

HEADERS = "header d_t { bit<8> op; bit<8> idx; bit<32> v; bit<32> r; bit<16> h16; bit<32> h32; }"
FWD = "ig_tm_md.ucast_egress_port = 1;"


@dataclass
class Case:
    """``bad`` (the pieces of tna_program) is rejected at ``marker`` (the first occurrence of that
    text) with ``ours``; the compiler says ``compiler``; ``good`` loads and compiles."""

    id: str
    bad: dict[str, Any]
    marker: str
    ours: str
    compiler: str
    good: dict[str, Any] = field(default_factory=dict)


def ig(body: str, **kw: Any) -> dict[str, Any]:
    return {"ingress": f"apply {{ {FWD} {body} }}", **kw}


# ---- 1: several RegisterAction executes in one expression
TWO_REGS = """
Register<bit<32>, bit<8>>(4) ra;
Register<bit<32>, bit<8>>(4) rb;
RegisterAction<bit<32>, bit<8>, bit<16>>(ra) a = {
    void apply(inout bit<32> value, out bit<16> rv) { rv = (bit<16>)value; value = value + 1; }
};
RegisterAction<bit<32>, bit<8>, bit<16>>(rb) b = {
    void apply(inout bit<32> value, out bit<16> rv) { rv = (bit<16>)value; value = value + 1; }
};
"""


def two_regs(body: str) -> dict[str, Any]:
    return {"ingress": TWO_REGS + f"apply {{ {FWD} {body} }}"}


# ---- 9/10: a RegisterAction's comparisons
def salu(body: str) -> dict[str, Any]:
    return {
        "meta_fields": "bit<32> m; bool ok;",
        "ingress": """
Register<bit<32>, bit<8>>(4) ra;
RegisterAction<bit<32>, bit<8>, bit<32>>(ra) a = {
    void apply(inout bit<32> value, out bit<32> rv) { """
        + body
        + f""" }}
}};
apply {{ {FWD} meta.m = hdr.d.v; meta.ok = false; if (hdr.d.op == 1) {{ meta.ok = true; }}
    hdr.d.r = a.execute(hdr.d.idx); }}""",
    }


# ---- 20: a Register's PHV inputs (a reads, on op 1; b otherwise)
def salu_pair(a: str, b: str) -> dict[str, Any]:
    ra = "RegisterAction<bit<32>, bit<8>, bit<32>>(ra) {} = {{ void apply(inout bit<32> value, "
    ra += "out bit<32> rv) {{ rv = value; {} }} }};"
    return {
        "meta_fields": "bit<32> m;",
        "ingress": "Register<bit<32>, bit<8>>(4) ra; "
        + ra.format("a", a)
        + ra.format("b", b)
        + f"apply {{ {FWD} meta.m = hdr.d.r; if (hdr.d.op == 1) {{ hdr.d.r = a.execute(hdr.d.idx); "
        "} else { hdr.d.r = b.execute(hdr.d.idx); } }",
    }


# ---- 5/6: parser assignments
PARSER_META = "bit<16> m; bit<16> m2; bit<8> x8; bit<32> w; bool ok;"


def parser_sets(stmt: str) -> dict[str, Any]:
    return {
        "meta_fields": PARSER_META,
        "ig_parser": "state start { pkt.extract(ig_intr_md); pkt.advance(PORT_METADATA_SIZE); "
        f"pkt.extract(hdr.d); {stmt} transition accept; }}",
        "ingress": f"apply {{ {FWD} hdr.d.h32 = meta.m ++ meta.m2; hdr.d.r = meta.w; "
        "hdr.d.op = meta.x8; if (meta.ok) { hdr.d.idx = 1; } }",
    }


# ---- 7 and 3: parser checksums
CHECKSUM_START = """Checksum() ck;
state start { pkt.extract(ig_intr_md); pkt.advance(PORT_METADATA_SIZE); transition parse_d; }
state parse_d { pkt.extract(hdr.d); """


def checksum_parser(parse_d: str, **pieces: Any) -> dict[str, Any]:
    """An ingress parser with a Checksum ck; ``parse_d`` goes on after hdr.d's extract."""
    return {"ig_parser": CHECKSUM_START + parse_d, "ingress": f"apply {{ {FWD} }}", **pieces}


def parser_checksum(in_extracting: str, in_next: str) -> dict[str, Any]:
    return checksum_parser(
        f"{in_extracting} transition select(hdr.d.op) {{ 1: next; default: accept; }} }}\n"
        f"state next {{ {in_next} transition accept; }}",
        meta_fields="bool ok; bit<16> m;",
    )


def varbit_checksum(op: str) -> dict[str, Any]:
    return checksum_parser(
        f"pkt.extract(hdr.o, (bit<32>)hdr.d.idx << 4); {op} hdr.d.h16 = ck.get(); "
        "transition accept; }",
        headers=HEADERS + " header o_t { varbit<64> data; }",
        hdr_fields="d_t d; o_t o;",
    )


# ---- 8: deparser checksum update conditions
COND_HEADERS = HEADERS + " header e_t { bit<16> c; } header f_t { bit<16> c; }"


def update_under(cond: str) -> dict[str, Any]:
    return {
        "headers": COND_HEADERS,
        "hdr_fields": "d_t d; e_t e; f_t f;",
        "meta_fields": "bool b; bit<1> f; bit<8> x8;",
        "ingress": f"apply {{ {FWD} meta.b = true; meta.f = 1; meta.x8 = 1; }}",
        "ig_deparser": "Checksum() ck; Checksum() ck2; apply { if ("
        + cond
        + ") { if (hdr.e.isValid()) { hdr.e.c = ck.update({hdr.d.v, hdr.d.r}); } "
        "else if (hdr.f.isValid()) { hdr.f.c = ck2.update({hdr.d.v}); } } pkt.emit(hdr); }",
    }


def update_if(cond: str) -> dict[str, Any]:
    return update_under(cond) | {
        "ig_deparser": f"Checksum() ck; apply {{ if ({cond}) {{ "
        "hdr.d.h16 = ck.update({hdr.d.v, hdr.d.r}); } pkt.emit(hdr); }"
    }


# ---- 4: the egress parser's depth
BLOB_HEADERS = HEADERS + " header b_t { bit<64> a; bit<64> b; bit<64> c; bit<64> e; }"


def egress_parses(n: int, varbit: bool = False) -> dict[str, Any]:
    """The egress parser extracts eg_intr_md (27 B to the compiler), d (16 B), n times 32 B and,
    with ``varbit``, up to 64 B more in a state of its own."""
    blobs = " ".join(f"pkt.extract(hdr.b{i});" for i in range(n))
    tail = "transition accept; }"
    if varbit:
        tail = "transition select(hdr.d.op) { 1: opt; default: accept; } }\n"
        tail += "state opt { pkt.extract(hdr.o, (bit<32>)hdr.d.idx << 3); transition accept; }"
    return {
        "headers": BLOB_HEADERS + " header o_t { varbit<512> data; }",
        "hdr_fields": "d_t d; o_t o; " + " ".join(f"b_t b{i};" for i in range(n)),
        "ingress": f"apply {{ {FWD} }}",
        "eg_parser": f"state start {{ pkt.extract(eg_intr_md); pkt.extract(hdr.d); {blobs} {tail}",
    }


PD = "Parser EP: longest path through parser ({}B) exceeds maximum parse depth (160B)"

CASES = [
    Case(
        "1-executes-in-one-dead-expression",
        two_regs("bit<32> k = a.execute(hdr.d.idx) ++ b.execute(hdr.d.idx);"),
        "b.execute(hdr.d.idx);",
        "a second RegisterAction execute in one statement (the first at t.p4:@a.execute(hdr.d.idx) ++@)",
        "too many side-effect in one expression",
        two_regs(
            "bit<16> x = a.execute(hdr.d.idx); bit<16> y = b.execute(hdr.d.idx); "
            "bit<32> k = x ++ y;"
        ),
    ),
    Case(
        "1-executes-added",
        two_regs("hdr.d.r = (bit<32>)a.execute(hdr.d.idx) + (bit<32>)b.execute(hdr.d.idx);"),
        "b.execute(hdr.d.idx);",
        "Tofino takes one stateful ALU result per expression",
        "Instruction selection creates an instruction that the rest of the compiler cannot "
        "correctly interpret",
        two_regs(
            "bit<16> x = a.execute(hdr.d.idx); bit<16> y = b.execute(hdr.d.idx); hdr.d.h16 = x + y;"
        ),
    ),
    Case(
        "2-mod-not-a-power-of-two",
        ig("hdr.d.r = hdr.d.v % 257;"),
        "hdr.d.v % 257",
        "hdr.d.v % 257: %: the target has no divider, only % by a constant power of two",
        "hdr.d.v % 257: could not evaluate expression at compilation time",
        ig("hdr.d.r = hdr.d.v % 256;"),
    ),
    Case(
        "2-div-by-a-field",
        ig("hdr.d.r = hdr.d.v / hdr.d.r;", egress="apply { hdr.d.r = hdr.d.v / 4; }"),
        "hdr.d.v / hdr.d.r",
        "/: the target has no divider, only / by a constant power of two",
        "hdr.d.v / hdr.d.r: could not evaluate expression at compilation time",
        ig("hdr.d.r = hdr.d.v / 4;", egress="apply { hdr.d.r = 32w1000 / 7; }"),
    ),
    Case(
        "2-shift-by-a-field",
        ig("hdr.d.r = hdr.d.v << hdr.d.idx;"),
        "hdr.d.v << hdr.d.idx",
        "hdr.d.v << hdr.d.idx: Tofino shifts by constant amounts only",
        "shift count must be a constant in ingress::hdr.d.v << ingress::hdr.d.idx",
        ig("hdr.d.r = hdr.d.v << 3;"),
    ),
    Case(
        "2-shift-in-a-stateful-alu",
        salu("rv = value; value = value << 1;"),
        "value << 1",
        "value << 1: a stateful ALU does not shift",
        "expression too complex for register action",
        salu("rv = value; value = value + value;"),
    ),
    Case(
        "3-varbit-in-checksum-subtract",
        varbit_checksum("ck.subtract({hdr.o.data});"),
        "ck.subtract({hdr.o.data})",
        "Checksum.subtract over a varbit field",
        "Checksum subtract is currently not supported to have varbit fields",
        varbit_checksum("ck.subtract({hdr.d.v});"),
    ),
    Case(
        "4-egress-parse-depth",
        egress_parses(4),
        "parser EP(",
        "egress parser EP: its longest path (start, varbits at their maximum) takes 171 B, "
        "more than Tofino's 160 B",
        PD.format(171),
        egress_parses(3),  # 139 B
    ),
    Case(
        "4-egress-parse-depth-varbit-at-its-maximum",
        egress_parses(2, varbit=True),
        "parser EP(",
        "egress parser EP: its longest path (start -> opt, varbits at their maximum) takes 171 B",
        PD.format(171),
        egress_parses(1, varbit=True),  # 139 B; the ingress parser has no limit on Tofino 1
    ),
    Case(
        "5-parser-arithmetic",
        parser_sets("meta.m = hdr.d.h16 - (bit<16>)hdr.d.idx;"),
        "hdr.d.h16 - (bit<16>)hdr.d.idx",
        "hdr.d.h16 - (bit<16>)hdr.d.idx: Tofino's parser writes constants, fields, their slices "
        "and lookahead only",
        "Assignment source cannot be evaluated in the parser: hdr.d/d.h16 - (0 ++ hdr.d/d.idx)",
        parser_sets(
            "meta.m = hdr.d.h16; meta.m2 = (bit<16>)hdr.d.idx; meta.x8 = hdr.d.v[19:12]; "
            "meta.w = hdr.d.h16 ++ pkt.lookahead<bit<16>>(); meta.ok = true;"
        ),
    ),
    Case(
        "6-parser-conditional",
        parser_sets("meta.m = hdr.d.op == 0 ? hdr.d.h16 : 0;"),
        "hdr.d.op == 0 ?",
        "Tofino's parser writes constants, fields",
        "Assignment source cannot be evaluated in the parser: ?:",
        parser_sets("meta.m = 5; meta.m2 = meta.m;"),
    ),
    Case(
        "7-checksum-after-the-extracting-state",
        parser_checksum("", "ck.add({hdr.d.v}); meta.ok = ck.verify();"),
        "ck.add({hdr.d.v})",
        "Checksum.add in parser state next over a header the state does not extract",
        "hdr.d.v field in ck_0 is not extracted in next. Operations on the checksum fields must "
        "be in the same parser state where the fields are extracted.",
        parser_checksum("ck.add({hdr.d.v, 16w0});", "meta.ok = ck.verify();"),
    ),
    Case(
        "7-checksum-of-metadata",
        parser_checksum("ck.add({hdr.d.v, meta.m}); meta.ok = ck.verify();", ""),
        "ck.add({hdr.d.v, meta.m})",
        "Checksum.add: an item is not a header field",
        "Operations on the checksum fields must be in the same parser state where the fields "
        "are extracted.",
        parser_checksum("ck.add({hdr.d.v}); meta.ok = ck.verify();", ""),
    ),
    Case(
        "8-update-condition-of-two-bits",
        update_under("meta.b && hdr.d.isValid()"),
        "meta.b && hdr.d.isValid()",
        "meta.b && hdr.d.isValid(): a deparser checksum update takes a one-bit condition",
        "Tofino only supports 1-bit checksum update condition in the deparser,  in the form of "
        '"cond == 1", "cond == 0", "cond != 1", "cond != 0". Please move the update condition '
        "into the control flow: meta.b && hdr.d/d.$valid == 1",
        update_under("meta.b"),
    ),
    Case(
        "8-update-condition-of-eight-bits",
        update_if("meta.x8 == 1"),
        "meta.x8 == 1",
        "a deparser checksum update takes a one-bit condition",
        "Tofino only supports 1-bit checksum update condition in the deparser",
        update_if("meta.f == 1"),
    ),
    Case(
        "8-header-write-in-a-deparser",
        update_under("hdr.d.isValid()")
        | {"ig_deparser": "apply { hdr.d.h16 = 0; pkt.emit(hdr); }"},
        "hdr.d.h16 = 0",
        "hdr.d.h16 = 0;: a deparser writes a header field only from a Checksum update",
        "Assignment to a header field in the deparser is only allowed when the source is "
        "checksum update, mirror, resubmit or learning digest",
        update_under("!meta.b"),
    ),
    Case(
        "9-three-comparisons",
        salu("rv = 0; if (value == 5 || value == 7 || value == 9) { value = value + 1; rv = 1; }"),
        "void apply(",
        "RegisterAction Ig.a.apply needs 3 comparisons but a stateful ALU has 2 comparison units "
        "(value == 5, value == 7, value == 9;",
        "RegisterAction a.apply needs 3 comparisons but the device only has 2 comparison units",
        # a comparison and its negation take one unit
        salu(
            "rv = 0; if (value < 5) { value = 1; } if (value >= 5) { rv = 1; } "
            "if (value == 7) { rv = 2; }"
        ),
    ),
    Case(
        "10-a-bool-from-outside-and-swapped-operands",
        salu(
            "rv = 0; if (meta.ok) { value = 1; } if (value < meta.m) { rv = 1; } "
            "if (meta.m > value) { rv = 2; }"
        ),
        "void apply(",
        "needs 3 comparisons but a stateful ALU has 2 comparison units (meta.ok, value < meta.m, "
        "meta.m > value;",
        "RegisterAction a.apply needs 3 comparisons but the device only has 2 comparison units",
        # bools computed in apply cost their comparisons only; predicate() reuses them
        salu(
            "bool x = value == 5; bool y = value < meta.m; rv = this.predicate(x, y); "
            "if (x || y) { value = 0; }"
        ),
    ),
]


# ---- what came next in small programs: bools a match-action stage computes
BOOL_META = "bool ok; bit<8> a;"
W_SALU = """bool w = false;
Register<bit<32>, bit<8>>(4) ra;
RegisterAction<bit<32>, bit<8>, bit<32>>(ra) a = {
    void apply(inout bit<32> value, out bit<32> rv) { rv = value; if (w) { value = value + 1; } }
};
"""
CASES += [
    Case(
        "11-comparison-into-metadata",
        ig("meta.ok = hdr.d.op == 1; if (meta.ok) { hdr.d.r = 1; }", meta_fields=BOOL_META),
        "meta.ok = hdr.d.op == 1",
        "meta.ok = hdr.d.op == 1;: a match-action stage cannot write a comparison",
        "source of modify_field invalid",
        # a local holding a comparison is folded into the ifs that test it
        ig(
            "bool x = hdr.d.op == 1; meta.ok = false; if (x) { meta.ok = true; } "
            "if (meta.ok) { hdr.d.r = 1; }",
            meta_fields=BOOL_META,
        ),
    ),
    Case(
        "11-comparison-as-a-stateful-alu-input",
        {"ingress": W_SALU + f"apply {{ {FWD} w = hdr.d.op == 1; hdr.d.r = a.execute(0); }}"},
        "w) { value",
        "RegisterAction Ig.a reads w, a bool the control computed from a comparison",
        "source of modify_field invalid",
        {
            "ingress": W_SALU
            + f"apply {{ {FWD} if (hdr.d.op == 1) {{ w = true; }} hdr.d.r = a.execute(0); }}"
        },
    ),
    Case(
        "11-select-in-a-stage",
        ig("meta.a = hdr.d.op == 1 ? 8w1 : 8w0; hdr.d.idx = meta.a;", meta_fields=BOOL_META),
        "hdr.d.op == 1 ?",
        "hdr.d.op == 1 ? 8w1 : 8w0: a match-action stage selects a value only in an if",
        "Conditions in an action must be simple comparisons of an action data parameter",
        ig(
            "meta.a = 0; if (hdr.d.op == 1) { meta.a = 1; } hdr.d.idx = meta.a;",
            meta_fields=BOOL_META,
        ),
    ),
]


# ---- what came next: gateways (ifs), one operation per action, register indexes
GW_META = "bool ok; bit<32> w; bit<32> base; bool is_server;"
REG = """Register<bit<32>, bit<32>>(1024) ra;
RegisterAction<bit<32>, bit<32>, bit<32>>(ra) rx = {
    void apply(inout bit<32> value, out bit<32> rv) { rv = value; value = value + 1; }
};
"""


def gw(body: str, **kw: Any) -> dict[str, Any]:
    return ig(body, meta_fields=GW_META, **kw)


def reg(body: str) -> dict[str, Any]:
    return {"meta_fields": GW_META, "ingress": REG + f"apply {{ {FWD} {body} }}"}


def act(action: str, body: str = "f();") -> dict[str, Any]:
    return {
        "meta_fields": GW_META,
        "ingress": f"action f() {{ {action} }} apply {{ {FWD} {body} }}",
    }


SERVER_TABLE = """action set(bit<8> server) {{ {} }}
table t {{ key = {{ hdr.d.op: exact; }} actions = {{ set; }} }}
apply {{ {} t.apply(); if (meta.is_server) {{ hdr.d.v = 1; }} }}"""


def server_action(body: str) -> dict[str, Any]:
    return {"meta_fields": GW_META, "ingress": SERVER_TABLE.format(body, FWD)}


TOO_WIDE = "condition too complex, limit of 4 bytes + 12 bits of PHV input exceeded"
CASES += [
    Case(
        "12-two-fields-compared-by-less-than",
        gw("if (hdr.d.op < hdr.d.idx) { hdr.d.v = 1; }"),
        "hdr.d.op < hdr.d.idx",
        "hdr.d.op < hdr.d.idx: a gateway compares a field with a constant by <",
        "condition too complex, one operand of ingress::hdr.d.op < ingress::hdr.d.idx must be "
        "constant",
        # == and != of two fields are XORs; < of a constant is a range
        gw(
            "if (hdr.d.op == hdr.d.idx || hdr.d.v != hdr.d.r) { if (hdr.d.op >= 5) { hdr.d.v = 1; } }"
        ),
    ),
    Case(
        "12-a-local-holding-a-comparison-of-two-fields",
        gw("bool x = hdr.d.op > hdr.d.idx; if (x) { hdr.d.v = 1; }"),
        "hdr.d.op > hdr.d.idx",
        "hdr.d.op > hdr.d.idx: a gateway compares a field with a constant by >",
        "one operand of ingress::hdr.d.op > ingress::hdr.d.idx must be constant",
        gw("bool x = hdr.d.op > 7; if (x) { hdr.d.v = 1; }"),
    ),
    Case(
        "12-a-difference-folded-into-the-if",
        gw("bit<32> u = hdr.d.v - hdr.d.r; hdr.d.h32 = u; if (u[31:31] == 0) { hdr.d.op = 1; }"),
        "u[31:31] == 0",
        "u[31:31]: a gateway tests PHV fields, not operations",
        "condition expression too complex",
        # computed in an action, or in both branches of an if; a mask is a masked comparison
        {
            "meta_fields": GW_META,
            "ingress": "action f() { meta.w = hdr.d.v - hdr.d.r; } "
            f"apply {{ {FWD} f(); if (meta.w[31:31] == 0) {{ hdr.d.op = 1; }} "
            "bit<32> u; if (hdr.d.op == 1) { u = hdr.d.v - hdr.d.r; } else { u = hdr.d.v; } "
            "if (u[31:31] == 0) { hdr.d.op = 2; } "
            "bit<16> k = 0x0F00; bit<16> m = hdr.d.h16 & k; if (m != 0) { hdr.d.op = 3; } "
            "if ((hdr.d.v & 3) == 1) { hdr.d.idx = 2; } }",
        },
    ),
    Case(
        "13-a-range-over-more-than-12-bits",
        gw("if (hdr.d.h16 < 20 || hdr.d.op == 1) { hdr.d.op = 1; }"),
        "hdr.d.h16 < 20",
        "a gateway reads 0 bytes + 14 bits of PHV, more than Tofino's 4 bytes + 12 bits",
        TOO_WIDE,
        # the bits below the constant's lowest one are sliced off; < a power of two is == 0
        gw("if (hdr.d.v[11:0] < 20 || hdr.d.v < 4096 || hdr.d.h16 >= 1024) { hdr.d.op = 1; }"),
    ),
    Case(
        "13-more-than-4-bytes-in-a-term",
        gw("if (hdr.d.v == 5 && hdr.d.op == 1 && hdr.d.idx == 1) { hdr.d.h16 = 1; }"),
        "hdr.d.v == 5 &&",
        "a gateway reads 5 bytes + 8 bits of PHV, more than Tofino's 4 bytes + 12 bits",
        TOO_WIDE,
        # a byte field goes to the 12 hash bits; terms of an || are split over gateways
        gw(
            "if (hdr.d.v == 5 && hdr.d.op == 1 && hdr.d.isValid()) { hdr.d.h16 = 1; } "
            "if (hdr.d.v == 5 || hdr.d.h16 == 1) { hdr.d.op = 1; } "
            "if (hdr.d.v == 5) { if (hdr.d.h16 == 1) { hdr.d.op = 1; } }"
        ),
    ),
    Case(
        "14-a-sum-shifted-in-one-expression",
        act("hdr.d.h32 = hdr.d.v - (hdr.d.r << 2);"),
        "hdr.d.h32 = hdr.d.v",
        "2 dependent operations in one action",
        "sub: action spanning multiple stages. Operations on operand 3 ($tmp3[0..31]) in action "
        "f require multiple stages for a single action.",
        act("hdr.d.h32 = hdr.d.v - hdr.d.r; hdr.d.r = hdr.d.v + 1;"),
    ),
    Case(
        "14-a-field-the-action-computed",
        act("meta.w = hdr.d.v - hdr.d.r; hdr.d.h32 = meta.w + 1;"),
        "hdr.d.h32 = meta.w + 1",
        "hdr.d.h32 = meta.w + 1;: 2 dependent operations in one action",
        "add: action spanning multiple stages. Operations on operand 2 ($tmp3[0..31]) in action "
        "f require multiple stages for a single action.",
        act("meta.w = hdr.d.v - hdr.d.r;", "f(); hdr.d.h32 = (bit<32>)(hdr.d.h16 + 1);"),
    ),
    Case(
        "14-a-local-folded-in",
        gw("bit<32> x = hdr.d.v - hdr.d.r; hdr.d.h32 = x + 1;"),
        "hdr.d.h32 = x + 1",
        "2 dependent operations in one action",
        "add: action spanning multiple stages. Operations on operand 2 ($tmp3[0..31])",
        # a local set in both branches of an if is not folded; constants are
        gw(
            "bit<32> x; bit<32> k = 3; if (hdr.d.op == 1) { x = hdr.d.v - hdr.d.r; } "
            "else { x = hdr.d.v + hdr.d.r; } hdr.d.h32 = x + (k << 2);"
        ),
    ),
    Case(
        "14-not-of-a-sum",
        act("hdr.d.h32 = ~(hdr.d.v + 1);"),
        "hdr.d.h32 = ~(",
        "2 dependent operations in one action",
        "not: action spanning multiple stages.",
        act("hdr.d.h32 = ~hdr.d.v;"),
    ),
    Case(
        "15-register-index-a-sum",
        reg("meta.base = hdr.d.v; hdr.d.r = rx.execute(meta.base + (bit<32>)hdr.d.idx);"),
        "meta.base + (bit<32>)",
        "Ig.rx.execute(meta.base + (bit<32>)hdr.d.idx): a stateful ALU's index is a field or a "
        "constant, not an operation",
        "The index is too complex for the primitive to be handled.",
        reg("hdr.d.r = rx.execute(hdr.d.v[9:0] ++ 22w0);"),
    ),
    Case(
        "15-register-index-masked",
        reg("hdr.d.r = rx.execute(hdr.d.v & 1023);"),
        "hdr.d.v & 1023",
        "a stateful ALU's index is a field or a constant",
        "The index is too complex for the primitive to be handled.",
        reg("hdr.d.r = rx.execute((bit<32>)hdr.d.idx);"),
    ),
    Case(
        "16-comparison-of-an-action-parameter",
        server_action("meta.is_server = server == 1;"),
        "meta.is_server = server == 1",
        "a match-action stage cannot write a comparison",
        "source of modify_field invalid",
        server_action("meta.is_server = (bool)server[0:0];"),
    ),
    Case(
        "20-three-phv-inputs-in-one-action",
        salu_pair("if (value < meta.m) { value = hdr.d.v; } else { value = hdr.d.h32; }", ""),
        "hdr.d.h32; }",
        "the RegisterActions of Ig.ra read 3 PHV inputs (meta.m, hdr.d.v, hdr.d.h32) but a "
        "stateful ALU takes 2",
        "Ig.ra requires more than 2 PHV inputs",
        salu_pair("if (value < meta.m) { value = hdr.d.v; }", "value = hdr.d.v;"),
    ),
    Case(
        "20-three-phv-inputs-over-two-actions",
        salu_pair("if (value < meta.m) { value = hdr.d.v; }", "value = hdr.d.h32;"),
        "hdr.d.h32;",
        "the RegisterActions of Ig.ra read 3 PHV inputs",
        "Ig.ra requires more than 2 PHV inputs",
        # a constant, the register's value and the actions' own locals are not PHV inputs
        salu_pair(
            "if (value < meta.m) { value = hdr.d.v; }", "bit<32> t = value + 3; value = t | 1;"
        ),
    ),
]


def program(pieces: dict[str, Any]) -> str:
    kw = dict(pieces)
    return tna_program(kw.pop("headers", HEADERS), **kw)


def where(src: str, text: str) -> str:
    """line:col of the first occurrence of ``text`` in ``src``."""
    lines = src.splitlines()
    line = next(i for i, x in enumerate(lines, 1) if text in x)
    return f"{line}:{lines[line - 1].index(text) + 1}"


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_the_compilers_rejections_are_load_errors(case: Case) -> None:
    src = program(case.bad)
    with pytest.raises(P4Error) as e:
        Switch.from_source(src, "t.p4")
    text = str(e.value)
    assert text.startswith(f"t.p4:{where(src, case.marker)}: "), text
    parts = case.ours.split("@")
    assert "".join(where(src, p) if i % 2 else p for i, p in enumerate(parts)) in text
    assert "\n" not in text


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_the_fixed_twins_load(case: Case) -> None:
    Switch.from_source(program(case.good), "t.p4")


def test_verify_in_a_tna_parser_is_a_load_error() -> None:
    # p4c-barefoot compiles it with a warning and drops it: 'Parser "verify" is currently
    # unsupported'; the packet would go on on Tofino where this switch stops it
    src = program(parser_sets("verify(hdr.d.op != 0, error.NoMatch);"))
    with pytest.raises(P4Error, match=r"verify in a TNA parser: Tofino's compiler drops it"):
        Switch.from_source(src, "t.p4")


def tofino_compiler() -> list[str] | None:
    """p4c's Tofino back end (p4c-barefoot) or bf-p4c on PATH."""
    for name in ("p4c-barefoot", "bf-p4c"):
        found = shutil.which(name)
        if found:
            return [found, "--std", "p4-16", "--target", "tofino", "--arch", "tna"]
    return None


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_the_compiler_agrees(case: Case, tmp_path: Path) -> None:
    """The compiler gives its message for the rejected program and not for the fixed twin
    (whose compile is not required to finish: only that it gets past this check)."""
    cmd = tofino_compiler()
    if cmd is None:
        pytest.skip("no p4c-barefoot or bf-p4c on PATH: the cases record the compiler's messages")
    for name, pieces, expect in (("bad", case.bad, True), ("good", case.good, False)):
        p4 = tmp_path / f"{name}.p4"
        p4.write_text(program(pieces))
        done = subprocess.run(
            [*cmd, "-o", str(tmp_path / name), str(p4)],
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert (case.compiler in done.stdout + done.stderr) == expect, (name, done.stderr)
