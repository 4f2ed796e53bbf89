"""The P4 switches as Mininet switch nodes: a switch process in the root namespace with one
raw-socket port per link, started without a program (the controller sets it), with
simple_switch_grpc's flags. No Open vSwitch, no OpenFlow."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from mininet.node import Switch

from kvsrack.procs import Proc, Procs, wait_tcp
from kvswitch.ports import port_offloads_off


class P4Switch(Switch):
    """``program`` is the target's executable; the P4Runtime and Thrift ports are the run's."""

    program: tuple[str, ...] = ()

    def __init__(
        self, name: str, grpc_port: int = 9559, thrift_port: int = 9090, **params: Any
    ) -> None:
        self.log_path: Path = params.pop("log_path")
        self.procs: Procs = params.pop("procs")
        params.update(inNamespace=False, dpid="1")
        super().__init__(name, **params)
        self.grpc_port, self.thrift_port = grpc_port, thrift_port
        self.proc: subprocess.Popen[bytes] | None = None

    def ports_by_intf(self) -> dict[str, int]:
        return {intf.name: port for intf, port in self.ports.items() if intf.name != "lo"}

    def command(self) -> list[str]:
        ordered = sorted(self.ports_by_intf().items(), key=lambda kv: kv[1])
        port_args = [a for intf, port in ordered for a in ("-i", f"{port}@{intf}")]
        return [
            *self.program, "--no-p4", *port_args, "--device-id", "0",
            "--thrift-port", str(self.thrift_port),
            "--", "--grpc-server-addr", f"127.0.0.1:{self.grpc_port}",
        ]  # fmt: skip

    def start(self, controllers: list[Any]) -> None:
        for intf in self.intfList():
            if intf.name != "lo":
                self.cmd(" ".join(port_offloads_off(intf.name)) + " >/dev/null 2>&1")
                self.cmd(f"sysctl -qw net.ipv6.conf.{intf.name}.disable_ipv6=1")
        self.start_process("wb")

    def start_process(self, mode: str = "ab") -> None:
        """The switch process on the node's ports, without a program (its controller sets it),
        until its P4Runtime port answers; ``mode`` "ab": its log goes on (a restart)."""
        with self.log_path.open(mode) as log:
            self.proc = subprocess.Popen(
                self.command(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.procs.note(self.proc.pid)
        wait_tcp(self.grpc_port, self.proc, f"switch {self.name}")

    def kill_process(self) -> None:
        """SIGKILL the switch process (a crash: no goodbye to its controllers); its interfaces
        stay, so :meth:`start_process` starts it again on the same ports."""
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            self.proc = None

    def stop_process(self) -> None:
        if self.proc is not None:
            Procs.stop_one(Proc(self.name, self.proc))
            self.proc = None

    def stop(self, deleteIntfs: bool = True) -> None:
        self.stop_process()
        super().stop(deleteIntfs)


class SoftSwitch(P4Switch):
    """``kvswitch switch``: this project's software P4 target."""

    program = (sys.executable, "-m", "kvswitch", "switch")


class Bmv2Switch(P4Switch):
    """BMv2's ``simple_switch_grpc`` (where it is installed)."""

    program = ("simple_switch_grpc",)


# the switch node of each --target
TARGETS: dict[str, type[P4Switch]] = {"softswitch": SoftSwitch, "bmv2": Bmv2Switch}
