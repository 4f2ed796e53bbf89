"""The BMv2 adapter's bounded waits still fail where they must (bmv2_target.py): a packet where the
test expects none, a missing one, one more than expected, and one that comes out after a send's
wait ended (seen by the next send, or at the end of the test)."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest
from scapy.layers.l2 import ARP, Ether

from .base import (
    CLIENT,
    SERVERS,
    SWITCH_MAC,
    Dataplane,
    SwitchTarget,
    ip_int,
    kvs,
    mac_int,
    proto,
    routed,
    udp_packet,
)
from .conftest import fresh_plane

pytestmark = [pytest.mark.bmv2, pytest.mark.netns]

NOWHERE = "192.168.7.7"  # no route: the switch drops it


@pytest.fixture
def dp(bmv2: SwitchTarget) -> Iterator[Dataplane]:
    yield from fresh_plane(bmv2)


def _to_nowhere(seq: int = 0) -> bytes:
    return bytes(udp_packet(CLIENT, NOWHERE, seq.to_bytes(4, "big"), dport=53))


def _as_if_sent_by_switch(dp: Dataplane, port: int) -> None:
    """A frame on the switch's end of ``port``'s wire: it reaches the tests' end as if BMv2 had
    sent it."""
    frame = Ether(src=SWITCH_MAC, dst=CLIENT.mac) / ARP(psrc="10.0.0.254", pdst=CLIENT.ip)
    with socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0) as sock:
        sock.bind((dp.sw.wires.switch_end(port), 0))  # type: ignore[attr-defined]
        sock.send(bytes(frame))
    time.sleep(0.02)  # the kernel's delivery to the other end may lag the send a little


def test_a_packet_where_none_is_expected_fails(dp: Dataplane) -> None:
    dp.send_expect(CLIENT.port, _to_nowhere(), [])
    dp.sw.table_add(
        "ipv4_lpm",
        {"dst_addr": (ip_int(NOWHERE), 32)},
        "set_next_hop",
        {"port": 3, "dmac": mac_int(SERVERS[2].mac), "smac": mac_int(SWITCH_MAC)},
    )
    with pytest.raises(pytest.fail.Exception, match="unexpected packets"):
        dp.send_expect(CLIENT.port, _to_nowhere(1), [])


def test_a_missing_packet_fails(dp: Dataplane) -> None:
    pkt = udp_packet(CLIENT, NOWHERE, b"x", dport=53)
    with pytest.raises(pytest.fail.Exception, match="expected on port 3"):
        dp.send_expect(CLIENT.port, pkt, [(3, routed(pkt, SERVERS[2]))])


def test_one_more_than_expected_is_returned(dp: Dataplane) -> None:
    # a hot Set goes to the origin and its replica: two copies, however many the test expects
    dp.make_hot("two-holders", 3, SERVERS[:2])
    pkt = bytes(udp_packet(CLIENT, SERVERS[0].ip, kvs(proto().op.SET, "two-holders", b"v")))
    out = dp.sw.process(CLIENT.port, pkt, expect=1)  # type: ignore[call-arg]
    assert sorted(port for port, _ in out) == [SERVERS[0].port, SERVERS[1].port]


def test_a_packet_after_the_wait_fails(dp: Dataplane) -> None:
    dp.send_expect(CLIENT.port, _to_nowhere(), [])
    _as_if_sent_by_switch(dp, SERVERS[1].port)
    with pytest.raises(pytest.fail.Exception, match="after the wait of the previous send"):
        dp.send_expect(CLIENT.port, _to_nowhere(1), [])
    # ... and at the end of a test
    _as_if_sent_by_switch(dp, CLIENT.port)
    with pytest.raises(pytest.fail.Exception, match="after the wait of the previous send"):
        dp.sw.assert_quiet()  # type: ignore[attr-defined]


def test_frames_the_test_sends_are_not_outputs(dp: Dataplane) -> None:
    # ARP is dropped by the program; the frame itself, leaving the tests' end, is not counted
    arp = Ether(src=CLIENT.mac, dst="ff:ff:ff:ff:ff:ff") / ARP(psrc=CLIENT.ip, pdst=SERVERS[0].ip)
    assert dp.send(CLIENT.port, arp) == []
    dp.sw.assert_quiet()  # type: ignore[attr-defined]
