"""Running the rack runner (``python -m kvsrack``, as a subprocess) and reading its output.

Every e2e test needs root, Debian's mininet and the controller (``kvswitch controller``). Each runs
on every target found: the software switch, and BMv2's ``simple_switch_grpc`` where it and
p4c-bm2-ss are on PATH (the rack compiles the program with p4c-bm2-ss; skipped with a message
elsewhere). ``KVSWITCH_TARGET=softswitch`` or ``bmv2`` keeps one target. ``KVSWITCH_ARCH=tna``
runs the rack on the TNA build (``p4src/kvswitch_tna.p4``, software switch only).
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kvswitch.consistency.lincheck import Op

TARGETS = ("softswitch", "bmv2")
ARCH = os.environ.get("KVSWITCH_ARCH", "v1model")  # the data-plane build: v1model or tna


def targets() -> list[str]:
    """The targets the rack suites run on: both, or the one ``KVSWITCH_TARGET`` names."""
    chosen = os.environ.get("KVSWITCH_TARGET")
    if chosen is None:
        return list(TARGETS)
    if chosen not in TARGETS:
        raise pytest.UsageError(f"KVSWITCH_TARGET={chosen!r}: expected one of {list(TARGETS)}")
    return [chosen]


def skip_reason(target: str = "softswitch", arch: str = ARCH) -> str:
    """'' when the rack can run here on ``target``, else why not."""
    if os.geteuid() != 0:
        return "needs root (Mininet, network namespaces)"
    if importlib.util.find_spec("mininet") is None or shutil.which("mnexec") is None:
        return "needs Mininet (Debian: apt-get install mininet; `make deps` installs it)"
    if shutil.which("ethtool") is None:
        return "needs ethtool"
    if importlib.util.find_spec("kvswitch.controller.main") is None:
        return "needs the controller runtime (kvswitch controller) which is not in this build"
    if arch not in ("v1model", "tna"):
        return f"unknown KVSWITCH_ARCH={arch!r} (v1model or tna)"
    if target == "bmv2":
        for tool in ("simple_switch_grpc", "p4c-bm2-ss"):
            if shutil.which(tool) is None:
                return f"on BMv2 needs {tool} on PATH (../shared/reftools/bin in CI)"
        if arch != "v1model":
            return f"on BMv2 runs v1model programs only, not {arch}"
    return ""


@dataclass
class RackRun:
    out: Path
    stdout: str
    summary: dict[str, Any]
    metrics: list[dict[str, Any]]

    def during_load(self, period: float) -> list[dict[str, Any]]:
        """The periods wholly inside the workload (not the preload, not the last partial one);
        a period's ``time`` is when the controller read it, at its end."""
        start, end = self.summary["load_start"], self.summary["load_end"]
        return [m for m in self.metrics if start <= m["time"] - period and m["time"] <= end]

    def history(self) -> list[Op]:
        ops = []
        for path in self.summary["history"]:
            for line in Path(path).read_text().splitlines():
                o = json.loads(line)
                ops.append(
                    Op(
                        kind=o["kind"],
                        key=bytes.fromhex(o["key"]),
                        call=o["call"],
                        ret=math.inf if o["ret"] is None else o["ret"],
                        value=None if o["value"] is None else bytes.fromhex(o["value"]),
                        output=None if o["output"] is None else bytes.fromhex(o["output"]),
                        client=o["client"],
                    )
                )
        return ops


def rack_command(out: Path, *args: str, target: str, arch: str = ARCH) -> list[str]:
    """The rack runner's command line (``python -m kvsrack``, as ``kvswitch demo`` runs it)."""
    runner = [sys.executable, "-m", "kvsrack"]
    return [*runner, "--target", target, "--arch", arch, "--out", str(out), *args]


def assert_torn_down(out: Path) -> None:
    """Nothing the run created is left: processes (by the PIDs it recorded), the switch's
    interfaces, the socket folder."""
    run = json.loads((out / "run.json").read_text())
    pids = [int(x) for x in (out / "pids.txt").read_text().split()]
    assert pids, "the rack recorded no process"
    alive = [pid for pid in pids if Path(f"/proc/{pid}").exists()]
    assert not alive, f"processes left running: {alive}"
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert f"{run['switch']}-eth" not in links, "switch interfaces left behind"
    assert not Path(run["run_dir"]).exists(), f"{run['run_dir']} left behind"


def run_rack(out: Path, *args: str, target: str, timeout: float = 150, arch: str = ARCH) -> RackRun:
    """``python -m kvsrack ARGS --out OUT`` to completion; fails the test with its output if the
    rack fails or leaves anything behind."""
    done = subprocess.run(
        rack_command(out, *args, target=target, arch=arch),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert_torn_down(out)
    if done.returncode != 0:
        pytest.fail(f"the rack exited with {done.returncode}:\n{done.stdout}\n{done.stderr}")
    assert f"{target}, {arch})" in done.stdout, f"not the {arch} build on {target}:\n{done.stdout}"
    summary = json.loads((out / "summary.json").read_text())
    metrics_path = out / "metrics.jsonl"
    metrics = [json.loads(x) for x in metrics_path.read_text().splitlines() if x.strip()]
    return RackRun(out, done.stdout, summary, metrics)


@pytest.fixture(params=targets())
def target(request: pytest.FixtureRequest) -> str:
    """The switch of the rack: every test of the suite runs on each target found."""
    return str(request.param)


@pytest.fixture
def rack(tmp_path: Path, target: str) -> Any:
    why = skip_reason(target)
    if why:
        pytest.skip(f"e2e rack test {why}")
    return lambda *args, timeout=150, arch=ARCH: run_rack(
        tmp_path / "rack", *args, target=target, timeout=timeout, arch=arch
    )
