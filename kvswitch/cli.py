"""The one console entry point: ``kvswitch <subcommand> [args...]``.

Each subcommand lives in the package that owns it and is imported only when chosen, so that
``kvswitch switch`` never loads the controller and ``kvswitch agent`` never loads the switch.
A subcommand's target is a ``main(argv: list[str]) -> int`` function.
"""

from __future__ import annotations

import importlib
import sys

# name -> ("module:function", one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "switch": ("softswitch.main:main", "software P4 switch (simple_switch_grpc-compatible flags)"),
    "p4c": ("softswitch.p4c:main", "P4Info, device config and BMv2-style JSON from P4 source"),
    "agent": ("kvswitch.agent.main:main", "KVS server agent in front of a backend store"),
    "client": ("kvswitch.client.oneshot:main", "one-shot get/set/delete against a rack"),
    "controller": ("kvswitch.controller.main:main", "switch-CPU control loop"),
    "fabric-controller": (
        "kvswitch.controller.fabric_main:main",
        "leaf-spine fabric: fabric-hot keys on the spines, steering on the leaves",
    ),
    "membership": (
        "kvswitch.controller.elastic:main",
        "show the ring; add or remove a server online (the controller's --admin socket)",
    ),
    "sim": ("kvswitch.bench.sim_cli:main", "trace-driven simulator and paper figures"),
    "bench": ("kvswitch.bench.benchmarks:main", "benchmarks that print their figures"),
    "demo": ("kvswitch.bench.demo:main", "start a rack, run a skewed workload, plot the balance"),
    "rack": (
        "kvsrack.cli:main",
        "one Mininet rack under a workload and faults (the demo's runner)",
    ),
}


def usage() -> str:
    width = max(map(len, SUBCOMMANDS))
    lines = ["usage: kvswitch <subcommand> [args...]", "", "subcommands:"]
    lines += [f"  {name:<{width}}  {text}" for name, (_, text) in SUBCOMMANDS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help", "help"):
        print(usage())
        return 0
    name, rest = args[0], args[1:]
    if name not in SUBCOMMANDS:
        print(f"kvswitch: unknown subcommand {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    module_name, func_name = SUBCOMMANDS[name][0].split(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            print(f"kvswitch: subcommand {name!r} is not available in this build", file=sys.stderr)
            return 2
        raise
    return int(getattr(module, func_name)(rest) or 0)
