"""The fabric controller's planning (controller/fabric.py, docs/fabric.md): racks balanced by
holders in other racks, one spine per fabric-hot key, the rack controllers leaving those keys."""

from __future__ import annotations

import itertools

import pytest

from kvswitch.controller import names
from kvswitch.controller.fabric import (
    FabricConfig,
    FabricController,
    FabricShape,
    place_fabric,
)
from kvswitch.controller.hashring import key16
from kvswitch.controller.ops import PushRequest, TableEntry
from kvswitch.controller.period import Controller, ControllerConfig, cold_load_estimate
from kvswitch.controller.placement import holder_load
from kvswitch.controller.plan import Plan, build_plan
from kvswitch.controller.rack import Rack

SHAPE = FabricShape(racks=4, servers=4, spines=2)


def rack_loads(shape: FabricShape, base, keys, holders, ratios=None) -> list[float]:
    server = list(base)
    for i, ((_, load), hs) in enumerate(zip(keys, holders, strict=True)):
        w = ratios[i] if ratios else 0.0
        for s in hs:
            server[s] += holder_load(load, len(hs), w)
    return [sum(server[s] for s in shape.servers_of(r)) for r in range(shape.racks)]


def test_a_hot_key_gets_holders_in_other_racks_until_the_racks_are_level() -> None:
    base = [100.0] * SHAPE.total
    keys = [("hot", 1200.0), ("warm", 300.0), ("cool", 40.0)]
    origins = [1, 5, 9]  # racks 0, 1, 2
    holders = place_fabric(keys, origins, SHAPE, base, threshold=50.0, tolerance=0.01)
    assert [h[0] for h in holders] == origins  # origin first
    assert len({SHAPE.rack_of(s) for s in holders[0]}) == SHAPE.racks  # the hot key everywhere
    assert holders[2] == (9,)  # below the threshold: stays in its rack
    racks = rack_loads(SHAPE, base, keys, holders)
    assert max(racks) <= sum(racks) / SHAPE.racks * 1.02  # holders come whole
    before = rack_loads(SHAPE, base, keys, [(o,) for o in origins])
    assert max(before) > 1.5 * sum(before) / SHAPE.racks  # it was not level to begin with
    for hs in holders:
        assert len(set(hs)) == len(hs)


def test_each_holder_of_a_fabric_key_serves_at_most_its_share_of_a_server() -> None:
    base = [100.0] * SHAPE.total
    keys = [("hot", 1200.0)]
    holders = place_fabric(keys, [0], SHAPE, base, threshold=10.0, holder_share=0.5)
    server_mean = (sum(base) + 1200.0) / SHAPE.total
    assert 1200.0 / len(holders[0]) <= 0.5 * server_mean


def test_no_key_gets_more_holders_than_a_spine_holds() -> None:
    """``max_holders`` (the spines' MAX_HOLDERS: one valid_ver cell per ordinal) bounds every
    key's holders, origin included, those kept from last period too; unbounded, the same key
    takes more."""
    base = [100.0] * SHAPE.total
    keys = [("hot", 1200.0)]
    free = place_fabric(keys, [0], SHAPE, base, threshold=10.0, holder_share=0.5)
    assert len(free[0]) > 5
    capped = place_fabric(keys, [0], SHAPE, base, threshold=10.0, holder_share=0.5, max_holders=5)
    assert len(capped[0]) == 5 and capped[0][0] == 0
    kept = place_fabric(
        keys, [0], SHAPE, base, threshold=10.0, holder_share=0.5, max_holders=3,
        previous={"hot": free[0]},
    )  # fmt: skip
    assert len(kept[0]) == 3 and set(kept[0]) <= set(free[0])
    fc = FabricController(SHAPE, FabricConfig(k=8, t0=5.0, max_holders=4), lambda key: 0)
    report = fc.decide({key16(7): 1200}, {}, [100.0] * SHAPE.total)
    assert [len(kp.holders) for plan in report.plans for kp in plan.keys.values()] == [4]
    with pytest.raises(ValueError, match="max holders"):
        FabricConfig(max_holders=0)


def test_the_replica_budget_of_each_server_is_kept() -> None:
    base = [100.0] * SHAPE.total
    keys = [(f"k{i}", 600.0 - 50 * i) for i in range(6)]
    origins = [0, 1, 2, 3, 4, 5]  # racks 0 and 1 carry everything
    room = [1] * SHAPE.total
    holders = place_fabric(keys, origins, SHAPE, base, threshold=10.0, room=room)
    used = [0] * SHAPE.total
    for hs in holders:
        for s in hs[1:]:
            used[s] += 1
    assert max(used) <= 1
    assert sum(used) > 0


