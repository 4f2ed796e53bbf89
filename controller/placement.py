"""Replica planning (paper §4.1.2) and the project's load-aware alternatives.

All functions are pure: they take predicted loads and origins and return, per key, its holders
(origin first, then replicas). Servers are numbered 0 .. M-1.

Policies:
- ``ring`` (the paper's reference): r = ceil(L/T) capped at M, keys with L < T get no replica, the
  r-1 replicas sit on the ring from the origin with step floor(M / r) (Figure 4).
- ``least-loaded``: same r, each replica on the server with the least estimated load, accounting
  the cold keys' hashed load and the hot keys already placed (largest keys first).
- ``balance``: water-filling. Keys heavier than a whole server's mean load go to every server;
  every other hot key starts at its origin; then the largest share on the most loaded server gets
  the fewest extra replicas (on the least loaded servers) that lower the maximum, until the most
  loaded server is within ``tolerance`` of the mean or the per-server replica budget is spent.
  With a budget, a first pass makes only moves that lower the top server by at least
  ``MIN_GAIN`` of the mean load per replica and passes by a top server no such move lowers; a
  second pass spends what budget is left on the top servers. T only gates which keys may get
  replicas.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import TypeVar

K = TypeVar("K", bound=Hashable)

POLICIES = ("ring", "least-loaded", "balance")

# balance's first pass: a move must lower the top server by at least this share of the mean
# server load per replica it adds (see _balance)
MIN_GAIN = 5e-4


def replica_count(load: float, threshold: float, servers: int) -> int:
    """r = ceil(L / T) capped at M; 1 (no replica) when L < T."""
    if threshold <= 0:
        raise ValueError("threshold must be > 0")
    if load < threshold:
        return 1
    return max(1, min(servers, math.ceil(load / threshold)))


def ring_replicas(origin: int, r: int, servers: int) -> tuple[int, ...]:
    """The r-1 replica servers of a key whose origin is ``origin``: origin + i * floor(M / r)."""
    if not 0 <= origin < servers:
        raise ValueError(f"origin {origin} outside 0..{servers - 1}")
    r = max(1, min(servers, r))
    step = max(1, servers // r)
    return tuple((origin + i * step) % servers for i in range(1, r))


def place(
    predicted: Sequence[tuple[K, float]],
    origins: Sequence[int],
    threshold: float,
    servers: int,
    policy: str = "ring",
    cold_loads: Sequence[float] | None = None,
    max_replicas_per_server: int | None = None,
    tolerance: float = 0.002,
    write_ratios: Sequence[float] | float = 0.0,
) -> list[tuple[int, ...]]:
    """Holders of each predicted key (same order as ``predicted``), origin first.

    ``balance`` only: ``tolerance``: stop once the most loaded server is within this fraction of
    the mean estimated load; ``write_ratios`` (each key's share of Sets and Deletes, or one share
    for all) make it write-aware: every holder receives every write of its key (the Set or its
    UPDATE copy) while the reads split over the holders, so a key with write share w gains
    nothing from more than about 1/w holders.
    """
    if policy not in POLICIES:
        raise ValueError(f"unknown placement policy {policy!r}; one of {', '.join(POLICIES)}")
    if len(origins) != len(predicted):
        raise ValueError("one origin per predicted key")
    base = [0.0] * servers if cold_loads is None else [float(x) for x in cold_loads]
    if len(base) != servers:
        raise ValueError("one cold load per server")
    if isinstance(write_ratios, int | float):
        write_ratios = [float(write_ratios)] * len(predicted)
    if len(write_ratios) != len(predicted):
        raise ValueError("one write ratio per predicted key")
    cap = max_replicas_per_server if max_replicas_per_server is not None else len(predicted)
    if policy == "ring":
        return [
            (origin, *ring_replicas(origin, replica_count(load, threshold, servers), servers))
            for (_, load), origin in zip(predicted, origins, strict=True)
        ]
    if policy == "least-loaded":
        return _least_loaded(predicted, origins, threshold, servers, base, cap)
    bounded = max_replicas_per_server is not None
    return _balance(
        predicted, origins, threshold, servers, base, cap, tolerance, write_ratios, bounded
    )


def _least_loaded(
    predicted: Sequence[tuple[K, float]],
    origins: Sequence[int],
    threshold: float,
    servers: int,
    loads: list[float],
    cap: int,
) -> list[tuple[int, ...]]:
    used = [0] * servers
    order = sorted(range(len(predicted)), key=lambda i: -predicted[i][1])
    holders: list[tuple[int, ...]] = [(o,) for o in origins]
    for i in order:
        load = predicted[i][1]
        r = replica_count(load, threshold, servers)
        chosen = [origins[i]]
        share = load / r
        loads[origins[i]] += share
        for _ in range(r - 1):
            best = -1
            for s in range(servers):
                if s in chosen or used[s] >= cap:
                    continue
                if best < 0 or loads[s] < loads[best]:
                    best = s
            if best < 0:
                break
            chosen.append(best)
            used[best] += 1
            loads[best] += share
        # replicas the budget refused leave their share with the origin
        loads[origins[i]] += share * (r - len(chosen))
        holders[i] = tuple(chosen)
    return holders


@dataclass(frozen=True)
class _Cost:
    """Per-holder load of a key of ``load`` queries per period with write share ``writes``. Every
    holder receives every write (the Set or its UPDATE copy); the reads split evenly over the
    holders, also while a write is in flight (docs/protocol.md, rule 4: the read set moves only
    when the origin reports a newer version). The origin and a replica cost the same."""

    load: float
    writes: float = 0.0

    def holder(self, n: int) -> float:
        return self.load * self.writes + self.movable(n)

    def movable(self, n: int) -> float:
        """The part of a holder's load that more holders would split: its share of the reads."""
        return self.load * (1.0 - self.writes) / n

    def priority(self, n: int, unit: float) -> float:
        """How much one more holder lowers each holder's load per unit of load it adds to the
        rack (its write copies; ``unit`` stands in for a read-only key's zero cost)."""
        return (self.movable(n) - self.movable(n + 1)) / (self.load * self.writes + unit)


