"""One KVSwitch rack on Mininet: a ToR switch, M servers with agents, C clients, the controller
(docs/rack.md).

The switch is the software switch (``kvswitch switch``) started on the switch-side veth ends, or
BMv2's ``simple_switch_grpc`` (``target="bmv2"``). No Open vSwitch, no OpenFlow controller: the
KVSwitch controller (``kvswitch controller``) programs the switch over P4Runtime. Start-up, files
and teardown are :class:`~kvsrack.deployment.Deployment`'s.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from subprocess import DEVNULL, PIPE
from typing import Any

from kvsrack import topology
from kvsrack.deployment import Deployment
from kvsrack.launchers import Agents, Controller, compile_for_bmv2, controller_command
from kvsrack.launchers import probe_command as probe
from kvsrack.network import SwitchNode
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


class Rack(Deployment):
    """The running rack. Use as a context manager: ``__exit__`` tears everything down."""

    def __init__(self, opts: RackOptions, out: Path) -> None:
        super().__init__(topology.rack(opts.servers, opts.clients, opts.spares), out)
        self.opts = opts
        self.admin = self.run_dir / "controller.admin"
        self.grpc_port, self.thrift_port = free_port(), free_port()
        self.rack_file = out / "rack.json"
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

    def switch_nodes(self) -> dict[str, SwitchNode]:
        """The ToR on the target; on BMv2, the program compiled first (once per run)."""
        o = self.opts
        if o.target == "bmv2" and not o.bmv2_json:
            o.bmv2_json, o.p4info = compile_for_bmv2(o.arch, self.defines())
        log = self.out / "switch.log"
        return {"tor": SwitchNode(TARGETS[o.target], self.grpc_port, self.thrift_port, log)}

    def start_roles(self) -> None:
        """The rack file, the agents, then the controller, until a client reaches a server."""
        topology.rack_file(self.topology, self.run_dir).write(self.rack_file)
        self.agents.start_all()
        if self.opts.controller:
            self.controller.start()
            self.wait_reachable()

    def run_info(self) -> dict[str, Any]:
        return {"thrift_port": self.thrift_port, "grpc_port": self.grpc_port}

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
        controller has set the pipeline and the forwarding entries). Probes (a client process
        each) begin once the controller says it started: beside its start-up they only took
        CPU from it."""
        c, s = self.topology.clients[0], self.topology.servers[-1]
        deadline = time.monotonic() + timeout
        said = ""
        while time.monotonic() < deadline:
            proc = self.controller.proc
            assert proc is not None
            if proc.popen.poll() is not None:
                raise RuntimeError(f"controller exited with {proc.popen.returncode}")
            if not self.controller.started.wait(0.05):
                continue
            p = self.network.host(c.name).popen(probe(s), stdout=DEVNULL, stderr=PIPE)
            _, err = p.communicate()
            if p.returncode in (0, 1):  # found or not found: either way the server answered
                return
            said = err.decode(errors="replace").strip()
            time.sleep(0.3)
        raise RuntimeError(f"{s.name} not reachable from {c.name} after {timeout:.0f} s: {said}")
