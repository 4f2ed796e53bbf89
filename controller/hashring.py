"""Key origins for the controller and the simulator, on the consistent hashing of docs/protocol.md.

The scalar definition lives in :mod:`kvswitch.protocol` (the one home of the protocol in Python);
this module adds the simulator's integer keys and a vectorised origin of many of them, which a
test checks against the scalar function, and how a ring change moves the hash space.
"""

from __future__ import annotations

from collections.abc import Collection

import numpy as np

from kvswitch.protocol import DEFAULT_VNODES, KEY_LEN, HashRing

FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3

__all__ = ["HashRing", "key16", "key_id", "origins_of_ids", "ring_transfer"]


def key16(key_id: int) -> bytes:
    """The simulator's 16-byte key of integer id ``key_id`` (big-endian, left-zero-padded)."""
    return int(key_id).to_bytes(KEY_LEN, "big")


def key_id(key: bytes) -> int:
    return int.from_bytes(key, "big")


def origins_of_ids(ids: np.ndarray, servers: int, vnodes: int = DEFAULT_VNODES) -> np.ndarray:
    """Origins of ``key16(id)`` for an array of ids (< 2**64), the same as
    ``HashRing(servers, vnodes).origin(key16(id))`` for each."""
    ring = HashRing(servers, vnodes).points
    points = np.array([p for p, _ in ring], dtype=np.uint64)
    owners = np.array([s for _, s in ring], dtype=np.int64)
    ids = np.asarray(ids, dtype=np.uint64)
    h = np.full(ids.shape, FNV_OFFSET, dtype=np.uint64)
    prime = np.uint64(FNV_PRIME)
    with np.errstate(over="ignore"):
        for _ in range(KEY_LEN - 8):  # the leading bytes of key16(id) are zero
            h *= prime
        for shift in range(56, -8, -8):
            h = (h ^ ((ids >> np.uint64(shift)) & np.uint64(0xFF))) * prime
        h ^= h >> np.uint64(30)
        h *= np.uint64(0xBF58476D1CE4E5B9)
        h ^= h >> np.uint64(27)
        h *= np.uint64(0x94D049BB133111EB)
        h ^= h >> np.uint64(31)
    idx = np.searchsorted(points, h, side="left") % len(points)
    return owners[idx].astype(np.uint8 if servers <= 256 else np.int64)


def ring_transfer(
    old: Collection[int], new: Collection[int], vnodes: int = DEFAULT_VNODES
) -> dict[int, dict[int, float]]:
    """For each member ``o`` of the ring of ids ``old``, the share of its hash space that each
    member ``n`` of the ring ``new`` owns: ``out[o][n]``, summing to 1 over ``n``. Each arc between
    two consecutive points of either ring belongs to one owner in each (the first point at or
    after it, wrapping), so the arcs' lengths add up exactly."""
    if not old or not new:
        raise ValueError("both rings need members")
    before, after = HashRing.of(old, vnodes), HashRing.of(new, vnodes)
    cuts = sorted({point for ring in (before, after) for point, _ in ring.points})
    moved: dict[int, dict[int, float]] = {o: {} for o in old}
    for i, cut in enumerate(cuts):
        length = cut - cuts[i - 1] if i else cut + (1 << 64) - cuts[-1]  # the first arc wraps
        o, n = before.owner_at(cut), after.owner_at(cut)
        moved[o][n] = moved[o].get(n, 0.0) + length
    return {o: {n: x / sum(to.values()) for n, x in to.items()} for o, to in moved.items()}


#: :meth:`RackOrigins.origin` of a key whose origin is a server of another rack
OTHER_RACK = -1


class RackOrigins:
    """Origins on a fabric's ring (every server of the fabric, ids 0..N-1) as one rack sees them:
    its servers ``first`` .. ``first + servers - 1`` are its 0 .. servers-1; a key whose origin is
    in another rack is :data:`OTHER_RACK` (not the rack's to plan). The clients, the agents and
    the fabric controller hash over the same ring, so every party names the same origin."""

    def __init__(self, fabric_servers: int, first: int, servers: int) -> None:
        self.ring = HashRing.of(range(fabric_servers))
        self.first, self.servers = first, servers

    def origin(self, key: bytes) -> int:
        local = self.ring.origin(key) - self.first
        return local if 0 <= local < self.servers else OTHER_RACK
