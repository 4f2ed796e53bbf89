"""The simulator's vectorised origins equal the protocol's scalar consistent hashing; a ring
change moves the hash space where the keys go."""

from __future__ import annotations

import numpy as np
import pytest

from kvswitch.controller.hashring import (
    OTHER_RACK,
    RackOrigins,
    key16,
    key_id,
    origins_of_ids,
    ring_transfer,
)
from kvswitch.protocol import HashRing


def test_vectorised_origins_match_the_scalar_ring() -> None:
    ids = np.concatenate([np.arange(500), np.random.default_rng(3).integers(0, 2**31, 1500)])
    for servers in (1, 7, 32):
        ring = HashRing(servers)
        got = origins_of_ids(ids, servers)
        assert [int(x) for x in got] == [ring.origin(key16(int(i))) for i in ids]


def test_key16_round_trip() -> None:
    assert key16(0x0102) == bytes(14) + b"\x01\x02"
    assert key_id(key16(123456789)) == 123456789


def test_ring_transfer_is_where_the_keys_go() -> None:
    keys = [b"k%d" % i for i in range(20_000)]
    for old, new in ((range(8), [0, 1, 3, 4, 5, 6, 7]), (range(8), range(9)), ([1, 3], [0, 3])):
        t = ring_transfer(old, new)
        a, b = HashRing.of(old), HashRing.of(new)
        for o, shares in t.items():
            assert sum(shares.values()) == pytest.approx(1.0)
            mine = [k for k in keys if a.origin(k) == o]
            for n in set(new):
                seen = sum(1 for k in mine if b.origin(k) == n) / len(mine)
                assert seen == pytest.approx(shares.get(n, 0.0), abs=0.03), (old, new, o, n)
    removed = ring_transfer(range(8), [0, 1, 3, 4, 5, 6, 7])
    assert all(removed[o] == {o: 1.0} for o in range(8) if o != 2)  # only server 2's keys move
    with pytest.raises(ValueError):
        ring_transfer([], [1])


def test_a_racks_origins_are_the_fabrics() -> None:
    """Rack 2 of 3 racks x 2 servers names a key's origin as the fabric's ring does (the clients'),
    shifted to its own servers, and OTHER_RACK for the rest."""
    fabric = HashRing.of(range(6))
    rack = RackOrigins(6, 2, 2)
    seen = set()
    for i in range(300):
        key = key16(i)
        g = fabric.origin(key)
        want = g - 2 if g in (2, 3) else OTHER_RACK
        assert rack.origin(key) == want
        seen.add(want)
    assert seen == {0, 1, OTHER_RACK}
