"""Plots of the figure suite (matplotlib, files only)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

STYLE = {
    "original": ("Original", "tab:gray", "o"),
    "netcache": ("NetCache-style cache", "tab:purple", "v"),
    "all-hot": ("Replicate hot keys everywhere", "tab:green", "s"),
    "ring": ("KVSwitch, paper policy (ring)", "tab:blue", "^"),
    "balance": ("KVSwitch, load-aware (ours)", "tab:red", "D"),
    "least-loaded": ("KVSwitch, least-loaded", "tab:orange", "x"),
}


#: The load-aware policy under the first consistency rules (every Get of a hot key went to its
#: origin from a Set until the origin's reply and every confirm were back), as measured by this suite
#: before the read-set rules (docs/results.md "Writes"): (write ratio, lambda, MQPS).
BALANCE_FIRST_RULES = (
    (0.0, 0.0027, 15.87),
    (0.05, 0.2103, 8.15),
    (0.1, 0.2198, 6.71),
    (0.2, 0.1569, 5.98),
    (0.3, 0.1101, 5.78),
    (0.5, 0.1032, 5.58),
)


def _series(rows: list[dict], experiment: str, x: str, y: str) -> dict[str, list[tuple]]:
    out: dict[str, list[tuple]] = defaultdict(list)
    for r in rows:
        if r.get("experiment") == experiment:
            out[r["policy"]].append((r[x], r[y]))
    return {k: sorted(v) for k, v in out.items()}


def _plot(ax, rows, experiment, x, y, policies=None, **kw) -> None:
    for policy, points in _series(rows, experiment, x, y).items():
        if policies is not None and policy not in policies:
            continue
        label, color, marker = STYLE.get(policy, (policy, None, "."))
        xs, ys = zip(*points, strict=True)
        ax.plot(xs, ys, label=kw.get("prefix", "") + label, color=color, marker=marker,
                linestyle=kw.get("linestyle", "-"))  # fmt: skip


def _save(fig, out: Path, name: str) -> Path:
    path = out / name
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def plot_all(summaries: list[dict], periods: list[dict], out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    size = (6.4, 4.0)

    fig, ax = plt.subplots(figsize=size)
    _plot(ax, summaries, "skew", "skew", "imbalance")
    ax.set(xlabel="Zipf skew (0 = uniform)", ylabel="imbalance factor λ", yscale="log",
           title="Fig. 7a: load imbalance vs skew")  # fmt: skip
    ax.axhline(0.005, color="k", linewidth=0.5, linestyle=":")
    ax.legend(fontsize=7)
    paths.append(_save(fig, out, "fig7a_imbalance.png"))

    fig, ax = plt.subplots(figsize=size)
    _plot(ax, [dict(r, mqps=r["throughput_qps"] / 1e6) for r in summaries], "skew", "skew", "mqps")
    ax.set(xlabel="Zipf skew", ylabel="throughput (MQPS, 32 x 0.5 MQPS servers)",
           title="Fig. 7b: throughput vs skew")  # fmt: skip
    ax.legend(fontsize=7)
    paths.append(_save(fig, out, "fig7b_throughput.png"))

    fig, ax = plt.subplots(figsize=size)
    _plot(ax, summaries, "skew", "skew", "replicas_mean", policies={"ring", "balance", "all-hot"})
    _plot(ax, summaries, "skew", "skew", "replicas_max", policies={"ring", "balance"},
          linestyle="--", prefix="max: ")  # fmt: skip
    ax.set(xlabel="Zipf skew", ylabel="replicas per server", yscale="log",
           title="Fig. 7e: replica memory (mean; dashed: max)")  # fmt: skip
    ax.legend(fontsize=7)
    paths.append(_save(fig, out, "fig7e_replicas.png"))

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    finite = [dict(r, p99=min(r["p99_us"], 1e3)) for r in summaries]
    _plot(a1, finite, "skew", "skew", "p99")
    a1.set(xlabel="Zipf skew", ylabel="p99 latency (µs) at 50 % load; 1000 = overloaded",
           yscale="log", title="Fig. 7f: tail latency")  # fmt: skip
    _plot(
        a2, [dict(r, mqps=r["slo_throughput_qps"] / 1e6) for r in summaries], "skew", "skew", "mqps"
    )
    a2.set(xlabel="Zipf skew", ylabel="throughput at p99 ≤ 50 µs (MQPS)",
           title="throughput at the p99 SLO")  # fmt: skip
    a2.legend(fontsize=7)
    paths.append(_save(fig, out, "fig7f_latency.png"))

    fig, ax = plt.subplots(figsize=size)
    _plot(ax, [dict(r, pct=100 * r["top_k_overlap"]) for r in summaries], "prediction", "k", "pct")
    ax.set(xlabel="K (hot keys)", ylabel="predicted ∩ true top-K (%)", ylim=(0, 105),
           title="Fig. 8a: prediction accuracy (Zipf 0.99)")  # fmt: skip
    paths.append(_save(fig, out, "fig8a_overlap.png"))

    fig, ax = plt.subplots(figsize=size)
    rows = [
        dict(r, pct=100 * r["predicted_share"], tpct=100 * r["true_top_k_share"]) for r in summaries
    ]
    _plot(ax, rows, "prediction", "k", "pct", prefix="predicted keys: ")
    _plot(ax, rows, "prediction", "k", "tpct", prefix="true top-K: ", linestyle="--")
    ax.set(xlabel="K (hot keys)", ylabel="share of queries (%)",
           title="Fig. 8b: queries carried by the hot set")  # fmt: skip
    ax.legend(fontsize=7)
    paths.append(_save(fig, out, "fig8b_share.png"))

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    _plot(a1, summaries, "writes", "write_ratio", "imbalance")
    a1.set(xlabel="write ratio", ylabel="λ", yscale="log", title="Fig. 9a: writes (Zipf 0.99)")
    _plot(
        a2,
        [dict(r, mqps=r["throughput_qps"] / 1e6) for r in summaries],
        "writes",
        "write_ratio",
        "mqps",
    )
    ratios, lambdas, mqps = zip(*BALANCE_FIRST_RULES, strict=True)
    before = {"color": "tab:red", "marker": "D", "linestyle": ":", "alpha": 0.6}
    a1.plot(ratios, lambdas, label="ours, first rules (before)", **before)
    a2.plot(ratios, mqps, label="ours, first rules (before)", **before)
    a2.axvspan(0.0, 0.2, color="tab:blue", alpha=0.07, label="paper: most of the gain kept")
    a2.set(xlabel="write ratio", ylabel="throughput (MQPS)")
    a2.legend(fontsize=7)
    paths.append(_save(fig, out, "fig9a_writes.png"))

    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8), sharey=True)
    for ax, kind in zip(axes, ("hot-in", "random", "hot-out"), strict=True):
        _plot(ax, periods, f"shift-{kind}", "period", "imbalance")
        ax.set(xlabel="period", title=f"Fig. 9b: {kind} shift", yscale="log")
    axes[0].set_ylabel("λ")
    axes[0].legend(fontsize=7)
    paths.append(_save(fig, out, "fig9b_shifts.png"))

    fig, ax = plt.subplots(figsize=size)
    _plot(ax, summaries, "scale", "servers", "imbalance")
    ax.set(xlabel="servers in the rack (M)", ylabel="λ", xscale="log", yscale="log",
           title="Fig. 9c: scale (Zipf 0.99, K = 10 000)")  # fmt: skip
    ax.legend(fontsize=7)
    paths.append(_save(fig, out, "fig9c_scale.png"))
    return paths


def plot_racks(summaries: list[dict], path: Path) -> Path:
    """λ over all servers (solid) and inside racks (dotted) against the number of racks, with the
    spine level and with the racks alone; the paper's claim (λ < 0.018 over 32 x 32) shaded."""
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ax.axhspan(0, 0.018, color="tab:green", alpha=0.12, label="paper's claim: λ < 0.018")
    for label, color, marker in (
        ("balance+spine", "tab:red", "D"),
        ("balance (racks alone)", "tab:blue", "^"),
        ("original", "tab:gray", "o"),
    ):
        points = sorted((r["racks"], r["imbalance"], r["rack_imbalance_mean"])
                        for r in summaries if r["policy"] == label)  # fmt: skip
        if not points:
            continue
        xs, ys, inside = zip(*points, strict=True)
        ax.plot(xs, ys, color=color, marker=marker, label=f"{label}: over all servers")
        if label != "original":
            ax.plot(xs, inside, color=color, marker=marker, linestyle=":", alpha=0.7,
                    label=f"{label}: inside racks (mean)")  # fmt: skip
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("racks of 32 servers (Zipf 0.99, 1M keys, K = 10 000 per switch)")
    ax.set_ylabel("imbalance λ")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    path.parent.mkdir(parents=True, exist_ok=True)
    return _save(fig, path.parent, path.name)
