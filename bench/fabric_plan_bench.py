"""``kvswitch bench fabric-plan``: the fabric controller's water-filling (``place_fabric``) against
its step-by-step mode (``stepwise=True``: every candidate count's racks found one holder at a time
through the heap, as the planner did before issue 21), on the same inputs in one process.

The inputs are a planning round of the paper's fabric scale (32 racks x 32 servers, 2K x 4
spines candidates, Zipf 0.99 over 1M keys, 5 % Sets): each candidate's predicted load, its
origin (a rack by ``workload.rack_of``, a server inside it by the consistent hash), each
server's load without the candidates (the mean server's cold load, ±10 %), a replica budget per
server, each key's write share (the period's mean, ±50 %) and the rotation rule of
``FabricController.decide``. The first round plans from scratch; each later one starts from the
last plan (``previous``) with the loads redrawn by ±5 %. Every round checks that both modes return
the same holders (exit 1 otherwise) and prints both CPU times and their ratio.

``--baseline REV``: the ``place_fabric`` of the git revision REV (``controller/fabric.py`` read
with ``git show`` and loaded beside the current one) is timed on the same inputs too, and its
plans must be the same: the speed of a change to the planner, before and after, in one run.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from kvswitch import argtypes as t
from kvswitch.bench.workload import rack_of
from kvswitch.controller import fabric
from kvswitch.controller.fabric import FabricShape, place_fabric, rotates
from kvswitch.controller.hashring import key16, origins_of_ids


def planner_at(rev: str) -> Callable[..., list[tuple[int, ...]]]:
    """``place_fabric`` as controller/fabric.py had it at git revision ``rev`` (its imports are
    today's modules)."""
    here = Path(fabric.__file__).resolve().parent
    try:
        root = subprocess.run(
            ["git", "rev-parse", "--show-toplevel"],
            cwd=here, capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        path = Path(here).relative_to(root) / "fabric.py"
        source = subprocess.run(
            ["git", "show", f"{rev}:{path.as_posix()}"],
            cwd=root, capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
    except (OSError, subprocess.CalledProcessError) as e:
        raise ValueError(
            f"--baseline {rev}: no controller/fabric.py at it in a git checkout"
        ) from e
    name = f"_fabric_at_{rev.replace('-', '_').replace('~', '_').replace('^', '_')}"
    with tempfile.TemporaryDirectory() as tmp:
        file = Path(tmp) / "fabric.py"
        file.write_text(source)
        spec = importlib.util.spec_from_file_location(name, file)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up
        spec.loader.exec_module(module)
    return module.place_fabric


def main(argv: list[str] | None = None) -> int:
    parser = t.Parser(prog="kvswitch bench fabric-plan", description=__doc__)
    parser.add_argument("--racks", type=t.positive_int, default=32, help="racks (32)")
    parser.add_argument("--servers", type=t.positive_int, default=32, help="servers per rack (32)")
    parser.add_argument(
        "--candidates", type=t.positive_int, default=80_000, help="predicted keys (80 000)"
    )
    parser.add_argument("--keys", type=t.positive_int, default=1_000_000, help="keyspace (1M)")
    parser.add_argument("--skew", type=t.nonneg_float, default=0.99, help="Zipf skew (0.99)")
    parser.add_argument("--write-ratio", type=t.fraction, default=0.05, help="Sets (0.05)")
    parser.add_argument("--rounds", type=t.positive_int, default=2, help="planning rounds (2)")
    parser.add_argument("--room", type=t.positive_int, default=16, help="replicas per server (16)")
    parser.add_argument(
        "--threshold", type=t.positive_float, default=0.002,
        help="the spine threshold T_f, a share of a server's mean load (0.002)",
    )  # fmt: skip
    parser.add_argument("--seed", type=int, default=1, help="random seed")
    parser.add_argument(
        "--baseline",
        metavar="REV",
        help="time the planner of this git revision too (before a change)",
    )
    ns = parser.parse_args(argv)
    if ns.candidates > ns.keys:
        parser.error("--candidates must be <= --keys")
    try:
        baseline = planner_at(ns.baseline) if ns.baseline else None
    except ValueError as e:
        parser.error(str(e))
    rng = np.random.default_rng(ns.seed)
    shape = FabricShape(ns.racks, ns.servers)
    queries = 1_000_000.0 * ns.racks  # a period of 1M queries per rack
    ids = rng.permutation(ns.keys)[: ns.candidates]
    share = 1.0 / np.arange(1, ns.keys + 1, dtype=np.float64) ** ns.skew
    share /= share.sum()
    loads = queries * share[: ns.candidates]
    origins = rack_of(ids, ns.racks) * ns.servers + origins_of_ids(ids, ns.servers)
    keys = [key16(int(i)) for i in ids]
    cold = (queries - loads.sum()) / shape.total
    room = [ns.room] * shape.total
    holder_share = 0.1
    previous: dict[bytes, tuple[int, ...]] = {}
    total_old = total_new = total_base = 0.0
    for n in range(ns.rounds):
        jitter = rng.uniform(0.95, 1.05, ns.candidates) if n else np.ones(ns.candidates)
        predicted = sorted(
            zip(keys, (loads * jitter).tolist(), strict=True), key=lambda item: -item[1]
        )
        order = {key: j for j, key in enumerate(keys)}
        key_origins = [int(origins[order[key]]) for key, _ in predicted]
        writes = (ns.write_ratio * rng.uniform(0.5, 1.5, ns.candidates)).tolist()
        base = (cold * rng.uniform(0.9, 1.1, shape.total)).tolist()
        server_mean = queries / shape.total
        rotate = [
            rotates(load, w, server_mean, holder_share)
            for (_, load), w in zip(predicted, writes, strict=True)
        ]
        args = (predicted, key_origins, shape, base, server_mean * ns.threshold)
        kwargs = dict(
            write_ratios=writes,
            holder_share=holder_share,
            room=room,
            previous=previous,
            rotate=rotate,
        )
        started = time.process_time()
        old = place_fabric(*args, **kwargs, stepwise=True)
        old_s = time.process_time() - started
        started = time.process_time()
        new = place_fabric(*args, **kwargs)
        new_s = time.process_time() - started
        total_old += old_s
        total_new += new_s
        same = old == new
        versus = ""
        if baseline is not None:
            started = time.process_time()
            before = baseline(*args, **kwargs)
            base_s = time.process_time() - started
            total_base += base_s
            same = same and before == new
            versus = f"{ns.baseline} {base_s:.2f} s ({base_s / new_s:.1f} x now), "
        spread = sum(1 for hs in new if len(hs) > 1)
        print(
            f"round {n + 1}: {ns.racks}x{ns.servers} servers, {ns.candidates} candidates, "
            f"{spread} keys with holders in other racks ({sum(len(hs) for hs in new if len(hs) > 1)} "
            f"holders): stepwise {old_s:.2f} s, {versus}now {new_s:.2f} s, {old_s / new_s:.1f} x; "
            f"same holders: {'yes' if same else 'NO'}",
            flush=True,
        )
        if not same:
            return 1
        previous = {key: hs for (key, _), hs in zip(predicted, new, strict=True) if len(hs) > 1}
    versus = (
        f"{ns.baseline} {total_base:.2f} s ({total_base / total_new:.1f} x now), "
        if baseline is not None
        else ""
    )
    print(
        f"place_fabric over {ns.rounds} rounds: stepwise {total_old:.2f} s, {versus}now "
        f"{total_new:.2f} s, {total_old / total_new:.1f} x faster than stepwise, the same plans"
    )
    return 0
