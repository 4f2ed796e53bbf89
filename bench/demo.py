"""``kvswitch demo`` (``make demo``): a rack of 8 servers on Mininet, a Zipf-0.99 workload from the
clients, the controller balancing it; per period the load per server, lambda and T, then a plot.

The rack itself is the rack runner (``kvswitch rack``, package ``kvsrack``), run as a subprocess
with this interpreter (nothing here imports it). The figures come from the controller's metrics
stream (``metrics.jsonl``: one JSON object per period, read from the switch's counters). See
docs/rack.md.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from kvswitch import argtypes as t
from kvswitch.bench.c_client_bench import find_loadgen


def rack_command() -> list[str] | None:
    """The rack runner's command with this interpreter, None where it is not installed."""
    if importlib.util.find_spec("kvsrack") is None:
        return None
    return [sys.executable, "-m", "kvsrack"]


def build_parser() -> t.Parser:
    ap = t.Parser(prog="kvswitch demo", description=__doc__.split("\n")[0])
    ap.add_argument("--servers", type=t.positive_int, default=8, help="servers in the rack (8)")
    ap.add_argument("--clients", type=t.positive_int, default=2, help="client hosts (2)")
    ap.add_argument("--rate", type=t.positive_int, default=1500, help="requests/s over all clients")
    ap.add_argument("--duration", type=t.positive_float, default=40.0, help="seconds of load")
    ap.add_argument("--period", type=t.positive_float, default=1.0, help="controller period (s)")
    ap.add_argument("--zipf", type=t.nonneg_float, default=0.99, help="Zipf skew of the keys")
    ap.add_argument("--keys", type=t.positive_int, default=1000, help="distinct keys (1000)")
    ap.add_argument("--policy", default="balance", help="replica placement (default balance)")
    ap.add_argument(
        "--bound", type=t.nonneg_float, default=0.1, help="T falls while max > (1+bound)*mean"
    )
    ap.add_argument("--gamma", type=t.fraction, default=0.5, help="T <- gamma*T per such period")
    ap.add_argument(
        "--target",
        choices=("softswitch", "bmv2"),
        default="softswitch",
        help="switch of the rack: the software switch (default) or BMv2's simple_switch_grpc "
        "(the program compiled with p4c-bm2-ss; both on PATH)",
    )
    ap.add_argument(
        "--backend",
        choices=("memory", "memcached", "redis"),
        default="memory",
        help="the servers' store (default memory)",
    )
    ap.add_argument("--observe-only", action="store_true", help="controller off (baseline)")
    ap.add_argument("--out", type=Path, default=Path("results/demo"), help="output folder")
    return ap


def format_period(m: dict[str, Any], names: list[str]) -> str:
    loads = m.get("loads") or []
    per_server = " ".join(f"{n}={int(v)}" for n, v in zip(names, loads, strict=False))
    return (
        f"period {m.get('period'):>3}  lambda {float(m.get('lambda', 0.0)):.3f}  "
        f"T {float(m.get('threshold', 0.0)):.0f}  hot {m.get('hot_keys', 0)}  "
        f"replicas {m.get('replicas', 0)}  load {per_server}"
    )


def read_metrics(path: Path, done: int) -> list[dict[str, Any]]:
    """The complete lines of ``path`` after the first ``done``."""
    if not path.exists():
        return []
    text = path.read_text()
    rows = []
    for line in text.splitlines(keepends=True)[done:]:
        if not line.endswith("\n"):
            break  # still being written
        with contextlib.suppress(json.JSONDecodeError):
            rows.append(json.loads(line))
    return rows