def test_write_copies_count_and_a_write_heavy_key_gets_fewer_holders() -> None:
    base = [100.0] * SHAPE.total
    keys = [("read", 1200.0), ("write", 1200.0)]
    reads = place_fabric(keys[:1], [0], SHAPE, base, threshold=10.0, write_ratios=0.0)
    writes = place_fabric(keys[1:], [0], SHAPE, base, threshold=10.0, write_ratios=0.3)
    assert len(writes[0]) < len(reads[0])


def test_a_key_keeps_its_holders_when_the_loads_did_not_change() -> None:
    base = [100.0] * SHAPE.total
    keys = [("hot", 1200.0), ("warm", 500.0)]
    origins = [1, 6]
    first = place_fabric(keys, origins, SHAPE, base, threshold=10.0)
    previous = {key: hs for (key, _), hs in zip(keys, first, strict=True)}
    again = place_fabric(keys, origins, SHAPE, base, threshold=10.0, previous=previous)
    assert [set(h) for h in again] == [set(h) for h in first]


def test_servers_are_chosen_by_the_load_their_rack_cannot_move() -> None:
    base = [100.0] * SHAPE.total
    fixed = [50.0] * SHAPE.total
    fixed[SHAPE.servers_of(2)[0]] = 95.0  # rack 2's first server: cold keys its leaf cannot move
    holders = place_fabric(
        [("hot", 1200.0)], [0], SHAPE, base, threshold=10.0, holder_share=2.0, fixed=fixed
    )
    in_rack2 = [s for s in holders[0] if SHAPE.rack_of(s) == 2]
    assert in_rack2 and SHAPE.servers_of(2)[0] not in in_rack2


@pytest.mark.parametrize(
    "change",
    [
        {"origins": [99]},
        {"base": [1.0]},
        {"room": [1]},
        {"write_ratios": [0.1, 0.2]},
        {"threshold": 0.0},
        {"home": [(1,)]},  # home holders start with the origin
        {"home": [(0, 5)]},  # server 5 is in another rack
        {"home": [(0,), (0,)]},
    ],
)
def test_bad_input_is_refused(change: dict) -> None:
    args = {
        "keys": [("a", 10.0)],
        "origins": [0],
        "shape": SHAPE,
        "base": [1.0] * SHAPE.total,
        "threshold": 1.0,
    }
    args.update(change)
    with pytest.raises(ValueError):
        place_fabric(**args)


def origin_of(key: bytes) -> int:
    return int.from_bytes(key, "big") % SHAPE.total


def test_the_controller_gives_each_fabric_key_one_spine_and_a_plan_there() -> None:
    fc = FabricController(SHAPE, FabricConfig(k=8, t0=5.0), origin_of)
    hot, warm = key16(1), key16(2)  # origins 1 and 2: both in rack 0
    observed = {hot: 1200, warm: 500, key16(7): 20}
    loads = [100.0] * SHAPE.total
    loads[1] += 1200
    loads[2] += 500
    loads[7] += 20
    rep = fc.decide(observed, {}, loads, floors=[0, 0])
    assert set(rep.spine_of) >= {hot}
    for key, spine in rep.spine_of.items():
        assert key in rep.plans[spine].keys
        assert all(key not in plan.keys for s, plan in enumerate(rep.plans) if s != spine)
        assert rep.plans[spine].keys[key].origin == origin_of(key)
    # the spine's batch installs the key and pushes it to the holders of other racks
    batch = rep.ops[rep.spine_of[hot]]
    installed = [
        op for op in batch if isinstance(op, TableEntry) and op.table == names.HOTKEY_TABLE
    ]
    assert installed
    pushes = [op for op in batch if isinstance(op, PushRequest) and op.key == hot]
    assert pushes and pushes[0].origin == origin_of(hot)
    assert {SHAPE.rack_of(s) for s in pushes[0].replicas} - {0}
    assert sum(rep.expected) == pytest.approx(sum(observed[k] for k in rep.spine_of) * 0.5)
    # the next period: same loads (as the spine measured them), the key keeps its spine
    spine_before = dict(rep.spine_of)
    rep2 = fc.decide(observed, {}, loads, floors=[0, 0])
    for key in spine_before:
        if key in rep2.spine_of:
            assert rep2.spine_of[key] == spine_before[key]
    # a key no longer seen anywhere leaves the fabric
    rep3 = fc.decide({key16(7): 20}, {}, [100.0] * SHAPE.total, floors=[0, 0])
    assert hot not in rep3.spine_of and rep3.demoted >= 1


