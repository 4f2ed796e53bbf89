"""``kvswitch bench hosts``: Gets/s and latency of one Python client against one agent per backend.

For each backend (memory, memcached, redis) the benchmark starts the backend server (memcached and
redis-server by absolute path, stopped by PID), one agent process (``python -m kvswitch agent``) on a
free loopback port, loads ``--keys`` keys, then measures with one client:

- sequential Gets (one request in flight): p50/p99 latency and Gets/s;
- pipelined Gets (``--window`` in flight through :meth:`Client.pipeline`): Gets/s, p50/p99.

A backend whose server binary is absent is reported as skipped.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

from kvswitch import argtypes as t
from kvswitch.agent.backend_procs import (
    MEMCACHED,
    REDIS_SERVER,
    BackendProcess,
    start_agent,
    start_memcached,
    start_redis,
)
from kvswitch.client import Client, Request


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    index = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[index]


@contextmanager
def backend_server(kind: str) -> Iterator[str | None]:
    proc: BackendProcess | None = None
    if kind == "memcached":
        proc = start_memcached()
    elif kind == "redis":
        proc = start_redis()
    try:
        yield None if proc is None else proc.addr
    finally:
        if proc is not None:
            proc.stop()


@contextmanager
def agent_process(kind: str, backend_addr: str | None) -> Iterator[int]:
    args = ["--backend", kind] + (["--backend-addr", backend_addr] if backend_addr else [])
    agent = start_agent(args)
    try:
        yield agent.port
    finally:
        agent.stop()  # the PID started above


def measure(port: int, args: argparse.Namespace) -> dict[str, float]:
    rng = random.Random(1)
    keys = [b"bench-%d" % i for i in range(args.keys)]
    value = b"v" * args.value_size
    with Client([("127.0.0.1", port)], timeout=1.0, retries=3) as client:
        loaded = client.pipeline([Request("set", k, value) for k in keys], window=args.window)
        if any(o.error for o in loaded):
            raise RuntimeError("loading the keys failed")
        seq_lat: list[float] = []
        started = time.perf_counter()
        for _ in range(args.sequential):
            t0 = time.perf_counter()
            if client.get(rng.choice(keys)) != value:
                raise RuntimeError("wrong value read")
            seq_lat.append(time.perf_counter() - t0)
        seq_time = time.perf_counter() - started
        requests = [Request("get", rng.choice(keys)) for _ in range(args.requests)]
        started = time.perf_counter()
        outcomes = client.pipeline(requests, window=args.window)
        pipe_time = time.perf_counter() - started
    errors = sum(1 for o in outcomes if o.error is not None or o.value != value)
    seq_lat.sort()
    pipe_lat = sorted(o.latency for o in outcomes if o.error is None)
    return {
        "seq_gets_s": args.sequential / seq_time,
        "seq_p50_us": percentile(seq_lat, 0.5) * 1e6,
        "seq_p99_us": percentile(seq_lat, 0.99) * 1e6,
        "pipe_gets_s": (args.requests - errors) / pipe_time,
        "pipe_p50_us": percentile(pipe_lat, 0.5) * 1e6,
        "pipe_p99_us": percentile(pipe_lat, 0.99) * 1e6,
        "errors": errors,
    }


def build_parser() -> t.Parser:
    ap = t.Parser(prog="kvswitch bench hosts", description=__doc__)
    ap.add_argument(
        "--backends", default="memory,memcached,redis", help="comma-separated backends to run"
    )
    ap.add_argument("--keys", type=t.positive_int, default=1000, help="distinct keys (1000)")
    ap.add_argument("--value-size", type=t.nonneg_int, default=64, help="bytes per value (64)")
    ap.add_argument("--sequential", type=t.nonneg_int, default=5000, help="Gets with one in flight")
    ap.add_argument("--requests", type=t.nonneg_int, default=20000, help="pipelined Gets")
    ap.add_argument(
        "--window", type=t.positive_int, default=32, help="requests in flight when pipelined"
    )
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    binaries = {"memcached": MEMCACHED, "redis": REDIS_SERVER}
    print(
        f"one Python client, one agent process, loopback; {args.keys} keys, "
        f"{args.value_size}-byte values; pipelined window {args.window}"
    )
    header = (
        f"{'backend':<10} {'seq Gets/s':>11} {'p50 us':>8} {'p99 us':>8}   "
        f"{'pipe Gets/s':>11} {'p50 us':>8} {'p99 us':>8} {'errors':>6}"
    )
    print(header)
    code = 0
    for kind in args.backends.split(","):
        binary = binaries.get(kind)
        if binary is not None and not binary.is_file():
            print(f"{kind:<10} skipped: {binary} is absent")
            continue
        try:
            with backend_server(kind) as backend_addr, agent_process(kind, backend_addr) as port:
                r = measure(port, args)
        except (RuntimeError, OSError) as exc:
            print(f"{kind:<10} failed: {exc}")
            code = 1
            continue
        print(
            f"{kind:<10} {r['seq_gets_s']:>11.0f} {r['seq_p50_us']:>8.0f} {r['seq_p99_us']:>8.0f}   "
            f"{r['pipe_gets_s']:>11.0f} {r['pipe_p50_us']:>8.0f} {r['pipe_p99_us']:>8.0f} "
            f"{r['errors']:>6.0f}",
            flush=True,
        )
        code = max(code, 1 if r["errors"] else 0)
    return code
