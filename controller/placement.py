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
  T only gates which keys may get replicas.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import TypeVar

K = TypeVar("K", bound=Hashable)

POLICIES = ("ring", "least-loaded", "balance")


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
    write_ratio: float = 0.0,
    window: float = 0.0,
) -> list[tuple[int, ...]]:
    """Holders of each predicted key (same order as ``predicted``), origin first.

    ``balance`` only: ``tolerance``: stop once the most loaded server is within this fraction of
    the mean estimated load; ``write_ratio`` (an estimate of the share of Sets) and ``window`` (the
    Set-to-confirm delay as a fraction of the period) make it write-aware: each replica costs every
    write of its key, and reads are split only while replicas are valid.
    """
    if policy not in POLICIES:
        raise ValueError(f"unknown placement policy {policy!r}; one of {', '.join(POLICIES)}")
    if len(origins) != len(predicted):
        raise ValueError("one origin per predicted key")
    base = [0.0] * servers if cold_loads is None else [float(x) for x in cold_loads]
    if len(base) != servers:
        raise ValueError("one cold load per server")
    cap = max_replicas_per_server if max_replicas_per_server is not None else len(predicted)
    if policy == "ring":
        return [
            (origin, *ring_replicas(origin, replica_count(load, threshold, servers), servers))
            for (_, load), origin in zip(predicted, origins, strict=True)
        ]
    if policy == "least-loaded":
        return _least_loaded(predicted, origins, threshold, servers, base, cap)
    return _balance(
        predicted, origins, threshold, servers, base, cap, tolerance, write_ratio, window
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
    """Per-holder load of a key of ``load`` queries per period with write share ``writes`` whose
    replicas are usable a fraction ``valid`` of the time (between a Set and its confirms Gets go to
    the origin). Every holder receives every write (the Set or its UPDATE copy); the reads split
    evenly over the holders while valid, otherwise they stay at the origin."""

    load: float
    writes: float = 0.0
    valid: float = 1.0

    def holder(self, n: int, origin: bool) -> float:
        reads = self.load * (1.0 - self.writes)
        share = self.load * self.writes + reads * self.valid / n
        return share + reads * (1.0 - self.valid) if origin else share


def holder_loads(load: float, n: int, write_ratio: float, window: float) -> tuple[float, float]:
    """(origin's, each replica's) load from a key of ``load`` held by ``n`` servers, under the
    write-aware model of ``balance`` (see :func:`place`)."""
    cost = _Cost(load, write_ratio, math.exp(-window * load * write_ratio))
    return cost.holder(n, True), cost.holder(n, False)


def _extra_replicas(
    cost: _Cost, n: int, top_is_origin: bool, top: float, free_loads: list[float]
) -> int:
    """The fewest extra replicas (on the least loaded free servers, ``free_loads`` ascending) of a
    key held by ``n`` servers after which the top server (load ``top``) and every new holder are
    below ``top``; 0 if none. Water-filling in one step: a single replica may overload its target
    while several share the key thinly enough."""
    before = cost.holder(n, top_is_origin)
    for extra in range(1, len(free_loads) + 1):
        after = cost.holder(n + extra, top_is_origin)
        replica = cost.holder(n + extra, False)
        if free_loads[extra - 1] + replica < top and top - before + after < top:
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
    write_ratio: float,
    window: float,
) -> list[tuple[int, ...]]:
    members: list[list[int]] = [[o] for o in origins]
    # expected writes of a key inside one Set-to-confirm window; replicas valid ~ exp(-that)
    costs = [
        _Cost(load, write_ratio, math.exp(-window * load * write_ratio)) for _, load in predicted
    ]
    used = [0] * servers
    # per server: heap of (-its load from the key, key index) of keys that may take a replica
    heaps: list[list[tuple[float, int]]] = [[] for _ in range(servers)]
    total = sum(loads) + sum(load for _, load in predicted)
    if total <= 0:
        return [tuple(m) for m in members]
    mean = total / servers
    for i, ((_, load), origin) in enumerate(zip(predicted, origins, strict=True)):
        if load >= mean and load >= threshold and costs[i].valid >= 0.5:
            # a key heavier than a whole server goes everywhere at once: an even split adds no
            # imbalance, and growing it one replica at a time gets stuck behind lighter keys
            members[i] += [s for s in range(servers) if s != origin and used[s] < cap]
            for s in members[i][1:]:
                used[s] += 1
        n = len(members[i])
        for s in members[i]:
            share = costs[i].holder(n, s == origin)
            loads[s] += share
            if load >= threshold:
                heaps[s].append((-share, i))
    for heap in heaps:
        heapq.heapify(heap)
    # every move adds at least one replica, so the budget bounds the number of moves
    for _ in range(cap * servers):
        top = max(range(servers), key=loads.__getitem__)
        if loads[top] <= sum(loads) / servers * (1.0 + tolerance):
            break
        heap = heaps[top]
        moved = False
        while heap and not moved:
            neg_share, i = heap[0]
            n = len(members[i])
            is_origin = top == origins[i]
            if top not in members[i] or -neg_share != costs[i].holder(n, is_origin):
                heapq.heappop(heap)  # stale entry
                continue
            free = sorted(
                (s for s in range(servers) if s not in members[i] and used[s] < cap),
                key=loads.__getitem__,
            )
            extra = _extra_replicas(costs[i], n, is_origin, loads[top], [loads[s] for s in free])
            if extra == 0:
                heapq.heappop(heap)  # this key cannot help the top server any more
                continue
            for s in members[i]:
                loads[s] += costs[i].holder(n + extra, s == origins[i]) - costs[i].holder(
                    n, s == origins[i]
                )
            for s in free[:extra]:
                members[i].append(s)
                used[s] += 1
                loads[s] += costs[i].holder(n + extra, False)
            for s in members[i]:
                heapq.heappush(heaps[s], (-costs[i].holder(n + extra, s == origins[i]), i))
            moved = True
        if not moved:
            break
    return [tuple(m) for m in members]
    mean = total / servers
    for i, ((_, load), origin) in enumerate(zip(predicted, origins, strict=True)):
        if load >= mean and load >= threshold:
            # a key heavier than a whole server goes everywhere at once: an even split adds no
            # imbalance, and growing it one replica at a time gets stuck behind lighter keys
            members[i] += [s for s in range(servers) if s != origin and used[s] < cap]
            for s in members[i][1:]:
                used[s] += 1
        for s in members[i]:
            loads[s] += load / len(members[i])
            if load >= threshold:
                heaps[s].append((-load / len(members[i]), i))
    for heap in heaps:
        heapq.heapify(heap)
    goal = total / servers * (1.0 + tolerance)
    # every move adds at least one replica, so the budget bounds the number of moves
    for _ in range(cap * servers):
        top = max(range(servers), key=loads.__getitem__)
        if loads[top] <= goal:
            break
        heap = heaps[top]
        moved = False
        while heap and not moved:
            neg_share, i = heap[0]
            n = len(members[i])
            load = predicted[i][1]
            if -neg_share != load / n or top not in members[i]:
                heapq.heappop(heap)  # stale entry
                continue
            free = sorted(
                (s for s in range(servers) if s not in members[i] and used[s] < cap),
                key=loads.__getitem__,
            )
            extra = _extra_replicas(load, n, loads[top], [loads[s] for s in free])
            if extra == 0:
                heapq.heappop(heap)  # this key cannot help the top server any more
                continue
            share, new_share = load / n, load / (n + extra)
            for s in members[i]:
                loads[s] -= share - new_share
            for s in free[:extra]:
                members[i].append(s)
                used[s] += 1
                loads[s] += new_share
            for s in members[i]:
                heapq.heappush(heaps[s], (-new_share, i))
            moved = True
        if not moved:
            break
    return [tuple(m) for m in members]
