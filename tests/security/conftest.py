"""One Mininet rack per defence mode for the adversarial suite (docs/protocol.md "Trust").

``python -m kvsrack --hold`` runs as a subprocess (the e2e fixture's command); the suite acts
inside its hosts through one :mod:`tests.security.hostshell` process per client host
(``mnexec -a PID``), reads the agents over their Unix control sockets and the switch's registers
over Thrift, and stops the rack with SIGTERM (the rack tears itself down; the e2e fixture's checks confirm it).

Modes: ``on`` is the build as shipped; ``off`` is the same rack with every trust rule switched off
by its test-only flag (``-DKVS_TEST_NO_TRUST_*`` for trust.p4, ``--test-no-trust`` for the agents),
on which every attack of the suite is expected to succeed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from kvswitch.agent.control import AgentControl, KeyVersion
from kvswitch.consistency.lincheck import Op
from kvswitch.controller.p4rt_driver import SwitchAddress, _thrift_client
from kvswitch.paths import repo_root
from tests.e2e.conftest import assert_torn_down, rack_command, skip_reason, targets

SERVERS, K = 4, 16
SWITCH_MAC = "02:00:00:00:00:fe"
SWITCH_RULES = ("SOURCE", "SERVER_OPS", "ZERO_VERSIONS")
AGENT_RULES = ("network-push", "tcp-versions", "ids-without-source")
REGISTERS = ("global_ver", "slot_ver", "origin_ver", "valid_ver")


def rack_args(mode: str) -> list[str]:
    args = ["--servers", str(SERVERS), "--clients", "2", "--k", str(K), "--period", "0.5"]
    args += ["--bound", "0.1", "--controller-arg=--gamma=0.5", "--hold"]
    if mode == "off":
        args += ["-D", f"HOT_KEYS={K}", "-D", f"MAX_SERVERS={SERVERS}"]
        args += [a for r in SWITCH_RULES for a in ("-D", f"KVS_TEST_NO_TRUST_{r}=1")]
        args += [f"--agent-arg=--test-no-trust={r}" for r in AGENT_RULES]
    return args


class HostShell:
    """One ``tests.security.hostshell`` process inside a Mininet host."""

    def __init__(self, pid: int) -> None:
        root = repo_root()
        env = dict(os.environ, PYTHONPATH=str(root))
        self.proc = subprocess.Popen(
            ["mnexec", "-a", str(pid), sys.executable, "-m", "tests.security.hostshell"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=root,
            env=env,
        )

    def __call__(self, cmd: str, **fields: Any) -> Any:
        self.start(cmd, **fields)
        return self.result()

    def start(self, cmd: str, **fields: Any) -> None:
        """Send a command without waiting for its answer (:meth:`result` reads it)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"cmd": cmd, **fields}) + "\n")
        self.proc.stdin.flush()

    def result(self) -> Any:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, f"host shell exited ({self.proc.poll()})"
        answer = json.loads(line)
        assert answer["ok"], answer["error"]
        return answer["answer"]

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.write(json.dumps({"cmd": "quit"}) + "\n")
            self.proc.stdin.close()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@dataclass
class Rack:
    mode: str
    out: Path
    proc: subprocess.Popen[str]
    run: dict[str, Any]
    rack: dict[str, Any]
    shells: dict[str, HostShell] = field(default_factory=dict)
    agents: list[AgentControl] = field(default_factory=list)
    thrift: Any = None
    history: list[Op] = field(default_factory=list)  # every recorded client operation
    loaded: list[str] = field(default_factory=list)  # keys c1's background Gets keep hot

    @property
    def servers(self) -> list[tuple[str, int]]:
        return [(s["ip"], self.rack["kvs_port"]) for s in self.rack["servers"]]

    def server(self, index: int) -> dict[str, Any]:
        return dict(self.rack["servers"][index])

    def client(self, name: str) -> dict[str, Any]:
        return next(c for c in self.rack["clients"] if c["name"] == name)

    def shell(self, host: str) -> HostShell:
        if host not in self.shells:
            self.shells[host] = HostShell(int(self.run["hosts"][host]))
        return self.shells[host]

    def versions(self, server: int) -> dict[bytes, KeyVersion]:
        return self.agents[server].versions()

    def registers(self) -> dict[str, list[int]]:
        """The version registers (trust must leave them as the legitimate traffic set them)."""
        if self.thrift is None:
            address = SwitchAddress(thrift_port=int(self.run["thrift_port"]))
            self.thrift = _thrift_client(address)[1]
        return {
            r: list(self.thrift.bm_register_read_all(0, f"KvsIngress.replicas.{r}"))
            for r in REGISTERS
        }

    def stop(self) -> None:
        for shell in self.shells.values():
            shell.close()
        for agent in self.agents:
            agent.close()
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_rack(mode: str, target: str, out: Path, timeout: float = 120) -> Rack:
    proc = subprocess.Popen(
        rack_command(out, *rack_args(mode), target=target),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    lines: list[str] = []
    up = threading.Event()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("rack: up"):
                up.set()

    threading.Thread(target=pump, daemon=True).start()
    deadline = time.monotonic() + timeout
    while not up.wait(0.2):
        if proc.poll() is not None or time.monotonic() > deadline:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGTERM)
                proc.wait(60)
            pytest.fail(f"rack ({mode}) did not come up:\n{''.join(lines)}")
    run = json.loads((out / "run.json").read_text())
    rack = json.loads((out / "rack.json").read_text())
    agents = [AgentControl.at(s["control"]) for s in rack["servers"]]
    return Rack(mode, out, proc, run, rack, agents=agents)


@pytest.fixture(
    scope="module",
    params=[(t, mode) for t in targets() for mode in ("on", "off")],
    ids=lambda p: f"{p[0]}-{p[1]}",
)
def rack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Rack]:
    """The rack of one target and defence mode (each attack runs on every pair; BMv2's program
    is compiled by p4c-bm2-ss with the same -D flags)."""
    target, mode = request.param
    why = skip_reason(target)
    if why:
        pytest.skip(f"adversarial rack test {why}")
    out = tmp_path_factory.mktemp(f"security-{target}-{mode}") / "rack"
    started = start_rack(mode, target, out)
    try:
        yield started
    finally:
        started.stop()
        assert_torn_down(out)
