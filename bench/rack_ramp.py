"""``kvswitch bench rack-ramp``: the Mininet rack at rising request rates on each target (the
software switch and BMv2's simple_switch_grpc), in one run: throughput, p50/p99 latency and loss
per rate from the C load generator, and the highest rate whose p99 stays under the bound once the
controller has balanced (the second half of each run's load).

Each point is one run of the rack runner (``kvswitch rack``; as ``kvswitch demo`` runs it: a
subprocess) with the controller balancing, Zipf 0.99 over 1 000 keys, 8 servers; the p99 is
over the whole load of that run. Needs root and Mininet; BMv2 needs simple_switch_grpc and
p4c-bm2-ss on PATH (skipped with a message otherwise). See docs/rack.md.
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kvswitch import argtypes as t
from kvswitch.bench.demo import rack_command


def build_parser() -> t.Parser:
    ap = t.Parser(prog="kvswitch bench rack-ramp", description=__doc__.split("\n")[0])
    ap.add_argument("--targets", default="softswitch,bmv2", help="comma-separated targets")
    ap.add_argument(
        "--rates", default="500,1000,2000,4000", help="requests/s over all clients, rising"
    )
    ap.add_argument("--duration", type=t.positive_float, default=8.0, help="seconds per rate")
    ap.add_argument("--bound-ms", type=t.positive_float, default=5.0, help="the p99 bound (ms)")
    ap.add_argument("--servers", type=t.positive_int, default=8, help="servers (8)")
    ap.add_argument("--observe-only", action="store_true", help="controller not balancing")
    ap.add_argument("--out", type=Path, help="keep each run's files here")
    return ap


def rack_flags(
    rate: int,
    *,
    servers: int = 8,
    duration: float = 8.0,
    observe_only: bool = False,
    extra: Sequence[str] = (),
) -> list[str]:
    """The ``kvswitch rack`` flags of one point: 2 clients, both running the loadgen, period
    1 s, bound 0.1, gamma 0.5, then ``extra`` (workload, agent arguments)."""
    flags = [
        "--servers", str(servers), "--clients", "2", "--loadgens", "0", "--rate", str(rate),
        "--duration", str(duration), "--period", "1.0", "--bound", "0.1",
        "--controller-arg=--gamma=0.5", *extra,
    ]  # fmt: skip
    return [*flags, "--observe-only"] if observe_only else flags


def figures(summary: dict[str, Any]) -> dict[str, Any]:
    """One rack run's figures from its ``summary.json``: the load generators' throughput,
    p50/p99/p999 and loss over the whole load, and over its second half (the controller has
    balanced by then) the p99/p999 bounded from above by the largest of its one-second intervals
    (no per-request record is kept) and their median second, the loss, the busiest server's share
    of the replies and the largest share of the requests any one origin server was sent."""
    loadgens = summary["loadgen"]
    sent = sum(int(lg["sent"]) for lg in loadgens)
    received = sum(int(lg["received"]) for lg in loadgens)
    late = [iv for lg in loadgens for iv in lg["intervals"][len(lg["intervals"]) // 2 :]]
    late_sent = sum(int(iv["sent"]) for iv in late)
    late_received = sum(int(iv["received"]) for iv in late)
    served, offered = _per_server(late, "replies_per_server"), _per_server(late, "sent_per_server")
    return {
        "throughput": sum(float(lg["throughput"]) for lg in loadgens),
        "p50_ms": max(float(lg["latency_us"]["p50"]) for lg in loadgens) / 1000,
        "p99_ms": max(float(lg["latency_us"]["p99"]) for lg in loadgens) / 1000,
        "p999_ms": max(float(lg["latency_us"]["p999"]) for lg in loadgens) / 1000,
        "late_p99_ms": max((float(iv["p99_us"]) for iv in late), default=float("inf")) / 1000,
        "late_p999_ms": max((float(iv["p999_us"]) for iv in late), default=float("inf")) / 1000,
        # the median second: robust to a one-second stall of a shared CPU, not to a queue that
        # builds (overload raises every second's p99)
        "late_p99_med_ms": _median([float(iv["p99_us"]) for iv in late]) / 1000,
        "late_p999_med_ms": _median([float(iv["p999_us"]) for iv in late]) / 1000,
        "loss": (sent - received) / sent if sent else 0.0,
        "late_loss": max(0, late_sent - late_received) / late_sent if late_sent else 0.0,
        "max_share": max(served) / sum(served) if sum(served) else 0.0,
        "offered_max_share": max(offered) / sum(offered) if sum(offered) else 0.0,
    }


def _per_server(intervals: list[dict[str, Any]], name: str) -> list[int]:
    """``name`` (a per-server count of the loadgen's intervals) summed over ``intervals``."""
    total: list[int] = []
    for iv in intervals:
        per = iv.get(name, [])
        total = [a + b for a, b in zip(total, per, strict=True)] if total else list(per)
    return total or [0]


def point(
    rack: list[str], target: str, rate: int, out: Path, timeout: float = 300, **flags: Any
) -> dict[str, Any]:
    """One run of the rack runner ``rack`` at ``rate`` (``flags``: :func:`rack_flags`'): its
    :func:`figures`, or ``{"error": its last line}``."""
    cmd = [*rack, "--target", target, "--out", str(out)]
    cmd += rack_flags(rate, **flags)
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        last = (done.stderr or done.stdout).strip().splitlines()
        return {"error": last[-1] if last else f"exit {done.returncode}"}
    return figures(json.loads((out / "summary.json").read_text()))


def _median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("inf")


def within(row: dict[str, Any], bound_ms: float, p99: str = "late_p99_ms") -> bool:
    """Whether a point kept its p99 (the figure ``p99`` names) under the bound and lost < 1 % in
    the second half of its load."""
    return "error" not in row and row[p99] < bound_ms and row["late_loss"] < 0.01


def sustained(rows: list[dict[str, Any]], bound_ms: float, p99: str = "late_p99_ms") -> float:
    """The highest throughput of a rate :func:`within` the bound."""
    return max((r["throughput"] for r in rows if within(r, bound_ms, p99)), default=0.0)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    rack = rack_command()
    if rack is None:
        print("kvswitch bench rack-ramp: the rack runner (kvsrack) is not installed")
        return 2
    try:
        rates = [int(r) for r in args.rates.split(",")]
    except ValueError:
        print(f"kvswitch bench rack-ramp: --rates {args.rates!r}: integers, comma-separated")
        return 2
    targets = args.targets.split(",")
    base = args.out or Path(tempfile.mkdtemp(prefix="kvswitch-ramp-"))
    results: dict[str, list[dict[str, Any]]] = {}
    for target in targets:
        missing = [x for x in ("simple_switch_grpc", "p4c-bm2-ss") if shutil.which(x) is None]
        if target == "bmv2" and missing:
            print(f"{target}: skipped ({' and '.join(missing)} not on PATH)", flush=True)
            continue
        rows = results.setdefault(target, [])
        for rate in rates:
            out = base / f"{target}-{rate}"
            flags = {"servers": args.servers, "duration": args.duration}
            row = {
                "rate": rate,
                **point(
                    rack,
                    target,
                    rate,
                    out,
                    args.duration + 300,
                    observe_only=args.observe_only,
                    **flags,
                ),
            }
            rows.append(row)
            if "error" in row:
                print(f"{target:>10} {rate:>6}/s  failed: {row['error']}", flush=True)
                continue
            print(
                f"{target:>10} {rate:>6}/s  throughput {row['throughput']:8.0f}/s  "
                f"p50 {row['p50_ms']:6.2f} ms  p99 {row['p99_ms']:7.2f} ms "
                f"(second half {row['late_p99_ms']:7.2f} ms)  "
                f"loss {100 * row['loss']:5.2f} %",
                flush=True,
            )
    best = {target: sustained(rows, args.bound_ms) for target, rows in results.items()}
    for target, rate in best.items():
        print(f"{target}: sustains {rate:.0f} requests/s at p99 < {args.bound_ms:g} ms")
    if "softswitch" in best and "bmv2" in best and best["softswitch"]:
        print(f"bmv2 / softswitch: {best['bmv2'] / best['softswitch']:.2f}")
    (base / "ramp.json").write_text(json.dumps(results, indent=1) + "\n")
    print(f"files: {base}")
    return 0
