"""Running ``mininet/rack.py`` (as a subprocess: nothing imports mininet/) and reading its output.

Every e2e test needs root, Debian's mininet and the controller (``kvswitch controller``); with
``KVSWITCH_TARGET=bmv2`` also ``simple_switch_grpc``, ``$KVSWITCH_BMV2_JSON`` and
``$KVSWITCH_BMV2_P4INFO`` (p4c's output). ``KVSWITCH_ARCH=tna`` runs the rack on the TNA build
(``p4src/kvswitch_tna.p4``, software switch only).
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

from kvswitch.bench.lincheck import Op
from kvswitch.paths import repo_root

TARGET = os.environ.get("KVSWITCH_TARGET", "softswitch")
ARCH = os.environ.get("KVSWITCH_ARCH", "v1model")  # the data-plane build: v1model or tna


def rack_script() -> Path:
    root = repo_root()
    assert root is not None, "the e2e tests run from a source checkout"
    return root / "mininet" / "rack.py"


def skip_reason() -> str:
    """'' when the rack can run here, else why not."""
    if os.geteuid() != 0:
        return "needs root (Mininet, network namespaces)"
    if importlib.util.find_spec("mininet") is None or shutil.which("mnexec") is None:
        return "needs Mininet (Debian: apt-get install mininet; `make deps` installs it)"
    if shutil.which("ethtool") is None:
        return "needs ethtool"
    if importlib.util.find_spec("kvswitch.controller.main") is None:
        return "needs the controller runtime (kvswitch controller) which is not in this build"
    if ARCH not in ("v1model", "tna"):
        return f"unknown KVSWITCH_ARCH={ARCH!r} (v1model or tna)"
    if TARGET == "bmv2":
        if shutil.which("simple_switch_grpc") is None:
            return "KVSWITCH_TARGET=bmv2 but simple_switch_grpc is not installed"
        if not os.environ.get("KVSWITCH_BMV2_JSON") or not os.environ.get("KVSWITCH_BMV2_P4INFO"):
            return (
                "KVSWITCH_TARGET=bmv2 needs KVSWITCH_BMV2_JSON and KVSWITCH_BMV2_P4INFO "
                "(p4c's BMv2 JSON and P4Info text of p4src/kvswitch.p4)"
            )
        if ARCH != "v1model":
            return f"KVSWITCH_ARCH={ARCH}: BMv2 runs v1model programs only"
    elif TARGET != "softswitch":
        return f"unknown KVSWITCH_TARGET={TARGET!r} (softswitch or bmv2)"
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


def rack_command(out: Path, *args: str, arch: str = ARCH) -> list[str]:
    cmd = [
        sys.executable,
        str(rack_script()),
        "--target",
        TARGET,
        "--arch",
        arch,
        "--out",
        str(out),
    ]
    cmd += args
    if TARGET == "bmv2":
        cmd += ["--bmv2-json", os.environ["KVSWITCH_BMV2_JSON"]]
        cmd += ["--p4info", os.environ["KVSWITCH_BMV2_P4INFO"]]
    return cmd


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


def run_rack(out: Path, *args: str, timeout: float = 150, arch: str = ARCH) -> RackRun:
    """``mininet/rack.py ARGS --out OUT`` to completion; fails the test with its output if the
    rack fails or leaves anything behind."""
    done = subprocess.run(
        rack_command(out, *args, arch=arch), capture_output=True, text=True, timeout=timeout
    )
    assert_torn_down(out)
    if done.returncode != 0:
        pytest.fail(f"rack.py exited with {done.returncode}:\n{done.stdout}\n{done.stderr}")
    assert f"{TARGET}, {arch})" in done.stdout, f"not the {arch} build on {TARGET}:\n{done.stdout}"
    summary = json.loads((out / "summary.json").read_text())
    metrics_path = out / "metrics.jsonl"
    metrics = [json.loads(x) for x in metrics_path.read_text().splitlines() if x.strip()]
    return RackRun(out, done.stdout, summary, metrics)


@pytest.fixture
def rack(tmp_path: Path) -> Any:
    why = skip_reason()
    if why:
        pytest.skip(f"e2e rack test {why}")
    return lambda *args, timeout=150, arch=ARCH: run_rack(
        tmp_path / "rack", *args, timeout=timeout, arch=arch
    )
