"""kvswitch.protocol's versioned ring (docs/protocol.md "Membership"): member rings, the RING_REPLY
encoding, and how a ring change moves keys."""

from __future__ import annotations

import pytest

from kvswitch import protocol as p

MEMBERS = (p.Member(0, "10.0.0.1"), p.Member(1, "10.0.0.2"), p.Member(3, "10.0.0.4", 9000))


def test_encoding_byte_by_byte() -> None:
    raw = p.Ring(7, MEMBERS, vnodes=64).encode()
    assert len(raw) == 8 + 8 * 3
    assert raw[:8] == bytes([0, 0, 0, 7, 0, 64, 0, 3])
    assert raw[8:16] == bytes([0, 0, 0x22, 0xC4, 10, 0, 0, 1])
    assert raw[24:32] == bytes([0, 3, 0x23, 0x28, 10, 0, 0, 4])


def test_roundtrip_sorts_members_by_id() -> None:
    ring = p.Ring(2, tuple(reversed(MEMBERS)))
    assert [m.id for m in ring.members] == [0, 1, 3]
    back = p.Ring.decode(ring.encode())
    assert back == ring and back.ids == {0, 1, 3}
    assert back.address(b"k") == (
        ring.member(ring.origin(b"k")).ip,
        ring.member(back.origin(b"k")).port,
    )


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        bytes(7),
        bytes([0, 0, 0, 1, 0, 64, 0, 2]) + bytes(8),  # count 2, one member
        bytes([0, 0, 0, 1, 0, 64, 0, 0]),  # no member
        bytes([0, 0, 0, 1, 0, 0, 0, 1]) + bytes(8),  # vnodes 0
        bytes([0, 0, 0, 1, 0, 64, 0, 2]) + bytes(16),  # the same id twice
        bytes([0, 0, 0, 1, 0, 64, 0, 1]) + bytes(9),  # a byte too many
    ],
)
def test_malformed_ring_refused(raw: bytes) -> None:
    with pytest.raises(p.MalformedMessage):
        p.Ring.decode(raw)


def test_bad_member_address_is_a_protocol_error() -> None:
    with pytest.raises(p.ProtocolError):
        p.Ring(1, (p.Member(0, "not-an-ip"),)).encode()


def test_version_zero_is_the_server_list() -> None:
    ring = p.Ring.of_servers([("10.0.0.1", 8900), ("10.0.0.2", 8900), ("10.0.0.3", 8900)])
    plain = p.HashRing(3)
    for i in range(200):
        key = b"k%d" % i
        assert ring.origin(key) == plain.origin(key)
        assert ring.address(key) == (f"10.0.0.{plain.origin(key) + 1}", 8900)


def test_adding_a_member_moves_keys_only_to_it_and_removing_only_from_it() -> None:
    eight, nine = p.HashRing.of(range(8)), p.HashRing.of(range(9))
    without3 = p.HashRing.of(set(range(8)) - {3})
    keys = [b"key%d" % i for i in range(3000)]
    moved_in = [k for k in keys if eight.origin(k) != nine.origin(k)]
    assert moved_in and all(nine.origin(k) == 8 for k in moved_in)
    assert 0.05 < len(moved_in) / len(keys) < 0.2
    moved_out = [k for k in keys if eight.origin(k) != without3.origin(k)]
    assert moved_out and all(eight.origin(k) == 3 for k in moved_out)
    assert all(without3.origin(k) != 3 for k in keys)


def test_empty_or_negative_members_refused() -> None:
    with pytest.raises(ValueError):
        p.HashRing.of([])
    with pytest.raises(ValueError):
        p.HashRing.of([-1, 2])
