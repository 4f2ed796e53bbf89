"""Hot-key prediction (paper §4.1.1): L_next = alpha * L_now + (1 - alpha) * L_prev.

The candidates are the keys of this period's HotkeyTable counters plus the keys HashPipe holds,
about 2K keys. A key seen in only one of the two periods counts zero in the other. The K keys with
the largest prediction are the next hot set.
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

K = TypeVar("K", bound=Hashable)


def merge_observations(
    hot_counts: Mapping[K, int], hashpipe: Iterable[tuple[K, int]]
) -> dict[K, int]:
    """One count per candidate key: hot-key counters plus HashPipe slots (a key may sit in several
    HashPipe stages; its counts add up). Empty slots (count 0) are ignored."""
    merged: dict[K, int] = {key: int(count) for key, count in hot_counts.items()}
    for key, count in hashpipe:
        if count > 0:
            merged[key] = merged.get(key, 0) + int(count)
    return merged


def predict(
    now: Mapping[K, float], prev: Mapping[K, float], alpha: float, k: int
) -> list[tuple[K, float]]:
    """The ``k`` keys of ``now`` with the largest alpha*now + (1-alpha)*prev, largest first.

    Only keys observed in this period are candidates (the switch's counters define them); a key
    missing from ``prev`` counts zero there. Ties keep the order of ``now`` (deterministic).
    """
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be within [0, 1], got {alpha}")
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    scored = ((key, alpha * now[key] + (1.0 - alpha) * prev.get(key, 0.0)) for key in now)
    return heapq.nlargest(k, scored, key=lambda item: item[1])


@dataclass
class Predictor:
    """Keeps last period's observations; ``update`` returns the prediction for the next period."""

    alpha: float = 0.5
    k: int = 10_000
    prev: dict = field(default_factory=dict)

    def update(
        self, observed: Mapping[K, int], prev_scale: float | None = 1.0
    ) -> list[tuple[K, float]]:
        """``prev_scale``: last period's counts are multiplied by it (the ratio of this period's
        total load to last period's, when the caller knows the load changed); None: last
        period says nothing about the next one (a start), the prediction is this period's
        counts alone."""
        now = {key: float(count) for key, count in observed.items()}
        if prev_scale is None:
            predicted = predict(now, {}, 1.0, self.k)
        elif prev_scale == 1.0:
            predicted = predict(now, self.prev, self.alpha, self.k)
        else:
            prev = {key: v * prev_scale for key, v in self.prev.items()}
            predicted = predict(now, prev, self.alpha, self.k)
        self.prev = now
        return predicted
