"""The roles' processes: each one's command line, and the life cycle of those a run starts again
(agents killed and restarted, the controller killed or crashed and restarted). Every process is
started through :class:`~kvsrack.procs.Procs`, so it is recorded and stopped by PID.

Nothing here knows the topology's shape: the rack (and a fabric) says which host runs what.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

from kvsrack.procs import InHost, Proc, Procs, wait_tcp_in
from kvsrack.topology import Node, Topology, control_socket
from kvswitch.agent.backend_procs import memcached_command, redis_command
from kvswitch.agent.control import AgentControl, ControlError
from kvswitch.bench.c_client_bench import find_loadgen
from kvswitch.controller.program import ProgramError, cached_p4c_bm2_ss
from kvswitch.paths import p4src_dir
from kvswitch.protocol import KVS_PORT

PY = sys.executable
# the data-plane build of each --arch (docs/tofino.md for the TNA one)
PROGRAMS = {"v1model": "kvswitch.p4", "tna": "kvswitch_tna.p4"}


def program_source(arch: str) -> Path:
    """The P4 program of the ``arch`` build (from the installed package or the checkout)."""
    return p4src_dir() / PROGRAMS[arch]


def compile_for_bmv2(arch: str, defines: Sequence[str]) -> tuple[str, str]:
    """p4c-bm2-ss's JSON and P4Info of the program with ``defines`` (NAME=VAL), for every
    controller start of the run (kept in the user's cache: the next run skips the compile)."""
    values = dict(d.split("=", 1) if "=" in d else (d, "1") for d in defines)
    try:
        json_path, info = cached_p4c_bm2_ss(program_source(arch), values)
    except ProgramError as exc:
        raise RuntimeError(str(exc)) from exc
    return str(json_path), str(info)


# ---------------------------------------------------------------- backends and agents


def start_backend(
    procs: Procs, host: InHost, server: str, kind: str, run_dir: Path, out: Path
) -> str | None:
    """memcached or Redis inside ``host`` on its loopback (``kind`` memory: none); its address."""
    if kind == "memory":
        return None
    if kind == "memcached":
        port = 11211
        cmd = memcached_command(port)
    else:
        port = 6379
        cmd = redis_command(port, run_dir)
    if shutil.which(cmd[0]) is None:
        raise RuntimeError(f"--backend {kind}: {cmd[0]} is not installed")
    proc = procs.start_in(host, cmd, out / f"{server}-{kind}.log")
    wait_tcp_in(host, server, port, proc)
    return f"127.0.0.1:{port}"


def agent_command(
    server: Node,
    backend: str,
    switch_ip: str,
    control: Path,
    backend_addr: str | None,
    extra: Sequence[str] = (),
) -> list[str]:
    """``kvswitch agent`` of ``server``: listening on its address, replying through the switch,
    its control API on the Unix socket ``control``."""
    args = [
        PY, "-m", "kvswitch", "agent", "--listen", server.ip, "--port", str(KVS_PORT),
        "--backend", backend, "--switch-addr", f"{switch_ip}:{KVS_PORT}",
        "--control-unix", str(control),
    ]  # fmt: skip
    if backend_addr:
        args += ["--backend-addr", backend_addr]
    return args + list(extra)


class Agents:
    """The agents of the topology's servers: started, waited for, killed and started again by
    server name; the running one of each server in :attr:`running`."""

    def __init__(
        self,
        procs: Procs,
        host: Callable[[str], InHost],
        topo: Topology,
        *,
        backend: str,
        run_dir: Path,
        out: Path,
        extra: Sequence[str] = (),
    ) -> None:
        self.procs, self.host, self.topo, self.servers = procs, host, topo, topo.servers
        self.backend, self.extra = backend, list(extra)
        self.run_dir, self.out = run_dir, out
        self.running: dict[str, Proc] = {}  # the running agent of each server, by server name
        self.starts: dict[str, int] = {}
        self.backend_addrs: dict[str, str | None] = {}

    def control(self, name: str) -> Path:
        return control_socket(self.run_dir, name)

    def start_all(self) -> None:
        """Every server's backend (if any), then every agent; until each control answers."""
        self.backend_addrs = {
            s.name: start_backend(
                self.procs, self.host(s.name), s.name, self.backend, self.run_dir, self.out
            )
            for s in self.servers
        }
        for s in self.servers:
            self.start(s.name)
        for s in self.servers:
            self.wait(s.name)

    def start(self, name: str) -> Proc:
        """Start (or restart) the agent of server ``name``; its log is ``<name>-agent[-N].log``."""
        args = agent_command(
            self.topo.server(name), self.backend, self.topo.gateway(name)[0], self.control(name),
            self.backend_addrs.get(name), self.extra,
        )  # fmt: skip
        n = self.starts[name] = self.starts.get(name, 0) + 1
        log = f"{name}-agent.log" if n == 1 else f"{name}-agent-{n}.log"
        self.running[name] = self.procs.start_in(self.host(name), args, self.out / log)
        return self.running[name]

    def wait(self, name: str, timeout: float = 60) -> None:
        """Until the agent's control socket answers a ping (a killed agent's socket file may
        still be there: the new one replaces it)."""
        proc = self.running[name]
        control = AgentControl.at(f"unix:{self.control(name)}", 0.5)
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

    def kill(self, name: str) -> list[str]:
        """SIGKILL the agent of server ``name`` (by its PID): no goodbye, its memory is gone.
        Returns the keys (hex) it held live just before."""
        held: list[str] = []
        with (
            contextlib.suppress(ControlError),
            AgentControl.at(f"unix:{self.control(name)}", 0.5) as control,
        ):
            held = [k.hex() for k in control.keys()]  # noqa: SIM118 (an agent call)
        self.procs.kill(self.running.pop(name))
        return held

    def versions(self) -> dict[str, dict[str, list[Any]]]:
        """Every running agent's stored versions (key hex -> [epoch, ver, live]) over its
        control API (a killed one is left out)."""
        out: dict[str, dict[str, list[Any]]] = {}
        for s in self.servers:
            if s.name not in self.running:
                continue
            with AgentControl.at(f"unix:{self.control(s.name)}") as ctl:
                out[s.name] = {k.hex(): [v.epoch, v.ver, v.live] for k, v in ctl.versions().items()}
        return out

    def writer_writes(self) -> dict[str, dict[str, int]]:
        """Every running agent's writes applied as a rotated key's writer (key hex -> count;
        docs/protocol.md F7) over its control API (a killed one is left out)."""
        out: dict[str, dict[str, int]] = {}
        for s in self.servers:
            if s.name not in self.running:
                continue
            with AgentControl.at(f"unix:{self.control(s.name)}") as ctl:
                out[s.name] = {k.hex(): n for k, n in ctl.writer_writes().items()}
        return out


# ---------------------------------------------------------------- the controller


class Controller:
    """The controller process in the root namespace: started (again) with ``command(n)`` for
    its n-th start, its output to ``OUT/controller-N.log`` and echoed line by line.

    ``crash_in_handoff`` (TESTS ONLY): the first start exits in the middle of its first ring
    change; whoever runs the scenario starts it again."""

    def __init__(
        self,
        procs: Procs,
        out: Path,
        command: Callable[[int], list[str]],
        echo: Callable[[str], None],
        crash_in_handoff: bool = False,
    ) -> None:
        self.procs, self.out, self.command, self.echo = procs, out, command, echo
        self.crash_in_handoff = crash_in_handoff
        self.proc: Proc | None = None
        self.starts = 0
        self.started = threading.Event()  # the running one said "started: epoch N"

    def start(self) -> None:
        """Start (or restart) the controller; its period lines are echoed as they come."""
        self.starts += 1
        self.started = threading.Event()
        log = self.out / f"controller-{self.starts}.log"
        p = subprocess.Popen(
            self.command(self.starts),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.proc = self.procs.add("controller", p, log)
        threading.Thread(target=self._pump, args=(p.stdout, log, self.started), daemon=True).start()

    def _pump(self, stream: IO[str] | None, log: Path, started: threading.Event) -> None:
        if stream is None:
            return
        with log.open("w") as f:
            for line in stream:
                f.write(line)
                f.flush()
                self.echo(line.rstrip("\n"))
                if " started: epoch " in line:
                    started.set()

    def exited(self, wait: float = 0.0) -> bool:
        """The controller process has exited (within ``wait`` seconds)."""
        if self.proc is None:
            return False
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.popen.wait(wait)
        return self.proc.popen.poll() is not None

    def restart(self, pause: float, kill: bool = False) -> None:
        """Start the controller again ``pause`` seconds after it exited, or after a SIGKILL
        (``kill``: it gets no chance to tidy up, the restart test)."""
        if self.proc is not None:
            if kill:
                self.procs.kill(self.proc)
            else:
                self.proc.popen.wait()
                self.procs.remove(self.proc)
            self.proc = None
        time.sleep(pause)
        self.start()

    def stop(self) -> int | None:
        """SIGTERM (SIGKILL after 10 s); its exit status, None if none runs."""
        if self.proc is None:
            return None
        code = Procs.stop_one(self.proc, grace=10)
        self.procs.remove(self.proc)
        self.proc = None
        return code


def controller_command(
    *,
    rack_file: Path,
    arch: str,
    target: str,
    grpc_port: int,
    thrift_port: int,
    period: float,
    k: int,
    policy: str,
    out: Path,
    admin: Path,
    defines: Sequence[str],
    observe_only: bool = False,
    crash_in_handoff: bool = False,
    bmv2_json: str | None = None,
    p4info: str | None = None,
    extra: Sequence[str] = (),
    program: Path | None = None,
) -> list[str]:
    """``kvswitch controller`` of one switch: its rack file, program and defines, its runtime
    ports; metrics to ``OUT/metrics.jsonl``, state to ``OUT/controller.state``, the admin socket
    (``kvswitch membership``) at ``admin``; ``program``: another P4 program than the ``arch``
    build's (a fabric's leaf)."""
    cmd = [
        PY, "-m", "kvswitch", "controller", "--rack", str(rack_file),
        "--p4", str(program or program_source(arch)),
        "--grpc-addr", f"127.0.0.1:{grpc_port}", "--device-id", "0",
        "--thrift-port", str(thrift_port), "--target", target,
        "--period", str(period), "--k", str(k), "--policy", policy,
        "--metrics", str(out / "metrics.jsonl"), "--state", str(out / "controller.state"),
        "--admin", str(admin),
    ]  # fmt: skip
    for d in defines:
        cmd += ["-D", d]
    if observe_only:
        cmd.append("--observe-only")
    if crash_in_handoff:
        cmd.append("--test-crash-in-handoff")
    if bmv2_json:
        cmd += ["--bmv2-json", bmv2_json]
    if p4info:
        cmd += ["--p4info", p4info]
    return cmd + list(extra)


# ---------------------------------------------------------------- clients


def probe_command(server: Node) -> list[str]:
    """One Get sent to ``server``: answered (found or not: exit 0 or 1) once the path through
    the switch is set."""
    return [PY, "-m", "kvswitch", "client", "--servers", f"{server.ip}:{KVS_PORT}",
            "--timeout", "0.3", "--retries", "0", "get", "probe"]  # fmt: skip


def server_list(servers: Sequence[Node]) -> str:
    """``IP:PORT,...``: the clients' configured servers."""
    return ",".join(f"{s.ip}:{KVS_PORT}" for s in servers)


def loadgen_command(
    servers: Sequence[Node],
    *,
    rate: int,
    duration: float,
    zipf: float,
    keys: int,
    write_ratio: float,
    seed: int,
    extra: Sequence[str] = (),
) -> list[str]:
    """``kvswitch-loadgen`` (the C load generator, open loop), its JSON summary on stdout."""
    return [
        str(find_loadgen()), "--servers", server_list(servers), "--rate", str(rate),
        "--duration", str(duration), "--zipf", str(zipf), "--keys", str(keys),
        "--write-ratio", str(write_ratio), "--timeout-ms", "500", "--seed", str(seed),
        "--json", "--quiet", *extra,
    ]  # fmt: skip


def history_command(
    servers: Sequence[Node],
    *,
    threads: int,
    keys: int,
    rate: float,
    set_ratio: float,
    duration: float,
    read_tail: float,
    client: int,
    out: Path,
    extra: Sequence[str] = (),
) -> list[str]:
    """The history clients (:mod:`kvsrack.history`) of one client host."""
    return [
        PY, "-m", "kvsrack.history", "--servers", server_list(servers),
        "--threads", str(threads), "--keys", str(keys),
        "--rate", str(rate), "--set-ratio", str(set_ratio),
        "--duration", str(duration), "--read-tail", str(read_tail),
        "--client", str(client), "--out", str(out), *extra,
    ]  # fmt: skip
