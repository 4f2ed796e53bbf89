"""One KVSwitch rack on Mininet: a ToR switch, M servers with agents, C clients, the controller.

``kvswitch rack`` (``python -m kvsrack``), as root, with the project installed (docs/rack.md)::

    kvswitch rack --servers 8 --clients 2 --duration 20 --out /tmp/rack

Starts the rack (:mod:`kvsrack.rack`), runs the workload and the fault schedule the flags give
(:mod:`kvsrack.scenarios`), writes ``OUT/summary.json`` and tears everything down, also on Ctrl-C,
SIGTERM or a failed start.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvsrack import scenarios
from kvsrack.launchers import PROGRAMS
from kvsrack.scenarios import ServerEvent, Workload, check_events, spares_of
from kvsrack.topology import FabricLayout
from kvsrack.variants import VARIANTS
from kvswitch import argtypes as t

if TYPE_CHECKING:
    from kvsrack.deployment import Deployment  # imports Mininet


def server_event(action: str) -> Callable[[str], ServerEvent]:
    def parse(text: str) -> ServerEvent:
        name, sep, at = text.partition("@")
        try:
            seconds = float(at)
        except ValueError:
            seconds = -1.0
        # a server (s3), or with --fabric a switch (sp1, l2)
        if not sep or not re.fullmatch(r"(s|sp|l)[1-9][0-9]*", name) or not 0 <= seconds < 1e6:
            raise argparse.ArgumentTypeError(f"{text!r}: expected SERVER@SECONDS, e.g. s3@20")
        return ServerEvent(action, name, seconds)

    return parse


def build_parser() -> t.Parser:
    ap = t.Parser(prog="kvswitch rack", description=__doc__.split("\n")[0])
    a = ap.add_argument
    a("--servers", type=t.positive_int, default=8, help="servers M (default 8)")
    a("--clients", type=t.positive_int, default=2, help="clients C (default 2)")
    a("--backend", choices=("memory", "memcached", "redis"), default="memory",
      help="the servers' store (default memory)")  # fmt: skip
    a("--target", choices=("softswitch", "bmv2"), default="softswitch",
      help="the switch: the software switch (default) or BMv2's simple_switch_grpc")  # fmt: skip
    a("--arch", choices=sorted(PROGRAMS), default="v1model",
      help="data-plane build: v1model (p4src/kvswitch.p4) or tna (p4src/kvswitch_tna.p4, "
           "software switch only)")  # fmt: skip
    a("--bmv2-json", help="p4c-compiled BMv2 JSON of p4src/kvswitch.p4 (--target bmv2; "
      "default: the controller compiles it with p4c-bm2-ss and the -D defines)")  # fmt: skip
    a("--p4info", help="the P4Info text file p4c wrote with it (--target bmv2)")
    a("--period", type=t.positive_float, default=1.0, help="controller period in seconds")
    a("--k", type=t.positive_int, default=64, help="hot-key slots the controller uses")
    a("--policy", default="balance", help="placement policy (ring, least-loaded, balance)")
    a("--observe-only", action="store_true", help="controller reports but installs no hot keys")
    a("--bound", type=t.nonneg_float, help="the controller's max/mean bound (its default: 0.30)")
    a("--controller-arg", action="append", default=[],
      help="one more controller argument, e.g. --controller-arg=--gamma=0.5")  # fmt: skip
    a("-D", dest="defines", action="append", default=[],
      help="P4 define NAME=VAL (default: HOT_KEYS=<k> MAX_SERVERS=<servers>)")  # fmt: skip
    a("--agent-arg", action="append", default=[],
      help="one more agent argument, e.g. --agent-arg=--test-no-trust=network-push")  # fmt: skip
    a("--no-controller", action="store_true", help="start no controller (nothing is forwarded)")
    a("--rate", type=t.nonneg_int, default=400,
      help="Gets+Sets per second over all clients (open loop)")  # fmt: skip
    a("--duration", type=t.nonneg_float, default=20.0, help="seconds of load")
    a("--zipf", type=t.nonneg_float, default=0.99, help="Zipf skew of the keys (default 0.99)")
    a("--keys", type=t.positive_int, default=1000, help="distinct keys (default 1000)")
    a("--write-ratio", type=t.fraction, default=0.0, help="share of Sets (default 0)")
    a("--no-preload", action="store_true", help="do not Set every key before the run")
    a("--seed", type=int, default=1, help="the loadgens' seed (key popularity and sampling)")
    a("--loadgens", type=t.nonneg_int, default=1, help="clients running the loadgen (0 = all)")
    a("--loadgen-arg", action="append", default=[],
      help="one more kvswitch-loadgen argument, e.g. --loadgen-arg=--timeout-us=200")  # fmt: skip
    a("--history-arg", action="append", default=[],
      help="one more kvsrack.history argument, e.g. --history-arg=--timeout=0.0005")  # fmt: skip
    a(
        "--history-threads",
        type=t.nonneg_int,
        default=0,
        help="Python client threads per client host",
    )
    a("--history-keys", type=t.positive_int, default=4, help="keys the history clients share")
    a("--history-rate", type=t.nonneg_float, default=100.0, help="operations/s per history thread")
    a("--history-set-ratio", type=t.fraction, default=0.05, help="share of Sets in the histories")
    a("--read-tail", type=t.nonneg_float, default=0.0,
      help="seconds of Gets only after --duration (versions are read halfway through)")  # fmt: skip
    a("--restart-controller-at", type=t.nonneg_float, default=0.0, help="SIGKILL + restart at S s")
    a("--crash-controller-in-handoff", action="store_true",
      help="TESTS ONLY: the controller exits between release and activation of its first ring "
           "change (--add/--remove); the rack starts it again, which finishes the change")  # fmt: skip
    a("--kill", type=server_event("kill"), action="append", default=[], metavar="SERVER@S",
      help="SIGKILL SERVER's agent S seconds into the load (repeatable), e.g. s3@20; with "
           "--fabric a switch's process, e.g. sp1@8 or l2@20")  # fmt: skip
    a("--restart", type=server_event("restart"), action="append", default=[], metavar="SERVER@S",
      help="start SERVER's agent again S seconds into the load, e.g. s3@30; with --fabric a "
           "switch's process, empty: its controllers program it again")  # fmt: skip
    a("--add", type=server_event("add"), action="append", default=[], metavar="SERVER@S",
      help="add SERVER to the ring S seconds into the load (online; a server beyond --servers, "
           "e.g. s9 with --servers 8, is a spare until then)")  # fmt: skip
    a("--remove", type=server_event("remove"), action="append", default=[], metavar="SERVER@S",
      help="remove SERVER from the ring S seconds into the load (online), e.g. s3@20")  # fmt: skip
    a("--fabric", action="store_true",
      help="a leaf-spine fabric instead of one rack: --racks leaves of --servers servers each, "
           "--spines spines, a rack controller per leaf, the fabric controller (docs/fabric.md)")  # fmt: skip
    a("--spines", type=t.positive_int, default=2, help="spines of the fabric (default 2)")
    a("--racks-balance", action="store_true",
      help="fabric: the rack controllers balance their racks too (default: they observe only)")  # fmt: skip
    a("--racks", type=t.positive_int, default=4, help="racks (leaves) of the fabric (default 4)")
    a("--no-spine-level", action="store_true",
      help="fabric: the fabric controller routes only, no key goes to a spine (the baseline)")  # fmt: skip
    a("--test-fabric-variant", choices=VARIANTS, default="",
      help="TESTS ONLY: run a broken fabric controller (kvsrack.variants), which the fabric "
           "test must catch")  # fmt: skip
    a("--hold", action="store_true", help="no workload: keep the rack up until Ctrl-C")
    a("--out", type=Path, help="folder for rack.json, metrics.jsonl, logs, summary.json")
    return ap


def why_not() -> str:
    """'' when this machine can run the rack, else why not."""
    if os.geteuid() != 0:
        return "needs root (Mininet)"
    if importlib.util.find_spec("mininet") is None:
        return "needs Mininet's Python package (Debian: apt-get install mininet)"
    for tool in ("mnexec", "ip", "ethtool"):
        if shutil.which(tool) is None:
            return f"needs {tool} (Debian: apt-get install mininet ethtool iproute2)"
    return ""


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    why = why_not()
    if why:
        print(f"rack: {why}", file=sys.stderr)
        return 2
    if args.target == "bmv2" and args.arch != "v1model":
        print("rack: BMv2 runs v1model programs only (--arch tna needs --target softswitch)",
              file=sys.stderr)  # fmt: skip
        return 2
    if args.target == "bmv2":
        if shutil.which("simple_switch_grpc") is None:
            print("rack: --target bmv2 needs simple_switch_grpc on PATH", file=sys.stderr)
            return 2
        if bool(args.bmv2_json) != bool(args.p4info):
            print("rack: --bmv2-json and --p4info go together (p4c writes both)", file=sys.stderr)
            return 2
        if not args.bmv2_json and shutil.which("p4c-bm2-ss") is None:
            print("rack: --target bmv2 needs p4c-bm2-ss on PATH (or p4c's --bmv2-json and "
                  "--p4info)", file=sys.stderr)  # fmt: skip
            return 2
    events = [*args.kill, *args.restart, *args.add, *args.remove]
    if args.fabric:
        return run_fabric(args, events)
    why = check_events(events, args.servers)
    if why:
        print(f"rack: {why}", file=sys.stderr)
        return 2
    from kvsrack.rack import Rack, RackOptions  # Mininet: only once it is known to be there

    out = args.out or Path(f"/tmp/kvswitch-rack-{time.strftime('%Y%m%d-%H%M%S')}")
    opts = RackOptions(
        servers=args.servers, clients=args.clients, backend=args.backend, target=args.target,
        arch=args.arch,
        period=args.period, k=args.k, policy=args.policy, observe_only=args.observe_only,
        defines=args.defines, bmv2_json=args.bmv2_json, p4info=args.p4info,
        controller=not args.no_controller, agent_args=args.agent_arg,
        spares=spares_of(events, args.servers), crash_in_handoff=args.crash_controller_in_handoff,
        controller_args=[*([f"--bound={args.bound}"] if args.bound is not None else []),
                         *args.controller_arg],
    )  # fmt: skip
    work = Workload(
        rate=args.rate, duration=args.duration, zipf=args.zipf, keys=args.keys,
        write_ratio=args.write_ratio, preload=not args.no_preload,
        seed=args.seed, loadgens=args.loadgens, loadgen_args=args.loadgen_arg,
        history_args=args.history_arg, history_threads=args.history_threads,
        history_keys=args.history_keys, history_rate=args.history_rate,
        history_set_ratio=args.history_set_ratio, read_tail=args.read_tail,
        restart_controller_at=args.restart_controller_at, events=events,
    )  # fmt: skip
    banner = (f"rack: up ({args.servers} servers, {args.clients} clients, {args.target}, "
              f"{args.arch}); files in {out}")  # fmt: skip
    summary = run_deployment(
        Rack, opts, out, banner, args.hold, work, lambda rack: rack.controller.stop()
    )
    if isinstance(summary, int):
        return summary
    (out / "summary.json").write_text(json.dumps(summary) + "\n")
    print(f"rack: done; summary in {out / 'summary.json'}", flush=True)
    return 0


def run_deployment(
    cls: Callable[[Any, Path], Deployment],
    opts: Any,
    out: Path,
    banner: str,
    hold: bool,
    work: Workload,
    stop_controllers: Callable[[Any], object],
) -> dict[str, Any] | int:
    """``cls(opts, out)`` (a rack or a fabric) up and ``banner`` printed; the workload run on it
    (with ``hold``: held until Ctrl-C or SIGTERM) and its controllers stopped; torn down. The
    run's summary, with the controllers' exit status (``stop_controllers``) under
    "controller_status", or the exit status: 130 interrupted, 1 failed (one line)."""

    def on_signal(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    try:
        with cls(opts, out) as deployment:
            print(banner, flush=True)
            if hold:
                while True:
                    time.sleep(1)
            summary = scenarios.run(deployment, work)
            summary["controller_status"] = stop_controllers(deployment)
    except KeyboardInterrupt:
        print("rack: interrupted, torn down", file=sys.stderr)
        return 130
    except (RuntimeError, OSError, subprocess.CalledProcessError) as exc:
        print(f"rack: {exc}", file=sys.stderr)
        return 1
    return summary


def run_fabric(args: argparse.Namespace, events: list[ServerEvent]) -> int:
    """``--fabric``: the fabric up, the workload, lambda per period printed and plotted."""
    if args.add or args.remove or args.restart_controller_at or args.arch != "v1model":
        print("rack: --fabric takes no --add/--remove, controller restarts or --arch",
              file=sys.stderr)  # fmt: skip
        return 2
    switches = FabricLayout(args.spines, args.racks, args.servers, args.clients).topology().switches
    why = scenarios.check_switch_events(events, switches)
    if why:
        print(f"rack: {why}", file=sys.stderr)
        return 2
    if args.target == "bmv2" and not all(map(shutil.which, ("simple_switch_grpc", "p4c-bm2-ss"))):
        print("rack: --fabric --target bmv2 needs simple_switch_grpc and p4c-bm2-ss on PATH",
              file=sys.stderr)  # fmt: skip
        return 2
    from kvsrack import fabric as fab  # Mininet: only once it is known to be there

    out = args.out or Path(f"/tmp/kvswitch-fabric-{time.strftime('%Y%m%d-%H%M%S')}")
    opts = fab.FabricOptions(
        spines=args.spines, racks=args.racks, servers=args.servers, clients=args.clients,
        backend=args.backend, target=args.target, period=args.period, k=args.k,
        spine_level=not args.no_spine_level, racks_balance=args.racks_balance,
        agent_args=args.agent_arg,
        variant=args.test_fabric_variant,
    )  # fmt: skip
    work = Workload(
        rate=args.rate, duration=args.duration, zipf=args.zipf, keys=args.keys,
        write_ratio=args.write_ratio, preload=not args.no_preload, seed=args.seed,
        loadgens=args.loadgens, loadgen_args=args.loadgen_arg, history_args=args.history_arg,
        history_threads=args.history_threads, history_keys=args.history_keys,
        history_rate=args.history_rate, history_set_ratio=args.history_set_ratio,
        read_tail=args.read_tail, events=events,
    )  # fmt: skip
    banner = (f"rack: fabric up ({args.spines} spines, {args.racks} racks x {args.servers} "
              f"servers, {args.clients} clients, {args.target}, v1model); files in {out}")  # fmt: skip
    summary = run_deployment(
        fab.Fabric, opts, out, banner, args.hold, work, lambda fabric: fabric.stop_controllers()
    )
    if isinstance(summary, int):
        return summary
    rows = fab.periods(
        out, args.racks, summary["load_start"] + args.period, summary["load_end"], args.period
    )
    summary["periods"] = rows
    (out / "summary.json").write_text(json.dumps(summary) + "\n")
    print(fab.table(rows), flush=True)
    if rows:
        mode = "spine level off" if args.no_spine_level else "spine level on"
        title = (f"{args.spines} spines, {args.racks} x {args.servers} servers, "
                 f"Zipf {args.zipf}, {mode}, {args.target}")  # fmt: skip
        fab.plot(rows, out / "fabric.png", title)
        print(f"plot: {out / 'fabric.png'}")
    print(f"rack: done; summary in {out / 'summary.json'}", flush=True)
    return 0
