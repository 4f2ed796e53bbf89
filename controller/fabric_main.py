"""``kvswitch fabric-controller --config FABRIC.json``: the fabric controller as a process
(docs/fabric.md "Runtime"). It connects to every spine and leaf the fabric file names, starts
(epochs, static entries, read-back, steering) and runs a period every ``--period`` seconds.

Each rack's candidates and loads come from the file its rack controller writes for it (the
rack's ``inputs`` in the fabric file; ``kvswitch controller --fabric-out``), and after start-up
and after each period the fabric controller writes the rack's share of its decision to the
rack's ``share`` file (``kvswitch controller --fabric-in``): the keys the rack must not make hot
and its servers' fabric load. Both formats: :mod:`kvswitch.controller.handoff`.

A rack without an inputs file, or with an unreadable, malformed or stale one (older than
``--max-age``: three periods, at least 5 s), counts as idle that period (said once per period in
the log): the fabric keeps what it has and places nothing new for it. A share file that cannot
be written is logged.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

from kvswitch import argtypes as t
from kvswitch import protocol as p
from kvswitch.controller.agents import AgentPool
from kvswitch.controller.driver import DriverError
from kvswitch.controller.fabric import FabricConfig
from kvswitch.controller.fabric_runtime import FabricMetrics, FabricRuntime
from kvswitch.controller.fabricfile import FabricFile, FabricFileError
from kvswitch.controller.handoff import (
    RackInput,
    fresh_since,
    next_boundary,
    read_inputs,
    stale_after,
    write_share,
)
from kvswitch.controller.main import stop_on_signals
from kvswitch.controller.p4rt_driver import P4RuntimeDriver, Program, SwitchAddress
from kvswitch.controller.program import compiled_for_bmv2, from_source

LOG = logging.getLogger("kvswitch.fabric")
#: The P4Runtime role the fabric controller holds on every leaf (the rack controller holds the
#: default role there: each is the primary of its own)
LEAF_ROLE = "fabric"
#: seconds the start waits for a leaf's pipeline (its rack controller sets it)
LEAF_WAIT = 60.0
#: seconds between two looks at the racks' inputs after a period boundary
FRESH_POLL = 0.01


def write_shares(runtime: FabricRuntime) -> None:
    """Each rack's share of the fabric's decision, to the rack's ``share`` file (if it has one)."""
    for r, rack in enumerate(runtime.fabric.racks):
        if rack.share is None:
            continue
        try:
            write_share(Path(rack.share), runtime.periods, runtime.share(r))
        except OSError as exc:
            LOG.warning("share of rack %s not written: %s", rack.switch.name, exc)


def metrics_record(runtime: FabricRuntime, m: FabricMetrics) -> dict[str, Any]:
    """A period's line of ``--metrics``: its :class:`FabricMetrics`, when it ended (Unix time),
    each spine's epoch and whether it is started, each fabric-hot key's spine and holders
    (the fabric's server numbers, origin first), the keys whose writes rotate (their plans'
    ``rotate`` flag, the spines' ``set_hot(slot, n, rotate)``; docs/protocol.md F7), and the
    servers the rack controllers declared dead (docs/fabric.md "Failures")."""
    return {
        **m.record(),
        "time": time.time(),
        "epochs": list(runtime.epochs),
        "spine_ok": list(runtime.spine_ok),
        "keys": {
            key.hex(): [s, list(kp.holders)]
            for s, plan in enumerate(runtime.plans)
            for key, kp in plan.keys.items()
        },
        "rotated": sorted(
            key.hex() for plan in runtime.plans for key, kp in plan.keys.items() if kp.rotate
        ),
        "dead": sorted(runtime.dead),  # the servers the racks declared dead (RackInput.down)
    }


