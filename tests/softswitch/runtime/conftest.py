"""Shared fixtures of the runtime tests: the test program, an in-process P4Runtime server, and
the switch as a separate process (``kvswitch switch``)."""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from finsy.proto import p4r, p4r_grpc
from google.protobuf import text_format

from kvswitch.agent.backend_procs import free_port
from kvswitch.ports import listens
from softswitch.runtime.bundle import Bundle
from softswitch.runtime.device import Device
from softswitch.runtime.p4runtime_server import P4RuntimeServer

P4_DIR = Path(__file__).parent / "p4"
PROGRAM = P4_DIR / "runtime.p4"
PROGRAM_TNA = P4_DIR / "runtime_tna.p4"
CPU_PORT = 255


def wait_port(port: int, proc: subprocess.Popen[bytes] | None = None, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(
                f"switch exited with {proc.returncode}: {proc.stderr.read().decode() if proc.stderr else ''}"
            )
        if listens("127.0.0.1", port, 0.2):
            return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listens on port {port}")


@dataclass
class Program:
    """The test program as P4Runtime clients get it: P4Info text file and device config file."""

    bundle: Bundle
    p4info_path: Path
    blob_path: Path


def make_program(source: Path, tmp: Path) -> Program:
    bundle = Bundle.from_file(source)
    switch = bundle.compile()
    info = tmp / f"{source.stem}.p4info.txtpb"
    info.write_text(text_format.MessageToString(switch.p4info))
    blob = tmp / f"{source.stem}.bundle.json"
    blob.write_bytes(bundle.to_bytes())
    return Program(bundle, info, blob)


@pytest.fixture(scope="session")
def program(tmp_path_factory: pytest.TempPathFactory) -> Program:
    return make_program(PROGRAM, tmp_path_factory.mktemp("program"))


@pytest.fixture(scope="session")
def tna_program(tmp_path_factory: pytest.TempPathFactory) -> Program:
    """runtime.p4's control-plane names on TNA (runtime_tna.p4)."""
    return make_program(PROGRAM_TNA, tmp_path_factory.mktemp("program_tna"))


@pytest.fixture(params=["v1model", "tna"])
def arch_program(request: pytest.FixtureRequest, program: Program, tna_program: Program) -> Program:
    """The runtime test program on each architecture: the same P4Runtime calls drive both."""
    return program if request.param == "v1model" else tna_program


@dataclass
class Server:
    device: Device
    server: P4RuntimeServer
    address: str


@pytest.fixture
def rt_server() -> Iterator[Server]:
    """A P4Runtime server in this process, device id 0, no pipeline yet, CPU port 255."""
    device = Device(device_id=0, cpu_port=CPU_PORT)
    address = f"127.0.0.1:{free_port()}"
    server = P4RuntimeServer(device, address)
    server.start()
    try:
        yield Server(device, server, address)
    finally:
        server.stop(grace=0)


@dataclass
class SwitchProcess:
    proc: subprocess.Popen[bytes]
    thrift_port: int
    grpc_port: int

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


@contextlib.contextmanager
def switch_process(
    args: list[str], cwd: Path | None = None, cpu_port: int | None = None
) -> Iterator[SwitchProcess]:
    """``kvswitch switch ARGS`` on free Thrift and gRPC ports; stopped with SIGTERM at the end.
    A port another process took between its choice and the switch's bind (tests run in
    parallel) is chosen again, up to three times; a crash prints its Python stacks
    (PYTHONFAULTHANDLER) in the error."""
    for attempt in range(3):
        thrift, grpc_port = free_port(), free_port()
        target = ["--", "--grpc-server-addr", f"127.0.0.1:{grpc_port}"]
        if cpu_port is not None:
            target += ["--cpu-port", str(cpu_port)]
        cmd = [sys.executable, "-m", "kvswitch", "switch", "--thrift-port", str(thrift)]
        proc = subprocess.Popen(
            [*cmd, *args, *target],
            cwd=cwd,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env={**os.environ, "PYTHONFAULTHANDLER": "1"},
        )
        sp = SwitchProcess(proc, thrift, grpc_port)
        try:
            wait_port(grpc_port, proc)
            break
        except (RuntimeError, TimeoutError) as exc:
            sp.stop()
            if "Address already in use" not in str(exc) or attempt == 2:
                raise
    try:
        yield sp
    finally:
        sp.stop()


class Client:
    """A P4Runtime client holding one StreamChannel."""

    def __init__(self, address: str) -> None:
        self.channel = grpc.insecure_channel(address)
        self.stub = p4r_grpc.P4RuntimeStub(self.channel)
        self.requests: queue.Queue[p4r.StreamMessageRequest | None] = queue.Queue()
        self.responses = self.stub.StreamChannel(self._iter())
        self.election_id = 0

    def _iter(self) -> Iterator[p4r.StreamMessageRequest]:
        while (msg := self.requests.get()) is not None:
            yield msg

    def arbitrate(self, election_id: int, device_id: int = 0) -> p4r.MasterArbitrationUpdate:
        self.election_id = election_id
        arb = p4r.MasterArbitrationUpdate(
            device_id=device_id, election_id=p4r.Uint128(low=election_id)
        )
        self.requests.put(p4r.StreamMessageRequest(arbitration=arb))
        return self.next_arbitration()

    def next_arbitration(self) -> p4r.MasterArbitrationUpdate:
        msg = next(self.responses)
        assert msg.HasField("arbitration"), msg
        return msg.arbitration

    def set_pipeline(
        self,
        program: Program,
        action: int = p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT,
        cookie: int = 5,
    ) -> None:
        info = program.bundle.compile().p4info
        config = p4r.ForwardingPipelineConfig(
            p4info=info, p4_device_config=program.bundle.to_bytes()
        )
        config.cookie.cookie = cookie
        self.stub.SetForwardingPipelineConfig(
            p4r.SetForwardingPipelineConfigRequest(
                device_id=0,
                election_id=p4r.Uint128(low=self.election_id),
                action=action,
                config=config,
            )
        )

    def write(self, *updates: p4r.Update, atomicity: int = 0) -> None:
        self.stub.Write(
            p4r.WriteRequest(
                device_id=0,
                election_id=p4r.Uint128(low=self.election_id),
                updates=updates,
                atomicity=atomicity,
            )
        )

    def read(self, *entities: p4r.Entity) -> list[p4r.Entity]:
        out: list[p4r.Entity] = []
        for resp in self.stub.Read(p4r.ReadRequest(device_id=0, entities=entities)):
            out += resp.entities
        return out

    def close(self) -> None:
        self.requests.put(None)
        self.channel.close()