def test_a_key_a_spine_lost_is_planned_back_onto_it() -> None:
    """docs/fabric.md "Failures": a spine that restarted empty (or came back after it was lost)
    gets its keys back with their holders, even when the racks are level without them (the
    other spine's keys level them; the planner alone would leave the lost keys cold)."""
    hot = key16(1)  # origin 1, rack 0

    def plan_once(fc: FabricController) -> dict[bytes, int]:
        # hot is cold: its Gets at its origin, rack 0 level with the others by its cold keys
        loads = [250.0] * SHAPE.total
        loads[0], loads[1], loads[2], loads[3] = 100.0, 700.0, 100.0, 100.0
        return fc.decide({hot: 600}, {}, loads, floors=[0, 0]).spine_of

    fc = FabricController(SHAPE, FabricConfig(k=8, t0=5.0), origin_of)
    assert hot not in plan_once(fc)  # the racks are level: nothing to move
    holders = (1, 5, 9, 13)
    fc.restore = {hot: (1, holders)}
    assert plan_once(fc) == {hot: 1}
    assert fc.plans[1].keys[hot].holders[: len(holders)] == holders  # kept (more may join)
    assert fc.restore == {}  # once
    # lost again, and no longer counted (the spine's counters went with it): its last count
    fc.plans[1], fc.spine_of = Plan(SHAPE.total, 8), {}
    fc.restore = {hot: (1, holders)}
    loads = [250.0] * SHAPE.total
    assert fc.decide({}, {}, loads, floors=[0, 0]).spine_of == {hot: 1}


def test_spines_are_filled_evenly_and_never_over_their_slots() -> None:
    fc = FabricController(SHAPE, FabricConfig(k=1, t0=1.0), origin_of)
    keys = [key16(i * SHAPE.total) for i in range(1, 4)]  # all at server 0 (rack 0)
    observed = {k: 900 - 100 * i for i, k in enumerate(keys)}
    loads = [100.0] * SHAPE.total
    loads[0] += sum(observed.values())
    rep = fc.decide(observed, {}, loads, floors=[0, 0])
    assert sorted(rep.spine_of.values()) == list(range(len(rep.spine_of)))
    assert len(rep.spine_of) <= SHAPE.spines  # one slot per spine


def test_shape_and_config_refuse_nonsense() -> None:
    with pytest.raises(ValueError):
        FabricShape(0, 4)
    with pytest.raises(ValueError):
        FabricConfig(holder_share=0.0)
    for h in (-0.1, 1.0):
        with pytest.raises(ValueError):
            FabricConfig(rotation_hysteresis=h)
    addresses = SHAPE.addresses()
    assert len(addresses) == SHAPE.total
    assert len({a.ip for a in addresses.servers}) == SHAPE.total


def test_a_rack_controller_never_makes_a_foreign_key_hot() -> None:
    rack = Rack.synthetic(4)
    ctl = Controller(ControllerConfig(k=4, t0=1.0, policy="balance"), lambda k: 0, rack, 8)
    hot = {key16(1): 500, key16(2): 300}
    ctl.foreign = frozenset({key16(1)})
    rep = ctl.decide(hot, [], [800, 10, 10, 10])
    assert key16(1) not in rep.plan.keys and key16(2) in rep.plan.keys


def test_a_key_leaving_for_the_fabric_takes_its_load_with_it() -> None:
    plan = build_plan([(key16(1), (0, 1))], Plan(2, 4), 2, 4)
    loads = [300.0, 300.0]
    back = cold_load_estimate(loads, {key16(1): 400}, plan, [], {}, lambda k: 0)
    gone = cold_load_estimate(loads, {key16(1): 400}, plan, [], {}, lambda k: 0, gone=[key16(1)])
    assert back == [500.0, 100.0]  # it returns to its origin
    assert gone == [100.0, 100.0]  # a spine serializes it next period


