#!/usr/bin/env python3
"""One KVSwitch rack on Mininet: a ToR switch, M servers with agents, C clients, the controller.

Run it as a script with the project's venv (as root), e.g.::

    .venv/bin/python mininet/rack.py --servers 8 --clients 2 --duration 20 --out /tmp/rack

The switch is the software switch (``kvswitch switch``) started on the switch-side veth ends, or
BMv2's ``simple_switch_grpc`` with ``--target bmv2``. No Open vSwitch, no OpenFlow controller: the
KVSwitch controller (``kvswitch controller``) programs the switch over P4Runtime. Every process is
started and stopped by its PID; teardown removes only what this run created, also on Ctrl-C or a
failed start. See docs/rack.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from mininet.log import setLogLevel
from mininet.net import Mininet
from mininet.node import Host, Switch

from kvswitch.agent.backend_procs import free_port
from kvswitch.agent.control import AgentControl, ControlError
from kvswitch.bench.c_client_bench import find_loadgen
from kvswitch.controller.elastic import ask
from kvswitch.controller.program import ProgramError, cached_p4c_bm2_ss
from kvswitch.paths import p4src_dir
from kvswitch.protocol import KVS_PORT

PY = sys.executable
SWITCH_IP, SWITCH_MAC = "10.0.0.254", "02:00:00:00:00:fe"
# the data-plane build of each --arch (docs/tofino.md for the TNA one)
PROGRAMS = {"v1model": "kvswitch.p4", "tna": "kvswitch_tna.p4"}
HERE = Path(__file__).resolve().parent


# ---------------------------------------------------------------- addressing


@dataclass(frozen=True)
class Node:
    name: str
    ip: str
    mac: str
    port: int


def servers_of(count: int) -> list[Node]:
    """Servers s1..sM: 10.0.0.i, 02:00:00:00:00:ii, switch port i (ring order = file order)."""
    return [Node(f"s{i}", f"10.0.0.{i}", f"02:00:00:00:00:{i:02x}", i) for i in range(1, count + 1)]


def clients_of(count: int, first_port: int) -> list[Node]:
    """Clients c1..cC: 10.0.1.j, 02:00:00:00:01:jj, switch ports after the servers'."""
    return [
        Node(f"c{j}", f"10.0.1.{j}", f"02:00:00:00:01:{j:02x}", first_port + j - 1)
        for j in range(1, count + 1)
    ]


def rack_document(
    servers: list[Node], clients: list[Node], run_dir: Path, spares: frozenset[str] = frozenset()
) -> dict[str, Any]:
    """The rack file of the controller contract (docs/rack.md); ``spares`` are servers outside
    the first ring (``"member": false``, added later with --add)."""
    return {
        "kvs_port": KVS_PORT,
        "switch": {"ip": SWITCH_IP, "mac": SWITCH_MAC},
        "servers": [
            {
                **_node(s),
                "control": f"unix:{run_dir / (s.name + '.ctl')}",
                **({"member": False} if s.name in spares else {}),
            }
            for s in servers
        ],
        "clients": [_node(c) for c in clients],
    }


def _node(n: Node) -> dict[str, Any]:
    return {"name": n.name, "ip": n.ip, "mac": n.mac, "port": n.port}


def wait_tcp(port: int, proc: subprocess.Popen[Any], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with status {proc.returncode} (see its log)")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.1)
    raise RuntimeError(f"{what}: nothing listens on port {port} after {timeout:.0f} s")


# ---------------------------------------------------------------- processes


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen[Any]
    log: Path | None = None


@dataclass
class Procs:
    """Every process this run started, stopped by PID in reverse order of start."""

    items: list[Proc] = field(default_factory=list)
    record: Path | None = None  # every PID started, one per line (checked after teardown)

    def add(self, name: str, popen: subprocess.Popen[Any], log: Path | None = None) -> Proc:
        proc = Proc(name, popen, log)
        self.items.append(proc)
        self.note(popen.pid)
        return proc

    def note(self, pid: int) -> None:
        if self.record is not None:
            with self.record.open("a") as f:
                f.write(f"{pid}\n")

    @staticmethod
    def stop_one(proc: Proc, grace: float = 5.0) -> int | None:
        p = proc.popen
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p.pid, signal.SIGTERM)
            try:
                p.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p.pid, signal.SIGKILL)
                p.wait()
        return p.returncode

    def stop_all(self) -> None:
        while self.items:
            self.stop_one(self.items.pop())

    def remove(self, proc: Proc) -> None:
        self.items.remove(proc)


