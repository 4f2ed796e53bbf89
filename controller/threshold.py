"""Adaptive replication threshold (paper §4.1.2).

If the most loaded server carries more than ``(1 + bound)`` times the mean, the threshold shrinks
(T <- gamma * T) so that more keys get replicas; otherwise it stays. ``T0`` of ``None`` starts the
threshold at the mean server load of the first period seen.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


def max_over_mean(loads: Sequence[float]) -> float:
    total = float(sum(loads))
    if not loads or total <= 0.0:
        return 1.0
    return max(loads) * len(loads) / total


def imbalance(loads: Sequence[float]) -> float:
    """lambda = sum_j |L_j - mean| / (mean * M); 0 for an idle rack."""
    if not loads:
        return 0.0
    mean = float(sum(loads)) / len(loads)
    if mean <= 0.0:
        return 0.0
    return sum(abs(load - mean) for load in loads) / (mean * len(loads))


@dataclass
class Threshold:
    bound: float = 0.30
    gamma: float = 0.8
    t0: float | None = None
    floor: float = 1.0
    value: float | None = None

    def __post_init__(self) -> None:
        if self.bound < 0:
            raise ValueError("bound must be >= 0")
        if not 0.0 < self.gamma <= 1.0:
            raise ValueError("gamma must be within (0, 1]")
        if self.value is None and self.t0 is not None:
            if self.t0 <= 0:
                raise ValueError("T0 must be > 0")
            self.value = float(self.t0)

    def update(self, loads: Sequence[float]) -> float:
        """Account one period's per-server loads; return the threshold for the next plan."""
        if self.value is None:
            mean = float(sum(loads)) / max(1, len(loads))
            self.value = max(self.floor, mean)
        elif max_over_mean(loads) > 1.0 + self.bound:
            self.value = max(self.floor, self.value * self.gamma)
        return self.value
