"""``kvswitch bench slo``: what balancing buys in the rack, the throughput at a p99 bound with the
controller balancing and without (``--observe-only``), on servers of equal bounded capacity.

Every agent of the rack runs with ``--capacity R`` (docs/agent.md "Bounded capacity"), so each
server, not the shared CPU, is the bottleneck. For each target, Zipf skew and share of Sets, the
Mininet rack runs once per rate (``kvswitch bench rack-ramp``'s :func:`point`) in each mode at
rising rates, given as fractions of the rack's capacity M x R; a mode stops after ``--stop-after``
rates in a row over the bound. The bound is ``--bound-factor`` x the p50 of an unloaded rack
(one run at a low rate first) unless ``--bound-ms`` gives it. It prints each point as it comes,
then per configuration the highest throughput with p99 under the bound in each mode and their
ratio, beside the simulator's (``kvswitch sim run`` for the same M, keys, K and skew, policy
balance vs Original, over a few seeds), and plots throughput vs p99 per mode. See docs/rack.md.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kvswitch import argtypes as t
from kvswitch.bench.demo import rack_command
from kvswitch.bench.rack_ramp import point, sustained, within

#: The p99 a point is judged by: the median of its late one-second intervals' p99 (the machine is
#: shared: a one-second stall of every process is not the servers' queue)
P99 = "late_p99_med_ms"

MODES = ("balanced", "unbalanced")  # controller balancing / --observe-only


def build_parser() -> t.Parser:
    ap = t.Parser(prog="kvswitch bench slo", description=__doc__.split("\n")[0])
    a = ap.add_argument
    a("--targets", default="softswitch", help="comma-separated: softswitch, bmv2")
    a("--skews", default="1.2", help="Zipf skews, comma-separated (e.g. 0.9,0.99,1.2)")
    a("--write-ratios", default="0", help="shares of Sets, comma-separated (e.g. 0,0.05)")
    a("--capacity", type=t.positive_float, default=200.0, help="requests/s per server (200)")
    a("--service", choices=("fixed", "exp"), default="fixed", help="service times (fixed)")
    a("--loads", default="0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9",
      help="offered rates as fractions of servers x capacity, rising")  # fmt: skip
    a("--duration", type=t.positive_float, default=10.0, help="seconds of load per rate (10)")
    a("--servers", type=t.positive_int, default=8, help="servers M (8)")
    a("--keys", type=t.positive_int, default=1000, help="keys (1000)")
    a("--bound-ms", type=t.positive_float, help="the p99 bound (default: factor x unloaded p50)")
    a("--bound-factor", type=t.positive_float, default=10.0, help="bound / unloaded p50 (10)")
    a(
        "--stop-after",
        type=t.positive_int,
        default=2,
        help="rates over the bound before a mode stops",
    )
    a("--sim-seeds", type=t.nonneg_int, default=3, help="simulator seeds per configuration (3)")
    a("--out", type=Path, help="keep each run's files, slo.json and slo.png here")
    a("--plot", type=Path, help="where the plot goes (default OUT/slo.png)")
    a("--replot", type=Path, action="append", default=[], metavar="SLO.JSON",
      help="run nothing: plot the results of earlier runs (repeatable) into --plot")  # fmt: skip
    return ap


def simulated(
    servers: int, keys: int, skew: float, write_ratio: float, seeds: int, capacity: float,
    bound_ms: float,
) -> tuple[list[float], list[float]]:  # fmt: skip
    """The simulator's ratios balance / Original for the rack's shape, one per seed: of the
    throughput (the busiest server at its capacity, docs/results.md) and of the throughput at
    p99 <= the bound (M/M/1 servers of ``capacity``: the simulator's "MQPS at SLO")."""
    from kvswitch.bench.simulator import SimConfig, simulate, summary

    cap, slo = [], []
    for seed in range(1, seeds + 1):
        base = {"servers": servers, "keys": keys, "k": 64, "skew": skew, "bound": 0.1}
        base |= {"gamma": 0.5, "write_ratio": write_ratio, "queries": 50_000, "periods": 8}
        base |= {"policy": "balance", "seed": seed, "capacity": capacity, "slo": bound_ms / 1000}
        runs = [summary(simulate(SimConfig(mode=m, **base)), 3) for m in ("kvswitch", "original")]
        cap.append(runs[0]["throughput_qps"] / runs[1]["throughput_qps"])
        slo.append(runs[0]["slo_throughput_qps"] / runs[1]["slo_throughput_qps"])
    return cap, slo


def workload_flags(
    capacity: float, service: str, keys: int, skew: float, write_ratio: float
) -> list[str]:
    """The rack flags of a workload on servers of ``capacity`` requests/s each."""
    agent = [f"--capacity={capacity:g}", f"--service={service}"]
    # a request waiting longer than the loadgen's 500 ms timeout is lost anyway
    agent.append(f"--queue-limit={max(1, int(capacity * 0.5))}")
    flags = ["--zipf", f"{skew:g}", "--keys", str(keys), "--write-ratio", f"{write_ratio:g}"]
    return flags + [f"--agent-arg={x}" for x in agent]


def line(target: str, label: str, mode: str, row: dict[str, Any]) -> str:
    head = f"{target} {label} {mode:>10} {row['rate']:>5}/s"
    if "error" in row:
        return f"{head}  failed: {row['error']}"
    return (
        f"{head}  throughput {row['throughput']:6.0f}/s  p50 {row['p50_ms']:6.1f}  "
        f"p99 {row[P99]:7.1f} (worst second {row['late_p99_ms']:7.1f})  "
        f"p999 {row['late_p999_med_ms']:7.1f} ms  "
        f"loss {100 * row['late_loss']:5.2f} %  busiest {100 * row['max_share']:4.1f} %"
    )


def ramp(
    rack: list[str], target: str, label: str, flags: list[str], rates: list[int], bound: float,
    args: Any, base: Path,
) -> dict[str, list[dict[str, Any]]]:  # fmt: skip
    rows: dict[str, list[dict[str, Any]]] = {}
    for mode in MODES:
        over = 0
        for rate in rates:
            out = base / f"{target}-{label}-{mode}-{rate}"
            fig = point(
                rack, target, rate, out, args.duration + 300, servers=args.servers,
                duration=args.duration, observe_only=mode == "unbalanced", extra=flags,
            )  # fmt: skip
            row = {"rate": rate, **fig}
            rows.setdefault(mode, []).append(row)
            print(line(target, label, mode, row), flush=True)
            over = 0 if within(row, bound, P99) else over + 1
            if over >= args.stop_after:
                break
    return rows


def plot(results: dict[str, Any], path: Path) -> None:
    """Throughput vs p99 per mode, one panel per target and configuration; a point that lost
    >= 1 % in the second half of its load (or failed) is hollow and off the line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(tg, label, res) for tg, confs in results.items() for label, res in confs.items()]
    cols = min(3, len(panels))
    nrows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(4.6 * cols, 3.6 * nrows), squeeze=False)
    for ax, (target, label, res) in zip(axes.flat, panels, strict=False):
        for mode, (marker, ls, color) in zip(
            MODES, (("o", "-", "tab:blue"), ("s", "--", "tab:orange")), strict=True
        ):
            rows = [r for r in res["rows"].get(mode, []) if "error" not in r]
            kept = [r for r in rows if r["late_loss"] < 0.01]
            lossy = [r for r in rows if r["late_loss"] >= 0.01]
            ax.plot([r["throughput"] for r in kept], [r[P99] for r in kept], marker=marker,
                    ls=ls, color=color, label=f"{mode}: {res['sustained'][mode]:.0f}/s")  # fmt: skip
            ax.plot([r["throughput"] for r in lossy], [r[P99] for r in lossy], marker=marker,
                    ls="none", mfc="none", color=color)  # fmt: skip
        ax.axhline(res["bound_ms"], color="grey", lw=0.8, ls=":")
        ax.set_yscale("log")
        ax.set_title(f"{target}, {label}: ratio {res['ratio']:.2f}", fontsize=9)
        ax.set_xlabel("throughput (replies/s)")
        ax.set_ylabel("p99 (ms)")
        ax.legend(fontsize=8)
    for ax in list(axes.flat)[len(panels) :]:
        ax.set_visible(False)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def sim_text(res: dict[str, Any]) -> str:
    def ratios(name: str) -> str:
        return ", ".join(f"{r:.2f}" for r in res.get(name, [])) or "not run"

    return (
        f"simulator ratio at the same p99 bound {ratios('sim_slo_ratios')}, at capacity "
        f"{ratios('sim_ratios')} (seeds 1-{len(res.get('sim_ratios', []))})"
    )


def replot(files: list[Path], path: Path) -> int:
    """The plot of earlier runs' ``slo.json`` files, merged; their summary lines printed again."""
    results: dict[str, dict[str, Any]] = {}
    for file in files:
        try:
            loaded = json.loads(file.read_text())
        except (OSError, ValueError) as exc:
            print(f"kvswitch bench slo: {file}: {exc}")
            return 2
        for target, confs in loaded.items():
            results.setdefault(target, {}).update(confs)
    for target, confs in results.items():
        for label, res in confs.items():
            best = res["sustained"]
            print(f"{target} {label}: p99 < {res['bound_ms']:.1f} ms: balanced "
                  f"{best['balanced']:.0f}/s, unbalanced {best['unbalanced']:.0f}/s, ratio "
                  f"{res['ratio']:.2f}; {sim_text(res)}")  # fmt: skip
    plot(results, path)
    print(f"plot: {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    if args.replot:
        return replot(args.replot, args.plot or Path("slo.png"))
    rack = rack_command()
    if rack is None:
        print("kvswitch bench slo: the rack runner (kvsrack) is not installed")
        return 2
    try:
        skews = [float(x) for x in args.skews.split(",")]
        writes = [float(x) for x in args.write_ratios.split(",")]
        loads = [float(x) for x in args.loads.split(",")]
    except ValueError:
        print("kvswitch bench slo: --skews, --write-ratios, --loads: numbers, comma-separated")
        return 2
    if not all(x > 0 for x in loads) or not all(0 <= w <= 1 for w in writes):
        print("kvswitch bench slo: --loads > 0, --write-ratios within 0-1")
        return 2
    total = args.servers * args.capacity
    rates = [max(1, round(x * total)) for x in loads]
    base = args.out or Path(tempfile.mkdtemp(prefix="kvswitch-slo-"))
    print(f"kvswitch bench slo: {args.servers} servers x {args.capacity:g}/s ({args.service}), "
          f"{args.keys} keys, rates {rates} per mode, {args.duration:g} s each; files in {base}",
          flush=True)  # fmt: skip
    started = time.monotonic()
    results: dict[str, dict[str, Any]] = {}
    bounds: dict[str, float] = {}
    for target in args.targets.split(","):
        missing = [x for x in ("simple_switch_grpc", "p4c-bm2-ss") if shutil.which(x) is None]
        if target == "bmv2" and missing:
            print(f"{target}: skipped ({' and '.join(missing)} not on PATH)", flush=True)
            continue
        idle: dict[str, Any] = {}
        if args.bound_ms is None:  # the unloaded rack: 2 % of its capacity, uniform keys
            idle = point(
                rack, target, max(1, round(0.02 * total)), base / f"{target}-idle",
                args.duration + 300, servers=args.servers, duration=args.duration,
                observe_only=True, extra=workload_flags(args.capacity, args.service, args.keys, 0.0, 0.0),
            )  # fmt: skip
            if "error" in idle:
                print(f"{target}: the unloaded run failed: {idle['error']}", flush=True)
                continue
            bounds[target] = args.bound_factor * idle["p50_ms"]
            print(f"{target}: unloaded p50 {idle['p50_ms']:.2f} ms -> p99 bound "
                  f"{bounds[target]:.1f} ms", flush=True)  # fmt: skip
        else:
            bounds[target] = args.bound_ms
        for skew in skews:
            for write in writes:
                label = f"zipf {skew:g}, {100 * write:g} % Sets"
                tag = f"z{skew:g}-w{write:g}"
                flags = workload_flags(args.capacity, args.service, args.keys, skew, write)
                rows = ramp(rack, target, tag, flags, rates, bounds[target], args, base)
                best = {mode: sustained(rows.get(mode, []), bounds[target], P99) for mode in MODES}
                ratio = best["balanced"] / best["unbalanced"] if best["unbalanced"] else 0.0
                sim, sim_slo = simulated(
                    args.servers, args.keys, skew, write, args.sim_seeds, args.capacity,
                    bounds[target],
                )  # fmt: skip
                res = {"rows": rows, "sustained": best, "ratio": ratio, "sim_ratios": sim,
                       "sim_slo_ratios": sim_slo, "bound_ms": bounds[target], "idle": idle}  # fmt: skip
                results.setdefault(target, {})[label] = res
                print(f"{target} {label}: sustained at p99 < {bounds[target]:.1f} ms: balanced "
                      f"{best['balanced']:.0f}/s, unbalanced {best['unbalanced']:.0f}/s, ratio "
                      f"{ratio:.2f}; {sim_text(res)}", flush=True)  # fmt: skip
    (base / "slo.json").parent.mkdir(parents=True, exist_ok=True)
    (base / "slo.json").write_text(json.dumps(results, indent=1) + "\n")
    if results:
        path = args.plot or base / "slo.png"
        plot(results, path)
        print(f"plot: {path}")
    print(f"files: {base}; {time.monotonic() - started:.0f} s")
    return 0