# ---------------------------------------------------------------- switches


class P4Switch(Switch):
    """A P4 switch process in the root namespace with one raw-socket port per link, started
    without a program (the controller sets it), with simple_switch_grpc's flags.

    ``program`` is the target's executable; the P4Runtime and Thrift ports are the rack's.
    """

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
                # the switch reads and writes whole frames: no offload on its side either
                self.cmd(f"ethtool --offload {intf.name} rx off tx off >/dev/null 2>&1")
                self.cmd(f"sysctl -qw net.ipv6.conf.{intf.name}.disable_ipv6=1")
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                self.command(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.procs.note(self.proc.pid)
        wait_tcp(self.grpc_port, self.proc, f"switch {self.name}")

    def stop_process(self) -> None:
        if self.proc is not None:
            Procs.stop_one(Proc(self.name, self.proc))
            self.proc = None

    def stop(self, deleteIntfs: bool = True) -> None:
        self.stop_process()
        super().stop(deleteIntfs)


class SoftSwitch(P4Switch):
    """``kvswitch switch``: this project's software P4 target."""

    program = (PY, "-m", "kvswitch", "switch")


class Bmv2Switch(P4Switch):
    """BMv2's ``simple_switch_grpc`` (where it is installed)."""

    program = ("simple_switch_grpc",)


# ---------------------------------------------------------------- the rack


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


class Rack:
    """The running rack. Use as a context manager: ``__exit__`` tears everything down."""

    def __init__(self, opts: RackOptions, out: Path) -> None:
        self.opts = opts
        self.out = out
        # the tag names the switch (its interfaces are t<tag>-ethN) and the socket folder (unix
        # socket paths must stay short: 108 bytes); it must not be another run's
        while True:
            self.tag = uuid.uuid4().hex[:6]
            self.run_dir = Path(f"/tmp/kvswitch-{self.tag}")
            if not self.run_dir.exists() and not Path(f"/sys/class/net/t{self.tag}-eth1").exists():
                break
        self.run_dir_made = False
        self.servers = servers_of(opts.servers + opts.spares)
        self.spares = frozenset(s.name for s in self.servers[opts.servers :])
        self.clients = clients_of(opts.clients, opts.servers + opts.spares + 1)
        self.admin = self.run_dir / "controller.admin"
        self.procs = Procs()
        self.net: Mininet | None = None
        self.grpc_port, self.thrift_port = free_port(), free_port()
        self.rack_file = out / "rack.json"
        self.metrics_file = out / "metrics.jsonl"
        self.controller: Proc | None = None
        self.controller_starts = 0
        self.agents: dict[str, Proc] = {}  # the running agent of each server, by server name
        self.agent_starts: dict[str, int] = {}
        self.echo: Callable[[str], None] = print

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
            json.dumps({"tag": self.tag, "switch": f"t{self.tag}", "run_dir": str(self.run_dir)})
        )
        self.run_dir.mkdir(mode=0o700)
        self.run_dir_made = True
        if self.opts.target == "bmv2" and not self.opts.bmv2_json:
            self.compile_for_bmv2()
        switch_cls = SoftSwitch if self.opts.target == "softswitch" else Bmv2Switch
        setLogLevel("warning")
        net = Mininet(
            controller=None, build=False, autoSetMacs=False, autoStaticArp=False, cleanup=False
        )
        self.net = net
        tor = net.addSwitch(
            f"t{self.tag}",
            cls=switch_cls,
            grpc_port=self.grpc_port,
            thrift_port=self.thrift_port,
            log_path=self.out / "switch.log",
            procs=self.procs,
        )
        for n in [*self.servers, *self.clients]:
            host = net.addHost(n.name, ip=f"{n.ip}/16", mac=n.mac)
            net.addLink(host, tor, port2=n.port)
        net.build()
        self.setup_hosts()
        net.start()
        self.write_run_file()
        self.rack_file.write_text(
            json.dumps(
                rack_document(self.servers, self.clients, self.run_dir, self.spares), indent=2
            )
            + "\n"
        )
        self.start_agents()
        if self.opts.controller:
            self.start_controller()
            self.wait_reachable()

    def write_run_file(self) -> None:
        """``OUT/run.json``: what teardown checks (tag, switch, socket folder) and what a test
        needs to act inside the rack: each host's PID (``mnexec -a PID`` enters its network
        namespace), the switch's Thrift and P4Runtime ports."""
        run = json.loads((self.out / "run.json").read_text())
        run["hosts"] = {n.name: self.host(n.name).pid for n in [*self.servers, *self.clients]}
        run["thrift_port"], run["grpc_port"] = self.thrift_port, self.grpc_port
        (self.out / "run.json").write_text(json.dumps(run) + "\n")

    def host(self, name: str) -> Host:
        assert self.net is not None
        return self.net.get(name)

    def setup_hosts(self) -> None:
        everyone = [*self.servers, *self.clients]
        for n in everyone:
            h = self.host(n.name)
            intf = h.defaultIntf().name
            h.cmd(f"ethtool --offload {intf} rx off tx off >/dev/null 2>&1")
            h.cmd(f"sysctl -qw net.ipv6.conf.{intf}.disable_ipv6=1")
            h.setARP(SWITCH_IP, SWITCH_MAC)
            for other in everyone:
                if other is not n:
                    h.setARP(other.ip, other.mac)

    def popen(self, host: str, args: list[str], log_name: str) -> Proc:
        log = self.out / log_name
        with log.open("wb") as f:
            p = self.host(host).popen(args, stdout=f, stderr=subprocess.STDOUT)
        return self.procs.add(log_name, p, log)

    def start_backend(self, s: Node) -> str | None:
        if self.opts.backend == "memory":
            return None
        if self.opts.backend == "memcached":
            port = 11211
            user = pwd.getpwuid(os.geteuid()).pw_name  # memcached as root wants -u
            cmd = ["memcached", "-l", "127.0.0.1", "-p", str(port), "-U", "0", "-m", "64",
                   "-u", user]  # fmt: skip
        else:
            port = 6379
            cmd = ["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--save", "",
                   "--appendonly", "no", "--dir", str(self.run_dir)]  # fmt: skip
        if shutil.which(cmd[0]) is None:
            raise RuntimeError(f"--backend {self.opts.backend}: {cmd[0]} is not installed")
        proc = self.popen(s.name, cmd, f"{s.name}-{self.opts.backend}.log")
        self.wait_in_host(s.name, port, proc)
        return f"127.0.0.1:{port}"

    def wait_in_host(self, host: str, port: int, proc: Proc, timeout: float = 20) -> None:
        probe = (
            "import socket,sys,time\n"
            f"end=time.time()+{timeout}\n"
            "while time.time()<end:\n"
            "  try:\n"
            f"    socket.create_connection(('127.0.0.1',{port}),0.2).close(); sys.exit(0)\n"
            "  except OSError: time.sleep(0.1)\n"
            "sys.exit(1)\n"
        )
        done = self.host(host).popen([PY, "-c", probe]).wait()
        if done != 0 or proc.popen.poll() is not None:
            raise RuntimeError(f"{proc.name}: not ready in {host} (see {proc.log})")

    def start_agents(self) -> None:
        self.backend_addrs = {s.name: self.start_backend(s) for s in self.servers}
        for s in self.servers:
            self.start_agent(s.name)
        for s in self.servers:
            self.wait_agent(s.name)

    def start_agent(self, name: str) -> Proc:
        """Start (or restart) the agent of server ``name``; its log is ``<name>-agent[-N].log``."""
        s = next(s for s in self.servers if s.name == name)
        args = [
            PY, "-m", "kvswitch", "agent", "--listen", s.ip, "--port", str(KVS_PORT),
            "--backend", self.opts.backend, "--switch-addr", f"{SWITCH_IP}:{KVS_PORT}",
            "--control-unix", str(self.run_dir / f"{s.name}.ctl"),
        ]  # fmt: skip
        backend_addr = self.backend_addrs.get(name)
        if backend_addr:
            args += ["--backend-addr", backend_addr]
        args += self.opts.agent_args
        n = self.agent_starts[name] = self.agent_starts.get(name, 0) + 1
        log = f"{name}-agent.log" if n == 1 else f"{name}-agent-{n}.log"
        self.agents[name] = self.popen(name, args, log)
        return self.agents[name]

    def wait_agent(self, name: str, timeout: float = 60) -> None:
        """Until the agent's control socket answers a ping (a killed agent's socket file may
        still be there: the new one replaces it)."""
        proc = self.agents[name]
        control = AgentControl.at(f"unix:{self.run_dir / (name + '.ctl')}", 0.5)
        deadline = time.monotonic() + timeout
        try:
            while True:
                try:
                    control.ping()
                    return
                except ControlError:
                    pass
                if proc.popen.poll() is not None or time.monotonic() > deadline:
                    text = proc.log.read_text() if proc.log else ""
                    raise RuntimeError(f"agent on {name} did not start: {text}")
                time.sleep(0.02)
        finally:
            control.close()

    def kill_agent(self, name: str) -> list[str]:
        """SIGKILL the agent of server ``name`` (by its PID): no goodbye, its memory is gone.
        Returns the keys (hex) it held live just before."""
        held: list[str] = []
        with (
            contextlib.suppress(ControlError),
            AgentControl.at(f"unix:{self.run_dir / (name + '.ctl')}", 0.5) as control,
        ):
            held = [k.hex() for k in control.keys()]  # noqa: SIM118 (an agent call)
        proc = self.agents.pop(name)
        os.kill(proc.popen.pid, signal.SIGKILL)
        proc.popen.wait()
        self.procs.remove(proc)
        return held

    def defines(self) -> list[str]:
        """The P4 defines of the program (-D, or the rack's sizes)."""
        o = self.opts
        return o.defines or [f"HOT_KEYS={o.k}", f"MAX_SERVERS={len(self.servers)}"]

    def compile_for_bmv2(self) -> None:
        """p4c-bm2-ss's JSON and P4Info of the program with the rack's defines, for every
        controller start of the run (kept in the user's cache: the next run skips the compile)."""
        source = p4src_dir() / PROGRAMS[self.opts.arch]
        defines = dict(d.split("=", 1) if "=" in d else (d, "1") for d in self.defines())
        try:
            json_path, info = cached_p4c_bm2_ss(source, defines)
        except ProgramError as exc:
            raise RuntimeError(str(exc)) from exc
        self.opts.bmv2_json, self.opts.p4info = str(json_path), str(info)

    def controller_command(self) -> list[str]:
        o = self.opts
        cmd = [
            PY, "-m", "kvswitch", "controller", "--rack", str(self.rack_file),
            "--p4", str(p4src_dir() / PROGRAMS[o.arch]),
            "--grpc-addr", f"127.0.0.1:{self.grpc_port}", "--device-id", "0",
            "--thrift-port", str(self.thrift_port), "--target", o.target,
            "--period", str(o.period), "--k", str(o.k), "--policy", o.policy,
            "--metrics", str(self.metrics_file), "--state", str(self.out / "controller.state"),
            "--admin", str(self.admin),
        ]  # fmt: skip
        for d in self.defines():
            cmd += ["-D", d]
        if o.observe_only:
            cmd.append("--observe-only")
        if o.crash_in_handoff and self.controller_starts == 1:
            cmd.append("--test-crash-in-handoff")
        if o.bmv2_json:
            cmd += ["--bmv2-json", o.bmv2_json]
        if o.p4info:
            cmd += ["--p4info", o.p4info]
        return cmd + o.controller_args

    def start_controller(self) -> None:
        """Start (or restart) the controller; its period lines are echoed as they come."""
        self.controller_starts += 1
        log = self.out / f"controller-{self.controller_starts}.log"
        p = subprocess.Popen(
            self.controller_command(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.controller = self.procs.add("controller", p, log)
        threading.Thread(target=self._pump, args=(p.stdout, log), daemon=True).start()

    def _pump(self, stream: IO[str] | None, log: Path) -> None:
        if stream is None:
            return
        with log.open("w") as f:
            for line in stream:
                f.write(line)
                f.flush()
                self.echo(line.rstrip("\n"))

    def controller_exited(self, wait: float = 0.0) -> bool:
        """The controller process has exited (within ``wait`` seconds)."""
        if self.controller is None:
            return False
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.controller.popen.wait(wait)
        return self.controller.popen.poll() is not None

    def restart_controller(self, pause: float, kill: bool = False) -> None:
        """Start the controller again ``pause`` seconds after it exited, or after a SIGKILL
        (``kill``: it gets no chance to tidy up, the restart test)."""
        if self.controller is not None:
            if kill:
                os.kill(self.controller.popen.pid, signal.SIGKILL)
            self.controller.popen.wait()
            self.procs.remove(self.controller)
            self.controller = None
        time.sleep(pause)
        self.start_controller()

    def stop_controller(self) -> int | None:
        if self.controller is None:
            return None
        code = Procs.stop_one(self.controller, grace=10)
        self.procs.remove(self.controller)
        self.controller = None
        return code

    def wait_reachable(self, timeout: float = 90) -> None:
        """Until a Get from the first client reaches the last server through the switch (the
        controller has set the pipeline and the forwarding entries)."""
        c, s = self.clients[0], self.servers[-1]
        deadline = time.monotonic() + timeout
        cmd = [PY, "-m", "kvswitch", "client", "--servers", f"{s.ip}:{KVS_PORT}",
               "--timeout", "0.3", "--retries", "0", "get", "probe"]  # fmt: skip
        said = ""
        while time.monotonic() < deadline:
            assert self.controller is not None
            if self.controller.popen.poll() is not None:
                raise RuntimeError(f"controller exited with {self.controller.popen.returncode}")
            p = self.host(c.name).popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
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
        if self.net is not None:
            net, self.net = self.net, None
            for sw in net.switches:  # before Mininet takes its interfaces away
                if isinstance(sw, P4Switch):
                    sw.stop_process()
            with contextlib.suppress(Exception):
                net.stop()
        if self.run_dir_made:  # the agents' sockets, a redis working folder
            shutil.rmtree(self.run_dir, ignore_errors=True)

    # -- workloads

    def server_list(self) -> str:
        """The clients' configured servers: the first ring's members (they learn later rings
        from the agents, docs/protocol.md "Membership")."""
        return ",".join(f"{s.ip}:{KVS_PORT}" for s in self.servers if s.name not in self.spares)

    def loadgen_args(self, w: Workload, client_index: int, extra: bool = True) -> list[str]:
        """The loadgen's command line (``extra``: with the --loadgen-arg ones; the preload is
        set-up, not workload, and goes without them)."""
        return [
            str(find_loadgen()), "--servers", self.server_list(),
            "--rate", str(max(1, w.rate // self.loadgen_count(w))),
            "--duration", str(w.duration + w.read_tail), "--zipf", str(w.zipf),
            "--keys", str(w.keys), "--write-ratio", str(w.write_ratio), "--timeout-ms", "500",
            "--seed", str(w.seed), "--json", "--quiet", *(w.loadgen_args if extra else ()),
        ]  # fmt: skip

    def loadgen_count(self, w: Workload) -> int:
        return max(1, min(w.loadgens or len(self.clients), len(self.clients)))

    def history_args(self, w: Workload, client_index: int) -> list[str]:
        out = self.out / f"{self.clients[client_index].name}-history.jsonl"
        return [
            PY, str(HERE / "history.py"), "--servers", self.server_list(),
            "--threads", str(w.history_threads), "--keys", str(w.history_keys),
            "--rate", str(w.history_rate), "--set-ratio", str(w.history_set_ratio),
            "--duration", str(w.duration), "--read-tail", str(w.read_tail),
            "--client", str(client_index), "--out", str(out), *w.history_args,
        ]  # fmt: skip

    def preload(self, w: Workload) -> None:
        args = self.loadgen_args(w, 0, extra=False)
        args[args.index("--duration") + 1] = "1"
        args[args.index("--rate") + 1] = "1"
        p = self.popen(self.clients[0].name, [*args, "--preload"], "preload.log")
        if p.popen.wait() != 0:
            raise RuntimeError(f"preload failed: {p.log.read_text() if p.log else ''}")

    def run(self, w: Workload) -> dict[str, Any]:
        """The workload: loadgens (and history clients) on the clients; returns the summary."""
        summary: dict[str, Any] = {"loadgen": [], "history": [], "failed": []}
        if w.preload and w.rate > 0:
            self.preload(w)
        summary["load_start"] = time.time()
        loadgens = [
            self.popen(c.name, self.loadgen_args(w, i), f"{c.name}-loadgen.json")
            for i, c in enumerate(self.clients[: self.loadgen_count(w)])
            if w.rate > 0
        ]
        histories = [
            self.popen(c.name, self.history_args(w, i), f"{c.name}-history.log")
            for i, c in enumerate(self.clients)
            if w.history_threads > 0
        ]
        start = time.monotonic()
        restarted = False
        pending = sorted(w.events, key=lambda e: e.at)
        summary["events"] = []
        while any(p.popen.poll() is None for p in [*loadgens, *histories]):
            elapsed = time.monotonic() - start
            while pending and elapsed >= pending[0].at:
                summary["events"].append(self.server_event(pending.pop(0), elapsed))
                elapsed = time.monotonic() - start
            if w.read_tail and "versions" not in summary and elapsed > w.duration + w.read_tail / 2:
                # the Sets have stopped, the keys are still read (hot): what do the holders hold?
                summary["versions"] = self.agent_versions()
                summary["versions_time"] = time.time()
            crashed = self.opts.crash_in_handoff and self.controller_exited()
            kill = bool(w.restart_controller_at) and elapsed >= w.restart_controller_at
            if not restarted and (crashed or kill):
                how = "exited (mid-handoff)" if crashed else "killed (SIGKILL)"
                self.echo(f"rack: controller {how} at {elapsed:.1f} s, restarting")
                self.restart_controller(w.restart_pause, kill=not crashed)
                restarted = True
                summary["restart_time"], summary["restart_mono"] = time.time(), time.monotonic()
            if elapsed > w.duration + w.read_tail + 120:
                raise RuntimeError("the workload did not end")
            time.sleep(0.1 if not pending else max(0.0, min(0.1, pending[0].at - elapsed)))
        summary["load_end"] = time.time()
        for p in [*loadgens, *histories]:
            if p.popen.returncode != 0:
                summary["failed"].append({"name": p.name, "status": p.popen.returncode})
        for p in loadgens:
            if p.log is not None and p.popen.returncode == 0:
                summary["loadgen"].append(json.loads(p.log.read_text().strip().splitlines()[-1]))
        summary["history"] = [str(self.out / f"{c.name}-history.jsonl") for c in self.clients][
            : len(histories)
        ]
        if "versions" not in summary:
            time.sleep(w.settle)
            summary["versions"] = self.agent_versions()
            summary["versions_time"] = time.time()
        return summary

    def server_event(self, event: ServerEvent, elapsed: float) -> dict[str, Any]:
        """Kill or restart a server's agent now; what happened, when (Unix time)."""
        record: dict[str, Any] = {"action": event.action, "server": event.server}
        if event.action in ("add", "remove"):
            record["time"], record["mono"] = time.time(), time.monotonic()
            try:
                answer = ask(str(self.admin), event.action, event.server)
            except (OSError, ValueError) as exc:
                answer = {"ok": False, "error": str(exc)}
            record["done"], record["done_mono"] = time.time(), time.monotonic()
            record["answer"] = answer
            if not answer.get("ok") and self.opts.crash_in_handoff and self.controller_exited(5):
                self.echo(f"rack: {event.action} {event.server}: the controller died under it")
                return record
            if not answer.get("ok"):
                raise RuntimeError(f"--{event.action} {event.server}: {answer.get('error')}")
            self.echo(f"rack: {event.action} {event.server} at {elapsed:.2f} s: {answer}")
            return record
        if event.action == "kill":
            record["held"] = self.kill_agent(event.server)
            record["time"], record["mono"] = time.time(), time.monotonic()
        else:
            # started (Unix and monotonic time: the histories'); "ready": its control answers
            record["time"], record["mono"] = time.time(), time.monotonic()
            self.start_agent(event.server)
            self.wait_agent(event.server)
            record["ready"] = time.time()
        self.echo(f"rack: {event.action} {event.server} at {elapsed:.2f} s")
        return record

    def agent_versions(self) -> dict[str, dict[str, list[Any]]]:
        """Every running agent's stored versions (key hex -> [epoch, ver, live]) over its
        control API (a killed one is left out)."""
        out: dict[str, dict[str, list[Any]]] = {}
        for s in self.servers:
            if s.name not in self.agents:
                continue
            with AgentControl.at(f"unix:{self.run_dir / (s.name + '.ctl')}") as ctl:
                out[s.name] = {k.hex(): [v.epoch, v.ver, v.live] for k, v in ctl.versions().items()}
        return out


@dataclass(frozen=True)
class ServerEvent:
    """``--kill s3@20``: SIGKILL server s3's agent 20 s into the load; ``--restart s3@30``:
    start it again (an empty memory backend; memcached/Redis keep running); ``--add s9@10``:
    bring s9 into the ring online (a server after --servers is a spare until then);
    ``--remove s3@20``: take s3 out of the ring online (its agent keeps running, owning nothing;
    after ``--kill s3@T``: removed while down, its keys' new owners get what its replicas hold).
    """

    action: str  # "kill", "restart", "add" or "remove"
    server: str
    at: float


def server_event(action: str) -> Callable[[str], ServerEvent]:
    def parse(text: str) -> ServerEvent:
        name, sep, at = text.partition("@")
        try:
            seconds = float(at)
        except ValueError:
            seconds = -1.0
        if not sep or not re.fullmatch(r"s[1-9][0-9]*", name) or not 0 <= seconds < 1e6:
            raise argparse.ArgumentTypeError(f"{text!r}: expected SERVER@SECONDS, e.g. s3@20")
        return ServerEvent(action, name, seconds)

    return parse


@dataclass
class Workload:
    rate: int = 400
    duration: float = 20.0
    zipf: float = 0.99
    keys: int = 1000
    write_ratio: float = 0.0
    preload: bool = True
    seed: int = 1
    loadgens: int = 1
    loadgen_args: list[str] = field(default_factory=list)  # more for every loadgen
    history_args: list[str] = field(default_factory=list)  # more for every history client
    history_threads: int = 0
    history_keys: int = 4
    history_rate: float = 100.0
    history_set_ratio: float = 0.05
    read_tail: float = 0.0
    restart_controller_at: float = 0.0
    restart_pause: float = 1.0
    settle: float = 1.0
    events: list[ServerEvent] = field(default_factory=list)


# ---------------------------------------------------------------- command line


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="mininet/rack.py", description=__doc__.split("\n")[0])
    a = ap.add_argument
    a("--servers", type=int, default=8, help="servers M (default 8)")
    a("--clients", type=int, default=2, help="clients C (default 2)")
    a("--backend", choices=("memory", "memcached", "redis"), default="memory")
    a("--target", choices=("softswitch", "bmv2"), default="softswitch")
    a("--arch", choices=sorted(PROGRAMS), default="v1model",
      help="data-plane build: v1model (p4src/kvswitch.p4) or tna (p4src/kvswitch_tna.p4, "
           "software switch only)")  # fmt: skip
    a("--bmv2-json", help="p4c-compiled BMv2 JSON of p4src/kvswitch.p4 (--target bmv2; "
      "default: the controller compiles it with p4c-bm2-ss and the -D defines)")  # fmt: skip
    a("--p4info", help="the P4Info text file p4c wrote with it (--target bmv2)")
    a("--period", type=float, default=1.0, help="controller period in seconds")
    a("--k", type=int, default=64, help="hot-key slots the controller uses")
    a("--policy", default="balance", help="placement policy (ring, least-loaded, balance)")
    a("--observe-only", action="store_true", help="controller reports but installs no hot keys")
    a("--bound", type=float, help="the controller's max/mean bound (its default: 0.30)")
    a("--controller-arg", action="append", default=[],
      help="one more controller argument, e.g. --controller-arg=--gamma=0.5")  # fmt: skip
    a("-D", dest="defines", action="append", default=[],
      help="P4 define NAME=VAL (default: HOT_KEYS=<k> MAX_SERVERS=<servers>)")  # fmt: skip
    a("--agent-arg", action="append", default=[],
      help="one more agent argument, e.g. --agent-arg=--test-no-trust=network-push")  # fmt: skip
    a("--no-controller", action="store_true", help="start no controller (nothing is forwarded)")
    a("--rate", type=int, default=400, help="Gets+Sets per second over all clients (open loop)")
    a("--duration", type=float, default=20.0, help="seconds of load")
    a("--zipf", type=float, default=0.99)
    a("--keys", type=int, default=1000)
    a("--write-ratio", type=float, default=0.0)
    a("--no-preload", action="store_true", help="do not Set every key before the run")
    a("--seed", type=int, default=1, help="the loadgens' seed (key popularity and sampling)")
    a("--loadgens", type=int, default=1, help="clients running the loadgen (0 = all)")
    a("--loadgen-arg", action="append", default=[],
      help="one more kvswitch-loadgen argument, e.g. --loadgen-arg=--timeout-us=200")  # fmt: skip
    a("--history-arg", action="append", default=[],
      help="one more mininet/history.py argument, e.g. --history-arg=--timeout=0.0005")  # fmt: skip
    a("--history-threads", type=int, default=0, help="Python client threads per client host")
    a("--history-keys", type=int, default=4, help="keys the history clients share")
    a("--history-rate", type=float, default=100.0, help="operations/s per history thread")
    a("--history-set-ratio", type=float, default=0.05, help="share of Sets in the histories")
    a("--read-tail", type=float, default=0.0,
      help="seconds of Gets only after --duration (versions are read halfway through)")  # fmt: skip
    a("--restart-controller-at", type=float, default=0.0, help="SIGKILL + restart at S s")
    a("--crash-controller-in-handoff", action="store_true",
      help="TESTS ONLY: the controller exits between release and activation of its first ring "
           "change (--add/--remove); the rack starts it again, which finishes the change")  # fmt: skip
    a("--kill", type=server_event("kill"), action="append", default=[], metavar="SERVER@S",
      help="SIGKILL SERVER's agent S seconds into the load (repeatable), e.g. s3@20")  # fmt: skip
    a("--restart", type=server_event("restart"), action="append", default=[], metavar="SERVER@S",
      help="start SERVER's agent again S seconds into the load, e.g. s3@30")  # fmt: skip
    a("--add", type=server_event("add"), action="append", default=[], metavar="SERVER@S",
      help="add SERVER to the ring S seconds into the load (online; a server beyond --servers, "
           "e.g. s9 with --servers 8, is a spare until then)")  # fmt: skip
    a("--remove", type=server_event("remove"), action="append", default=[], metavar="SERVER@S",
      help="remove SERVER from the ring S seconds into the load (online), e.g. s3@20")  # fmt: skip
    a("--hold", action="store_true", help="no workload: keep the rack up until Ctrl-C")
    a("--out", type=Path, help="folder for rack.json, metrics.jsonl, logs, summary.json")
    return ap


def spares_of(events: list[ServerEvent], servers: int) -> int:
    """How many servers beyond ``servers`` the --add events name (s9 with 8: one spare)."""
    top = max((int(e.server[1:]) for e in events if e.action == "add"), default=0)
    return max(0, top - servers)


def check_events(events: list[ServerEvent], servers: int) -> str:
    """'' when every event names a server of the rack and, in time order, kills only a running
    agent, restarts only a killed one, adds only a non-member whose agent runs and removes only a
    member (at least one left; a killed one too: removed while down); else why not. Servers beyond ``servers`` exist only if some --add names
    them (spares)."""
    total = servers + spares_of(events, servers)
    names = {f"s{i + 1}" for i in range(total)}
    running = set(names)
    members = {f"s{i + 1}" for i in range(servers)}
    for e in sorted(events, key=lambda e: e.at):
        if e.server not in names:
            return f"--{e.action} {e.server}: the rack has servers s1 .. s{total}"
        if e.action in ("kill", "restart"):
            if (e.action == "kill") != (e.server in running):
                state = "not running" if e.action == "kill" else "running"
                return f"--{e.action} {e.server}@{e.at:g}: its agent is {state} then"
            running ^= {e.server}
            continue
        if (e.action == "add") == (e.server in members):
            state = "already" if e.action == "add" else "not"
            return f"--{e.action} {e.server}@{e.at:g}: it is {state} a member then"
        if e.action == "add" and e.server not in running:
            return f"--{e.action} {e.server}@{e.at:g}: its agent is not running then"
        members ^= {e.server}
        if not members:
            return f"--remove {e.server}@{e.at:g}: the ring would have no member"
    return ""


def why_not() -> str:
    """'' when this machine can run the rack, else why not."""
    if os.geteuid() != 0:
        return "needs root (Mininet)"
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
    why = check_events(events, args.servers)
    if why:
        print(f"rack: {why}", file=sys.stderr)
        return 2
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
    interrupted: list[int] = []

    def on_signal(signum: int, _frame: object) -> None:
        interrupted.append(signum)
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    try:
        with Rack(opts, out) as rack:
            print(f"rack: up ({args.servers} servers, {args.clients} clients, {args.target}, "
                  f"{args.arch}); "
                  f"files in {out}", flush=True)  # fmt: skip
            if args.hold:
                while True:
                    time.sleep(1)
            summary = rack.run(work)
            summary["controller_status"] = rack.stop_controller()
            (out / "summary.json").write_text(json.dumps(summary) + "\n")
            print(f"rack: done; summary in {out / 'summary.json'}", flush=True)
    except KeyboardInterrupt:
        print("rack: interrupted, torn down", file=sys.stderr)
        return 130
    except (RuntimeError, OSError, subprocess.CalledProcessError) as exc:
        print(f"rack: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
