"""Spine-level planning for a leaf-spine fabric of KVSwitch racks (docs/fabric.md). Pure: no I/O.

Every hot key has exactly one switch that version-stamps it (docs/protocol.md "Many racks"):
its home leaf (a *rack-hot* key, holders in its own rack, planned by that rack's
:class:`~kvswitch.controller.period.Controller`) or one spine (a *fabric-hot* key, holders in any
rack, planned here). Each period the fabric controller

1. merges what the leaves and the spines counted (candidates and their writes) and predicts the
   next period's load of each (the rack controllers' predictor, over the whole fabric);
2. adapts its threshold T_f on the racks' loads: T_f <- gamma * T_f while the busiest rack
   carries more than (1 + bound) times the mean; keys below T_f stay in their rack;
3. water-fills the racks (:func:`place_fabric`): every candidate starts at its home rack, a key
   still above T_f with last period's holders (warm start); then, while
   the busiest rack is above (1 + tolerance) times the mean, the key on it whose next holder
   lowers the rack most per write copy it adds gets the fewest extra holders, on servers of the
   least loaded racks, that bring the busiest rack down without lifting another one to its level;
4. gives each fabric-hot key a spine (it keeps its spine while it stays fabric-hot; a new one
   goes to the spine with the fewest keys) and turns each spine's holders into a
   :class:`~kvswitch.controller.plan.Plan` and the ordered operations of :func:`plan.diff`, the
   same tables, registers and pushes as a rack switch (a spine runs the rack's rules over the
   servers of the whole fabric).

The rack controllers keep balancing inside their racks: they measure every packet their servers
receive (the spine's redirected Gets and write copies included) and leave out the fabric-hot
keys (``Controller.foreign``); :attr:`FabricReport.expected` is the load the new fabric plan puts
on each server, which the caller may hand to them so they plan with it at once.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import math
import operator
from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from kvswitch.controller.ops import Operation
from kvswitch.controller.period import key_write_ratios, overall_write_ratio
from kvswitch.controller.placement import holder_load
from kvswitch.controller.plan import Plan, build_plan, diff
from kvswitch.controller.predictor import Predictor
from kvswitch.controller.rack import Rack, ServerAddress
from kvswitch.controller.threshold import Threshold

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True)
class FabricShape:
    """``racks`` leaves of ``servers`` servers each, under ``spines`` spines. Servers of the fabric
    are numbered rack by rack: server ``j`` of rack ``r`` is ``r * servers + j``."""

    racks: int
    servers: int
    spines: int = 4

    def __post_init__(self) -> None:
        if self.racks <= 0 or self.servers <= 0 or self.spines <= 0:
            raise ValueError("racks, servers per rack and spines must be > 0")

    @property
    def total(self) -> int:
        return self.racks * self.servers

    def rack_of(self, server: int) -> int:
        return server // self.servers

    def servers_of(self, rack: int) -> range:
        return range(rack * self.servers, (rack + 1) * self.servers)

    def addresses(self) -> Rack:
        """The fabric's servers as a spine's tables name them: 10.<rack>.<j // 250>.<j % 250 + 1>.
        ``port`` is unique per server (a spine reaches a rack through one leaf port and tells the
        rack's servers apart by the multicast replication id; docs/fabric.md)."""
        return Rack(
            tuple(
                ServerAddress(
                    ip=0x0A000000 | (r << 16) | ((j // 250) << 8) | (j % 250 + 1),
                    mac=0x020000000000 | (r << 16) | (j + 1),
                    port=r * self.servers + j + 1,
                )
                for r in range(self.racks)
                for j in range(self.servers)
            )
        )


@dataclass
class FabricConfig:
    k: int = 10_000  # hot-key slots per spine
    alpha: float = 0.5
    bound: float = 0.05  # T_f shrinks while the busiest rack is above (1 + bound) x the mean
    gamma: float = 0.8
    t0: float | None = None  # None: the mean server load of the first period
    tolerance: float = 0.005  # stop once the busiest rack is within this of the mean
    # a fabric-hot key has enough holders that each serves at most this share of a server's
    # mean load in reads: the rack controllers can then still balance around it
    holder_share: float = 0.1
    max_replicas_per_server: int | None = None  # fabric and rack replicas together
    write_ratio: float = 0.0  # assumed for keys without a measured write share
    # the write rotation (docs/protocol.md F7): a fabric-hot key whose writes alone exceed
    # holder_share of a server's mean load sends each write to one holder instead of all
    write_rotation: bool = True
    # a rotating key stops rotating only once its writes fall below (1 - rotation_hysteresis) of
    # the bound above (rotates): each switch is a write freeze of all its holders
    rotation_hysteresis: float = 0.2
    # inside a rack, move fabric holders off servers whose unmovable load is above
    # (1 + level_inside) x their rack's mean (None: the racks only; place_fabric)
    level_inside: float | None = None
    # each key's most holders, origin included: the spines' MAX_HOLDERS (a valid_ver row per
    # slot, one cell per ordinal; docs/fabric.md "Spine program"); None: unbounded
    max_holders: int | None = None

    def __post_init__(self) -> None:
        if self.k <= 0:
            raise ValueError("k must be > 0")
        if self.max_holders is not None and self.max_holders < 1:
            raise ValueError("max holders must be >= 1")
        if self.holder_share <= 0.0:
            raise ValueError("holder share must be > 0")
        if self.tolerance < 0:
            raise ValueError("tolerance must be >= 0")
        if not 0.0 <= self.rotation_hysteresis < 1.0:
            raise ValueError("rotation hysteresis must be in [0, 1)")


@dataclass
class FabricReport:
    predicted: list[tuple[bytes, float]]
    threshold: float
    rack_loads: list[float]
    plans: list[Plan]  # one per spine
    ops: list[list[Operation]]  # one batch per spine
    spine_of: dict[bytes, int]  # the fabric-hot keys and their spines (the leaves' steering)
    expected: list[float] = field(default_factory=list)  # fabric load per server next period
    promoted: int = 0  # keys that became fabric-hot this period
    demoted: int = 0  # keys that stopped being fabric-hot
    rotated: frozenset[bytes] = frozenset()  # the fabric-hot keys that rotate their writes


def rotates(
    load: float,
    write_ratio: float,
    server_mean: float,
    holder_share: float,
    rotating: bool = False,
    hysteresis: float = 0.0,
) -> bool:
    """Whether a fabric-hot key rotates its writes (docs/protocol.md F7): its writes alone exceed
    ``holder_share`` of a server's mean load. Copying them to every holder would then cost each
    holder more than the share of reads it takes (``place_fabric``'s bound on such keys), while
    a key with fewer writes keeps every holder in its read set between writes at little cost.

    ``rotating``: the key rotates now; it keeps rotating until its writes fall below
    ``(1 - hysteresis)`` of that bound, so that a key whose writes hover about the bound does not
    switch every period (each switch freezes the writes of all its holders)."""
    bound = holder_share * server_mean
    if rotating:
        bound *= 1.0 - hysteresis
    return load * write_ratio > bound


def _priority(load: float, writes: float, n: int, unit: float) -> float:
    """How much one more holder lowers each holder's load, per unit of load it adds to the
    fabric (its write copies; ``unit`` stands in for a read-only key's zero cost)."""
    return (holder_load(load, n, writes) - holder_load(load, n + 1, writes)) / (
        load * writes + unit
    )


def _water_level(levels: Sequence[float], spare: Sequence[int], extra: int, each: float) -> float:
    """The level x at which racks filled continuously (a rack at ``levels[r]`` takes
    ``(x - levels[r]) / each`` holders, at most ``spare[r]``) take ``extra`` holders."""
    active = [r for r, s in enumerate(spare) if s > 0]
    want = float(extra)
    while active and want > 0.0:
        x = (want * each + sum(levels[r] for r in active)) / len(active)
        full = [r for r in active if levels[r] + spare[r] * each <= x]
        if full:  # capped racks take their spare and leave the sum
            want -= sum(spare[r] for r in full)
            active = [r for r in active if levels[r] + spare[r] * each > x]
            continue
        below = [r for r in active if levels[r] < x]
        if len(below) == len(active):
            return x
        active = below
    return math.inf if want <= 0.0 else -math.inf


def _fill(
    levels: Sequence[float],
    spare: Sequence[int],
    extra: int,
    each: float,
    ahead: bool = True,
    rise: tuple[Mapping[int, float], float] | None = None,
) -> list[int] | None:
    """How many of ``extra`` new holders (``each`` load apiece) each rack gets when every one
    goes to the least loaded rack as filled so far (ties to the lower rack number) among those
    with a spare server: the counts of ``place_fabric``'s spread, without placing the holders
    one by one. A rack's level after c holders is ``levels[r] + each + ... + each`` (c
    additions, as the spread adds them), so the holders go to the ``extra`` smallest (level,
    rack, c). Each rack first takes one less than its share at the continuous water level
    (:func:`_water_level`) and the rest go one by one; if a holder placed ahead lies above a
    level left out, they all go one by one. None if the racks have fewer than ``extra`` spare
    servers.

    ``rise`` = (start, top): None as well once a rack r given c holders reaches ``levels[r] +
    (start.get(r, 0.0) + each + ... + each) >= top`` (c additions; ``fits``'s test of the
    racks that take holders). Counts only grow as holders are placed and adding ``each`` (>= 0)
    never lowers a float sum, so the whole spread would reach it too. The holders placed one by
    one are the spread's (the smallest of those not placed ahead, and a rack's own come in
    order); those placed ahead count once no holder left out lies below them (then the spread
    keeps them)."""
    racks = [r for r, s in enumerate(spare) if s > 0]
    if sum(spare[r] for r in racks) < extra:
        return None
    first = [0] * len(levels)
    if ahead and each > 0.0 and extra > 2 * len(racks):
        x = _water_level(levels, spare, extra, each)
        for r in racks:
            if levels[r] < x:
                share = spare[r] if x == math.inf else math.floor((x - levels[r]) / each)
                first[r] = max(0, min(spare[r], share) - 1)
        if sum(first) > extra:
            first = [0] * len(levels)
    counts = list(first)
    heap: list[tuple[float, int]] = []
    last: tuple[float, int] | None = None  # the highest (level, rack) placed ahead
    start, top = rise if rise is not None else ({}, math.inf)
    value: dict[int, float] = {}  # rise's sum of each rack given holders so far
    over = False  # a rack given holders ahead reached ``top``
    for r in racks:
        level = levels[r]
        if first[r]:
            level = functools.reduce(operator.add, itertools.repeat(each, first[r] - 1), level)
            if last is None or (level, r) > last:
                last = (level, r)
            level += each
            if rise is not None:
                value[r] = functools.reduce(
                    operator.add, itertools.repeat(each, first[r]), start.get(r, 0.0)
                )
                over = over or levels[r] + value[r] >= top
        if first[r] < spare[r]:
            heap.append((level, r))
    heapq.heapify(heap)
    for _ in range(extra - sum(first)):
        if over and (last is None or not heap or last <= heap[0]):
            return None  # the spread keeps what was placed ahead, and that is too much already
        level, r = heapq.heappop(heap)
        counts[r] += 1
        if counts[r] < spare[r]:
            heapq.heappush(heap, (level + each, r))
        if rise is not None:
            value[r] = value.get(r, start.get(r, 0.0)) + each
            if levels[r] + value[r] >= top:
                return None  # a holder of the spread (r's holders below it are too)
    if last is not None and heap and last > heap[0]:
        return _fill(levels, spare, extra, each, ahead=False, rise=rise)
    return None if over else counts


def place_fabric(
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
    stepwise: bool = False,
    level_inside: float | None = None,
    slots: int | None = None,
    max_holders: int | None = None,
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
    ``previous`` do not pile up period after period.

    ``max_holders``: each key's most holders, origin included (the spines' MAX_HOLDERS; None:
    unbounded); last period's holders past it are not kept.

    ``stepwise``: every candidate count's racks are found one holder at a time through the heap
    (:func:`_fill` without its water level), as the planner did before issue 21; the same plans,
    slower: the baseline of ``kvswitch bench fabric-plan`` and of the equality tests."""
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
    if max_holders is not None and max_holders < 1:
        raise ValueError("max holders must be >= 1")
    cap = total if max_holders is None else min(total, max_holders)
    server = [float(x) for x in base]
    stuck = [float(x) for x in (fixed if fixed is not None else base)]
    hot = 0  # keys placed beyond their home rack (at most ``slots``: the spines' hot-key slots)
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
        """Key i's most holders: ``max_holders``, and none past spread_to for a key whose
        writes alone exceed holder_share of a server (the read-only and lightly written keys are
        bounded by ``max_holders`` alone)."""
        load, w = keys[i][1], write_ratios[i]
        if load * w <= holder_share * server_mean:
            return cap
        return min(cap, max(1, math.ceil(load * (1.0 - w) / spread_to(i))))

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

    def fits(
        i: int, extra: int, top: int, spare: Sequence[int], room: tuple[float, int, int | None]
    ) -> bool:
        """Whether ``extra`` new holders of key i, spread over the racks, bring the top rack
        down without lifting a rack to its level (``spare``: each rack's servers with budget
        left and without the key; ``room``: :func:`headroom`'s)."""
        load, w = keys[i][1], write_ratios[i]
        after = holder_load(load, len(holders[i]) + extra, w)
        level = rack[top]
        if not stepwise:
            below, share, low = room
            if low is not None and low not in per_rack[i] and rack[low] + after >= level:
                return False  # the first new holder goes there
            # the new holders' load must fit below the top rack's level on the racks without the
            # key (each of the racks with it takes at most its spare servers' worth); the margin
            # covers the float sums' rounding (``extra`` additions, ``racks`` terms), far below
            # any rack's load
            if extra * after >= below + share * after + level * 1e-12 * (extra + shape.racks**2):
                return False
        change = {r: -x for r, x in now(i).items()}
        for r, c in per_rack[i].items():
            change[r] += c * after
        if stepwise:  # as before issue 21: the whole spread, then the test
            fill = _fill(rack, spare, extra, after, ahead=False)
        else:
            fill = _fill(rack, spare, extra, after, rise=(change, level))
        if fill is None:
            return False
        counts = {r: c for r, c in enumerate(fill) if c}
        for r, c in counts.items():  # c holders, each adding ``after`` to the rack's change
            change[r] = functools.reduce(
                operator.add, itertools.repeat(after, c), change.get(r, 0.0)
            )
        return rack[top] + change.get(top, 0.0) < level and all(
            rack[r] + change[r] < level for r in counts
        )

    def headroom(i: int, top: int, spare: Sequence[int]) -> tuple[float, int, int | None]:
        """What bounds key i's new holders, whatever their number: the room below the top rack's
        level on the racks without the key that have a spare server, the spare servers of the
        racks with it, and the least loaded rack with a spare server (ties to the lower number:
        it takes the first new holder)."""
        level, held = rack[top], per_rack[i]
        below, share, low = 0.0, 0, None
        for r, n in enumerate(spare):
            if n <= 0:
                continue
            if low is None or rack[r] < rack[low]:
                low = r
            if r in held:
                share += n
            else:
                below += level - rack[r]
        return below, share, low

    def smallest(i: int, top: int) -> list[int] | None:
        """The racks of the fewest extra holders that fit (doubling, then bisection)."""
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
        spare = [with_room[r] - in_rack(i, r) for r in range(shape.racks)]
        limit = min(sum(max(0, s) for s in spare), most(i) - n)
        first = min(first, limit)  # a goal: with fewer servers, as many as there are
        if first < 1:
            return None
        room = headroom(i, top, spare)
        hi = first
        ok = fits(i, hi, top, spare, room)
        while not ok and hi < limit:
            hi = min(limit, hi * 2)
            ok = fits(i, hi, top, spare, room)
        if not ok:
            return None
        lo = max(first, hi // 2)
        while lo < hi:  # the smallest count in [lo, hi] that fits
            mid = (lo + hi) // 2
            if fits(i, mid, top, spare, room):
                hi = mid
            else:
                lo = mid + 1
        return spread(i, hi, holder_load(load, n + hi, w))

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
        nonlocal hot
        load, w = keys[i][1], write_ratios[i]
        each = holder_load(load, len(homes[i]), home_w[i])
        for s in homes[i]:
            add(s, -each)
        add(origins[i], holder_load(load, 1, w))
        at_home[i] = False
        hot += 1

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
        old = old[: cap - 1]
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
            if at_home[i] and slots is not None and hot >= slots:
                heapq.heappop(heap)  # no spine has a slot left for it
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

    # inside each rack, while its most loaded server (by the load its rack controller cannot
    # move) is above (1 + level_inside) x the rack's mean: a fabric holder on it moves to the
    # rack's least loaded server, or a key it holds gets one more holder there, whichever lowers
    # the pair's larger load most. The loop above levels racks only, and the warm start keeps
    # the servers it once picked however the rack changed since.
    def level(r: int) -> bool:
        members = list(shape.servers_of(r))
        hi = max(members, key=lambda s: (stuck[s], s))
        lo = min(members, key=lambda s: (stuck[s], s))
        mean_r = sum(stuck[s] for s in members) / len(members)
        if stuck[hi] <= mean_r * (1.0 + level_inside) or free[lo] <= 0:
            return False
        best: tuple[float, int, int] | None = None  # (the pair's larger load after, grow?, key)
        for i in range(len(keys)):
            if hi not in holders[i] or lo in holders[i]:
                continue
            load, n = keys[i][1], len(holders[i])
            x = holder_load(load, n, write_ratios[i])
            options = []
            if holders[i][0] != hi and not at_home[i]:  # move that holder
                options.append((max(stuck[hi] - x, stuck[lo] + x), 0))
            home_alone = at_home[i] and len(homes[i]) == 1
            if (
                load >= threshold
                and n < most(i)
                and (not at_home[i] or (home_alone and (slots is None or hot < slots)))
            ):  # one more holder, on lo
                y = holder_load(load, n + 1, write_ratios[i])
                options.append((max(stuck[hi] - (x - y), stuck[lo] + y), 1))
            for after, grows in options:
                if after < stuck[hi] and (best is None or (after, grows, i) < best):
                    best = (after, grows, i)
        if best is None:
            return False
        _, grows, i = best
        if grows:
            grow(i, [lo])
            return True
        x = holder_load(keys[i][1], len(holders[i]), write_ratios[i])
        holders[i][holders[i].index(hi)] = lo
        with_room[r] += free[hi] == 0
        free[hi] += 1
        free[lo] -= 1
        with_room[r] -= free[lo] == 0
        add(hi, -x)
        add(lo, x)
        return True

    for r in range(shape.racks) if level_inside is not None else ():
        for _ in range(2 * shape.servers):
            if not level(r):
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


def dead_origins_out(
    predicted: Sequence[tuple[bytes, float]],
    ratios: Sequence[float],
    origin_of: Callable[[bytes], int],
    dead: Collection[int],
) -> tuple[list[tuple[bytes, float]], list[float]]:
    """The candidates (and their write ratios) whose origin is not ``dead``: a key whose origin
    is dead is not placed (docs/fabric.md "Failures"; :func:`dead_origins_kept`)."""
    keep = [i for i, (key, _) in enumerate(predicted) if origin_of(key) not in dead]
    return [predicted[i] for i in keep], [ratios[i] for i in keep]


def dead_origins_kept(
    holders: Mapping[bytes, Sequence[int]], origin_of: Callable[[bytes], int], dead: Collection[int]
) -> dict[bytes, tuple[int, ...]]:
    """The fabric-hot keys (``holders``: their current holders, origin first) whose origin is
    ``dead``, each with its live holders after the origin, as a rack keeps a dead origin's hot
    key (docs/controller_runtime.md "Failure detection"): no holder is added (the origin cannot
    SYNC a push), the live ones keep serving its Gets and the writes R1 gives them, and the
    copies stay where they are (leaving the spine would remove them while the origin's copy
    may be older or gone). One left with no live holder is not fabric-hot any more."""
    out: dict[bytes, tuple[int, ...]] = {}
    for key, hs in holders.items():
        if origin_of(key) in dead and hs:
            kept = (hs[0], *(h for h in hs[1:] if h not in dead))
            if len(kept) > 1:
                out[key] = kept
    return out


def dead_out(
    shape: FabricShape,
    dead: Collection[int],
    room: Sequence[int] | None,
    fixed: Sequence[float],
    keys: int,
) -> tuple[list[int] | None, list[float]]:
    """:func:`place_fabric`'s ``room`` and ``fixed`` with the ``dead`` servers taken out: no
    replica budget (no holder is placed on them, none of last period's is kept), and the live
    servers' mean of their rack as their fixed load (a dead server, its load near 0, is neither
    its rack's least nor its most loaded one when the rack is levelled inside). ``keys``: the
    budget of a live server when ``room`` is None (unbounded)."""
    if not dead:
        return (list(room) if room is not None else None), list(fixed)
    free = list(room) if room is not None else [keys] * shape.total
    stuck = list(fixed)
    for r in range(shape.racks):
        live = [s for s in shape.servers_of(r) if s not in dead]
        mean = sum(stuck[s] for s in live) / len(live) if live else 0.0
        for s in shape.servers_of(r):
            if s in dead:
                free[s], stuck[s] = 0, mean
    return free, stuck


class FabricController:
    """The spine-level controller's planning state (docs/fabric.md "Controllers")."""

    def __init__(
        self,
        shape: FabricShape,
        config: FabricConfig,
        origin_of: Callable[[bytes], int],
    ) -> None:
        self.shape = shape
        self.config = config
        self.origin_of = origin_of  # key -> fabric server id of its origin
        self.addresses = shape.addresses()
        # candidates: every spine's slots, twice (as the rack predictor keeps 2K candidates)
        self.predictor = Predictor(config.alpha, 2 * config.k * shape.spines)
        self.threshold = Threshold(config.bound, config.gamma, config.t0)
        self.plans = [Plan(shape.total, config.k) for _ in range(shape.spines)]
        self.spine_of: dict[bytes, int] = {}
        # keys a spine lost (it went away or restarted empty; docs/fabric.md "Failures"): their
        # spine and holders, a warm start for the next plan (then forgotten)
        self.restore: dict[bytes, tuple[int, tuple[int, ...]]] = {}
        self.rotated: frozenset[bytes] = frozenset()  # fabric-hot keys that rotate their writes
        # the fabric's total load last period (None: unknown, after a restart)
        self.last_total: float | None = None
        self.last_base: list[float] = []  # each server's predicted load outside the candidates

    def holders(self) -> dict[bytes, tuple[int, ...]]:
        return {key: kp.holders for plan in self.plans for key, kp in plan.keys.items()}

    def fabric_load(
        self, counts: Mapping[bytes, float], ratios: Mapping[bytes, float]
    ) -> list[float]:
        """Each server's load from the fabric-hot keys of the current plans, for ``counts``
        queries of each key."""
        out = [0.0] * self.shape.total
        for key, hs in self.holders().items():
            w = 0.0 if key in self.rotated else ratios.get(key, 0.0)  # rotated: split evenly
            each = holder_load(float(counts.get(key, 0.0)), len(hs), w)
            for s in hs:
                out[s] += each
        return out

    def decide(
        self,
        observed: Mapping[bytes, int],
        writes: Mapping[bytes, int],
        loads: Sequence[float],
        replicas: Sequence[int] | None = None,
        floors: Sequence[int] | None = None,
        fixed: Sequence[float] | None = None,
        rack_holders: Mapping[bytes, Sequence[int]] | None = None,
        dead: Collection[int] = (),
    ) -> FabricReport:
        """One period. ``observed``: queries of every candidate the leaves and spines counted
        (hot-key counters and HashPipe, merged); ``writes``: Sets and Deletes of the keys whose
        writes were counted; ``loads``: packets each server of the fabric received;
        ``replicas``: each server's replicas of rack-hot keys (their controllers' plans);
        ``floors``: each spine's ``global_ver`` read before this plan (plan.diff); ``fixed``:
        each server's cold load as its rack controller estimated it (see :func:`place_fabric`);
        ``rack_holders``: the holders (fabric server ids, origin first) of each rack-hot key in
        its home rack's current plan, so that its load and its replicas' write copies are taken
        out of the base where they are and a key staying in its rack costs them (default: a
        rack-hot key's load counted at its origin only, its replicas' write copies left in);
        ``dead``: servers their rack controllers declared dead (:func:`dead_out`)."""
        shape, cfg = self.shape, self.config
        if len(loads) != shape.total:
            raise ValueError("one load per server of the fabric")
        racks = [sum(loads[s] for s in shape.servers_of(r)) for r in range(shape.racks)]
        threshold = self.threshold.update([x / shape.servers for x in racks])
        # a key a spine lost may not be counted this period (its counts went with the spine,
        # and no leaf's HashPipe sees a key it steers): its last count stands in
        lost = {k: int(self.predictor.prev[k]) for k in self.restore if k in self.predictor.prev}
        observed = {**lost, **observed}
        scale = self._prev_scale(float(sum(loads)))
        predicted = self.predictor.update(observed, scale)
        measured = key_write_ratios(observed, writes)
        default = overall_write_ratio(observed, writes, cfg.write_ratio)
        ratios = [measured.get(key, default) for key, _ in predicted]
        predicted, ratios = dead_origins_out(predicted, ratios, self.origin_of, dead)
        server_mean = sum(loads) / shape.total
        rotated = frozenset(
            key
            for (key, load), w in zip(predicted, ratios, strict=True)
            if cfg.write_rotation
            and rotates(
                load,
                w,
                server_mean,
                cfg.holder_share,
                key in self.rotated,
                cfg.rotation_hysteresis,
            )
        )
        was = self.rotated  # the current plans' rotated keys (their measured load splits evenly)
        # every candidate's measured load out of the base: the fabric-hot ones where the plan
        # put them, the others at their origin (a rack-hot key's replicas are in its rack)
        base = [float(x) for x in loads]
        current = self.holders()
        homes = self._homes(rack_holders or {})
        for key, count in observed.items():
            hs = current.get(key) or homes.get(key) or (self.origin_of(key),)
            w = 0.0 if key in current and key in was else measured.get(key, default)
            each = holder_load(float(count), len(hs), w)
            for s in hs:
                base[s] -= each
        base = [max(0.0, x) for x in base]
        # the load outside the candidates is predicted as theirs is (alpha over two periods,
        # last period's scaled to this one's total): planned from one period's counts, the
        # servers' noise is chased, and every holder moved for it costs a push
        if scale is not None and len(self.last_base) == len(base):
            a = cfg.alpha
            base = [
                a * x + (1.0 - a) * y * scale for x, y in zip(base, self.last_base, strict=True)
            ]
        self.last_base = base
        room = None
        if cfg.max_replicas_per_server is not None:
            used = list(replicas) if replicas is not None else [0] * shape.total
            room = [max(0, cfg.max_replicas_per_server - u) for u in used]
        origins = [self.origin_of(key) for key, _ in predicted]
        room, fixed = dead_out(
            shape, dead, room, fixed if fixed is not None else base, len(origins)
        )
        placed = place_fabric(
            predicted,
            origins,
            shape,
            base,
            threshold,
            write_ratios=ratios,
            tolerance=cfg.tolerance,
            holder_share=cfg.holder_share,
            room=room,
            previous={**{k: hs for k, (_, hs) in self.restore.items()}, **current},
            fixed=fixed,
            home=[homes.get(key, (o,)) for (key, _), o in zip(predicted, origins, strict=True)],
            rotate=[key in rotated for key, _ in predicted],
            level_inside=cfg.level_inside,
            slots=cfg.k * shape.spines,
            max_holders=cfg.max_holders,
        )
        chosen = {key: hs for (key, _), hs in zip(predicted, placed, strict=True) if len(hs) > 1}
        kept = dead_origins_kept(current, self.origin_of, dead)
        chosen.update(kept)
        rotated |= {key for key in kept if key in was}
        spine_of = self._assign_spines(chosen, dict(predicted))
        per_spine: list[list[tuple[bytes, tuple[int, ...]]]] = [[] for _ in self.plans]
        for key, hs in chosen.items():
            if key in spine_of:
                per_spine[spine_of[key]].append((key, hs))
        plans, ops = [], []
        for s, old in enumerate(self.plans):
            new = build_plan(per_spine[s], old, shape.total, cfg.k, rotated)
            floor = floors[s] if floors is not None else 0
            ops.append(diff(old, new, self.addresses, floor))
            plans.append(new)
        promoted = sum(1 for key in spine_of if key not in self.spine_of)
        demoted = sum(1 for key in self.spine_of if key not in spine_of)
        self.plans, self.spine_of = plans, spine_of
        self.restore = {}
        self.rotated = frozenset(key for key in rotated if key in spine_of)
        load_of = dict(predicted)
        ratio_of = {key: r for (key, _), r in zip(predicted, ratios, strict=True)}
        expected = self.fabric_load(load_of, ratio_of)
        return FabricReport(
            predicted,
            threshold,
            racks,
            plans,
            ops,
            spine_of,
            expected,
            promoted,
            demoted,
            self.rotated,
        )

    def _prev_scale(self, total: float) -> float | None:
        """How last period's counts enter the prediction (:meth:`Predictor.update`): scaled to
        this period's total load, or left out when last period carried less than half of it
        (the load started or ramped up: a partial period's counts, weighted as a whole one,
        halve every new key's prediction and the first plans place too little; measured in
        the Mininet fabric, docs/fabric.md)."""
        last, self.last_total = self.last_total, total
        if last is None:
            return 1.0
        if total <= 0.0 or last < 0.5 * total:
            return None
        return total / last

    def _homes(self, rack_holders: Mapping[bytes, Sequence[int]]) -> dict[bytes, tuple[int, ...]]:
        """The rack-hot keys' in-rack holders that fit this fabric: the key's origin first, every
        holder in the origin's rack, each once (a rack plan from before a ring change may name
        another origin: such a key counts at its origin alone)."""
        shape, out = self.shape, {}
        for key, hs in rack_holders.items():
            hs = tuple(int(s) for s in hs)
            o = self.origin_of(key)
            if (
                hs
                and hs[0] == o
                and len(set(hs)) == len(hs)
                and all(0 <= s < shape.total and shape.rack_of(s) == shape.rack_of(o) for s in hs)
            ):
                out[key] = hs
        return out

    def _assign_spines(
        self, chosen: Mapping[bytes, tuple[int, ...]], loads: Mapping[bytes, float]
    ) -> dict[bytes, int]:
        """A spine for every chosen key: the one it had, else the spine with the fewest keys
        (heaviest keys first). A key no spine has a slot for stays in its rack."""
        out: dict[bytes, int] = {}
        used = [0] * self.shape.spines
        for key in chosen:
            s = self.spine_of.get(key)
            if s is None and key in self.restore:
                s = self.restore[key][0]  # back to the spine that lost it
            if s is not None:
                out[key] = s
                used[s] += 1
        for key in sorted((k for k in chosen if k not in out), key=lambda k: -loads[k]):
            s = min(range(self.shape.spines), key=lambda x: (used[x], x))
            if used[s] >= self.config.k:
                continue
            out[key] = s
            used[s] += 1
        return out
