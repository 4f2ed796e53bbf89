"""The fabric planner's water-filling as it was before it was made incremental (issue 21), kept
unchanged as the baseline of ``kvswitch bench fabric-plan`` and the oracle of
``tests/controller/test_fabric_speed.py``: the product's :func:`kvswitch.controller.fabric.place_fabric`
must return exactly what this returns, only faster. Not used by the product."""

from __future__ import annotations

import heapq
import math
from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

from kvswitch.controller.fabric import FabricShape
from kvswitch.controller.placement import holder_load

K = TypeVar("K", bound=Hashable)


def _priority(load: float, writes: float, n: int, unit: float) -> float:
    """How much one more holder lowers each holder's load, per unit of load it adds to the
    fabric (its write copies; ``unit`` stands in for a read-only key's zero cost)."""
    return (holder_load(load, n, writes) - holder_load(load, n + 1, writes)) / (
        load * writes + unit
    )


def place_fabric_reference(
    keys: Sequence[tuple[K, float]],
    origins: Sequence[int],
    shape: FabricShape,
    base: Sequence[float],
    threshold: float,
    *,
    write_ratios: Sequence[float] | float = 0.0,
    tolerance: float = 0.005,
    holder_share: float = 0.5,
    room: Sequence[int] | None = None,
    previous: Mapping[K, Sequence[int]] | None = None,
    fixed: Sequence[float] | None = None,
    home: Sequence[Sequence[int]] | None = None,
    rotate: Sequence[bool] | None = None,
) -> list[tuple[int, ...]]:
    """Holders (fabric server ids, origin first) of each of ``keys`` (key, predicted load);
    a single holder means the key stays in its home rack.

    ``base``: each server's load without these keys'; ``room``: replicas each server may still
    take (default unbounded); ``previous``: each key's holders last period, preferred within a
    rack so that a key's holders change only where the racks' loads did; ``fixed``: the load on
    each server its rack controller cannot move (its cold keys), by which servers are chosen
    inside a rack (default ``base``): a rack balances around a fabric holder only by moving its
    own hot keys off that server. ``home``: each key's holders in its home rack's plan (origin
    first; default the origin alone): a key that stays in its rack costs that rack its queries
    plus the write copies of its in-rack replicas, ``load * (1 + w * (n - 1))``, and sheds
    those copies when it becomes fabric-hot. ``rotate``: the keys whose writes rotate once
    fabric-hot (docs/protocol.md F7): each write reaches one holder, so each of n holders carries
    ``load / n`` (reads and writes alike) and a holder adds no write copies; at home (rack-hot)
    such a key still costs its rack the copies of every write.

    After the water-filling, holders of keys with writes that no longer lower the busiest rack
    are taken away again (each costs the fabric its key's writes), so that holders kept from
    ``previous`` do not pile up period after period."""
    total = shape.total
    if len(origins) != len(keys):
        raise ValueError("one origin per key")
    if len(base) != total:
        raise ValueError("one base load per server of the fabric")
    if isinstance(write_ratios, int | float):
        write_ratios = [float(write_ratios)] * len(keys)
    if len(write_ratios) != len(keys):
        raise ValueError("one write ratio per key")
    rot = list(rotate) if rotate is not None else [False] * len(keys)
    if len(rot) != len(keys):
        raise ValueError("one rotation flag per key")
    # at home every holder takes every write; at the spine a rotated key's writes split like its
    # reads (write share 0 in the per-holder cost)
    home_w = [float(w) for w in write_ratios]
    write_ratios = [0.0 if r else w for r, w in zip(rot, home_w, strict=True)]
    if threshold <= 0:
        raise ValueError("threshold must be > 0")
    free = list(room) if room is not None else [len(keys)] * total
    if len(free) != total:
        raise ValueError("one replica budget per server of the fabric")
    prev = previous or {}
    server = [float(x) for x in base]
    stuck = [float(x) for x in (fixed if fixed is not None else base)]
    if len(stuck) != total:
        raise ValueError("one fixed load per server of the fabric")
    homes = [tuple(h) for h in home] if home is not None else [(o,) for o in origins]
    if len(homes) != len(keys):
        raise ValueError("one home holder set per key")
    rack = [sum(server[s] for s in shape.servers_of(r)) for r in range(shape.racks)]
    holders: list[list[int]] = [[o] for o in origins]
    # while a key is rack-hot (True) its load sits on its home holders, write copies included
    at_home = [True] * len(keys)
    for i, ((_, load), o) in enumerate(zip(keys, origins, strict=True)):
        hs, w = homes[i], home_w[i]
        if not 0 <= o < total:
            raise ValueError(f"origin {o} outside the fabric")
        if not hs or hs[0] != o or len(set(hs)) != len(hs):
            raise ValueError("a key's home holders start with its origin, each once")
        if any(not 0 <= s < total or shape.rack_of(s) != shape.rack_of(o) for s in hs):
            raise ValueError("a key's home holders are servers of its origin's rack")
        each = holder_load(load, len(hs), w)
        for s in hs:
            server[s] += each
            stuck[s] += each  # a key's share on a server is its holder load there, as elsewhere
        rack[shape.rack_of(o)] += each * len(hs)
    whole = sum(rack)
    if whole <= 0:
        return [tuple(h) for h in holders]
    mean = whole / shape.racks
    server_mean = mean / shape.servers
    unit = server_mean * holder_share  # a holder's replica slot, priced as write copies
    heaps: list[list[tuple[float, int]]] = [[] for _ in range(shape.racks)]

    def priority(i: int, n: int) -> float:
        return _priority(keys[i][1], write_ratios[i], n, unit)

    for i, ((_, load), o) in enumerate(zip(keys, origins, strict=True)):
        if load >= threshold:
            heaps[shape.rack_of(o)].append((-priority(i, 1), i))
    for heap in heaps:
        heapq.heapify(heap)

    # holders of each key per rack, and servers of each rack with replica budget left
    per_rack: list[dict[int, int]] = [{shape.rack_of(o): 1} for o in origins]
    with_room = [sum(1 for s in shape.servers_of(r) if free[s] > 0) for r in range(shape.racks)]

    def in_rack(i: int, r: int) -> int:
        return per_rack[i].get(r, 0)

    def now(i: int) -> dict[int, float]:
        """Key i's load on each rack that carries some of it."""
        load, w = keys[i][1], write_ratios[i]
        if at_home[i]:
            return {shape.rack_of(origins[i]): load * (1.0 + home_w[i] * (len(homes[i]) - 1))}
        each = holder_load(load, len(holders[i]), w)
        return {r: c * each for r, c in per_rack[i].items()}

    def spread_to(i: int) -> float:
        """The reads per holder below which key i gets no more holders: holder_share of a
        server's mean, or its writes (every holder receives them all) if those are more: past
        that, a holder adds more write copies than it takes reads off the others."""
        load, w = keys[i][1], write_ratios[i]
        return max(holder_share * server_mean, load * w)

    def most(i: int) -> int:
        """Key i's most holders: none past spread_to for a key whose writes alone exceed
        holder_share of a server (the read-only and lightly written keys are not bounded)."""
        load, w = keys[i][1], write_ratios[i]
        if load * w <= holder_share * server_mean:
            return total
        return max(1, math.ceil(load * (1.0 - w) / spread_to(i)))

    def spread(i: int, extra: int, each: float) -> list[int] | None:
        """Racks of ``extra`` new holders of key i, each on the least loaded rack (as filled so
        far) that still has a server without the key and with budget; None if there are not
        that many."""
        spare = [with_room[r] - in_rack(i, r) for r in range(shape.racks)]
        order = [(rack[r], r) for r in range(shape.racks) if spare[r] > 0]
        heapq.heapify(order)
        chosen: list[int] = []
        while len(chosen) < extra and order:
            level, r = heapq.heappop(order)
            chosen.append(r)
            spare[r] -= 1
            if spare[r] > 0:
                heapq.heappush(order, (level + each, r))
        return chosen if len(chosen) == extra else None

    def lowers(i: int, racks: Sequence[int], top: int) -> bool:
        """Whether new holders of key i in ``racks`` (one each) bring the top rack down without
        lifting a rack to its level."""
        load, w = keys[i][1], write_ratios[i]
        after = holder_load(load, len(holders[i]) + len(racks), w)
        change = {r: -x for r, x in now(i).items()}
        for r, c in per_rack[i].items():
            change[r] += c * after
        for r in racks:
            change[r] = change.get(r, 0.0) + after
        level = rack[top]
        return rack[top] + change.get(top, 0.0) < level and all(
            rack[r] + change[r] < level for r in set(racks)
        )

    def fits(i: int, extra: int, top: int) -> list[int] | None:
        load, w = keys[i][1], write_ratios[i]
        racks = spread(i, extra, holder_load(load, len(holders[i]) + extra, w))
        return racks if racks is not None and lowers(i, racks, top) else None

    def smallest(i: int, top: int) -> list[int] | None:
        """The fewest extra holders that fit (doubling, then bisection)."""
        load, w = keys[i][1], write_ratios[i]
        n = len(holders[i])
        first = 1
        room_each = holder_share * server_mean
        wanted = math.ceil(load * (1.0 - w) / room_each) if room_each > 0 else 1
        if n == 1 and wanted * w <= holder_share:
            # becoming fabric-hot: each holder's reads within holder_share of a server, unless
            # those holders' write copies would add up to more than holder_share of the key's
            # own load (every holder receives every write): then the smallest count that lowers
            # the top rack
            first = max(1, wanted - 1)
        limit = sum(max(0, with_room[r] - in_rack(i, r)) for r in range(shape.racks))
        limit = min(limit, most(i) - n)
        first = min(first, limit)  # a goal: with fewer servers, as many as there are
        if first < 1:
            return None
        hi, found = first, fits(i, first, top)
        while found is None and hi < limit:
            hi = min(limit, hi * 2)
            found = fits(i, hi, top)
        if found is None:
            return None
        lo = max(first, hi // 2)
        while lo < hi:  # the smallest count in [lo, hi] that fits
            mid = (lo + hi) // 2
            got = fits(i, mid, top)
            if got is not None:
                hi, found = mid, got
            else:
                lo = mid + 1
        return found

    def pick(i: int, r: int, chosen: Sequence[int]) -> int:
        """A server of rack r for a new holder of key i (besides ``chosen``): one of its holders
        last period, else the least loaded one with replica budget left."""
        mine = set(holders[i]) | set(chosen)
        old = [s for s in prev.get(keys[i][0], ()) if shape.rack_of(s) == r]
        for s in old:
            if s not in mine and free[s] > 0:
                return s
        return min(
            (s for s in shape.servers_of(r) if s not in mine and free[s] > 0),
            key=lambda s: (stuck[s], -free[s], s),
        )

    def add(s: int, x: float) -> None:
        server[s] += x
        stuck[s] += x
        rack[shape.rack_of(s)] += x

    def leave_home(i: int) -> None:
        """Key i becomes fabric-hot: its home replicas and their write copies go, the origin
        stays (as its only holder so far)."""
        load, w = keys[i][1], write_ratios[i]
        each = holder_load(load, len(homes[i]), home_w[i])
        for s in homes[i]:
            add(s, -each)
        add(origins[i], holder_load(load, 1, w))
        at_home[i] = False

    def grow(i: int, servers: Sequence[int]) -> None:
        if at_home[i]:
            leave_home(i)
        load, w = keys[i][1], write_ratios[i]
        n = len(holders[i])
        before, after = holder_load(load, n, w), holder_load(load, n + len(servers), w)
        for s in holders[i]:
            add(s, after - before)
        for s in servers:
            r = shape.rack_of(s)
            holders[i].append(s)
            per_rack[i][r] = in_rack(i, r) + 1
            free[s] -= 1
            if free[s] == 0:
                with_room[r] -= 1
            add(s, after)
        for r in {shape.rack_of(s) for s in holders[i]}:
            heapq.heappush(heaps[r], (-priority(i, len(holders[i])), i))

    def shrink(i: int, s: int) -> None:
        load, w = keys[i][1], write_ratios[i]
        n = len(holders[i])
        before, after = holder_load(load, n, w), holder_load(load, n - 1, w)
        holders[i].remove(s)
        r = shape.rack_of(s)
        per_rack[i][r] -= 1
        if per_rack[i][r] == 0:
            del per_rack[i][r]
        if free[s] == 0:
            with_room[r] += 1
        free[s] += 1
        add(s, -before)
        for x in holders[i]:
            add(x, after - before)

    # warm start: a key still above the threshold keeps last period's holders (each change
    # costs pushes and table writes, and a plan from scratch moves keys back and forth between
    # the levels, which the racks' controllers then chase)
    for i in sorted(range(len(keys)), key=lambda i: -keys[i][1]):
        old = [s for s in prev.get(keys[i][0], ())[1:] if free[s] > 0 and s not in holders[i]]
        if old and keys[i][1] >= threshold:
            grow(i, old)

    for _ in range(total * 4):
        top = max(range(shape.racks), key=rack.__getitem__)
        if rack[top] <= mean * (1.0 + tolerance):
            break
        heap = heaps[top]
        moved = False
        while heap and not moved:
            neg, i = heap[0]
            if in_rack(i, top) == 0 or -neg != priority(i, len(holders[i])):
                heapq.heappop(heap)  # stale
                continue
            racks = smallest(i, top)
            if racks is None:
                heapq.heappop(heap)  # this key cannot lower the top rack any more
                continue
            chosen: list[int] = []
            for r in racks:
                chosen.append(pick(i, r, chosen))
            grow(i, chosen)
            moved = True
        if not moved:
            break

    # no ratchet: a holder of a key with writes costs the fabric every write of that key, so
    # holders whose removal lifts no rack above the busiest one (or the tolerance), nor a
    # remaining holder's reads above spread_to, go again: the keys
    # whose last holder lowers least per write copy first, each from its most loaded rack. A
    # key fabric-hot last period keeps a replica (leaving the fabric is a level change: the
    # threshold and the predictor decide that); a new one may fall back to its rack.
    level = max(max(rack), mean * (1.0 + tolerance))
    writers = [
        i
        for i in range(len(keys))
        if len(holders[i]) > 1 and keys[i][1] * write_ratios[i] > server_mean * 1e-3
    ]
    for i in sorted(writers, key=lambda i: (priority(i, len(holders[i]) - 1), i)):
        load, w = keys[i][1], write_ratios[i]
        least = 1
        while len(holders[i]) > least:
            n = len(holders[i])
            before, after = holder_load(load, n, w), holder_load(load, n - 1, w)
            s = max(holders[i][1:], key=lambda s: (rack[shape.rack_of(s)], stuck[s], s))
            r = shape.rack_of(s)
            change = {x: c * (after - before) for x, c in per_rack[i].items()}
            change[r] -= after
            if any(rack[x] + c > level for x, c in change.items() if c > 0) or load * (1.0 - w) / (
                n - 1
            ) > spread_to(i):
                break
            shrink(i, s)
    return [tuple(h) for h in holders]
