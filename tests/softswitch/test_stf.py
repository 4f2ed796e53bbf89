"""The STF runner (p4c's BMv2 packet-test format) on the engine's L3 program."""

from __future__ import annotations

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from softswitch.stf import matches, run_stf


def _hex(dst: str, ident: int = 1) -> str:
    return bytes(Ether(dst="00:00:00:00:00:01") / IP(dst=dst, id=ident, ttl=64) / UDP()).hex()


def test_stf_forwarding_multicast_and_wildcards(basic_switch_factory) -> None:
    sw = basic_switch_factory()
    out_hex = _hex("10.1.2.3")
    # forwarded: dst MAC rewritten, TTL and checksum change: wildcards over those bytes
    # dst MAC from the action, src MAC = old dst, TTL and checksum wildcarded
    expect = "0000000000aa" + "000000000001" + out_hex[24:44] + "**" + out_hex[46:48] + "****"
    expect += out_hex[52:]
    script = f"""
    # comment
    add ipv4_lpm dst:0x0a000000/8 ipv4_forward(dstAddr:0xaa, port:3)
    add ipv4_lpm dst:0x0b000000/8 set_mcast(grp:5)
    mc_mgrp_create 5
    mc_node_create 7 1 2
    mc_node_associate 5 0
    packet 1 {_hex("10.1.2.3")}
    expect 3 {expect}$
    packet 1 {_hex("11.0.0.1")}
    expect 1 ********
    expect 2 ********
    """
    assert run_stf(sw, script) == []


def test_stf_reports_missing_and_unexpected_packets(basic_switch_factory) -> None:
    sw = basic_switch_factory()
    failures = run_stf(sw, f"packet 1 {_hex('10.1.2.3')}\nexpect 3 00\n")
    assert failures == ["port 3: expected 1 packets, got 0"]  # no route: dropped
    sw.table_set_default("ipv4_lpm", "ipv4_forward", {"dstAddr": 1, "port": 4})
    failures = run_stf(sw, f"packet 1 {_hex('10.1.2.3')}\n")
    assert failures == ["port 4: expected 0 packets, got 1"]


def test_pattern_matching() -> None:
    assert matches("ab**", "abcd")
    assert matches("ab", "abcd")
    assert not matches("ab$", "abcd")
    assert not matches("ac**", "abcd")