def plot(rows: list[dict[str, Any]], names: list[str], path: Path, title: str) -> None:
    """lambda (top) and per-server load (bottom) against time since the first period."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t0 = float(rows[0]["time"])
    ts = [float(r["time"]) - t0 for r in rows]
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(9, 7), sharex=True)
    ax1.plot(ts, [float(r["lambda"]) for r in rows], marker="o", color="tab:red")
    ax1.set_ylabel("imbalance lambda")
    ax1.set_ylim(bottom=0)
    ax1.grid(alpha=0.3)
    ax1.set_title(title)
    for j, name in enumerate(names):
        ax2.plot(ts, [float(r["loads"][j]) if j < len(r["loads"]) else 0 for r in rows],
                 label=name)  # fmt: skip
    ax2.set_ylabel("requests per period")
    ax2.set_xlabel("time (s)")
    ax2.grid(alpha=0.3)
    ax2.legend(ncol=4, fontsize="small")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def describe(rows: list[dict[str, Any]], summary_path: Path, period: float) -> str:
    """lambda in the first period of the Zipf load and over its second half (the periods wholly
    inside the load: not the preload before it, not the partial one after it)."""
    try:
        summary = json.loads(summary_path.read_text())
        start, end = float(summary["load_start"]), float(summary["load_end"])
    except (OSError, ValueError, KeyError):
        return "lambda: the rack wrote no summary"
    inside = [float(r["lambda"]) for r in rows if start <= r["time"] - period and r["time"] <= end]
    if not inside:
        return "lambda: no period lay wholly inside the load"
    tail = inside[len(inside) // 2 :]
    return (
        f"lambda: {inside[0]:.3f} in the first period of load; mean {sum(tail) / len(tail):.3f} "
        f"(lowest {min(tail):.3f}, highest {max(tail):.3f}) over the last {len(tail)} periods"
    )


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    rack = rack_command()
    if rack is None:
        print("kvswitch demo: the rack runner (kvsrack) is not installed", file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print("kvswitch demo: needs root (Mininet); run `sudo make demo`", file=sys.stderr)
        return 2
    if importlib.util.find_spec("mininet") is None:
        print("kvswitch demo: needs Mininet's Python package (Debian: apt-get install mininet; a "
              "venv made with Debian's python3 and --system-site-packages sees it)",
              file=sys.stderr)  # fmt: skip
        return 2
    try:
        find_loadgen()  # built here where it is missing, not inside the rack
    except (OSError, subprocess.CalledProcessError) as exc:
        print(f"kvswitch demo: {exc}", file=sys.stderr)
        return 2
    if args.target == "bmv2":
        missing = [t for t in ("simple_switch_grpc", "p4c-bm2-ss") if shutil.which(t) is None]
        if missing:
            print(f"kvswitch demo: --target bmv2 needs {' and '.join(missing)} on PATH "
                  "(p4lang's BMv2 with PI, and p4c)", file=sys.stderr)  # fmt: skip
            return 2
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    metrics = out / "metrics.jsonl"
    metrics.unlink(missing_ok=True)
    cmd = [
        *rack, "--servers", str(args.servers), "--clients",
        str(args.clients), "--rate", str(args.rate), "--duration", str(args.duration),
        "--period", str(args.period), "--zipf", str(args.zipf), "--keys", str(args.keys),
        "--policy", args.policy, "--target", args.target, "--backend", args.backend,
        "--bound", str(args.bound), f"--controller-arg=--gamma={args.gamma}", "--out", str(out),
    ]  # fmt: skip
    if args.observe_only:
        cmd.append("--observe-only")
    names = [f"s{i}" for i in range(1, args.servers + 1)]
    print(
        f"kvswitch demo: {args.servers} servers, {args.clients} clients, Zipf {args.zipf} over "
        f"{args.keys} keys at {args.rate} requests/s for {args.duration:.0f} s "
        f"({'controller off' if args.observe_only else 'controller on, policy ' + args.policy})",
        flush=True,
    )
    rows: list[dict[str, Any]] = []
    with open(out / "rack.log", "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        try:
            while proc.poll() is None:
                time.sleep(0.2)
                for m in read_metrics(metrics, len(rows)):
                    rows.append(m)
                    print(format_period(m, names), flush=True)
        except KeyboardInterrupt:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
            print("kvswitch demo: interrupted", file=sys.stderr)
            return 130
    for m in read_metrics(metrics, len(rows)):
        rows.append(m)
        print(format_period(m, names), flush=True)
    if proc.returncode != 0:
        print(f"kvswitch demo: the rack failed ({proc.returncode}); its log:", file=sys.stderr)
        print((out / "rack.log").read_text(), file=sys.stderr)
        return 1
    if not rows:
        print("kvswitch demo: the controller reported no period", file=sys.stderr)
        return 1
    png = out / "demo.png"
    mode = "controller off" if args.observe_only else f"KVSwitch controller ({args.policy})"
    plot(rows, names, png, f"{args.servers} servers, Zipf {args.zipf}, {mode}, {args.target}")
    print(describe(rows, out / "summary.json", args.period))
    print(f"plot: {png}")
    print(f"files (rack.json, metrics.jsonl, logs): {out}")
    return 0
