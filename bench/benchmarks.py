"""``kvswitch bench <name|all> [args...]``: the benchmarks, each printing its own figures.

Each benchmark is a module of this package with a ``main(argv) -> int``; it is imported only when
chosen. ``all`` runs every benchmark with its default (short) settings, one after the other.
"""

from __future__ import annotations

import importlib
import sys
import time

BENCHMARKS: dict[str, tuple[str, str]] = {
    "dataplane": (
        "kvswitch.bench.dataplane_bench",
        "hot/cold Get packets/s through the P4 program",
    ),
    "runtime": (
        "kvswitch.bench.runtime_bench",
        "P4Runtime entries/s; packets/s between namespaces",
    ),
    "fabric-runtime": (
        "kvswitch.bench.fabric_runtime_bench",
        "the fabric controller's periods on S spines + R leaves over P4Runtime: write times",
    ),
    "fabric-plan": (
        "kvswitch.bench.fabric_plan_bench",
        "the fabric planner's water-filling at 32 x 32: stepwise / now, the same plans",
    ),
    "freeze": (
        "kvswitch.bench.freeze_bench",
        "a rotated key's write freeze over the agents' control channels, by holders and ids",
    ),
    "hosts": ("kvswitch.bench.hosts_bench", "Gets/s and p50/p99 per backend (Python client)"),
    "c-client": (
        "kvswitch.bench.c_client_bench",
        "Gets/s through the C library vs the Python client",
    ),
    "sim": ("kvswitch.bench.sim_bench", "simulated queries/s with exact HashPipe semantics"),
    "rack-ramp": (
        "kvswitch.bench.rack_ramp",
        "the Mininet rack at rising rates on each target: p99, and the rate it sustains",
    ),
    "slo": (
        "kvswitch.bench.slo",
        "bounded servers: throughput at a p99 bound, balanced vs not, against the simulator",
    ),
}


def usage() -> str:
    width = max(map(len, BENCHMARKS))
    lines = ["usage: kvswitch bench <name|all> [args...]", "", "benchmarks:"]
    lines += [f"  {name:<{width}}  {text}" for name, (_, text) in BENCHMARKS.items()]
    return "\n".join(lines)


def run(name: str, argv: list[str]) -> int:
    module = importlib.import_module(BENCHMARKS[name][0])
    started = time.perf_counter()
    print(f"== bench {name}", flush=True)
    code = int(module.main(argv) or 0)
    print(f"== bench {name}: exit {code} after {time.perf_counter() - started:.1f} s", flush=True)
    return code


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print(usage())
        return 0
    name, rest = args[0], args[1:]
    if name == "all":
        codes = [run(each, []) for each in BENCHMARKS]
        return max(codes)
    if name not in BENCHMARKS:
        print(f"kvswitch bench: unknown benchmark {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    return run(name, rest)
