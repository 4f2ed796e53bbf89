"""``kvswitch controller``: the rack's controller on BMv2 or the software switch.

    kvswitch controller --rack rack.json --p4 p4src/kvswitch.p4 [-D NAME=VAL ...]
        --grpc-addr 127.0.0.1:9559 --device-id 0 --thrift-port 9090 --target softswitch|bmv2
        --period 1.0 --k 64 --policy ring [--observe-only] [--metrics m.jsonl] [--periods N]
        [--fabric-out FILE --fabric-in FILE]

It sets the forwarding pipeline (software switch: the P4 source bundle; BMv2: ``--bmv2-json`` and
``--p4info``, or the P4 source compiled with the p4c-bm2-ss on PATH), installs the rack's static entries and a new epoch, takes over the hot keys the
switch holds, then runs one control period every ``--period`` seconds until ``--periods`` are done
or SIGTERM/SIGINT arrives. In a fabric (docs/fabric.md "Runtime"), ``--fabric-out`` is the file
it writes each period for the fabric controller (the rack's ``inputs`` in the fabric file) and
``--fabric-in`` the one it reads back (the rack's ``share``).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import signal
import sys
import threading
import time
from pathlib import Path
from types import FrameType
from typing import TextIO

from kvswitch import argtypes as t
from kvswitch.controller.agents import AgentPool
from kvswitch.controller.elastic import AdminServer
from kvswitch.controller.handoff import next_boundary, stale_after
from kvswitch.controller.p4rt_driver import DriverError, P4RuntimeDriver, Program, SwitchAddress
from kvswitch.controller.period import ControllerConfig
from kvswitch.controller.placement import POLICIES
from kvswitch.controller.program import compiled_for_bmv2, from_p4c_files, from_source
from kvswitch.controller.rackfile import RackFile, RackFileError
from kvswitch.controller.runtime import Runtime

LOG = logging.getLogger("kvswitch.controller")


def build_parser() -> t.Parser:
    ap = t.Parser(
        prog="kvswitch controller",
        description="KVSwitch controller: hot-key replication on BMv2 or the software switch.",
    )
    ap.add_argument("--rack", required=True, help="rack file (JSON) written by the topology")
    ap.add_argument("--p4", help="P4 source (software switch; default p4src/kvswitch.p4)")
    ap.add_argument(
        "-D", dest="defines", action="append", default=[], metavar="NAME=VAL", help="P4 define"
    )
    ap.add_argument(
        "-I", dest="includes", action="append", default=[], metavar="DIR", help="P4 include dir"
    )
    ap.add_argument(
        "--bmv2-json",
        help="p4c-compiled BMv2 JSON (target bmv2; default: compile --p4 with p4c-bm2-ss)",
    )
    ap.add_argument("--p4info", help="P4Info text file (target bmv2: the one p4c wrote)")
    ap.add_argument(
        "--grpc-addr", type=t.endpoint, default="127.0.0.1:9559", help="P4Runtime server"
    )
    ap.add_argument(
        "--device-id", type=t.nonneg_int, default=0, help="P4Runtime device id (default 0)"
    )
    ap.add_argument("--thrift-host", default="127.0.0.1", help="BMv2 Thrift runtime host")
    ap.add_argument("--thrift-port", type=t.port, default=9090, help="BMv2 Thrift runtime port")
    ap.add_argument(
        "--target",
        choices=("softswitch", "bmv2"),
        default="softswitch",
        help="the program's form: bmv2 sends p4c's JSON and P4Info (--bmv2-json, --p4info), "
        "softswitch the P4 source (default); registers go over P4Runtime or Thrift by what "
        "the switch answers",
    )
    ap.add_argument(
        "--period", type=t.positive_float, default=1.0, help="seconds per period (default 1)"
    )
    ap.add_argument(
        "--periods", type=t.positive_int, help="stop after N periods (default: run until killed)"
    )
    ap.add_argument(
        "--k", type=t.positive_int, default=64, help="hot keys tracked (<= the program's slots)"
    )
    ap.add_argument(
        "--policy",
        choices=sorted(POLICIES),
        default="ring",
        help="where hot keys are replicated (default ring)",
    )
    ap.add_argument("--alpha", type=t.fraction, default=0.5, help="predictor smoothing (0-1)")
    ap.add_argument(
        "--bound", type=t.nonneg_float, default=0.30, help="max/mean bound of the threshold"
    )
    ap.add_argument("--gamma", type=t.fraction, default=0.8, help="threshold decay (0-1)")
    ap.add_argument(
        "--t0", type=t.nonneg_float, help="initial threshold (default: first period's mean)"
    )
    ap.add_argument("--observe-only", action="store_true", help="report only; no hot keys")
    ap.add_argument("--metrics", help="append one JSON object per period to this file")
    ap.add_argument("--state", help="state file: epoch, threshold, last counts (restarts)")
    ap.add_argument(
        "--fabric-out",
        metavar="FILE",
        help="in a fabric: write this rack's candidates and loads here each period, for the "
        'fabric controller (the rack\'s "inputs" in the fabric file)',
    )
    ap.add_argument(
        "--fabric-in",
        metavar="FILE",
        help="in a fabric: read the fabric controller's share for this rack here each period "
        '(the rack\'s "share" in the fabric file): its fabric-hot keys are never made hot '
        "here, its servers' fabric load is planned with; missing, malformed or older than 3 "
        "periods (at least 5 s; --fabric-max-age): logged, the rack plans without the "
        "fabric's loads",
    )
    ap.add_argument(
        "--fabric-max-age",
        type=t.positive_float,
        metavar="SECONDS",
        help="age after which --fabric-in is stale (default: 3 periods, at least 5 s)",
    )
    ap.add_argument(
        "--timeout", type=t.positive_float, default=10.0, help="switch/agent timeout, seconds"
    )
    ap.add_argument(
        "--down-after",
        type=t.positive_int,
        default=2,
        help="periods missed in a row before a server is declared down (default 2)",
    )
    ap.add_argument(
        "--probe-timeout",
        type=t.float_range(0, 60, above=True),
        default=0.5,
        help="seconds an agent's ping may take before it counts as missed (default 0.5)",
    )
    ap.add_argument(
        "--admin",
        help="Unix socket for membership changes (kvswitch membership --admin PATH add|remove)",
    )
    ap.add_argument(
        "--test-unsafe-handoff",
        action="store_true",
        help="TESTS ONLY: switch rings before copying the moving keys (shows the e2e check fails)",
    )
    ap.add_argument(
        "--test-crash-in-handoff",
        action="store_true",
        help="TESTS ONLY: exit between the release and the activation of a ring change",
    )
    ap.add_argument("--no-pipeline", action="store_true", help="do not set the pipeline")
    ap.add_argument("-v", "--verbose", action="store_true", help="log every period's details")
    return ap


def load_program(args: argparse.Namespace) -> Program:
    """The P4Info and device config SetForwardingPipelineConfig sends for the target: BMv2 takes
    p4c's JSON and P4Info (given, or compiled here with p4c-bm2-ss), the software switch the P4
    source."""
    from kvswitch.paths import p4src_dir
    from softswitch.main import parse_defines

    source = Path(args.p4) if args.p4 else p4src_dir() / "kvswitch.p4"
    defines = parse_defines(args.defines)
    if args.target == "bmv2":
        if args.bmv2_json and args.p4info:
            return from_p4c_files(Path(args.bmv2_json), Path(args.p4info))
        if args.bmv2_json or args.p4info:
            raise ValueError("--bmv2-json and --p4info go together (p4c writes both)")
        return compiled_for_bmv2(source, defines, [Path(d) for d in args.includes])
    return from_source(source, defines, args.includes)


def stop_on_signals() -> threading.Event:
    """An event SIGTERM and SIGINT set (when called from the main thread)."""
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
    return stop


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(message)s",
        stream=sys.stdout,
    )
    # finsy logs a failed stream with a traceback; the period's own error line says it
    logging.getLogger("finsy").setLevel(logging.DEBUG if args.verbose else logging.CRITICAL)
    if args.period <= 0 or (args.periods is not None and args.periods < 0):
        print("kvswitch controller: --period must be > 0 and --periods >= 0", file=sys.stderr)
        return 2
    stop = stop_on_signals()
    try:
        rack = RackFile.load(args.rack)
        config = ControllerConfig(
            k=args.k,
            alpha=args.alpha,
            bound=args.bound,
            gamma=args.gamma,
            t0=args.t0,
            policy=args.policy,
        )
        program = load_program(args)
    except (OSError, ValueError, RackFileError) as exc:
        print(f"kvswitch controller: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # the P4 program does not compile
        print(f"kvswitch controller: cannot load the P4 program: {exc}", file=sys.stderr)
        return 2
    address = SwitchAddress(
        args.grpc_addr,
        args.device_id,
        args.thrift_host,
        args.thrift_port,
        timeout=args.timeout,
    )
    agents = AgentPool(rack, args.timeout, args.probe_timeout)
    metrics: TextIO | None = None
    try:
        with contextlib.ExitStack() as stack:
            stack.callback(agents.close)
            driver = stack.enter_context(
                P4RuntimeDriver(address, program, rack.rack(), agents, not args.no_pipeline)
            )
            if args.metrics:
                metrics = stack.enter_context(Path(args.metrics).open("a"))
            runtime = Runtime(
                driver,
                rack,
                config,
                agents,
                observe_only=args.observe_only,
                metrics=metrics,
                state_file=Path(args.state) if args.state else None,
                down_after=args.down_after,
                unsafe_handoff=args.test_unsafe_handoff,
                crash_in_handoff=args.test_crash_in_handoff,
                fabric_out=Path(args.fabric_out) if args.fabric_out else None,
                fabric_in=Path(args.fabric_in) if args.fabric_in else None,
                fabric_max_age=args.fabric_max_age or stale_after(args.period),
            )
            runtime.start()
            if args.admin:
                admin = AdminServer(args.admin, runtime.handle_admin)
                stack.callback(admin.close)
                admin.start()
            run_periods(runtime, args.period, args.periods, stop, aligned=bool(args.fabric_out))
    except (DriverError, ValueError, OSError) as exc:
        print(f"kvswitch controller: {exc}", file=sys.stderr)
        return 1
    return 0


def run_periods(
    runtime: Runtime,
    period: float,
    periods: int | None,
    stop: threading.Event,
    aligned: bool = False,
) -> None:
    """One period every ``period`` seconds (on a fixed schedule; a late period is not repeated).
    ``aligned`` (a rack of a fabric): the periods end on the wall clock's multiples of
    ``period`` (:func:`~kvswitch.controller.handoff.next_boundary`), as every rack's do."""
    deadline = time.monotonic()
    while periods is None or runtime.periods < periods:
        deadline += period
        if aligned:
            now = time.time()
            deadline = time.monotonic() + next_boundary(period, now) - now
        if stop.wait(max(0.0, deadline - time.monotonic())):
            return
        deadline = max(deadline, time.monotonic() - period)
        with runtime.lock:  # not while a membership change runs
            runtime.period()
