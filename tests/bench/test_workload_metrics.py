"""Workloads (Zipf sampling through the kernel's alias tables, shifts) and the metrics."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kvswitch.bench import metrics
from kvswitch.bench.model import Model
from kvswitch.bench.workload import Workload, zipf_weights
from kvswitch.controller.hashring import origins_of_ids
from kvswitch.controller.plan import rack_setup
from kvswitch.controller.rack import Rack


def test_zipf_weights() -> None:
    w = zipf_weights(4, 1.0)
    assert w == pytest.approx(np.array([1, 1 / 2, 1 / 3, 1 / 4]) / (25 / 12))
    assert np.all(zipf_weights(10, 0.0) == 0.1)
    with pytest.raises(ValueError):
        zipf_weights(0, 1.0)


@pytest.mark.parametrize("keys", [500, 70_000])
def test_kernel_sampling_follows_the_distribution(keys: int) -> None:
    # 70 000 keys: 65 536 ranks from the cached head table, the rest from the tail table
    n = 400_000
    wl = Workload(keys, 0.99, seed=4)
    rack = Rack.synthetic(4)
    origin = origins_of_ids(np.arange(keys), 4)
    model = Model(rack, 16, 4, origin)
    model.apply(rack_setup(rack, 1))
    counts = np.zeros(keys, np.int32)
    model.run_sampled(n, 9, wl, wl.rank_info(origin), counts)
    edges = np.unique(np.geomspace(1, keys, 60).astype(int)) - 1  # log-spaced rank bins
    observed = np.add.reduceat(counts, edges)
    expected = np.add.reduceat(wl.weights, edges) * n
    chi2 = float(np.sum((observed - expected) ** 2 / expected))
    assert chi2 < 3 * len(edges)  # ~ len(edges) - 1 degrees of freedom
    assert counts.sum() == n
    # every query is counted at its key's origin (no hot keys installed)
    by_key = np.zeros(keys)
    by_key[wl.perm] = counts
    assert np.array_equal(model.load, np.bincount(origin, weights=by_key, minlength=4))


def test_shifts_move_the_right_keys() -> None:
    wl = Workload(100, 1.0, seed=1)
    before = wl.perm.copy()
    wl.shift("hot-in", 5, np.random.default_rng(0))
    assert np.array_equal(wl.perm[:5], before[-5:])
    wl = Workload(100, 1.0, seed=1)
    wl.shift("hot-out", 5, np.random.default_rng(0))
    assert np.array_equal(wl.perm[-5:], before[:5])
    wl = Workload(100, 1.0, seed=1)
    wl.shift("random", 5, np.random.default_rng(0))
    assert not set(wl.perm[:5]) & set(before[:5])
    assert sorted(wl.perm) == list(range(100))
    with pytest.raises(ValueError):
        wl.shift("sideways", 1, np.random.default_rng(0))


def test_throughput_and_latency() -> None:
    assert metrics.throughput([10, 10, 20], 40, capacity=100) == 200
    # one M/M/1 server: response time ~ Exp(mu - rate)
    mu, rate = 1000.0, 600.0
    p50 = metrics.latency_percentile(np.array([1.0]), rate, mu, 0.5)
    p99 = metrics.latency_percentile(np.array([1.0]), rate, mu, 0.99)
    assert p50 == pytest.approx(math.log(2) / (mu - rate), rel=1e-6)
    assert p99 == pytest.approx(math.log(100) / (mu - rate), rel=1e-6)
    assert metrics.latency_percentile(np.array([1.0]), mu, mu, 0.5) == math.inf
    slo = math.log(100) / 400.0
    assert metrics.slo_throughput(np.array([1.0]), mu, slo) == pytest.approx(600, rel=1e-3)
    # two servers, one with twice the share: at 900/s the busy one alone meets the SLO; the
    # mixture's p99 allows a little more, never the busy server's saturation point (1500/s)
    shares = np.array([2 / 3, 1 / 3])
    rate = metrics.slo_throughput(shares, mu, slo)
    assert 900 < rate < 1500
    assert metrics.latency_percentile(shares, rate, mu, 0.99) == pytest.approx(slo, rel=1e-3)


def test_prediction_accuracy() -> None:
    counts = np.array([50, 40, 30, 20, 10, 0], float)
    overlap, share, true_share = metrics.prediction_accuracy(np.array([0, 2, 5]), counts, 3)
    assert overlap == pytest.approx(2 / 3)
    assert share == pytest.approx(80 / 150)
    assert true_share == pytest.approx(120 / 150)
