"""The simulator's vectorised origins equal the protocol's scalar consistent hashing."""

from __future__ import annotations

import numpy as np

from kvswitch.controller.hashring import key16, key_id, origins_of_ids
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
