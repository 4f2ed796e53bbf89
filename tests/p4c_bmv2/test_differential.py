"""The same packets through BMv2's simple_switch (running p4c's JSON) and through the software
switch running that JSON and running the P4 source, all in ``--use-files`` mode and configured by
the same simple_switch_CLI session: the output pcaps (packets per port, in order) and the
registers and counters read back must be identical. Needs p4c-bm2-ss and simple_switch on PATH
(skipped with a message otherwise)."""

from __future__ import annotations

import re
import struct
import sys
from pathlib import Path

import pytest
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.l2 import Ether

from softswitch.pcap import read_pcap

from .tools import need, p4c_compile, run_use_files

ROOT = Path(__file__).resolve().parents[2]
BASIC = ROOT / "tests" / "softswitch" / "p4" / "basic.p4"
RUNTIME = ROOT / "tests" / "softswitch" / "runtime" / "p4" / "runtime.p4"
PORTS = (1, 2, 3, 4)


def write_ns_pcap(path: Path, records: list[tuple[int, bytes]]) -> None:
    """Nanosecond pcap: BMv2 (libpcap) sees microseconds, so 100 ns apart can be a tie."""
    head = struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, 1)
    body = b"".join(
        struct.pack("<IIII", ts // 10**9, ts % 10**9, len(d), len(d)) + d for ts, d in records
    )
    path.write_bytes(head + body)


def traffic() -> dict[int, list[tuple[int, bytes]]]:
    """Per input port: UDP/TCP to routed, multicast and unrouted prefixes, a bad IPv4
    checksum, non-IPv4, a runt; timestamps with ties across ports."""
    t0 = 1_700_000_000 * 10**9
    ins: dict[int, list[tuple[int, bytes]]] = {p: [] for p in PORTS}
    for i in range(40):
        port = PORTS[i % 3]
        dst = ("10.0.0.1", "10.1.2.3", "11.0.0.9", "12.0.0.1", "192.168.0.1")[i % 5]
        l4 = UDP(sport=1000 + i, dport=9) if i % 2 else TCP(sport=2000 + i, dport=80)
        pkt = Ether(src=f"00:00:00:00:00:0{port}") / IP(dst=dst, ttl=64 - i, id=i) / l4
        if i % 7 == 3:
            pkt[IP].chksum = 0x1234
        ts = t0 + (i // 3) * 1000 + (2 - i % 3) * 100  # three ports in one microsecond
        ins[port].append((ts, bytes(pkt)))
    ins[4] = [
        (t0 + 5_000, bytes(Ether(type=0x86DD) / (b"\x60" + b"\x00" * 50))),
        (t0 + 6_000, bytes(Ether(type=0x0800) / b"\x45\x00")),  # runt: parser error
        (t0 + 7_000, bytes(Ether() / IP(dst="10.0.0.7") / UDP())),
    ]
    return ins


BASIC_SETUP = """\
table_add ipv4_lpm ipv4_forward 10.0.0.0/8 => 00:00:00:00:01:01 3
table_add ipv4_lpm ipv4_forward 10.1.0.0/16 => 00:00:00:00:01:02 4
table_add ipv4_lpm set_mcast 11.0.0.0/8 => 7
table_add ipv4_lpm NoAction 12.0.0.0/8 =>
mc_mgrp_create 7
mc_node_create 5 1 2
mc_node_associate 7 0
"""
BASIC_READ = """\
register_read last_ttl
counter_read port_counter 1
counter_read port_counter 2
counter_read port_counter 3
counter_read port_counter 4
counter_read lpm_counter 0
counter_read lpm_counter 1
counter_read lpm_counter 2
table_dump ipv4_lpm
"""
RUNTIME_SETUP = """\
table_add l2 forward 1 => 2
table_add l2 set_mcast 2 => 9
table_add ipv4_lpm ipv4_forward 10.0.0.0/8 => 00:00:00:00:01:01 3
table_add acl drop 0x86dd&&&0xffff => 1
mc_mgrp_create 9
mc_node_create 3 3 4
mc_node_associate 9 0
register_write wide 1 77
"""
RUNTIME_READ = """\
register_read last_ttl
register_read wide 1
counter_read port_counter 1
counter_read port_counter 2
counter_read port_counter 4
counter_read lpm_counter 0
"""


def read_out(path: Path) -> list[bytes]:
    # BMv2 writes a file's header with its first packet: a port that sent nothing has 0 bytes
    return [r.data for r in read_pcap(path)] if path.stat().st_size else []


def run(argv0: list[str], program: Path, tmp: Path, setup: str, readback: str) -> tuple:
    tmp.mkdir()
    for port, recs in traffic().items():
        write_ns_pcap(tmp / f"p{port}_in.pcap", recs)
    out = run_use_files(argv0, program, tmp, PORTS, setup, readback)
    packets = {p: read_out(tmp / f"p{p}_out.pcap") for p in PORTS}
    return packets, out.replace(str(tmp), "")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("source", "setup", "readback"),
    [(BASIC, BASIC_SETUP, BASIC_READ), (RUNTIME, RUNTIME_SETUP, RUNTIME_READ)],
    ids=["basic", "runtime"],
)
def test_bmv2_and_softswitch_agree(tmp_path: Path, source: Path, setup: str, readback: str) -> None:
    simple_switch = need("simple_switch")
    json_path, _info = p4c_compile(source, tmp_path, include_dirs=[source.parent])
    kvswitch = [sys.executable, "-m", "kvswitch", "switch"]
    bmv2 = run([simple_switch], json_path, tmp_path / "bmv2", setup, readback)
    from_json = run(kvswitch, json_path, tmp_path / "json", setup, readback)
    from_source = run(
        [*kvswitch, "-I", str(source.parent)], source, tmp_path / "source", setup, readback
    )
    assert sum(len(v) for v in bmv2[0].values()) > 20  # the traffic did go through
    assert " packets)" in bmv2[1], bmv2[1]
    assert from_json[0] == bmv2[0]
    assert from_source[0] == bmv2[0]
    assert from_json[1] == bmv2[1]
    # From source the CLI's JSON is built from the P4Info: a key is shown by its P4Info name
    # (MyIngress_ipv4_lpm.dst), not by p4c's header.field (ipv4.dstAddr); all else is the same.
    assert key_names_dropped(from_source[1]) == key_names_dropped(bmv2[1])


def key_names_dropped(cli_output: str) -> str:
    return re.sub(r"^\* [^:]+: ", "* ", cli_output, flags=re.M)
