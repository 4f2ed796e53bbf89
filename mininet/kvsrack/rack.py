"""One KVSwitch rack on Mininet, up and torn down: a ToR switch, M servers with agents, C clients,
the controller (docs/rack.md).

The switch is the software switch (``kvswitch switch``) started on the switch-side veth ends, or
BMv2's ``simple_switch_grpc`` (``target="bmv2"``). No Open vSwitch, no OpenFlow controller: the
KVSwitch controller (``kvswitch controller``) programs the switch over P4Runtime. Every process is
started and stopped by its PID; teardown removes only what this run created, also on Ctrl-C or a
failed start.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import signal
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from subprocess import DEVNULL, PIPE

from kvsrack import topology
from kvsrack.launchers import Agents, Controller, compile_for_bmv2, controller_command
from kvsrack.launchers import probe_command as probe
from kvsrack.network import Network, SwitchNode, switch_name
from kvsrack.procs import Proc, Procs
from kvsrack.switches import TARGETS
from kvswitch.agent.backend_procs import free_port


@dataclass
class RackOptions:
    servers: int = 8
    clients: int = 2
    backend: str = "memory"
    target: str = "softswitch"
    arch: str = "v1model"  # the data-plane build: kvswitch.p4 (v1model) or kvswitch_tna.p4 (tna)
    period: float = 1.0
    k: int = 64
    policy: str = "balance"
    observe_only: bool = False
    defines: list[str] = field(default_factory=list)
    bmv2_json: str | None = None
    p4info: str | None = None
    controller: bool = True
    controller_args: list[str] = field(default_factory=list)
    agent_args: list[str] = field(default_factory=list)
    # servers after the first ``servers`` ones, outside the first ring until --add (s9 with
    # --servers 8 --add s9@T): running agents, switch entries, not members
    spares: int = 0
    # TESTS ONLY: the first controller exits in the middle of its first ring change (between
    # release and activation); the rack starts it again
    crash_in_handoff: bool = False


def new_tag() -> tuple[str, Path]:
    """A tag no other run uses, and the run's socket folder. The tag names the switch (its
    interfaces are t<tag>-ethN) and the folder (unix socket paths must stay short: 108 bytes)."""
    while True:
        tag = uuid.uuid4().hex[:6]
        run_dir = Path(f"/tmp/kvswitch-{tag}")
        if not run_dir.exists() and not Path(f"/sys/class/net/{switch_name(tag, 0)}-eth1").exists():
            return tag, run_dir


class Rack:
    """The running rack. Use as a context manager: ``__exit__`` tears everything down."""

    def __init__(self, opts: RackOptions, out: Path) -> None:
        self.opts = opts
        self.out = out
        self.tag, self.run_dir = new_tag()
        self.run_dir_made = False
        self.topology = topology.rack(opts.servers, opts.clients, opts.spares)
        self.admin = self.run_dir / "controller.admin"
        self.procs = Procs()
        self.network = Network(self.topology, self.tag)
        self.grpc_port, self.thrift_port = free_port(), free_port()
        self.rack_file = out / "rack.json"
        self.echo: Callable[[str], None] = print
        self.agents = Agents(
            self.procs,
            self.network.host,
            self.topology,
            backend=opts.backend,
            run_dir=self.run_dir,
            out=out,
            extra=opts.agent_args,
        )
        self.controller = Controller(
            self.procs,
            out,
            self.controller_command,
            lambda line: self.echo(line),
            crash_in_handoff=opts.crash_in_handoff,
        )

    # -- start-up

    def __enter__(self) -> Rack:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        self.procs.record = self.out / "pids.txt"
        self.procs.record.write_text("")
        (self.out / "run.json").write_text(
            json.dumps(
                {
                    "tag": self.tag,
                    "switch": switch_name(self.tag, 0),
                    "run_dir": str(self.run_dir),
                }
            )
        )
        self.run_dir.mkdir(mode=0o700)
        self.run_dir_made = True
        if self.opts.target == "bmv2" and not self.opts.bmv2_json:
            self.opts.bmv2_json, self.opts.p4info = compile_for_bmv2(self.opts.arch, self.defines())
        tor = SwitchNode(
            TARGETS[self.opts.target], self.grpc_port, self.thrift_port, self.out / "switch.log"
        )
        self.network.start({"tor": tor}, self.procs)
        self.write_run_file()
        topology.rack_file(self.topology, self.run_dir).write(self.rack_file)
        self.agents.start_all()
        if self.opts.controller:
            self.controller.start()
            self.wait_reachable()

    def write_run_file(self) -> None:
        """``OUT/run.json``: what teardown checks (tag, switch, socket folder) and what a test
        needs to act inside the rack: each host's PID (``mnexec -a PID`` enters its network
        namespace), the switch's Thrift and P4Runtime ports."""
        run = json.loads((self.out / "run.json").read_text())
        run["hosts"] = {n.name: self.network.host(n.name).pid for n in self.topology.hosts}
        run["thrift_port"], run["grpc_port"] = self.thrift_port, self.grpc_port
        (self.out / "run.json").write_text(json.dumps(run) + "\n")

    def start_in(self, host: str, args: list[str], log_name: str) -> Proc:
        """``args`` inside host ``host``, its output to ``OUT/log_name``."""
        return self.procs.start_in(self.network.host(host), args, self.out / log_name)

    def defines(self) -> list[str]:
        """The P4 defines of the program (-D, or the rack's sizes)."""
        o = self.opts
        return o.defines or [f"HOT_KEYS={o.k}", f"MAX_SERVERS={len(self.topology.servers)}"]

    def controller_command(self, start: int) -> list[str]:
        """The controller's command line at its ``start``-th start."""
        o = self.opts
        return controller_command(
            rack_file=self.rack_file,
            arch=o.arch,
            target=o.target,
            grpc_port=self.grpc_port,
            thrift_port=self.thrift_port,
            period=o.period,
            k=o.k,
            policy=o.policy,
            out=self.out,
            admin=self.admin,
            defines=self.defines(),
            observe_only=o.observe_only,
            crash_in_handoff=o.crash_in_handoff and start == 1,
            bmv2_json=o.bmv2_json,
            p4info=o.p4info,
            extra=o.controller_args,
        )

    def wait_reachable(self, timeout: float = 90) -> None:
        """Until a Get from the first client reaches the last server through the switch (the
        controller has set the pipeline and the forwarding entries)."""
        c, s = self.topology.clients[0], self.topology.servers[-1]
        deadline = time.monotonic() + timeout
        said = ""
        while time.monotonic() < deadline:
            proc = self.controller.proc
            assert proc is not None
            if proc.popen.poll() is not None:
                raise RuntimeError(f"controller exited with {proc.popen.returncode}")
            p = self.network.host(c.name).popen(probe(s), stdout=DEVNULL, stderr=PIPE)
            _, err = p.communicate()
            if p.returncode in (0, 1):  # found or not found: either way the server answered
                return
            said = err.decode(errors="replace").strip()
            time.sleep(0.3)
        raise RuntimeError(f"{s.name} not reachable from {c.name} after {timeout:.0f} s: {said}")

    # -- teardown

    def close(self) -> None:
        # a second Ctrl-C or SIGTERM must not cut the teardown short
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        with contextlib.suppress(Exception):
            self.procs.stop_all()
        self.network.close()
        if self.run_dir_made:  # the agents' sockets, a redis working folder
            shutil.rmtree(self.run_dir, ignore_errors=True)
