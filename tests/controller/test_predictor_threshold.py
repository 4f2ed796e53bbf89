"""Hot-key prediction and the adaptive threshold."""

from __future__ import annotations

import pytest

from kvswitch.controller.predictor import Predictor, merge_observations, predict
from kvswitch.controller.threshold import Threshold, imbalance, max_over_mean


def test_prediction_formula_and_missing_keys_count_zero() -> None:
    now = {"a": 100.0, "b": 40.0, "c": 10.0}
    prev = {"a": 20.0, "c": 90.0, "gone": 1000.0}
    got = dict(predict(now, prev, alpha=0.75, k=3))
    assert got == {"a": 80.0, "b": 30.0, "c": 30.0}  # b: 0.75*40 + 0.25*0
    assert "gone" not in got  # only keys observed now are candidates


def test_keeps_the_k_largest() -> None:
    now = {i: float(i) for i in range(100)}
    assert [k for k, _ in predict(now, {}, 0.5, 5)] == [99, 98, 97, 96, 95]
    with pytest.raises(ValueError):
        predict(now, {}, 1.5, 5)


def test_merge_adds_hashpipe_stages_and_skips_empty_slots() -> None:
    merged = merge_observations({"h": 7}, [("x", 3), ("x", 2), ("y", 0), ("h", 1)])
    assert merged == {"h": 8, "x": 5}


def test_predictor_remembers_the_previous_period() -> None:
    p = Predictor(alpha=0.5, k=2)
    assert p.update({"a": 10, "b": 4}) == [("a", 5.0), ("b", 2.0)]
    assert p.update({"b": 10, "c": 30}) == [("c", 15.0), ("b", 7.0)]


def test_threshold_shrinks_only_above_the_bound() -> None:
    t = Threshold(bound=0.3, gamma=0.5, t0=100)
    assert t.update([10, 10, 10, 10]) == 100  # balanced: stays
    assert t.update([12.9, 9, 9, 9]) == 100  # 1.29 x mean: within the bound
    assert t.update([20, 10, 10, 0]) == 50  # 2 x mean: T <- gamma T
    assert t.update([20, 10, 10, 0]) == 25


def test_threshold_starts_at_the_mean_without_t0() -> None:
    assert Threshold().update([30, 10]) == 20
    with pytest.raises(ValueError):
        Threshold(gamma=0)


def test_imbalance_factor() -> None:
    assert imbalance([10, 10, 10, 10]) == 0
    # mean 10, deviations 10+10+0+0 over 10*4
    assert imbalance([20, 0, 10, 10]) == pytest.approx(0.5)
    assert max_over_mean([20, 0, 10, 10]) == 2
    assert imbalance([0, 0]) == 0
