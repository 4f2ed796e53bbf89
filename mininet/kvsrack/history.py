"""Concurrent Python clients on a few shared keys, recording a history for the linearizability
check (kvswitch.consistency.lincheck). The rack starts it (``python -m kvsrack.history``) inside
a client host.

Each thread has its own :class:`kvswitch.client.Client` and loops for ``--duration`` seconds:
a Set of a value unique to (client, thread, n) with probability ``--set-ratio``, else a Get, on
a key drawn uniformly from ``--keys`` keys named ``lin<i>``. One JSON object per operation goes to
``--out``: ``kind``, ``key`` (hex of the 16-byte wire key), ``call``/``ret`` (CLOCK_MONOTONIC,
the same clock in every network namespace; ``ret`` null when the outcome is unknown: a timed-out
Set may have been applied), ``value`` (hex, a Set's) and ``output`` (hex or null, a Get's).
Timed-out Gets constrain nothing and are left out of the history; every failed Get (timeout or
error status) is written to ``<out>.failed`` instead (key, call, error), so runs can count them.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvswitch.client import Client, KvsError, Unavailable
from kvswitch.protocol import pad_key


def parse_servers(text: str) -> list[tuple[str, int]]:
    out = []
    for item in text.split(","):
        host, _, port = item.rpartition(":")
        out.append((host, int(port)))
    return out


@dataclass(frozen=True)
class Plan:
    servers: list[tuple[str, int]]
    keys: list[str]
    set_ratio: float
    rate: float  # operations/s per thread, 0 = back to back
    writes_end: float  # monotonic time after which only Gets are sent
    end: float
    timeout: float = 0.3  # the client's wait for a reply before it resends (same request id)
    retries: int = 3


def worker(
    plan: Plan, tag: str, seed: int, ops: list[dict[str, Any]], failed: list[dict[str, Any]]
) -> None:
    rng = random.Random(seed)
    servers, keys, set_ratio, rate = plan.servers, plan.keys, plan.set_ratio, plan.rate
    writes_end, end = plan.writes_end, plan.end
    n = 0
    next_op = time.monotonic()
    with Client(servers, timeout=plan.timeout, retries=plan.retries) as kv:
        while (now := time.monotonic()) < end:
            if rate > 0:
                next_op += rng.expovariate(rate)
                if next_op > now:
                    time.sleep(next_op - now)
            key = rng.choice(keys)
            wire = pad_key(key.encode()).hex()
            n += 1
            if time.monotonic() < writes_end and rng.random() < set_ratio:
                value = f"{tag}-{n}".encode()
                call = time.monotonic()
                try:
                    kv.set(key, value)
                    ret: float | None = time.monotonic()
                except Unavailable as exc:
                    if not exc.maybe_applied:  # refused at the first attempt: applied nowhere
                        continue
                    ret = None  # an earlier attempt may have reached the replicas: unknown
                except (KvsError, TimeoutError):
                    ret = None
                ops.append({"kind": "set", "key": wire, "call": call, "ret": ret,
                            "value": value.hex(), "output": None})  # fmt: skip
            else:
                call = time.monotonic()
                try:
                    got = kv.get(key)
                except (KvsError, TimeoutError) as exc:
                    failed.append({"key": wire, "call": call, "ret": time.monotonic(),
                                   "error": type(exc).__name__})  # fmt: skip
                    continue
                ops.append({"kind": "get", "key": wire, "call": call, "ret": time.monotonic(),
                            "value": None, "output": None if got is None else got.hex()})  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m kvsrack.history", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--servers", required=True, help="IP:PORT,... in rack order")
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--keys", type=int, default=4)
    ap.add_argument("--set-ratio", type=float, default=0.05)
    ap.add_argument(
        "--rate", type=float, default=100.0, help="operations/s per thread (0: no wait)"
    )
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--read-tail", type=float, default=0.0, help="then Gets only for S seconds")
    ap.add_argument("--client", type=int, default=0, help="this host's number (value tags)")
    ap.add_argument(
        "--timeout", type=float, default=0.3, help="seconds before a resend (same request id)"
    )
    ap.add_argument("--retries", type=int, default=3, help="resends before giving up")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    servers = parse_servers(args.servers)
    keys = [f"lin{i}" for i in range(args.keys)]
    writes_end = time.monotonic() + args.duration
    end = writes_end + args.read_tail
    if args.timeout <= 0 or args.retries < 0:
        print("history: --timeout must be > 0 and --retries >= 0", file=sys.stderr)
        return 2
    plan = Plan(
        servers, keys, args.set_ratio, args.rate, writes_end, end, args.timeout, args.retries
    )
    per_thread: list[list[dict[str, Any]]] = [[] for _ in range(args.threads)]
    failed: list[dict[str, Any]] = []
    threads = [
        threading.Thread(
            target=worker,
            args=(plan, f"c{args.client}t{t}", args.client * 1000 + t, per_thread[t], failed),
        )
        for t in range(args.threads)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with args.out.open("w") as f:
        for t, ops in enumerate(per_thread):
            for op in ops:
                f.write(json.dumps({**op, "client": args.client * 1000 + t}) + "\n")
    with Path(f"{args.out}.failed").open("w") as f:
        for fail in failed:
            f.write(json.dumps(fail) + "\n")
    print(f"history: {sum(map(len, per_thread))} operations in {args.out}, "
          f"{len(failed)} failed Gets", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