def build_parser() -> t.Parser:
    ap = t.Parser(
        prog="kvswitch fabric-controller",
        description="KVSwitch fabric controller: fabric-hot keys on the spines, steering on the leaves.",
    )
    ap.add_argument("--config", required=True, help="fabric file (JSON): spines, leaves, servers")
    ap.add_argument("--state", help="state file: the spines' epochs, T_f, last counts (restarts)")
    ap.add_argument("--period", type=t.positive_float, default=1.0, help="seconds per period")
    ap.add_argument("--periods", type=t.nonneg_int, help="stop after this many periods")
    ap.add_argument(
        "--target",
        choices=("softswitch", "bmv2"),
        default="softswitch",
        help="the programs' form: bmv2 compiles them with the p4c-bm2-ss on PATH, softswitch "
        "sends the P4 source (default)",
    )
    ap.add_argument(
        "--spine-define", action="append", default=[], metavar="NAME=VAL", help="spine P4 define"
    )
    ap.add_argument(
        "--leaf-define", action="append", default=[], metavar="NAME=VAL", help="leaf P4 define"
    )
    ap.add_argument(
        "--metrics",
        help="append one JSON object per period to this file (its metrics, the spines' epochs, "
        "every fabric-hot key's holders)",
    )
    ap.add_argument(
        "--no-pipeline",
        action="store_true",
        help="do not set the spines' pipelines (a leaf's is always its rack controller's)",
    )
    ap.add_argument(
        "--level-inside",
        type=t.nonneg_float,
        default=0.1,
        metavar="FRACTION",
        help="inside a rack, move fabric holders off a server whose load its rack controller "
        "cannot move is above (1 + FRACTION) x its rack's mean (default 0.1)",
    )
    ap.add_argument(
        "--rotation-hysteresis",
        type=t.float_range(0.0, 0.99),
        default=0.2,
        metavar="FRACTION",
        help="a rotated key stops rotating only once its writes fall below (1 - FRACTION) x "
        "the bound that starts its rotation (default 0.2; 0: decided afresh each period)",
    )
    ap.add_argument("--timeout", type=t.positive_float, default=10.0, help="switch call timeout")
    ap.add_argument(
        "--liveness",
        type=t.positive_float,
        default=0.5,
        metavar="SECONDS",
        help="a spine whose control port takes no connection within this at the start of a "
        "period is lost for that period without a call to it (default 0.5)",
    )
    ap.add_argument(
        "--repeat-window",
        type=t.positive_float,
        default=10.0,
        metavar="SECONDS",
        help="a rotated key's write freeze hands its holders the request ids of the last this "
        "many seconds: at least the longest time a client re-sends a write (timeout x "
        "(retries + 1): 2 s with the clients' defaults; default 10)",
    )
    ap.add_argument(
        "--max-age",
        type=t.positive_float,
        metavar="SECONDS",
        help="a rack's inputs file older than this counts as idle (default: 3 periods, >= 5 s)",
    )
    return ap


def _program(name: str, defines: list[str], target: str) -> Program:
    return _cached_program(name, tuple(defines), target)


