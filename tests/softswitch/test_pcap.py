"""pcap file mode (BMv2 --use-files): inputs merged by timestamp, one output file per port."""

from __future__ import annotations

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.utils import rdpcap

from softswitch.pcap import read_pcap, run_pcap_files, write_pcap


def test_pcap_mode(basic_switch_factory, tmp_path) -> None:
    sw = basic_switch_factory()
    sw.table_add("ipv4_lpm", {"dst": (0x0A000000, 8)}, "ipv4_forward", {"dstAddr": 1, "port": 2})
    sw.table_add("ipv4_lpm", {"dst": (0x0B000000, 8)}, "ipv4_forward", {"dstAddr": 1, "port": 9})
    a = bytes(Ether() / IP(dst="10.0.0.1", id=1) / UDP())
    b = bytes(Ether() / IP(dst="10.0.0.1", id=2) / UDP())
    c = bytes(Ether() / IP(dst="11.0.0.1", id=3) / UDP())
    write_pcap(tmp_path / "1_in.pcap", [(3000, a), (5000, c)])
    write_pcap(tmp_path / "2_in.pcap", [(1000, b)])
    written = run_pcap_files(sw, tmp_path, [1, 2])
    assert written == {1: 0, 2: 2}
    out = rdpcap(str(tmp_path / "2_out.pcap"))
    assert [p[IP].id for p in out] == [2, 1]  # timestamp order across input files
    assert [r.ts_ns for r in read_pcap(tmp_path / "2_out.pcap")] == [1000, 3000]
    assert list(read_pcap(tmp_path / "1_out.pcap")) == []


def _write_ns_pcap(path, records: list[tuple[int, bytes]]) -> None:
    """A nanosecond-resolution pcap (magic a1b23c4d), as tcpdump -j ... --nano writes."""
    import struct

    head = struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, 1)
    body = b"".join(
        struct.pack("<IIII", ts // 10**9, ts % 10**9, len(d), len(d)) + d for ts, d in records
    )
    path.write_bytes(head + body)


def test_pcap_order_is_bmv2s(basic_switch_factory, tmp_path) -> None:
    """BMv2 compares timestamps in microseconds (libpcap) and breaks ties by port number."""
    sw = basic_switch_factory()
    sw.table_add("ipv4_lpm", {"dst": (0x0A000000, 8)}, "ipv4_forward", {"dstAddr": 1, "port": 3})
    a, b, c = (bytes(Ether() / IP(dst="10.0.0.1", id=i) / UDP()) for i in (1, 2, 3))
    # port 2's packet is 800 ns earlier, but in the same microsecond as port 1's
    _write_ns_pcap(tmp_path / "1_in.pcap", [(10**9 + 900, a), (10**9 + 2000, c)])
    _write_ns_pcap(tmp_path / "2_in.pcap", [(10**9 + 100, b)])
    run_pcap_files(sw, tmp_path, [2, 1, 3])
    assert [p[IP].id for p in rdpcap(str(tmp_path / "3_out.pcap"))] == [1, 2, 3]
