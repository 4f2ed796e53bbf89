"""``kvswitch bench sim``: simulated queries per second with exact HashPipe semantics.

Sets up the paper's configuration (M = 32, K = 10 000, d = 4, Zipf 0.99 over 1M keys), lets the
real controller install a hot set for a few periods, then times the compiled kernel (sampling
included) on one core, and the plain-Python reference of the same rules on a short trace.
"""

from __future__ import annotations

import time

import numpy as np

from kvswitch import argtypes as t
from kvswitch.bench.model import Model, ReferencePipeline
from kvswitch.bench.workload import Workload
from kvswitch.controller.hashring import key_id, origins_of_ids
from kvswitch.controller.period import Controller, ControllerConfig
from kvswitch.controller.plan import rack_setup
from kvswitch.controller.rack import Rack


def main(argv: list[str] | None = None) -> int:
    parser = t.Parser(prog="kvswitch bench sim", description=__doc__)
    parser.add_argument(
        "--keys", type=t.int_range(1, 2**31 - 1), default=1_000_000, help="distinct keys"
    )
    parser.add_argument("--skew", type=t.nonneg_float, default=0.99, help="Zipf skew")
    parser.add_argument(
        "--queries", type=t.positive_int, default=20_000_000, help="queries simulated"
    )
    parser.add_argument(
        "--reference-queries",
        type=t.positive_int,
        default=100_000,
        help="queries run through the reference pipeline",
    )
    parser.add_argument("--write-ratio", type=t.fraction, default=0.0, help="share of writes (0-1)")
    parser.add_argument("--policy", default="balance", help="replica placement")
    ns = parser.parse_args(argv)

    servers, k, stages = 32, 10_000, 4
    rack = Rack.synthetic(servers)
    wl = Workload(ns.keys, ns.skew, ns.write_ratio)
    origin = origins_of_ids(np.arange(ns.keys), servers)
    info = wl.rank_info(origin)
    model = Model(rack, k, stages, origin, lag=1000)
    model.apply(rack_setup(rack, 1))
    controller = Controller(
        ControllerConfig(k=k, t0=250, policy=ns.policy, max_replicas_per_server=53),
        lambda key: int(origin[key_id(key)]),
        rack,
        k,
    )
    counts = np.zeros(ns.keys, np.int32)
    compile_start = time.perf_counter()
    model.run_sampled(1000, 0, wl, info, counts)  # JIT compile or load
    print(f"kernel ready in {time.perf_counter() - compile_start:.1f} s (numba compile/cache)")
    for period in range(3):
        model.run_sampled(2_000_000, period + 1, wl, info, counts)
        controller.step(model)
    hot = len(model.tables.hot)

    started = time.perf_counter()
    model.run_sampled(ns.queries, 42, wl, info, counts)
    fast = ns.queries / (time.perf_counter() - started)

    # the same rules in plain Python, trace drawn by numpy (drawing not timed)
    rng = np.random.default_rng(5)
    ranks = rng.choice(ns.keys, size=ns.reference_queries, p=wl.weights)
    kids = wl.perm[ranks].tolist()
    writes = (rng.random(ns.reference_queries) < ns.write_ratio).tolist()
    ref = ReferencePipeline(model)
    started = time.perf_counter()
    ref.run(kids, writes)
    slow = ns.reference_queries / (time.perf_counter() - started)

    print(
        f"config: M={servers} K={k} d={stages} keys={ns.keys} zipf={ns.skew} "
        f"writes={ns.write_ratio} hot keys installed={hot}"
    )
    print(f"compiled kernel: {fast / 1e6:.2f} M queries/s (one core, sampling included)")
    print(f"pure-Python reference: {slow / 1e3:.1f} k queries/s")
    print(f"speed-up: {fast / slow:.0f}x")
    return 0
