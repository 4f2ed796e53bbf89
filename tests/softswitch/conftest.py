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


TNA_PRELUDE = """
#include <core.p4>
#include <tna.p4>
"""


def tna_program(
    headers: str,
    ingress: str,
    ig_parser: str = "state start { pkt.extract(ig_intr_md); pkt.advance(PORT_METADATA_SIZE); "
    "pkt.extract(hdr.d); transition accept; }",
    ig_deparser: str = "apply { pkt.emit(hdr); }",
    eg_parser: str = "state start { pkt.extract(eg_intr_md); pkt.extract(hdr.d); transition accept; }",
    egress: str = "apply { }",
    eg_deparser: str = "apply { pkt.emit(hdr); }",
    hdr_fields: str = "d_t d;",
    meta_fields: str = "bit<8> unused;",
    extra: str = "",
) -> str:
    """A complete TNA program from its pieces (same headers/metadata types on both sides)."""
    return f"""{TNA_PRELUDE}
{headers}
struct headers_t {{ {hdr_fields} }}
struct meta_t {{ {meta_fields} }}
{extra}
parser IP(packet_in pkt, out headers_t hdr, out meta_t meta,
          out ingress_intrinsic_metadata_t ig_intr_md) {{
{ig_parser}
}}
control Ig(inout headers_t hdr, inout meta_t meta,
           in ingress_intrinsic_metadata_t ig_intr_md,
           in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
           inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
           inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {{
{ingress}
}}
control ID(packet_out pkt, inout headers_t hdr, in meta_t meta,
           in ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {{
{ig_deparser}
}}
parser EP(packet_in pkt, out headers_t hdr, out meta_t meta,
          out egress_intrinsic_metadata_t eg_intr_md) {{
{eg_parser}
}}
control Eg(inout headers_t hdr, inout meta_t meta,
           in egress_intrinsic_metadata_t eg_intr_md,
           in egress_intrinsic_metadata_from_parser_t eg_prsr_md,
           inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md,
           inout egress_intrinsic_metadata_for_output_port_t eg_oport_md) {{
{egress}
}}
control ED(packet_out pkt, inout headers_t hdr, in meta_t meta,
           in egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {{
{eg_deparser}
}}
Pipeline(IP(), Ig(), ID(), EP(), Eg(), ED()) pipe;
Switch(pipe) main;
"""


@pytest.fixture(scope="session")
def tna():
    """Builds a TNA program from pieces: see tna_program."""
    return tna_program


@pytest.fixture(scope="session")
def basic_switch_factory():
    def make(**defines: str) -> Switch:
        return Switch.from_file(P4_DIR / "basic.p4", defines=defines or None)

    return make


@pytest.fixture(scope="session")
def v1():
    """Builds a v1model program from pieces: see v1_program."""
    return v1_program