@functools.cache
def _cached_program(name: str, defines: tuple[str, ...], target: str) -> Program:
    """The program of ``p4src/<name>`` (a process that starts the controller again, as the
    tests do, compiles it once)."""
    from kvswitch.paths import p4src_dir
    from softswitch.main import parse_defines

    source = p4src_dir() / name
    parsed = parse_defines(list(defines))
    if target == "bmv2":
        return compiled_for_bmv2(source, parsed)
    return from_source(source, parsed)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stdout)
    logging.getLogger("finsy").setLevel(logging.CRITICAL)
    stop = stop_on_signals()
    try:
        fabric = FabricFile.load(args.config)
        spine_prog = _program("kvswitch_spine.p4", args.spine_define, args.target)
        leaf_prog = _program("kvswitch_leaf.p4", args.leaf_define, args.target)
    except (FabricFileError, ValueError, OSError) as exc:
        print(f"kvswitch fabric-controller: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # a program that does not compile
        print(f"kvswitch fabric-controller: cannot load the P4 programs: {exc}", file=sys.stderr)
        return 2
    agents = AgentPool(fabric.agents_rack(), args.timeout)
    agents.repeat_window = args.repeat_window
    shape = fabric.shape
    max_age = args.max_age or stale_after(args.period)
    ring = p.HashRing.of(range(shape.total))  # docs/protocol.md "Origin of a key", over all
    try:
        with contextlib.ExitStack() as stack:
            stack.callback(agents.close)

            def connect(end, program: Program, rack, role=None, **kw) -> P4RuntimeDriver:
                address = SwitchAddress(
                    end.grpc_addr, end.device_id, end.thrift_host, end.thrift_port, args.timeout,
                    role,
                )  # fmt: skip
                # a leaf's pipeline is its rack controller's: two controllers that both set it
                # after the leaf restarted would each wipe the entries the other wrote first
                pipeline = not args.no_pipeline and role is None
                return stack.enter_context(
                    P4RuntimeDriver(address, program, rack, set_pipeline=pipeline, **kw)
                )

            spines = [
                connect(
                    s.switch,
                    spine_prog,
                    fabric.spine_rack(),
                    agents=agents,
                    row=fabric.spine_cells // fabric.k,
                )
                for s in fabric.spines
            ]

            def connect_leaf(i: int) -> P4RuntimeDriver:
                """Leaf ``i``, once its rack controller has set its pipeline (both may start
                at the same time): tried every half second for ``LEAF_WAIT`` seconds."""
                end, said = time.monotonic() + LEAF_WAIT, False
                while True:
                    try:
                        return connect(
                            fabric.racks[i].switch, leaf_prog, fabric.leaf_rack(i), role=LEAF_ROLE
                        )
                    except DriverError as exc:
                        if time.monotonic() > end or stop.is_set():
                            raise
                        if not said:
                            why = str(exc).splitlines()[0] if str(exc) else repr(exc)
                            LOG.info("leaf %s: not ready (%s): waiting for its rack controller",
                                     fabric.racks[i].switch.name, why)  # fmt: skip
                            said = True
                        stop.wait(0.5)

            leaves = [connect_leaf(i) for i in range(len(fabric.racks))]
            runtime = FabricRuntime(
                fabric,
                spines,
                leaves,
                FabricConfig(
                    k=fabric.k,
                    level_inside=args.level_inside,
                    max_holders=fabric.max_holders,
                    rotation_hysteresis=args.rotation_hysteresis,
                ),
                ring.origin,
                Path(args.state) if args.state else None,
                liveness=args.liveness,
                freeze=agents,
            )
            stack.callback(runtime.close)
            runtime.announce = lambda: write_shares(runtime)  # before a period's pushes
            metrics = stack.enter_context(Path(args.metrics).open("a")) if args.metrics else None
            runtime.start()
            write_shares(runtime)
            paths = [r.inputs for r in fabric.racks if r.inputs is not None]
            while args.periods is None or runtime.periods < args.periods:
                # just after the racks' period boundary, once every rack wrote its inputs of the
                # period that ended there (their controllers end theirs on the same boundaries),
                # at most half a period later
                boundary = next_boundary(args.period, time.time())
                if stop.wait(max(0.0, boundary - time.time())):
                    break
                while not fresh_since(paths, boundary) and time.time() < boundary + args.period / 2:
                    if stop.wait(FRESH_POLL):
                        break
                if stop.is_set():
                    break
                inputs = [
                    read_inputs(r.inputs, shape.servers, max_age)
                    or RackInput({}, [0.0] * shape.servers)
                    for r in fabric.racks
                ]
                m = runtime.period(inputs)
                write_shares(runtime)
                if metrics is not None:
                    metrics.write(json.dumps(metrics_record(runtime, m)) + "\n")
                    metrics.flush()
    except (DriverError, ValueError, OSError) as exc:
        print(f"kvswitch fabric-controller: {exc}", file=sys.stderr)
        return 1
    return 0
