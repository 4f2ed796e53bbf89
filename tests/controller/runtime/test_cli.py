"""``kvswitch controller`` as a process against ``kvswitch switch`` as a process (loopback gRPC and
Thrift): static entries and epoch installed, one line and one JSON object per period, a restart
with a larger epoch, SIGTERM, a switch that goes away, and bad arguments."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from kvswitch.controller import names
from kvswitch.controller.p4rt_driver import P4RuntimeDriver, Program, SwitchAddress
from kvswitch.controller.rackfile import RackFile
from kvswitch.paths import p4src_dir
from tests.controller.runtime.conftest import DEFINES
from tests.softswitch.runtime.conftest import SwitchProcess, switch_process, wait_port

P4 = str(p4src_dir() / "kvswitch.p4")
DEFS = [arg for name, value in DEFINES.items() for arg in ("-D", f"{name}={value}")]


def controller_cmd(rack: Path, grpc_port: int, thrift_port: int, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "kvswitch",
        "controller",
        "--rack",
        str(rack),
        "--p4",
        P4,
        *DEFS,
        "--grpc-addr",
        f"127.0.0.1:{grpc_port}",
        "--device-id",
        "0",
        "--thrift-port",
        str(thrift_port),
        "--target",
        "softswitch",
        "--k",
        "8",
        "--policy",
        "ring",
        "--timeout",
        "3",
        *extra,
    ]


def test_controller_process(tmp_path: Path, rackfile: RackFile, program: Program) -> None:
    rack_path = tmp_path / "rack.json"
    metrics, state = tmp_path / "m.jsonl", tmp_path / "state.json"
    with switch_process([P4, *DEFS]) as sw:
        done = subprocess.run(
            controller_cmd(
                rack_path,
                sw.grpc_port,
                sw.thrift_port,
                "--period",
                "0.2",
                "--periods",
                "2",
                "--metrics",
                str(metrics),
                "--state",
                str(state),
            ),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        lines = [line for line in done.stdout.splitlines() if "  lambda " in line]
        assert len(lines) == 2 and "period 2  lambda 0.000  T 1  hot 0" in lines[1]
        rows = [json.loads(line) for line in metrics.read_text().splitlines()]
        assert [r["period"] for r in rows] == [1, 2] and rows[0]["loads"] == [0, 0, 0]
        assert json.loads(state.read_text()) == {
            "epoch": 1,
            "threshold": 1.0,
            "ring": {"version": 1, "members": [0, 1, 2]},
        }

        address = SwitchAddress(f"127.0.0.1:{sw.grpc_port}", 0, "127.0.0.1", sw.thrift_port)
        with P4RuntimeDriver(address, program, rackfile.rack()) as drv:
            assert drv.read_register(names.REG_EPOCH) == [1]
            assert len(drv.read_entries("ipv4_lpm")) == 4
            offsets = drv.read_entries(names.SERVEROFFSET_TABLE)
            assert sorted((h.params["offset"], h.params["port"]) for h in offsets.values()) == [
                (0, 1),
                (1, 2),
                (2, 3),
            ]

        # again, until SIGTERM; the switch goes away in between: errors are reported, no crash
        proc = subprocess.Popen(
            controller_cmd(
                rack_path, sw.grpc_port, sw.thrift_port, "--period", "0.2", "--state", str(state)
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert proc.stdout is not None
            seen = ""
            while "period 1 " not in seen:
                line = proc.stdout.readline()
                assert line, proc.stderr.read() if proc.stderr else ""
                seen += line
            assert "epoch 2" in seen
            sw.stop()
            while " error " not in (line := proc.stdout.readline()):
                assert line
            # a new switch on the same ports: the controller reconnects and starts again
            with restarted(sw):
                while "started: epoch 3" not in (line := proc.stdout.readline()):
                    assert line
                line = proc.stdout.readline()  # the line of the period that reconnected
                while "  lambda " not in (line := proc.stdout.readline()):
                    assert line
                assert " error " not in line
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=20) == 0, proc.stderr.read() if proc.stderr else ""
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert json.loads(state.read_text())["epoch"] == 3


@contextlib.contextmanager
def restarted(old: SwitchProcess) -> Iterator[None]:
    """``kvswitch switch`` again on the ports of ``old`` (which has stopped)."""
    cmd = [sys.executable, "-m", "kvswitch", "switch", "--thrift-port", str(old.thrift_port)]
    cmd += [P4, *DEFS, "--", "--grpc-server-addr", f"127.0.0.1:{old.grpc_port}"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    sw = SwitchProcess(proc, old.thrift_port, old.grpc_port)
    try:
        wait_port(old.grpc_port, proc)
        yield
    finally:
        sw.stop()


def test_bad_arguments(tmp_path: Path) -> None:
    bad = tmp_path / "rack.json"
    bad.write_text('{"switch": {"ip": "10.0.0.254", "mac": "02:00:00:00:00:fe"}, "servers": []}')
    for args, message in (
        (["--rack", str(tmp_path / "absent.json")], "absent.json"),
        (["--rack", str(bad)], "no servers"),
        (["--rack", str(bad), "--target", "bmv2"], "no servers"),
        (["--rack", str(bad), "--period", "0"], "--period"),
    ):
        cmd = [sys.executable, "-m", "kvswitch", "controller", *args]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 2 and message in done.stderr, (args, done.stderr)


def test_no_switch(tmp_path: Path, rackfile: RackFile) -> None:
    from tests.softswitch.runtime.conftest import free_port

    rack = tmp_path / "rack.json"
    start = time.monotonic()
    done = subprocess.run(
        controller_cmd(rack, free_port(), free_port(), "--periods", "1"),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1 and "P4Runtime" in done.stderr
    assert time.monotonic() - start < 30