def holder_load(load: float, n: int, write_ratio: float) -> float:
    """Each holder's load (the origin's and every replica's alike) from a key of ``load`` held by
    ``n`` servers, under the write-aware model of ``balance`` (see :func:`place`): ``_Cost``'s
    ``holder``, written out (the fabric planner calls it hundreds of thousands of times)."""
    return load * write_ratio + load * (1.0 - write_ratio) / n


def _extra_replicas(cost: _Cost, n: int, top: float, free_loads: list[float]) -> int:
    """The fewest extra replicas (on the least loaded free servers, ``free_loads`` ascending) of a
    key held by ``n`` servers after which the top server (load ``top``) and every new holder are
    below ``top``; 0 if none. Water-filling in one step: a single replica may overload its target
    while several share the key thinly enough."""
    before = cost.holder(n)
    for extra in range(1, len(free_loads) + 1):
        after = cost.holder(n + extra)
        if free_loads[extra - 1] + after < top and top - before + after < top:
            return extra
    return 0


def _balance(
    predicted: Sequence[tuple[K, float]],
    origins: Sequence[int],
    threshold: float,
    servers: int,
    loads: list[float],
    cap: int,
    tolerance: float,
    write_ratios: Sequence[float],
    bounded: bool = False,
) -> list[tuple[int, ...]]:
    members: list[list[int]] = [[o] for o in origins]
    costs = [_Cost(load, w) for (_, load), w in zip(predicted, write_ratios, strict=True)]
    used = [0] * servers
    total = sum(loads) + sum(load for _, load in predicted)
    if total <= 0:
        return [tuple(m) for m in members]
    mean = total / servers
    unit = mean * 1e-3
    for i, ((_, load), origin) in enumerate(zip(predicted, origins, strict=True)):
        if load >= mean and load >= threshold and costs[i].writes * servers < 1.0:
            # a key heavier than a whole server goes everywhere at once: an even split adds no
            # imbalance, and growing it one replica at a time gets stuck behind lighter keys
            members[i] += [s for s in range(servers) if s != origin and used[s] < cap]
            for s in members[i][1:]:
                used[s] += 1
        n = len(members[i])
        for s in members[i]:
            loads[s] += costs[i].holder(n)
    # with a replica budget (``bounded``), a first pass makes only moves that lower the top
    # server by at least MIN_GAIN of the mean per replica they add, and a top server no such
    # move lowers is left as it is while the next one is levelled: a server whose unmovable load
    # sits above the level would otherwise spend the whole budget on splinters of its smallest
    # keys (each replica moving a few queries) before the others are reached. Then (the only
    # pass without a budget) what budget is left lowers the top servers as far as it goes.
    passes = [(MIN_GAIN * mean, True)] if bounded else []
    for min_gain, go_past in [*passes, (0.0, False)]:
        # per server: heap of (-priority, key index) of its keys that may take a replica (each
        # pass sees every key again: the first drops those it would not split)
        heaps: list[list[tuple[float, int]]] = [[] for _ in range(servers)]
        for i, m in enumerate(members):
            if costs[i].load >= threshold:
                for s in m:
                    heaps[s].append((-costs[i].priority(len(m), unit), i))
        for heap in heaps:
            heapq.heapify(heap)
        _fill_tops(members, costs, used, heaps, loads, cap, tolerance, unit, min_gain, go_past)
    return [tuple(m) for m in members]