def test_holders_kept_from_a_read_only_plan_go_when_the_key_turns_write_heavy() -> None:
    keys = [("hot", 1600.0)]
    first = place_fabric(keys, [0], SHAPE, [100.0] * SHAPE.total, threshold=10.0)
    assert len(first[0]) == SHAPE.total  # read-only: everywhere
    # then rack 1's own load grows and the key takes 30 % Sets: every holder receives them all
    base = [300.0 if SHAPE.rack_of(s) == 1 else 100.0 for s in range(SHAPE.total)]
    again = place_fabric(
        keys, [0], SHAPE, base, threshold=10.0, write_ratios=0.3, previous={"hot": first[0]}
    )
    assert set(again[0]) < set(first[0])  # no ratchet: the warm start is not kept whole
    assert all(SHAPE.rack_of(s) != 1 for s in again[0])  # the busiest rack's holders went first
    kept = rack_loads(SHAPE, base, keys, first, [0.3])
    now = rack_loads(SHAPE, base, keys, again, [0.3])
    assert max(now) < max(kept)


def test_holders_are_not_added_period_after_period_under_writes() -> None:
    """The fabric controller's holders of a hot key over 8 periods, the loads measured as its
    plan puts them: read-only first, then 30 % Sets while rack 1's own load doubles. The warm
    start used to keep every holder of the read-only plan for good."""
    hot = key16(SHAPE.total * 5)  # origin 0, rack 0
    # every holder takes every write (a rotated key's holders cost no copies: next test)
    fc = FabricController(SHAPE, FabricConfig(k=8, t0=5.0, write_rotation=False), origin_of)
    count, history = 1600, []
    for period in range(8):
        w = 0.0 if period < 2 else 0.3
        loads = [200.0 if period >= 2 and SHAPE.rack_of(s) == 1 else 100.0 for s in range(16)]
        hs = fc.holders().get(hot, (origin_of(hot),))
        for s in hs:
            loads[s] += holder_load(count, len(hs), w)
        fc.decide({hot: count}, {hot: int(count * w)}, loads, floors=[0, 0])
        history.append(len(fc.holders().get(hot, (0,))))
    assert history[1] == SHAPE.total
    assert history[-1] < history[1] and history[-3:] == [history[-1]] * 3  # fewer, then steady
    assert all(later <= earlier for earlier, later in itertools.pairwise(history[2:]))


def test_a_rotated_key_costs_each_holder_its_share_and_only_write_heavy_keys_rotate() -> None:
    """The write rotation (docs/protocol.md F7): a write goes to one holder, so a rotated key of
    load L costs each of its n holders L / n, and with 30 % Sets it is spread as widely as a
    read-only key, where copying every write keeps it on few holders. The controller rotates the
    keys whose writes exceed holder_share of a server's mean, and no key without rotation."""
    base = [100.0] * SHAPE.total
    keys = [("write", 1200.0)]
    copied = place_fabric(keys, [0], SHAPE, base, threshold=10.0, write_ratios=0.3)
    rotated = place_fabric(keys, [0], SHAPE, base, threshold=10.0, write_ratios=0.3, rotate=[True])
    reads = place_fabric(keys, [0], SHAPE, base, threshold=10.0)
    assert len(copied[0]) < len(rotated[0]) == len(reads[0])
    heavy, light = key16(SHAPE.total * 5), key16(SHAPE.total * 6)
    loads = [100.0] * SHAPE.total
    for rotation in (True, False):
        fc = FabricController(SHAPE, FabricConfig(k=8, t0=5.0, write_rotation=rotation), origin_of)
        report = fc.decide({heavy: 1600, light: 400}, {heavy: 480, light: 4}, loads, floors=[0, 0])
        assert heavy in report.spine_of
        assert report.rotated == (frozenset({heavy}) if rotation else frozenset())
        # the plan carries the flag: the spine's set_hot(slot, n, rotate) of the heavy key only
        kp = report.plans[report.spine_of[heavy]].keys
        assert [key for key in (heavy, light) if key in kp and kp[key].rotate] == (
            [heavy] if rotation else []
        )
        if rotation:  # the expected load splits evenly over the holders
            hs = fc.holders()[heavy]
            split = fc.fabric_load({heavy: 1600.0}, {heavy: 0.3})
            assert {round(split[s], 6) for s in hs} == {round(1600 / len(hs), 6)}
    with pytest.raises(ValueError):
        place_fabric(keys, [0], SHAPE, base, threshold=10.0, rotate=[True, False])


