"""``kvswitch bench c-client``: Gets/s through the C library against the Python client.

One agent (built-in store) on loopback, pinned to one CPU; the clients run pinned to another. For
the C library, ``kvswitch-loadgen`` runs closed loop (one Get outstanding, blocking ``kvs_get``),
closed loop with a window of Gets in flight (the async pair), open loop at a fixed rate, and open
loop at a rate no single core reaches (its send rate is the library's ceiling on one core). For the
Python client, ``Client.get`` in a loop and ``Client.pipeline`` with the same window. Client CPU
time per Get is measured for both (the loadgen's from the kernel's accounting of the finished
child, the Python client's as this process's CPU time), so the ratio says how much cheaper a Get is
in C independently of how fast the Python agent answers.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kvswitch import argtypes as t
from kvswitch.agent.backend_procs import start_agent
from kvswitch.client.client import Client, Request
from kvswitch.paths import c_src_dir, repo_root


@dataclass
class Figure:
    """One measured run."""

    name: str
    gets_per_s: float
    p50_us: float
    p99_us: float
    cpu_us_per_get: float
    lost: int = 0


def find_loadgen() -> Path:
    """$KVS_LOADGEN; else the checkout's build (built on demand); else ``kvswitch-loadgen`` on PATH
    or beside this interpreter (``make install-c PREFIX=<venv>``); else built from the C sources
    installed with the package (:func:`build_loadgen`)."""
    env = os.environ.get("KVS_LOADGEN")
    if env:
        return Path(env)
    root = repo_root()
    if root is not None and (root / "client_lib" / "c" / "Makefile").is_file():
        subprocess.run(["make", "-s", "-C", str(root / "client_lib" / "c")], check=True)
        return root / "client_lib" / "c" / "build" / "kvswitch-loadgen"
    for path in (None, sysconfig.get_path("scripts")):
        found = shutil.which("kvswitch-loadgen", path=path)
        if found is not None:
            return Path(found)
    return build_loadgen(c_src_dir())


def build_loadgen(src: Path, cache: Path | None = None) -> Path:
    """``kvswitch-loadgen`` built with the C sources' Makefile (``src``) into a folder of
    ``cache`` (default ``$XDG_CACHE_HOME/kvswitch/loadgen``) named after the sources' digest:
    built once, then found there. Needs make and a C compiler; FileNotFoundError (one line)
    where they are missing or the build fails."""
    digest = hashlib.sha256()
    for f in sorted(p for p in src.rglob("*") if p.is_file() and "build" not in p.parts):
        digest.update(f.relative_to(src).as_posix().encode() + b"\0" + f.read_bytes())
    base = cache or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    folder = (base if cache else base / "kvswitch" / "loadgen") / digest.hexdigest()[:24]
    binary = folder / "kvswitch-loadgen"
    if binary.is_file():
        return binary
    missing = [tool for tool in ("make", "gcc") if shutil.which(tool) is None]
    if missing:
        raise FileNotFoundError(
            f"kvswitch-loadgen is not installed and {' and '.join(missing)} is missing to build it "
            "(Debian: apt-get install build-essential)"
        )
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder) as tmp:  # two builds at once: one wins
        done = subprocess.run(
            ["make", "-s", "-C", str(src), f"B={tmp}", f"{tmp}/kvswitch-loadgen"],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            last = (done.stderr or done.stdout).strip().splitlines()
            raise FileNotFoundError(
                f"kvswitch-loadgen: the build failed: {last[-1] if last else ''}"
            )
        os.replace(Path(tmp) / "kvswitch-loadgen", binary)
    return binary


def cpus() -> tuple[int | None, int | None]:
    """(agent CPU, client CPU): two different CPUs when there are two, else no pinning."""
    available = sorted(os.sched_getaffinity(0))
    if len(available) < 2:
        return None, None
    return available[0], available[1]


def pin(cpu: int | None) -> None:
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})


@contextlib.contextmanager
def agent(cpu: int | None) -> Iterator[int]:
    """Run one agent with the built-in store on a free loopback port; yield the port."""
    proc = start_agent(preexec_fn=(lambda: pin(cpu)) if cpu is not None else None)
    try:
        yield proc.port
    finally:
        proc.stop()  # the PID started above


def children_cpu() -> float:
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def run_loadgen(loadgen: Path, cpu: int | None, args: list[str]) -> dict[str, object]:
    """Run the load generator to completion; its JSON summary plus its CPU seconds."""
    before = children_cpu()
    done = subprocess.run(
        [str(loadgen), "--json", "--quiet", *args],
        capture_output=True,
        text=True,
        check=True,
        preexec_fn=(lambda: pin(cpu)) if cpu is not None else None,
    )
    summary: dict[str, object] = json.loads(done.stdout)
    summary["cpu_s"] = children_cpu() - before
    return summary


def loadgen_figure(name: str, s: dict[str, object], sent_rate: bool = False) -> Figure:
    latency = s["latency_us"]
    assert isinstance(latency, dict)
    cpu_s = float(str(s["cpu_s"]))
    rate = float(str(s["send_rate"] if sent_rate else s["throughput"]))
    return Figure(
        name,
        rate,
        float(latency["p50"]),
        float(latency["p99"]),
        cpu_s * 1e6 / max(1, int(str(s["sent"]))),
        int(str(s["lost"])),
    )


def python_closed(port: int, keys: list[str], seconds: float) -> Figure:
    latencies: list[float] = []
    with Client([("127.0.0.1", port)]) as client:
        cpu0, end = time.process_time(), time.perf_counter() + seconds
        started = time.perf_counter()
        while (now := time.perf_counter()) < end:
            client.get(random.choice(keys))
            latencies.append(time.perf_counter() - now)
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu0
    q = statistics.quantiles(latencies, n=100)
    return Figure(
        "python closed loop (get)",
        len(latencies) / wall,
        q[49] * 1e6,
        q[98] * 1e6,
        cpu * 1e6 / len(latencies),
    )


def python_pipeline(port: int, keys: list[str], seconds: float, window: int) -> Figure:
    latencies: list[float] = []
    lost = 0
    with Client([("127.0.0.1", port)]) as client:
        cpu0, started = time.process_time(), time.perf_counter()
        while time.perf_counter() - started < seconds:
            batch = [Request("get", random.choice(keys)) for _ in range(window * 16)]
            for out in client.pipeline(batch, window=window):
                if out.error is None:
                    latencies.append(out.latency)
                else:
                    lost += 1
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu0
    q = statistics.quantiles(latencies, n=100)
    return Figure(
        f"python pipeline (window {window})",
        len(latencies) / wall,
        q[49] * 1e6,
        q[98] * 1e6,
        cpu * 1e6 / (len(latencies) + lost),
        lost,
    )


def build_parser() -> t.Parser:
    ap = t.Parser(prog="kvswitch bench c-client", description=__doc__)
    ap.add_argument(
        "--seconds", type=t.positive_float, default=3.0, help="length of each run (default 3)"
    )
    ap.add_argument(
        "--keys", type=t.positive_int, default=1000, help="distinct keys, preloaded (default 1000)"
    )
    ap.add_argument(
        "--rate",
        type=t.nonneg_float,
        default=0,
        help="open-loop rate (default: 80%% of C closed loop)",
    )
    ap.add_argument(
        "--window",
        type=t.positive_int,
        default=32,
        help="requests in flight, C and Python (default 32)",
    )
    ap.add_argument(
        "--repeat", type=t.positive_int, default=2, help="closed-loop rounds, best kept (2)"
    )
    ap.add_argument("--json", action="store_true", help="print the figures as JSON too")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    loadgen = find_loadgen()
    agent_cpu, client_cpu = cpus()
    keys = [f"key{i}" for i in range(args.keys)]
    secs = str(args.seconds)
    common = ["--keys", str(args.keys), "--zipf", "0.99"]
    every_cpu = os.sched_getaffinity(0)
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"agent on CPU {agent_cpu}, clients on CPU {client_cpu}; {args.seconds} s per run, "
        f"closed loops best of {args.repeat}; load average before: {load}"
    )
    with agent(agent_cpu) as port:
        server = ["--servers", f"127.0.0.1:{port}", *common]
        # preload every key, then measure
        run_loadgen(loadgen, client_cpu, [*server, "--preload", "--closed", "--duration", "0.1"])
        # closed loops alternate C and Python, best of --repeat: the machine may be shared
        c_best: Figure | None = None
        py_best: Figure | None = None
        for _ in range(args.repeat):
            closed = run_loadgen(loadgen, client_cpu, [*server, "--closed", "--duration", secs])
            c_run = loadgen_figure("C closed loop (kvs_get)", closed)
            pin(client_cpu)
            try:
                py_run = python_closed(port, keys, args.seconds)
            finally:
                os.sched_setaffinity(0, every_cpu)
            if c_best is None or c_run.gets_per_s > c_best.gets_per_s:
                c_best = c_run
            if py_best is None or py_run.gets_per_s > py_best.gets_per_s:
                py_best = py_run
        assert c_best is not None and py_best is not None
        rate = args.rate or 0.8 * c_best.gets_per_s
        opened = run_loadgen(
            loadgen, client_cpu, [*server, "--rate", f"{rate:.0f}", "--duration", secs]
        )
        windowed = run_loadgen(
            loadgen, client_cpu, [*server, "--window", str(args.window), "--duration", secs]
        )
        flood = run_loadgen(loadgen, client_cpu, [*server, "--rate", "5000000", "--duration", "1"])
        pin(client_cpu)
        try:
            pipelined = python_pipeline(port, keys, args.seconds, args.window)
        finally:
            os.sched_setaffinity(0, every_cpu)
        figures = [
            c_best,
            loadgen_figure(f"C open loop at {rate:.0f}/s", opened),
            loadgen_figure(f"C closed loop (window {args.window})", windowed),
            loadgen_figure("C open loop send ceiling (sent/s)", flood, sent_rate=True),
            py_best,
            pipelined,
        ]
    print(f"{'run':<40} {'Gets/s':>10} {'p50 us':>9} {'p99 us':>9} {'client CPU us/Get':>18}")
    for f in figures:
        lost = f"  (lost {f.lost})" if f.lost else ""
        print(
            f"{f.name:<40} {f.gets_per_s:>10.0f} {f.p50_us:>9.1f} {f.p99_us:>9.1f}"
            f" {f.cpu_us_per_get:>18.2f}{lost}"
        )
    for label, c_fig, py_fig in (
        ("closed loop", figures[0], figures[4]),
        (f"window {args.window}", figures[2], figures[5]),
    ):
        print(
            f"ratio C/Python, {label}: {c_fig.gets_per_s / py_fig.gets_per_s:.2f}x Gets/s, "
            f"{py_fig.cpu_us_per_get / c_fig.cpu_us_per_get:.1f}x less client CPU per Get"
        )
    if args.json:
        print(json.dumps([f.__dict__ for f in figures]))
    return 0
