"""TNA on the software switch: intrinsic metadata, the ingress/egress parsers and deparsers, the
traffic manager (unicast, mcast_grp_a + rid, drop_ctl, bypass_egress, resubmit, mirror), bridged
metadata, parser errors, P4Info."""

from __future__ import annotations

import pytest

from softswitch import P4Error, Switch, SwitchError

HEADERS = """
header d_t { bit<8> op; bit<8> a; bit<16> b; bit<16> rid; bit<8> first; bit<8> port; }
header bridge_t { bit<8> tag; }
"""

ETH = bytes.fromhex("0102")  # op=1, a=2


def pkt(op: int, a: int = 0, b: int = 0) -> bytes:
    return bytes([op, a]) + b.to_bytes(2, "big") + bytes(6) + b"payload"


def fields(data: bytes) -> dict[str, int]:
    return {
        "op": data[0],
        "a": data[1],
        "b": int.from_bytes(data[2:4], "big"),
        "rid": int.from_bytes(data[4:6], "big"),
        "first": data[6],
        "port": data[7],
    }


FORWARD = """
apply {
    if (hdr.d.op == 1) { ig_tm_md.ucast_egress_port = (PortId_t)hdr.d.a; }
    if (hdr.d.op == 2) { ig_tm_md.mcast_grp_a = (MulticastGroupId_t)hdr.d.b; }
    if (hdr.d.op == 3) { ig_tm_md.ucast_egress_port = 4; ig_dprsr_md.drop_ctl = 1; }
    if (hdr.d.op == 4) { ig_tm_md.ucast_egress_port = 4; ig_tm_md.bypass_egress = 1; }
    if (hdr.d.op == 5) { ig_tm_md.ucast_egress_port = 4; hdr.d.b = (bit<16>)ig_intr_md.ingress_port; }
    if (hdr.d.op == 6) { ig_tm_md.ucast_egress_port = 4; }
    if (hdr.d.op == 7) {
        ig_tm_md.ucast_egress_port = 6;
        ig_tm_md.mcast_grp_a = (MulticastGroupId_t)hdr.d.b;
    }
}
"""

EGRESS = """
apply {
    hdr.d.rid = eg_intr_md.egress_rid;
    hdr.d.first = (bit<8>)eg_intr_md.egress_rid_first;
    hdr.d.port = (bit<8>)eg_intr_md.egress_port;
    if (hdr.d.op == 6) { eg_dprsr_md.drop_ctl = 1; }
}
"""


@pytest.fixture
def sw(tna) -> Switch:
    return Switch.from_source(tna(HEADERS, FORWARD, egress=EGRESS), "fwd_tna.p4")


def test_arch_and_p4info(sw: Switch) -> None:
    assert sw.program.arch == "tna"
    assert sw.p4info.pkg_info.arch == "tna"
    assert sw.program.blocks["ingress"] == "Ig"
    assert sw.program.blocks["egress_deparser"] == "ED"


def test_unicast_egress_sees_its_port_and_rid_zero(sw: Switch) -> None:
    out = sw.process(3, pkt(1, a=9))
    assert [p for p, _ in out] == [9]
    f = fields(out[0][1])
    assert f["port"] == 9 and f["rid"] == 0 and f["first"] == 0
    assert out[0][1].endswith(b"payload")


def test_no_egress_port_no_copy(sw: Switch) -> None:
    # ucast_egress_port never set and no multicast group: nothing reaches the traffic manager
    assert sw.process(3, pkt(0)) == []


def test_ingress_intrinsic_metadata(sw: Switch) -> None:
    out = sw.process(17, pkt(5))
    assert fields(out[0][1])["b"] == 17


def test_multicast_copies_carry_the_node_rid(sw: Switch) -> None:
    sw.mc_group_set(7, [(1, 11), (2, 12), (5, 0)])
    out = sw.process(3, pkt(2, b=7))
    assert [(p, fields(d)["rid"], fields(d)["first"], fields(d)["port"]) for p, d in out] == [
        (1, 11, 1, 1),
        (2, 12, 0, 2),
        (5, 0, 0, 5),
    ]
    # unicast and multicast together: the unicast copy first
    out = sw.process(3, pkt(7, b=7))
    assert [p for p, _ in out] == [6, 1, 2, 5]
    # an unknown group replicates nothing
    assert sw.process(3, pkt(2, b=8)) == []


def test_drop_ctl_in_ingress_and_egress(sw: Switch) -> None:
    assert sw.process(3, pkt(3)) == []
    assert sw.process(3, pkt(6)) == []


