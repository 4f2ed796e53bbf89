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
