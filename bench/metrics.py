"""Per-period metrics: imbalance, throughput with per-server capacity, M/M/1 latency, prediction
accuracy.

Queueing model: every server is an M/M/1 queue with service rate ``mu`` (its capacity, queries/s).
At an offered rack rate X, server j receives X * share_j; its response time is exponential with rate
``mu - X * share_j`` (infinite when that is <= 0). A query's latency is the mixture over servers
weighted by their shares, so its percentiles come from solving
``sum_j share_j * (1 - exp(-(mu - X share_j) t)) = q``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from kvswitch.controller.threshold import imbalance, max_over_mean

__all__ = [
    "imbalance",
    "latency_percentile",
    "max_over_mean",
    "prediction_accuracy",
    "slo_throughput",
    "throughput",
]


def throughput(loads: Sequence[float], queries: float, capacity: float) -> float:
    """Queries/s the rack sustains when the busiest server runs at ``capacity`` (queries/s):
    ``capacity * queries / max_j L_j`` (``loads`` may exceed ``queries``: write copies count)."""
    peak = max(loads) if len(loads) else 0
    return math.inf if peak <= 0 else capacity * queries / peak


def latency_percentile(shares: np.ndarray, rate: float, mu: float, q: float) -> float:
    """The q-quantile (0 < q < 1) of the response time in seconds at offered rack rate ``rate``.

    ``shares[j]`` = server j's packets per query (they may add up to more than 1: write copies);
    a response time is drawn from server j with probability proportional to ``shares[j]``."""
    shares = np.asarray(shares, dtype=np.float64)
    shares = shares[shares > 0]
    weights = shares / shares.sum()
    slack = mu - rate * shares
    if np.any(slack <= 0):
        return math.inf

    def cdf(t: float) -> float:
        return float(np.sum(weights * (1.0 - np.exp(-slack * t))))

    lo, hi = 0.0, 1.0 / float(slack.min())
    while cdf(hi) < q:
        hi *= 2.0
    for _ in range(60):
        mid = (lo + hi) / 2.0
        if cdf(mid) < q:
            lo = mid
        else:
            hi = mid
    return hi


def slo_throughput(shares: np.ndarray, mu: float, slo: float, q: float = 0.99) -> float:
    """The largest offered rack rate whose q-quantile latency stays within ``slo`` seconds."""
    shares = np.asarray(shares, dtype=np.float64)
    peak = float(shares.max())
    if peak <= 0:
        return 0.0
    lo, hi = 0.0, mu / peak
    for _ in range(50):
        mid = (lo + hi) / 2.0
        if latency_percentile(shares, mid, mu, q) <= slo:
            lo = mid
        else:
            hi = mid
    return lo


def prediction_accuracy(
    predicted: np.ndarray, counts: np.ndarray, k: int
) -> tuple[float, float, float]:
    """(overlap of ``predicted`` with the true top-k of ``counts``, share of queries of the
    predicted keys, share of the true top-k). ``predicted`` are indices into ``counts``."""
    total = float(counts.sum())
    if total <= 0 or k <= 0:
        return 0.0, 0.0, 0.0
    k = min(k, counts.size)
    top = np.argpartition(counts, -k)[-k:]
    overlap = np.intersect1d(top, predicted, assume_unique=True).size / k
    return overlap, float(counts[predicted].sum()) / total, float(counts[top].sum()) / total
