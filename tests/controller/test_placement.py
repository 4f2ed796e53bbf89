"""Replica placement: the paper's ring (Figure 4) and the load-aware policies."""

from __future__ import annotations

import pytest

from kvswitch.controller.placement import place, replica_count, ring_replicas


def one_based(origin: int, r: int, servers: int = 8) -> list[int]:
    return [s + 1 for s in ring_replicas(origin - 1, r, servers)]


def test_figure4_r4_from_server1() -> None:
    # 8 servers, r = 4, origin server 1: step 8 / 4 = 2 -> replicas on servers 3, 5, 7
    assert one_based(1, 4) == [3, 5, 7]


def test_figure4_r5_from_server4() -> None:
    # r = 5: step floor(8 / 5) = 1 -> the four servers after the origin, 5, 6, 7, 8
    assert one_based(4, 5) == [5, 6, 7, 8]


def test_ring_wraps_and_caps() -> None:
    assert one_based(7, 4) == [1, 3, 5]
    assert sorted(one_based(3, 8)) == [1, 2, 4, 5, 6, 7, 8]
    assert sorted(one_based(3, 50)) == [1, 2, 4, 5, 6, 7, 8]  # capped at M
    assert one_based(2, 1) == []


def test_replica_count() -> None:
    assert replica_count(99, 100, 32) == 1  # below T: not replicated
    assert replica_count(100, 100, 32) == 1
    assert replica_count(101, 100, 32) == 2
    assert replica_count(1000, 100, 32) == 10
    assert replica_count(10**9, 100, 32) == 32
    with pytest.raises(ValueError):
        replica_count(1, 0, 32)


def test_ring_policy_uses_ring_replicas() -> None:
    holders = place([("a", 400.0), ("b", 50.0)], [0, 3], threshold=100, servers=8, policy="ring")
    assert holders == [(0, 2, 4, 6), (3,)]


def test_least_loaded_goes_to_the_idle_servers() -> None:
    cold = [10.0, 10.0, 0.0, 10.0, 0.0, 10.0, 10.0, 10.0]
    holders = place([("a", 300.0)], [0], 100, 8, "least-loaded", cold_loads=cold)
    assert holders[0][0] == 0 and sorted(holders[0][1:]) == [2, 4]


def test_balance_levels_the_load_within_budget() -> None:
    predicted = [(i, 1000.0 / (i + 1)) for i in range(50)]
    origins = [0] * 25 + [1] * 25  # everything hot sits on two of eight servers
    cold = [100.0] * 8
    holders = place(predicted, origins, 1.0, 8, "balance", cold_loads=cold, tolerance=0.01)
    loads = list(cold)
    for (_, load), h in zip(predicted, holders, strict=True):
        for s in h:
            loads[s] += load / len(h)
    mean = sum(loads) / 8
    assert max(loads) <= mean * 1.02
    capped = place(
        predicted, origins, 1.0, 8, "balance", cold_loads=cold, max_replicas_per_server=2
    )
    per_server = [sum(s in h[1:] for h in capped) for s in range(8)]
    assert max(per_server) <= 2


def test_balance_splits_a_key_over_several_servers_at_once() -> None:
    # one key carries most of the load: a single extra replica cannot lower the maximum
    # (its target would become the maximum), several at once can
    holders = place([("hot", 800.0)], [0], 1.0, 8, "balance", cold_loads=[100.0] * 8)
    assert len(holders[0]) == 8


def test_place_rejects_bad_input() -> None:
    with pytest.raises(ValueError):
        place([("a", 1.0)], [0], 1.0, 4, "nope")
    with pytest.raises(ValueError):
        place([("a", 1.0)], [0, 1], 1.0, 4)
    with pytest.raises(ValueError):
        ring_replicas(9, 2, 8)


def test_write_aware_holder_load() -> None:
    from kvswitch.controller.placement import holder_load

    assert holder_load(800.0, 4, 0.0) == 200.0  # no writes: an even split
    assert holder_load(800.0, 4, 0.25) == pytest.approx(200.0 + 600.0 / 4)  # writes reach all


def test_balance_does_not_replicate_write_only_keys() -> None:
    cold = [100.0] * 8
    holders = place([("w", 400.0)], [0], 1.0, 8, "balance", cold_loads=cold, write_ratios=1.0)
    assert holders == [(0,)]  # every replica would only add write copies
    holders = place([("w", 400.0)], [0], 1.0, 8, "balance", cold_loads=cold)
    assert len(holders[0]) > 1


def test_balance_uses_each_keys_own_write_ratio() -> None:
    # two equally hot keys on server 0: the read-only one is spread, the write-only one (every
    # holder would get all of its load) stays at its origin; with one shared ratio they are alike
    cold = [0.0] * 8
    predicted = [("reads", 800.0), ("writes", 800.0)]
    holders = place(predicted, [0, 0], 1.0, 8, "balance", cold_loads=cold, write_ratios=[0.0, 1.0])
    assert len(holders[0]) > 1 and holders[1] == (0,)
    same = place(predicted, [0, 0], 1.0, 8, "balance", cold_loads=cold, write_ratios=0.0)
    assert len(same[1]) > 1
    with pytest.raises(ValueError):
        place(predicted, [0, 0], 1.0, 8, "balance", write_ratios=[0.1])


def _stuck_rack() -> tuple[list[tuple[str, float]], list[int], list[float]]:
    """Server 0's cold load alone is above the mean and its hot keys are splinters (0.05 each);
    server 1 is over the mean by one big key; servers 2 and 3 are below it."""
    predicted = [(f"tiny{i}", 0.05) for i in range(400)] + [("big", 60.0)]
    return predicted, [0] * 400 + [1], [130.0, 50.0, 80.0, 80.0]


def test_balance_does_not_spend_the_budget_on_a_server_it_cannot_level() -> None:
    predicted, origins, cold = _stuck_rack()
    holders = place(
        predicted, origins, 0.01, 4, "balance", cold_loads=cold, max_replicas_per_server=5
    )
    # splitting a splinter lowers server 0 by 0.025 a replica: the budget goes to the big key,
    # which levels server 1 (before: 15 splinter replicas, the big key left whole at 110)
    assert len(holders[-1]) > 1
    loads = list(cold)
    for (_, load), h in zip(predicted, holders, strict=True):
        for s in h:
            loads[s] += load / len(h)
    assert max(loads[1:]) < 105.0


def test_balance_spends_what_is_left_on_the_top_server() -> None:
    predicted, origins, cold = _stuck_rack()
    holders = place(
        predicted, origins, 0.01, 4, "balance", cold_loads=cold, max_replicas_per_server=200
    )
    # with the others levelled, the budget left still lowers server 0 as far as it goes
    assert sum(len(h) - 1 for h in holders[:400]) > 100
    assert len(holders[-1]) > 1