@pytest.mark.parametrize(
    ("hysteresis", "expected"),
    [(0.2, [True, True, True, True, False]), (0.0, [True, False, True, False, False])],
)
def test_a_key_whose_writes_hover_about_the_bound_keeps_its_rotation(
    hysteresis: float, expected: list[bool]
) -> None:
    """Each switch of a key's rotation freezes the writes of all its holders. The bound is 10
    writes (holder_share 0.1 of a server's mean 100); a key of 400 queries with 12, 9, 12, 9
    writes (after a first period, predicted at half its load) rotates from the second period on and
    keeps rotating (9 is above 0.8 x 10) until its writes fall to 7; decided afresh (hysteresis
    0) it switches every period."""
    key = key16(SHAPE.total * 7 + 1)
    loads = [100.0] * SHAPE.total
    cfg = FabricConfig(k=8, t0=5.0, rotation_hysteresis=hysteresis)
    fc = FabricController(SHAPE, cfg, origin_of)
    seen = []
    for writes in (12, 12, 9, 12, 9, 7):
        report = fc.decide({key: 400}, {key: writes}, loads, floors=[0, 0])
        assert key in report.spine_of  # fabric-hot throughout: every switch would freeze it
        seen.append(key in report.rotated)
    assert seen == [False, *expected]


def test_a_rack_hot_key_costs_its_rack_the_write_copies_of_its_replicas() -> None:
    """Rack 0 carries a key of 800 queries (25 % Sets) on its 4 servers: 200 writes and 150
    reads each. Counted at its origin alone, the copies stay in rack 0's own load and moving the
    key looks worth it; with its holders reported, moving it would lift another rack above rack
    0 (every new holder takes its 200 writes): it stays."""
    key = key16(SHAPE.total * 3)  # origin 0
    loads = [250.0] * SHAPE.total
    for s in SHAPE.servers_of(0):
        loads[s] = 100.0 + 200.0 + 150.0
    moved = {}
    for homes in (None, {key: (0, 1, 2, 3)}):
        fc = FabricController(SHAPE, FabricConfig(k=8, t0=5.0), origin_of)
        fc.decide({key: 800}, {key: 200}, loads, floors=[0, 0], rack_holders=homes)
        moved[homes is not None] = key in fc.spine_of
    assert moved == {False: True, True: False}


def test_servers_inside_a_level_rack_are_levelled_too() -> None:
    """Racks level (each holds one hot key), but every hot key's origin carries it alone: only
    the in-rack pass gives it holders beside its origin, until no server is above 1.1 x its
    rack's mean (the Mininet fabric's rack controllers observe only: nobody else would)."""
    base = [100.0] * SHAPE.total
    keys = [(f"k{r}", 400.0) for r in range(SHAPE.racks)]
    origins = [r * SHAPE.servers for r in range(SHAPE.racks)]

    def servers(holders) -> list[float]:
        out = list(base)
        for (_, load), hs in zip(keys, holders, strict=True):
            for s in hs:
                out[s] += load / len(hs)
        return out

    flat = place_fabric(keys, origins, SHAPE, base, threshold=50.0)
    assert max(servers(flat)) == 500.0  # the racks were level: nothing moved
    levelled = place_fabric(keys, origins, SHAPE, base, threshold=50.0, level_inside=0.1)
    loads = servers(levelled)
    for r in range(SHAPE.racks):
        mine = [loads[s] for s in SHAPE.servers_of(r)]
        assert max(mine) <= 1.1 * sum(mine) / len(mine)
    for hs, o in zip(levelled, origins, strict=True):
        assert hs[0] == o and {SHAPE.rack_of(s) for s in hs} == {SHAPE.rack_of(o)}


def test_a_holder_moves_off_a_loaded_server_inside_its_rack() -> None:
    """Last period's holder sits on a server that has since become the rack's busiest: it
    moves to the rack's least loaded server (the warm start alone would keep it there)."""
    base = [100.0] * SHAPE.total
    base[1] = 300.0  # its rack's busiest, by load the rack cannot move
    keys = [("hot", 800.0)]
    prev = {"hot": (4, 1, 8, 12)}
    kept = place_fabric(keys, [4], SHAPE, base, threshold=10.0, previous=prev)
    assert 1 in kept[0]
    moved = place_fabric(keys, [4], SHAPE, base, threshold=10.0, previous=prev, level_inside=0.1)
    assert 1 not in moved[0] and SHAPE.rack_of(moved[0][1]) == 0


