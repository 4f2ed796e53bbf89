#!/usr/bin/env python3
"""Concurrent Python clients on a few shared keys, recording a history for the linearizability
check (kvswitch.bench.lincheck). Started by mininet/rack.py inside a client host.

Each thread has its own :class:`kvswitch.client.Client` and loops for ``--duration`` seconds:
a Set of a value unique to (client, thread, n) with probability ``--set-ratio``, else a Get, on
a key drawn uniformly from ``--keys`` keys named ``lin<i>``. One JSON object per operation goes to
``--out``: ``kind``, ``key`` (hex of the 16-byte wire key), ``call``/``ret`` (CLOCK_MONOTONIC,
the same clock in every network namespace; ``ret`` null when the outcome is unknown: a timed-out
Set may have been applied), ``value`` (hex, a Set's) and ``output`` (hex or null, a Get's).
Timed-out Gets constrain nothing and are left out.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import threading
import time
from pathlib import Path
from typing import Any

from kvswitch.client import Client, KvsError
from kvswitch.protocol import pad_key


def parse_servers(text: str) -> list[tuple[str, int]]:
    out = []
    for item in text.split(","):
        host, _, port = item.rpartition(":")
        out.append((host, int(port)))
    return out


def worker(
    servers: list[tuple[str, int]],
    keys: list[str],
    set_ratio: float,
    end: float,
    tag: str,
    seed: int,
    ops: list[dict[str, Any]],
) -> None:
    rng = random.Random(seed)
    n = 0
    with Client(servers, timeout=0.3, retries=3) as kv:
        while time.monotonic() < end:
            key = rng.choice(keys)
            wire = pad_key(key.encode()).hex()
            n += 1
            if rng.random() < set_ratio:
                value = f"{tag}-{n}".encode()
                call = time.monotonic()
                try:
                    kv.set(key, value)
                    ret: float | None = time.monotonic()
                except (KvsError, TimeoutError):
                    ret = None
                ops.append({"kind": "set", "key": wire, "call": call, "ret": ret,
                            "value": value.hex(), "output": None})  # fmt: skip
            else:
                call = time.monotonic()
                try:
                    got = kv.get(key)
                except (KvsError, TimeoutError):
                    continue
                ops.append({"kind": "get", "key": wire, "call": call, "ret": time.monotonic(),
                            "value": None, "output": None if got is None else got.hex()})  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="mininet/history.py", description=__doc__.split("\n")[0])
    ap.add_argument("--servers", required=True, help="IP:PORT,... in rack order")
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--keys", type=int, default=4)
    ap.add_argument("--set-ratio", type=float, default=0.2)
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--client", type=int, default=0, help="this host's number (value tags)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    servers = parse_servers(args.servers)
    keys = [f"lin{i}" for i in range(args.keys)]
    end = time.monotonic() + args.duration
    per_thread: list[list[dict[str, Any]]] = [[] for _ in range(args.threads)]
    threads = [
        threading.Thread(
            target=worker,
            args=(servers, keys, args.set_ratio, end, f"c{args.client}t{t}", seed, per_thread[t]),
        )
        for t, seed in ((t, args.client * 1000 + t) for t in range(args.threads))
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with args.out.open("w") as f:
        for t, ops in enumerate(per_thread):
            for op in ops:
                f.write(json.dumps({**op, "client": args.client * 1000 + t}) + "\n")
    print(f"history: {sum(map(len, per_thread))} operations in {args.out}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
