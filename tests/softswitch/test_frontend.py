"""Frontend: preprocessor (#include, -D, #if, macros) and load-time errors with file:line:col."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from softswitch import P4Error, Switch
from softswitch.frontend.preprocessor import preprocess

P4_DIR = Path(__file__).parent / "p4"


def test_include_define_override_and_if_arithmetic() -> None:
    sw = Switch.from_file(P4_DIR / "preproc.p4")
    assert sw.process(0, b"\x00\x00\x00")[0][1] == bytes([4, 8, 0])
    assert len(sw.register_read("r")) == 4
    sw = Switch.from_file(P4_DIR / "preproc.p4", defines={"SLOTS": "9"})
    assert sw.process(0, b"\x00\x00\x00")[0][1] == bytes([9, 18, 1])
    assert len(sw.register_read("r")) == 9
    sw = Switch.from_file(P4_DIR / "preproc.p4", defines={"SLOTS": 3})
    assert sw.process(0, b"\x00\x00\x00")[0][1] == bytes([3, 6, 2])


def test_preprocessor_line_map_and_macros() -> None:
    pre = preprocess("#define A(x, y) x + y\n#if 0\nnot here\n#else\nA(1, 2)\n#endif\n", "m.p4")
    assert pre.text.split("\n")[4].strip() == "1 + 2"
    assert pre.origin(5) == ("m.p4", 5)
    assert "not here" not in pre.text
    pre = preprocess('#line 100 "orig.p4"\nx\n', "m.p4")
    assert pre.origin(2) == ("orig.p4", 100)


@pytest.mark.parametrize(
    ("src", "where", "msg"),
    [
        ("#define F(a) a\nF(1, 2)\n", "m.p4:2:", "takes 1 arguments"),
        ("#if 1\n", "m.p4:", "unterminated #if"),
        ('#include "nope.p4"\n', "m.p4:1:", "not found"),
        ("\n#if 1 +\n#endif\n", "m.p4:2:", "#if"),
        ("#error stop here\n", "m.p4:1:", "stop here"),
    ],
)
def test_preprocessor_errors(src: str, where: str, msg: str) -> None:
    with pytest.raises(P4Error) as e:
        preprocess(src, "m.p4")
    assert str(e.value).startswith(where)
    assert msg in str(e.value)


@pytest.mark.parametrize(
    ("ingress", "msg"),
    [
        ("apply { hdr.d.a = hdr.d.b; }", "type mismatch"),
        ("apply { hdr.d.b = hdr.d.a + hdr.d.b; }", "cannot mix bit<8> and bit<16>"),
        ("apply { bool f = 1; }", "type mismatch"),
        ("apply { if (hdr.d.a) { sm.egress_spec = 1; } }", "must be bool"),
        ("apply { bit<8> m; execute_meter(m); }", "unknown function or action execute_meter"),
        ("apply { hdr.d.a = undefined_name; }", "unknown name undefined_name"),
        ("apply { hdr.d.a = hdr.d.a[8:1]; }", "out of range"),
        ("apply { hdr.d.nofield = 1; }", "has no field nofield"),
        (
            "action_profile(4) ap;\napply { }",
            "extern action_profile is not supported",
        ),
        ("apply { hdr.d.a = 8w1 ++ 8w2; }", "type mismatch"),
        ("action a(bit<8> v) { v = 1; }\napply { a(1); }", "cannot assign"),
        (
            "action a() { hdr.d.a = 1; }\ntable t { key = { hdr.d.a: exact; } actions = { a; } }\n"
            "action b() { t.apply(); }\napply { b(); }",
            "tables cannot be applied from actions",
        ),
        ("apply { bool b = hdr.d.a == 16w1; }", "cannot mix"),
        ("apply { hdr.d.a = hdr.d.a << -1; }", "shift amount"),
        ("apply { hdr.d.b = (bit<16>)(int<8>)hdr.d.a; }", "cannot cast int<8> to bit<16>"),
    ],
)
def test_load_errors_point_at_the_source(v1, ingress: str, msg: str) -> None:
    src = v1(
        "header d_t { bit<8> a; bit<16> b; }",
        "state start { pkt.extract(hdr.d); transition accept; }",
        ingress,
        hdr_fields="d_t d;",
    )
    with pytest.raises(P4Error) as e:
        Switch.from_source(src, "bad.p4")
    text = str(e.value)
    assert msg in text
    m = re.match(r"bad\.p4:(\d+):(\d+): ", text)
    assert m, text
    line = int(m.group(1))
    bad_line = src.split("\n")[line - 1]
    assert bad_line.strip(), "the error points at a real source line"


def test_syntax_error_location() -> None:
    with pytest.raises(P4Error, match=r"^s\.p4:3:19: syntax error"):
        Switch.from_source(
            "#include <v1model.p4>\nheader h_t { bit<8> a; }\nstruct s { bit<8> }\n", "s.p4"
        )


def test_errors_in_included_files_name_that_file(tmp_path) -> None:
    (tmp_path / "inc.p4").write_text("// comment\nconst bit<8> X = 8w1 + 16w2;\n")
    (tmp_path / "top.p4").write_text('#include <v1model.p4>\n#include "inc.p4"\n')
    with pytest.raises(P4Error) as e:
        Switch.from_file(tmp_path / "top.p4")
    assert str(e.value).startswith(f"{tmp_path / 'inc.p4'}:2:")


def test_macro_stringify_paste_and_varargs() -> None:
    src = (
        "#define CAT(a, b) a##b\n#define STR(x) #x\n#define V(f, ...) f(__VA_ARGS__)\n"
        "CAT(foo, bar) STR(hi) V(g, 1, 2)\n"
    )
    assert preprocess(src, "x.p4").text.split("\n")[3] == 'foobar "hi" g(1, 2)'


@pytest.mark.parametrize(
    "ingress",
    [
        "action a() { }\naction a() { }\napply { }",
        "apply { bit<8> x = 1; bit<8> x = 2; }",
        "table t { key = { sm.ingress_port: exact; } actions = { NoAction; } }\n"
        "register<bit<8>>(1) t;\napply { }",
    ],
)
def test_redeclarations_are_rejected(v1, ingress: str) -> None:
    src = v1("", "state start { transition accept; }", ingress)
    with pytest.raises(P4Error, match=r"^bad\.p4:\d+:\d+: re-declaration of"):
        Switch.from_source(src, "bad.p4")


def test_annotated_blocks_and_type_annotation_arguments(v1) -> None:
    src = v1(
        '@p4runtime_translation("p4.org/x", bit<32>) type bit<9> port_t;',
        "state start { transition accept; }",
        "apply { @atomic { sm.egress_spec = (bit<9>)(port_t)3; } }",
    )
    assert Switch.from_source(src, "ann.p4").process(0, b"\x00") == [(3, b"\x00")]
