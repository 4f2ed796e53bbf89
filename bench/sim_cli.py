"""``kvswitch sim``: run one simulation, or the whole figure suite.

kvswitch sim run --skew 0.99 --policy balance --max-replicas 53 --csv run.csv
kvswitch sim figures --out results            # CSV + PNG + a markdown table
kvswitch sim figures --out /tmp/q --quick     # a small-scale suite (seconds)
kvswitch sim explore                          # the protocol's bounded exhaustive check
kvswitch sim explore --preset faults --losses 2 --client "set a1,get" --client "get,set b1"
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from dataclasses import fields, replace
from pathlib import Path
from typing import TYPE_CHECKING

from kvswitch import argtypes as t
from kvswitch.bench.simulator import MODES, SimConfig, simulate, summary
from kvswitch.bench.workload import SHIFTS
from kvswitch.consistency.explore_cli import add_explore, add_explore_fabric
from kvswitch.controller.placement import POLICIES

if TYPE_CHECKING:
    from kvswitch.bench.fabric_sim import FabricSimConfig

QUICK = {"keys": 20_000, "k": 200, "servers": 8, "queries": 200_000, "periods": 5, "stages": 4}


def read_csv(path: Path) -> list[dict]:
    """Rows written by :func:`write_csv` (numbers back as numbers; none if there is no file)."""
    if not path.exists():
        return []

    def value(text: str) -> object:
        try:
            return float(text)
        except ValueError:
            return text

    with path.open(newline="") as fh:
        return [{k: value(v) for k, v in row.items()} for row in csv.DictReader(fh)]


def write_csv(rows: list[dict], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    columns: list[str] = []
    for row in rows:
        columns += [c for c in row if c not in columns]
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)


def _config_args(parser: argparse.ArgumentParser) -> None:
    d = SimConfig()
    add = parser.add_argument
    add("--mode", choices=MODES, default=d.mode, help=f"system simulated (default {d.mode})")
    add("--policy", choices=POLICIES, default=d.policy, help=f"replica placement ({d.policy})")
    add("--servers", type=t.positive_int, default=d.servers, help="servers in the rack")
    add("--k", type=t.positive_int, default=d.k, help="hot keys (switch slots)")
    add("--stages", type=t.positive_int, default=d.stages, help="HashPipe stages")
    add("--keys", type=t.int_range(1, 2**31 - 1), default=d.keys, help="distinct keys")
    add("--skew", type=t.nonneg_float, default=d.skew, help="Zipf skew, 0 = uniform")
    add("--write-ratio", type=t.fraction, default=d.write_ratio, help="share of writes (0-1)")
    add("--queries", type=t.positive_int, default=d.queries, help="per period")
    add("--periods", type=t.positive_int, default=d.periods, help="controller periods")
    add("--alpha", type=t.fraction, default=d.alpha, help="predictor smoothing (0-1)")
    add("--bound", type=t.nonneg_float, default=d.bound, help="max/mean bound of the threshold")
    add("--gamma", type=t.fraction, default=d.gamma, help="threshold decay (0-1)")
    add(
        "--t0-fraction",
        type=t.nonneg_float,
        default=d.t0_fraction,
        help="initial threshold as a fraction of the first period's mean server load",
    )
    add("--max-replicas", type=t.positive_int, default=None, help="per server")
    add("--tolerance", type=t.nonneg_float, default=d.tolerance, help="balance tolerance")
    add("--lag", type=t.nonneg_int, default=d.lag, help="queries until a confirm lands")
    add("--shift", choices=SHIFTS, default=d.shift, help="popularity shift (default none)")
    add("--shift-period", type=t.nonneg_int, default=d.shift_period, help="period of the shift")
    add("--shift-count", type=t.nonneg_int, default=d.shift_count, help="keys that shift")
    add("--seed", type=int, default=d.seed, help="random seed")


def _config(ns: argparse.Namespace) -> SimConfig:
    names = {f.name for f in fields(SimConfig)} - {"racks", "rack"}
    values = {k: v for k, v in vars(ns).items() if k in names}
    return SimConfig(**values, max_replicas_per_server=ns.max_replicas)


def cmd_run(ns: argparse.Namespace) -> int:
    cfg = _config(ns)
    started = time.perf_counter()
    rows = simulate(cfg, progress=lambda line: print(line, flush=True))
    elapsed = time.perf_counter() - started
    s = summary(rows, ns.warmup)
    print(
        f"summary over the last {s['periods']} of {cfg.periods} periods: lambda={s['imbalance']:.4f} "
        f"max/mean={s['max_over_mean']:.3f} throughput={s['throughput_qps'] / 1e6:.2f} MQPS "
        f"p99={s['p99_us']:.1f} us top-K overlap={s['top_k_overlap']:.3f} "
        f"replicas/server max={s['replicas_max']:.0f} mean={s['replicas_mean']:.1f}"
    )
    total = cfg.queries * cfg.periods
    print(f"{total} queries in {elapsed:.1f} s ({total / elapsed / 1e6:.2f} M/s incl. controller)")
    if ns.csv:
        write_csv(rows, Path(ns.csv))
        print(f"wrote {ns.csv}")
    return 0


def markdown_table(summaries: list[dict]) -> str:
    lines = [
        "| experiment | policy | skew | K | M | writes | λ | max/mean | MQPS | p99 µs | "
        "MQPS at SLO | top-K overlap | replicated keys | replicas/server mean (max) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    order = sorted(
        summaries,
        key=lambda r: (
            r["experiment"],
            r["skew"],
            r["k"],
            r["servers"],
            r["write_ratio"],
            r["policy"],
        ),
    )
    for r in order:
        lines.append(
            f"| {r['experiment']} | {r['policy']} | {r['skew']:g} | {r['k']:.0f} | "
            f"{r['servers']:.0f} | {r['write_ratio']:g} | {r['imbalance']:.4f} | "
            f"{r['max_over_mean']:.3f} | {r['throughput_qps'] / 1e6:.2f} | {r['p99_us']:.1f} | "
            f"{r['slo_throughput_qps'] / 1e6:.2f} | {r['top_k_overlap']:.3f} | "
            f"{r['replicated_keys']:.0f} | {r['replicas_mean']:.1f} ({r['replicas_max']:.0f}) |"
        )
    return "\n".join(lines) + "\n"


def cmd_figures(ns: argparse.Namespace) -> int:
    from kvswitch.bench.figures import plot_all
    from kvswitch.bench.suite import experiments, run_suite

    base = SimConfig(periods=ns.periods, queries=ns.queries, seed=ns.seed)
    if ns.quick:
        base = replace(base, **QUICK)
    runs = experiments(base)
    if ns.only:
        unknown = set(ns.only) - {run.experiment for run in runs}
        if unknown:
            raise ValueError(f"no experiment {', '.join(sorted(unknown))}")
        runs = [run for run in runs if run.experiment in ns.only]
    out = Path(ns.out)
    print(f"figure suite: {len(runs)} runs, {base.periods} periods of {base.queries} queries, "
          f"writing {out}/", flush=True)  # fmt: skip
    started = time.perf_counter()
    periods, summaries = run_suite(
        runs, ns.warmup, ns.workers, progress=lambda line: print(line, flush=True)
    )
    if ns.only:  # the other experiments' rows of an earlier run in OUT stay
        periods += [r for r in read_csv(out / "periods.csv") if r["experiment"] not in ns.only]
        summaries += [r for r in read_csv(out / "summary.csv") if r["experiment"] not in ns.only]
    write_csv(periods, out / "periods.csv")
    write_csv(summaries, out / "summary.csv")
    (out / "summary.md").write_text(markdown_table(summaries))
    for path in plot_all(summaries, periods, out):
        print(f"wrote {path}")
    print(f"figure suite done in {time.perf_counter() - started:.0f} s")
    return 0


def _fabric_config(
    ns: argparse.Namespace, base: SimConfig, racks: int, spine: bool
) -> FabricSimConfig:
    from kvswitch.bench.fabric_sim import FabricSimConfig

    return FabricSimConfig(
        base,
        racks=racks,
        spines=ns.spines,
        spine=spine,
        fabric_bound=ns.fabric_bound,
        fabric_tolerance=ns.fabric_tolerance,
        holder_share=ns.holder_share,
        fabric_replicas=ns.fabric_replicas,
        write_rotation=ns.write_rotation,
        rotation_hysteresis=ns.rotation_hysteresis,
        max_holders=ns.max_holders or None,
    )


def cmd_racks(ns: argparse.Namespace) -> int:
    if ns.sweep:
        return _racks_sweep(ns)
    from kvswitch.bench.fabric_sim import simulate_fabric
    from kvswitch.bench.simulator import summary as mean_of

    base = _config(ns)
    cfg = _fabric_config(ns, base, ns.racks, ns.spine)
    print(
        f"{cfg.racks} racks x {base.servers} servers, {cfg.label()}, {base.periods} periods of "
        f"{base.queries * cfg.racks} queries ({base.queries} per rack)",
        flush=True,
    )
    started = time.perf_counter()
    rows = simulate_fabric(cfg, progress=lambda line: print(line, flush=True))
    s = mean_of(rows, ns.warmup)
    print(
        f"summary over the last {s['periods']} of {base.periods} periods: lambda over "
        f"{s['servers']:.0f} servers={s['imbalance']:.4f} (original {s['original_imbalance']:.4f}), "
        f"inside racks mean={s['rack_imbalance_mean']:.4f} max={s['rack_imbalance_max']:.4f}, "
        f"busiest rack/mean={s['rack_max_over_mean']:.3f}, throughput="
        f"{s['throughput_qps'] / 1e6:.1f} MQPS ({s['throughput_qps'] / s['original_qps']:.2f} x "
        f"original {s['original_qps'] / 1e6:.1f}), replicas/server max={s['replicas_max']:.0f} "
        f"mean={s['replicas_mean']:.2f}, fabric-hot keys={s['fabric_keys']:.0f} "
        f"(holders {s['fabric_holders']:.0f}, rotated {s['rotated_keys']:.0f}, rotation flips "
        f"per period {s['rotation_flips']:.1f}), requests "
        f"through a spine="
        f"{s['cross_rack_share']:.3f}, spine packets/query={s['spine_packets_per_query']:.3f}; "
        f"{time.perf_counter() - started:.0f} s"
    )
    if ns.csv:
        write_csv(rows, Path(ns.csv))
        print(f"wrote {ns.csv}")
    return 0


def _racks_sweep(ns: argparse.Namespace) -> int:
    """Every racks count of ``--sweep``, with the spine level and with the racks alone: one summary
    line each, a CSV and the figure of docs/results.md."""
    from kvswitch.bench.fabric_sim import simulate_fabric
    from kvswitch.bench.figures import plot_racks
    from kvswitch.bench.simulator import summary as mean_of

    base = _config(ns)
    counts = sorted({int(x) for x in ns.sweep.split(",") if x.strip()})
    if not counts or counts[0] < 1:
        raise ValueError("--sweep takes racks counts >= 1, e.g. 1,2,4,8,16,32")
    started = time.perf_counter()
    summaries = []
    for racks in counts:
        for spine in (True, False):
            cfg = _fabric_config(ns, base, racks, spine)
            s = mean_of(simulate_fabric(cfg), ns.warmup)
            summaries.append(s)
            print(
                f"{racks:3d} racks, {cfg.label():>22}: lambda all={s['imbalance']:.4f} inside "
                f"racks={s['rack_imbalance_mean']:.4f} busiest rack/mean="
                f"{s['rack_max_over_mean']:.3f} {s['throughput_qps'] / 1e6:.1f} MQPS "
                f"(original {s['original_qps'] / 1e6:.1f}) replicas/server<="
                f"{s['replicas_max']:.0f} ({time.perf_counter() - started:.0f} s)",
                flush=True,
            )
    if ns.csv:
        write_csv(summaries, Path(ns.csv))
        print(f"wrote {ns.csv}")
    if ns.plot:
        print(f"wrote {plot_racks(summaries, Path(ns.plot))}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = t.Parser(
        prog="kvswitch sim",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="one simulation, progress per period")
    _config_args(run)
    run.add_argument(
        "--warmup", type=t.nonneg_int, default=3, help="periods left out of the summary"
    )
    run.add_argument("--csv", help="write every period's metrics here")
    run.set_defaults(func=cmd_run)
    racks = sub.add_parser(
        "racks", help="a leaf-spine fabric of racks, spines balancing across them (docs/fabric.md)"
    )
    _config_args(racks)
    racks.add_argument("--racks", type=t.positive_int, default=32, help="racks (leaves; 32)")
    racks.add_argument("--spines", type=t.positive_int, default=4, help="spine switches (4)")
    racks.add_argument(
        "--spine",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the spine level (--no-spine: every rack balances alone)",
    )
    racks.add_argument(
        "--fabric-bound", type=t.nonneg_float, default=0.05, help="busiest rack over the mean "
        "above which the spine threshold shrinks (0.05)",
    )  # fmt: skip
    racks.add_argument(
        "--fabric-tolerance", type=t.nonneg_float, default=0.005,
        help="the fabric stops once the busiest rack is within this of the mean (0.005)",
    )  # fmt: skip
    racks.add_argument(
        "--holder-share", type=t.positive_float, default=0.1,
        help="a fabric holder's reads, at most this share of a server's mean load (0.1)",
    )  # fmt: skip
    racks.add_argument(
        "--write-rotation",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="a fabric-hot key whose writes exceed --holder-share of a server sends each write to "
        "one holder (docs/protocol.md F7; --no-write-rotation: to every holder)",
    )
    racks.add_argument(
        "--rotation-hysteresis", type=t.fraction, default=0.2,
        help="a rotating key stops rotating only once its writes fall below (1 - this) of the "
        "bound that starts it (0.2; 0: decided each period afresh)",
    )  # fmt: skip
    racks.add_argument(
        "--max-holders", type=t.nonneg_int, default=255,
        help="each fabric-hot key's most holders: the spines' MAX_HOLDERS (255, a spine built "
        "with -DMAX_HOLDERS=255, the most an ordinal holds; the default build has 64; 0: "
        "unbounded, more than a spine can hold)",
    )  # fmt: skip
    racks.add_argument(
        "--fabric-replicas", type=t.nonneg_int, default=16,
        help="replicas per server the racks leave to the fabric, of --max-replicas (16)",
    )  # fmt: skip
    racks.add_argument(
        "--warmup", type=t.nonneg_int, default=5, help="periods left out of the summary (5)"
    )
    racks.add_argument("--csv", help="write every period's metrics here (with --sweep: summaries)")
    racks.add_argument(
        "--sweep", metavar="RACKS", help="run these racks counts (e.g. 1,2,4,8,16,32), with the "
        "spine level and without, and summarise each",
    )  # fmt: skip
    racks.add_argument("--plot", help="with --sweep: write the figure here (PNG)")
    racks.set_defaults(func=cmd_racks)
    figs = sub.add_parser("figures", help="the paper's figures (CSV, PNG, markdown table)")
    figs.add_argument("--out", default="results", help="output folder (default results)")
    figs.add_argument("--quick", action="store_true", help="small scale (tests, smoke)")
    figs.add_argument("--periods", type=t.positive_int, default=8, help="periods per run")
    figs.add_argument(
        "--queries", type=t.positive_int, default=SimConfig().queries, help="per period"
    )
    figs.add_argument(
        "--warmup", type=t.nonneg_int, default=3, help="periods left out of the summary"
    )
    figs.add_argument(
        "--workers", type=t.positive_int, default=None, help="processes (default: one per CPU)"
    )
    figs.add_argument("--seed", type=int, default=1, help="random seed")
    figs.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="EXPERIMENT",
        help="run only this experiment (repeatable: skew, prediction, writes, shift-hot-in, "
        "shift-random, shift-hot-out, scale); the others' rows already in --out are kept",
    )
    figs.set_defaults(func=cmd_figures)
    add_explore(sub)
    add_explore_fabric(sub)
    ns = parser.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        return int(ns.func(ns))
    except ValueError as exc:
        print(f"kvswitch sim: {exc}", file=sys.stderr)
        return 2
