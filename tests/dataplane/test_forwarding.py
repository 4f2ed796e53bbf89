"""Plain IPv4 forwarding: LPM -> port and next-hop MAC, switch MAC as source, TTL - 1."""

from __future__ import annotations

from scapy.layers.inet import IP, UDP, IPOption_Router_Alert
from scapy.layers.l2 import ARP, Ether
from scapy.packet import Raw

from .base import CLIENT, SERVERS, SWITCH_MAC, Dataplane, routed, udp_packet


def test_udp_routed_to_server(dp: Dataplane) -> None:
    pkt = udp_packet(CLIENT, SERVERS[2].ip, b"hello", dport=53)
    dp.send_expect(CLIENT.port, pkt, [(SERVERS[2].port, routed(pkt, SERVERS[2]))])


def test_reply_routed_to_client(dp: Dataplane) -> None:
    pkt = udp_packet(SERVERS[0], CLIENT.ip, b"x" * 100, sport=5000, dport=6000)
    dp.send_expect(SERVERS[0].port, pkt, [(CLIENT.port, routed(pkt, CLIENT))])


def test_lpm_prefers_longest_prefix(dp: Dataplane) -> None:
    # A /8 default towards s3; the /32 of s1 still wins for its own address.
    dp.sw.table_add(
        "ipv4_lpm",
        {"dst_addr": (10 << 24, 8)},
        "set_next_hop",
        {"port": SERVERS[3].port, "dmac": 0x020000000004, "smac": 0x0200000000FE},
    )
    to_s1 = udp_packet(CLIENT, SERVERS[1].ip, b"a", dport=53)
    dp.send_expect(CLIENT.port, to_s1, [(SERVERS[1].port, routed(to_s1, SERVERS[1]))])
    other = udp_packet(CLIENT, "10.9.9.9", b"b", dport=53)
    dp.send_expect(CLIENT.port, other, [(SERVERS[3].port, routed(other, SERVERS[3]))])


def test_unknown_destination_dropped(dp: Dataplane) -> None:
    dp.send_expect(CLIENT.port, udp_packet(CLIENT, "192.168.7.7", b"x", dport=53), [])


def test_ttl_expiring_dropped(dp: Dataplane) -> None:
    dp.send_expect(CLIENT.port, udp_packet(CLIENT, SERVERS[0].ip, b"x", dport=53, ttl=1), [])


def test_bad_ipv4_checksum_dropped(dp: Dataplane) -> None:
    pkt = udp_packet(CLIENT, SERVERS[0].ip, b"x", dport=53)
    pkt = Ether(bytes(pkt))
    pkt[IP].chksum ^= 0x0101
    dp.send_expect(CLIENT.port, pkt, [])


def test_non_ipv4_dropped(dp: Dataplane) -> None:
    arp = Ether(src=CLIENT.mac, dst="ff:ff:ff:ff:ff:ff") / ARP(psrc=CLIENT.ip, pdst=SERVERS[0].ip)
    dp.send_expect(CLIENT.port, arp, [])


def test_ipv4_options_dropped(dp: Dataplane) -> None:
    # Tofino's checksum units take no varbit, so neither build processes IPv4 options: a packet
    # with options (or a header length below 5 words, or a version other than 4) is dropped.
    pkt = (
        Ether(src=CLIENT.mac, dst=SWITCH_MAC)
        / IP(src=CLIENT.ip, dst=SERVERS[1].ip, options=[IPOption_Router_Alert()])
        / UDP(sport=1, dport=2)
        / Raw(b"opts")
    )
    pkt = Ether(bytes(pkt))
    assert pkt[IP].ihl == 6
    dp.send_expect(CLIENT.port, pkt, [])
    for fields in ({"ihl": 4}, {"version": 5}):
        bad = (
            Ether(src=CLIENT.mac, dst=SWITCH_MAC)
            / IP(src=CLIENT.ip, dst=SERVERS[1].ip, **fields)
            / UDP(sport=1, dport=2)
        )
        dp.send_expect(CLIENT.port, Ether(bytes(bad)), [])
