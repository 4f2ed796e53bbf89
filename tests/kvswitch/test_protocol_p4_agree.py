"""kvswitch/protocol.py and the P4 program's p4src/shared/protocol.p4 say the same numbers.

The P4 file is parsed for its ``const bit<N> NAME = value;`` lines and its ``enum bit<8> Name {...}``
blocks. A missing file or a missing declaration is a failure, never a skip: the two copies of the
contract must exist and agree.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kvswitch import protocol as p
from kvswitch.paths import p4src_dir

_CONST = re.compile(r"^\s*const\s+bit<\d+>\s+(\w+)\s*=\s*(0x[0-9a-fA-F]+|\d+)\s*;", re.M)
_ENUM = re.compile(r"enum\s+bit<\d+>\s+(\w+)\s*\{([^}]*)\}", re.S)
_MEMBER = re.compile(r"(\w+)\s*=\s*(0x[0-9a-fA-F]+|\d+)")


def _protocol_p4() -> str:
    path = p4src_dir() / "shared" / "protocol.p4"
    if not path.is_file():
        pytest.fail(f"{path} does not exist: the P4 copy of the protocol constants is missing")
    return Path(path).read_text()


def _strip_comments(text: str) -> str:
    return re.sub(r"//[^\n]*|/\*.*?\*/", "", text, flags=re.S)


def parse_consts(text: str) -> dict[str, int]:
    return {name: int(value, 0) for name, value in _CONST.findall(_strip_comments(text))}


def parse_enums(text: str) -> dict[str, dict[str, int]]:
    return {
        name: {m: int(v, 0) for m, v in _MEMBER.findall(body)}
        for name, body in _ENUM.findall(_strip_comments(text))
    }


def test_constants_agree() -> None:
    consts = parse_consts(_protocol_p4())
    expected = {
        "KVS_PORT": p.KVS_PORT,
        "KVS_HDR_LEN": p.HEADER_LEN,
        "KVS_MAX_VALUE": p.MAX_VALUE,
        "KVS_F_TCP": p.F_TCP,
        "KVS_F_DUP": p.F_DUP,
        "KVS_F_REDIRECT": p.F_REDIRECT,
        "KVS_F_SETTLED": p.F_SETTLED,
    }
    missing = sorted(set(expected) - set(consts))
    assert not missing, f"protocol.p4 does not declare {missing}"
    assert {name: consts[name] for name in expected} == expected


def test_op_codes_agree() -> None:
    enums = parse_enums(_protocol_p4())
    assert "KvsOp" in enums, "protocol.p4 has no `enum bit<8> KvsOp`"
    assert enums["KvsOp"] == {op.name: int(op) for op in p.Op}


def test_status_codes_agree() -> None:
    enums = parse_enums(_protocol_p4())
    assert "KvsStatus" in enums, "protocol.p4 has no `enum bit<8> KvsStatus`"
    assert enums["KvsStatus"] == {s.name: int(s) for s in p.Status}


def test_header_p4_is_36_bytes() -> None:
    """The P4 header type's field widths add up to the Python header length."""
    shared = _strip_comments(
        "\n".join(f.read_text() for f in sorted((p4src_dir() / "shared").glob("*.p4")))
    )
    widths = {name: int(w) for w, name in re.findall(r"typedef\s+bit<(\d+)>\s+(\w+)\s*;", shared)}
    widths |= {name: int(w) for w, name in re.findall(r"enum\s+bit<(\d+)>\s+(\w+)", shared)}
    match = re.search(r"header\s+kvs_t\s*\{([^}]*)\}", shared)
    assert match, "p4src/shared has no `header kvs_t`"
    total = 0
    for ftype, fname in re.findall(r"(bit<\d+>|\w+)\s+(\w+)\s*;", match.group(1)):
        if ftype.startswith("bit<"):
            total += int(ftype[4:-1])
        else:
            assert ftype in widths, f"kvs_t.{fname}: type {ftype} not declared in p4src/shared"
            total += widths[ftype]
    assert total == 8 * p.HEADER_LEN


def test_parsers_detect_a_mismatch() -> None:
    """The parsing above would notice a changed value (the test can fail)."""
    text = "const bit<16> KVS_PORT = 8901;\nenum bit<8> KvsOp { GET = 1, SET = 4 }"
    assert parse_consts(text)["KVS_PORT"] != p.KVS_PORT
    assert parse_enums(text)["KvsOp"] != {op.name: int(op) for op in p.Op}