def test_no_more_keys_leave_their_racks_than_the_spines_have_slots() -> None:
    base = [100.0] * SHAPE.total
    keys = [("a", 600.0), ("b", 500.0), ("c", 400.0)]
    origins = [0, 1, 2]  # all in rack 0
    free = place_fabric(keys, origins, SHAPE, base, threshold=10.0)
    assert sum(len(h) > 1 for h in free) > 1
    held = place_fabric(keys, origins, SHAPE, base, threshold=10.0, slots=1)
    assert [len(h) > 1 for h in held] == [True, False, False]  # the most lowering one


def test_a_partial_first_period_does_not_halve_the_next_prediction() -> None:
    """The load starts inside a period: that period's few counts are left out of the next
    prediction (its total is under half of the next one's), which is the next period's counts
    alone; then last period's counts are scaled to this period's total."""
    origin = {b"hot": 0}
    fc = FabricController(SHAPE, FabricConfig(k=4), lambda key: origin.get(key, 1))
    loads = [0.0] * SHAPE.total
    fc.decide({b"hot": 10}, {}, [10.0, *loads[1:]])
    report = fc.decide({b"hot": 400}, {}, [400.0] + [40.0] * (SHAPE.total - 1))
    assert dict(report.predicted)[b"hot"] == 400.0  # not (400 + 10) / 2
    # the total halves: last period's 400 counts as 200, the prediction is their mean
    report = fc.decide({b"hot": 200}, {}, [200.0] + [20.0] * (SHAPE.total - 1))
    assert dict(report.predicted)[b"hot"] == pytest.approx(200.0)


def test_dead_servers_hold_no_fabric_key_and_a_dead_origins_key_gets_no_holder() -> None:
    """docs/fabric.md "Failures": the rack controllers hand the fabric their dead servers
    (``RackInput.down``); the planner drops them from every key's holders (last period's kept
    holders included) and places no new holder on them. A key whose origin is dead is not made
    fabric-hot; one that is keeps its live holders and gets no new one (as a rack keeps a dead
    origin's hot key: the origin cannot SYNC a push)."""
    fc = FabricController(SHAPE, FabricConfig(k=8, t0=5.0, level_inside=0.1), origin_of)
    hot, other, third = key16(1), key16(2), key16(3)  # origins 1, 2, 3: rack 0
    observed = {hot: 1200, other: 900}
    loads = [100.0] * SHAPE.total
    loads[1] += 1200
    loads[2] += 900
    rep = fc.decide(observed, {}, loads, floors=[0, 0])
    holders = rep.plans[rep.spine_of[hot]].keys[hot].holders
    theirs = rep.plans[rep.spine_of[other]].keys[other].holders
    assert len(holders) > 2 and len(theirs) > 2
    dead = {holders[1], theirs[2], 2, 3}  # a replica of each, other's origin, third's origin
    observed[third] = 1000
    loads[3] += 1000
    again = fc.decide(observed, {}, loads, floors=[0, 0], dead=dead)
    kept = again.plans[again.spine_of[hot]].keys[hot].holders
    assert not dead & set(kept) and set(kept) >= set(holders) - dead
    assert again.plans[again.spine_of[other]].keys[other].holders == (
        2,
        *(h for h in theirs[1:] if h not in dead),
    )
    assert third not in again.spine_of  # made fabric-hot with a live origin (below)
    assert all(not dead & set(kp.holders[1:]) for p in again.plans for kp in p.keys.values())
    assert third in fc.decide(observed, {}, loads, floors=[0, 0], dead={5}).spine_of
    # no holder is ever placed on a dead server, whatever the loads: every server of racks
    # 1-3 but one per rack dead, rack 0 carrying every key
    many = {key16(i): 400 + i for i in range(1, 4)}
    loads = [100.0] * SHAPE.total
    for key, n in many.items():
        loads[origin_of(key)] += n
    dead = {s for r in (1, 2, 3) for s in SHAPE.servers_of(r)} - {5, 10, 15}
    fresh = FabricController(SHAPE, FabricConfig(k=8, t0=5.0, level_inside=0.1), origin_of)
    rep = fresh.decide(many, {}, loads, floors=[0, 0], dead=dead)
    placed = {s for p in rep.plans for kp in p.keys.values() for s in kp.holders}
    assert rep.spine_of and placed and not placed & dead
