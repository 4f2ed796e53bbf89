"""Workloads: Zipf popularity of any skew (0 = uniform) over n keys, read/write mix, value sizes,
popularity shifts (NetCache's hot-in, random and hot-out).

Ranks are sampled with Walker's alias method inside the compiled kernel (one table for the 65 536
most popular ranks, one for the rest); rank -> key id goes
through a random permutation so that hot keys are spread over the origins.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kvswitch.bench import kernel

SHIFTS = ("none", "hot-in", "random", "hot-out")
MAX_KEYS = (1 << 31) - 1
HEAD = 1 << 16  # ranks sampled from their own alias table, which stays in cache


def zipf_weights(n: int, skew: float) -> np.ndarray:
    """Probabilities of ranks 1..n under Zipf(skew); skew 0 is uniform."""
    if n <= 0:
        raise ValueError("need at least one key")
    if skew < 0:
        raise ValueError("skew must be >= 0")
    w = np.arange(1, n + 1, dtype=np.float64) ** -skew
    return w / w.sum()


def rack_of(ids: np.ndarray, racks: int) -> np.ndarray:
    """The rack of each key id: splitmix64 of the id mod ``racks`` (independent of the consistent
    hashing that picks the server inside the rack)."""
    z = np.asarray(ids, dtype=np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z ^= z >> np.uint64(31)
    return (z % np.uint64(racks)).astype(np.int64)


@dataclass
class Workload:
    keys: int = 1_000_000
    skew: float = 0.99
    write_ratio: float = 0.0
    small_value_fraction: float = 0.5  # share of keys whose values are <= 128 B
    seed: int = 1
    racks: int = 1  # keys are spread over racks by rack_of(); this workload is one rack's share
    rack: int = 0
    alias: np.ndarray = field(init=False, repr=False)
    head: int = field(init=False, repr=False)
    p_head: float = field(init=False, repr=False)
    weights: np.ndarray = field(init=False, repr=False)
    perm: np.ndarray = field(init=False, repr=False)
    share: float = field(init=False, repr=False)  # of the whole workload's queries

    def __post_init__(self) -> None:
        if not 1 <= self.keys <= MAX_KEYS:
            raise ValueError(f"keys must be within 1 .. {MAX_KEYS}")
        if not 0.0 <= self.write_ratio <= 1.0:
            raise ValueError("write ratio must be within [0, 1]")
        if not 0 <= self.rack < self.racks:
            raise ValueError(f"rack {self.rack} outside 0 .. {self.racks - 1}")
        self.weights = zipf_weights(self.keys, self.skew)
        rng = np.random.default_rng(self.seed)
        self.perm = rng.permutation(self.keys).astype(np.int64)
        self.share = 1.0
        if self.racks > 1:
            mine = rack_of(self.perm, self.racks) == self.rack  # ranks stay in popularity order
            if not mine.any():
                raise ValueError(f"rack {self.rack} of {self.racks} holds no key")
            self.perm, self.weights = self.perm[mine], self.weights[mine]
            self.share = float(self.weights.sum())
            self.weights = self.weights / self.share
        n = self.perm.size
        self.head = min(n, HEAD)
        self.p_head = float(self.weights[: self.head].sum()) if self.head < n else 1.0
        prob, alias = kernel.alias_table(self.weights[: self.head])
        tables = [kernel.pack_alias(prob, alias)]
        if self.head < n:
            prob, alias = kernel.alias_table(self.weights[self.head :])
            tables.append(kernel.pack_alias(prob, alias + self.head))
        self.alias = np.concatenate(tables)

    def rank_info(self, origin: np.ndarray) -> np.ndarray:
        """Per rank: key id (bits 0..31) and the key's origin (bits 32..), for the kernel."""
        return self.perm | (origin[self.perm].astype(np.int64) << 32)

    def key_probabilities(self) -> np.ndarray:
        """Exact query probability of each key id."""
        p = np.zeros(self.keys)
        p[self.perm] = self.weights
        return p

    def small_values(self) -> np.ndarray:
        """Per key id: True when its value is at most 128 bytes (NetCache can cache it)."""
        rng = np.random.default_rng(self.seed + 7)
        return rng.random(self.keys) < self.small_value_fraction

    def shift(self, kind: str, count: int, rng: np.random.Generator) -> None:
        """Change popularity: ``hot-in`` puts the ``count`` coldest keys on top, ``hot-out`` sends
        the ``count`` hottest to the bottom, ``random`` swaps the hottest with random others."""
        if kind not in SHIFTS:
            raise ValueError(f"unknown shift {kind!r}; one of {', '.join(SHIFTS)}")
        n = self.perm.size
        count = min(count, n)
        if kind == "none" or count == 0:
            return
        if kind == "hot-in":
            self.perm = np.concatenate([self.perm[-count:], self.perm[:-count]])
        elif kind == "hot-out":
            self.perm = np.concatenate([self.perm[count:], self.perm[:count]])
        else:
            others = rng.choice(np.arange(count, n), size=min(count, n - count), replace=False)
            count = others.size
            top = self.perm[:count].copy()
            self.perm[:count] = self.perm[others]
            self.perm[others] = top
