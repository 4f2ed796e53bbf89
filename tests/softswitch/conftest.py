"""Shared helpers for the software switch engine tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from softswitch import Switch

P4_DIR = Path(__file__).parent / "p4"

V1_PRELUDE = """
#include <core.p4>
#include <v1model.p4>
"""


def v1_program(
    headers: str,
    parser: str,
    ingress: str,
    egress: str = "apply { }",
    deparser: str = "apply { }",
    hdr_fields: str = "",
    meta_fields: str = "bit<8> unused;",
    compute: str = "apply { }",
) -> str:
    """A complete v1model program from its pieces (each control body is the text inside `{}`)."""
    return f"""{V1_PRELUDE}
{headers}
struct headers_t {{ {hdr_fields} }}
struct meta_t {{ {meta_fields} }}
parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {{
{parser}
}}
control VC(inout headers_t hdr, inout meta_t meta) {{ apply {{ }} }}
control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {{
{ingress}
}}
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {{
{egress}
}}
control CC(inout headers_t hdr, inout meta_t meta) {{ {compute} }}
control D(packet_out pkt, in headers_t hdr) {{
{deparser}
}}
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


@pytest.fixture(scope="session")
def basic_switch_factory():
    def make(**defines: str) -> Switch:
        return Switch.from_file(P4_DIR / "basic.p4", defines=defines or None)

    return make


@pytest.fixture(scope="session")
def v1():
    """Builds a v1model program from pieces: see v1_program."""
    return v1_program