def _fill_tops(
    members: list[list[int]],
    costs: Sequence[_Cost],
    used: list[int],
    heaps: list[list[tuple[float, int]]],
    loads: list[float],
    cap: int,
    tolerance: float,
    unit: float,
    min_gain: float,
    go_past: bool,
) -> None:
    """Water-filling from the top (see :func:`_balance`): the key on the most loaded server
    whose next holder lowers it most per load added gets the fewest extra replicas that lower
    it, until the top is within ``tolerance`` of the mean, the budget is spent, or no key lowers
    the top by at least ``min_gain`` per replica; then the next server when ``go_past``, else
    the end. Updates ``members``, ``used``, ``heaps`` and ``loads`` in place."""
    servers = len(loads)
    passed: set[int] = set()
    # every move adds at least one replica and every pass-by sets a server aside: both bounded
    for _ in range(cap * servers + servers):
        rest = [s for s in range(servers) if s not in passed]
        if not rest:
            break
        top = max(rest, key=loads.__getitem__)
        if loads[top] <= sum(loads) / servers * (1.0 + tolerance):
            break
        heap = heaps[top]
        moved = False
        while heap and not moved:
            neg_priority, i = heap[0]
            n = len(members[i])
            if top not in members[i] or -neg_priority != costs[i].priority(n, unit):
                heapq.heappop(heap)  # stale entry
                continue
            free = sorted(
                (s for s in range(servers) if s not in members[i] and used[s] < cap),
                key=loads.__getitem__,
            )
            extra = _extra_replicas(costs[i], n, loads[top], [loads[s] for s in free])
            if extra == 0 or costs[i].holder(n) - costs[i].holder(n + extra) < min_gain * extra:
                heapq.heappop(heap)  # this key cannot help the top server (enough) any more
                continue
            for s in members[i]:
                loads[s] += costs[i].holder(n + extra) - costs[i].holder(n)
            for s in free[:extra]:
                members[i].append(s)
                used[s] += 1
                loads[s] += costs[i].holder(n + extra)
            for s in members[i]:
                heapq.heappush(heaps[s], (-costs[i].priority(n + extra, unit), i))
            moved = True
        if not moved:
            if not go_past:
                break
            passed.add(top)