def test_bypass_egress_skips_the_egress_pipeline(sw: Switch) -> None:
    out = sw.process(3, pkt(4))
    assert [p for p, _ in out] == [4]
    assert fields(out[0][1])["port"] == 0  # egress did not run: the field is as it arrived


def test_user_metadata_crosses_only_as_a_bridged_header(tna) -> None:
    ingress = """
    apply {
        ig_tm_md.ucast_egress_port = 1;
        meta.unused = 0x55;
        hdr.bridge.setValid();
        hdr.bridge.tag = hdr.d.a + 1;
    }
    """
    egress = """
    apply {
        hdr.d.rid = (bit<16>)meta.unused;    // egress metadata starts at 0: not ingress's 0x55
        hdr.d.b = (bit<16>)hdr.bridge.tag;   // the bridged header made it across
        hdr.bridge.setInvalid();
    }
    """
    src = tna(
        HEADERS,
        ingress,
        ig_deparser="apply { pkt.emit(hdr.bridge); pkt.emit(hdr.d); }",
        eg_parser="state start { pkt.extract(eg_intr_md); pkt.extract(hdr.bridge); "
        "pkt.extract(hdr.d); transition accept; }",
        egress=egress,
        eg_deparser="apply { pkt.emit(hdr.d); }",
        hdr_fields="bridge_t bridge; d_t d;",
    )
    out = Switch.from_source(src).process(2, pkt(1, a=41))
    f = fields(out[0][1])
    assert f["rid"] == 0 and f["b"] == 42
    assert len(out[0][1]) == len(pkt(1))


def test_port_metadata_follows_the_intrinsic_metadata(tna) -> None:
    ig_parser = """
    state start {
        pkt.extract(ig_intr_md);
        pkt.extract(hdr.pm);
        pkt.extract(hdr.d);
        transition accept;
    }
    """
    src = tna(
        HEADERS + "header pm_t { bit<16> tag; bit<48> rest; }",
        "apply { ig_tm_md.ucast_egress_port = 1; hdr.d.b = hdr.pm.tag; hdr.pm.setInvalid(); }",
        ig_parser=ig_parser,
        hdr_fields="pm_t pm; d_t d;",
    )
    sw = Switch.from_source(src)
    sw.port_metadata_set(3, b"\xbe\xef")
    assert fields(sw.process(3, pkt(0))[0][1])["b"] == 0xBEEF
    assert fields(sw.process(4, pkt(0))[0][1])["b"] == 0
    for port, data in ((511, b""), (3, bytes(9))):  # Tofino 1: 8 bytes; ports 0..510
        with pytest.raises(SwitchError, match="port metadata"):
            sw.port_metadata_set(port, data)
    assert fields(sw.process(3, pkt(0))[0][1])["b"] == 0xBEEF  # refused writes changed nothing


def test_parser_errors_drop_unless_parser_err_is_read(tna) -> None:
    fwd = "apply { ig_tm_md.ucast_egress_port = 1; }"
    sw = Switch.from_source(tna(HEADERS, fwd))
    assert sw.process(1, b"\x01\x02") == []  # too short for d_t: dropped
    reads = """
    apply {
        ig_tm_md.ucast_egress_port = 1;
        if (ig_prsr_md.parser_err != PARSER_ERROR_OK) { ig_tm_md.ucast_egress_port = 2; }
    }
    """
    # the egress parser would stop on the short packet too: this one only takes the metadata
    sw = Switch.from_source(
        tna(HEADERS, reads, eg_parser="state start { pkt.extract(eg_intr_md); transition accept; }")
    )
    # kept: the program looks at parser_err (PARTIAL_HDR); d_t never became valid
    assert sw.process(1, b"\x01\x02") == [(2, b"\x01\x02")]
    assert sw.process(1, pkt(0))[0][0] == 1


def test_resubmit_runs_ingress_again_with_the_resubmit_header(tna) -> None:
    ig_parser = """
    state start {
        pkt.extract(ig_intr_md);
        transition select(ig_intr_md.resubmit_flag) {
            1: resubmitted;
            default: port_md;
        }
    }
    state resubmitted { pkt.extract(hdr.rs); pkt.extract(hdr.d); transition accept; }
    state port_md { pkt.advance(PORT_METADATA_SIZE); pkt.extract(hdr.d); transition accept; }
    """
    ingress = """
    apply {
        if (ig_intr_md.resubmit_flag == 0) {
            ig_dprsr_md.resubmit_type = 1;
            meta.unused = hdr.d.a + 100;
            ig_tm_md.ucast_egress_port = 9;   // ignored: a resubmitted packet does not leave
        } else {
            hdr.d.b = (bit<16>)hdr.rs.v;
            hdr.rs.setInvalid();
            ig_tm_md.ucast_egress_port = 2;
        }
    }
    """
    ig_deparser = """
    Resubmit() resubmit;
    apply {
        if (ig_dprsr_md.resubmit_type == 1) { resubmit.emit<rs_t>({meta.unused, 0}); }
        pkt.emit(hdr.d);
    }
    """
    src = tna(
        HEADERS + "header rs_t { bit<8> v; bit<56> pad; }",
        ingress,
        ig_parser=ig_parser,
        ig_deparser=ig_deparser,
        hdr_fields="rs_t rs; d_t d;",
    )
    sw = Switch.from_source(src)
    out = sw.process(1, pkt(0, a=5))
    assert [p for p, _ in out] == [2]
    assert fields(out[0][1])["b"] == 105


def test_ingress_and_egress_mirror_to_a_session(tna) -> None:
    ingress = "apply { ig_tm_md.ucast_egress_port = 1; ig_dprsr_md.mirror_type = 1; }"
    ig_deparser = """
    Mirror() mirror;
    apply {
        if (ig_dprsr_md.mirror_type == 1) { mirror.emit<mh_t>(10w5, {0xAA}); }
        pkt.emit(hdr);
    }
    """
    eg_parser = """
    state start {
        pkt.extract(eg_intr_md);
        transition select(pkt.lookahead<bit<8>>()) {
            0xAA: mirrored;
            default: normal;
        }
    }
    state mirrored { pkt.extract(hdr.mh); pkt.extract(hdr.d); transition accept; }
    state normal { pkt.extract(hdr.d); transition accept; }
    """
    egress = "apply { if (hdr.mh.isValid()) { hdr.d.port = 0xEE; } }"
    src = tna(
        HEADERS + "header mh_t { bit<8> m; }",
        ingress,
        ig_deparser=ig_deparser,
        eg_parser=eg_parser,
        egress=egress,
        hdr_fields="mh_t mh; d_t d;",
    )
    sw = Switch.from_source(src)
    assert [p for p, _ in sw.process(1, pkt(0, a=3))] == [1]  # no session 5 yet: no copy
    sw.mirroring_session_set(5, port=7)
    out = sw.process(1, pkt(0, a=3))
    assert [p for p, _ in out] == [7, 1]
    mirror = out[0][1]
    assert mirror[0] == 0xAA and fields(mirror[1:])["port"] == 0xEE
    assert fields(out[1][1])["port"] == 0


def test_port_metadata_is_tna_only(v1) -> None:
    sw = Switch.from_source(
        v1("header h_t { bit<8> a; }", "state start { transition accept; }", "apply { }")
    )
    with pytest.raises(SwitchError, match="TNA"):
        sw.port_metadata_set(1, b"\x00")


def test_digest_pack_in_the_ingress_deparser(tna) -> None:
    extra = "struct learn_t { bit<8> op; PortId_t port; }"
    ingress = "apply { ig_tm_md.ucast_egress_port = 1; ig_dprsr_md.digest_type = 1; }"
    ig_deparser = """
    Digest<learn_t>() learn;
    apply {
        if (ig_dprsr_md.digest_type == 1) { learn.pack({hdr.d.op, 9w3}); }
        pkt.emit(hdr);
    }
    """
    sw = Switch.from_source(tna(HEADERS, ingress, ig_deparser=ig_deparser, extra=extra))
    sw.process(2, pkt(42))
    # named by the Digest instance, as bf-p4c's P4Info names it; the struct is its type
    assert sw.digests_pop() == [("ID.learn", {"op": 42, "port": 3})]
    [digest] = sw.p4info.digests
    assert digest.preamble.name == "ID.learn"
    assert digest.type_spec.struct.name == "learn_t"
    assert [m.name for m in sw.p4info.type_info.structs["learn_t"].members] == ["op", "port"]


def test_blocks_of_one_gress_share_their_types(tna) -> None:
    src = tna(HEADERS, "apply { }").replace(
        "control Ig(inout headers_t hdr, inout meta_t meta,",
        "struct other_t { bit<8> x; }\ncontrol Ig(inout headers_t hdr, inout other_t meta,",
    )
    with pytest.raises(P4Error, match="other_t differs from meta_t of the other ingress blocks"):
        Switch.from_source(src, "types.p4")
