"""p4runtime-shell 0.0.6 (PyPI, unchanged) against the switch process: pipeline from p4c's BMv2
JSON and P4Info (when p4c-bm2-ss is on PATH) and from ``kvswitch p4c``'s outputs, then entries,
the default action, a multicast group (read back in ``egress_port``, the field the shell writes),
counters. The shell runs in its own venv (.venv-p4rtsh, made by ``make p4rtsh``, which
``make test`` runs): it pins a protobuf the project's environment cannot share."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from kvswitch import cli
from tests.runtime.conftest import switch_process

ROOT = Path(__file__).resolve().parents[2]
SHELL_PY = ROOT / ".venv-p4rtsh" / "bin" / "python"
SESSION = Path(__file__).parent / "p4rtsh_session.py"
TUTORIAL = ROOT / "tests" / "p4c_bmv2" / "p4" / "tutorial_basic.p4"
EXPECTED = [
    "entry 32 01",
    "default NoAction",
    "replicas [(3, 0), (4, 1)]",
    "counter 7 70",
    "entries after delete 0",
    "groups after delete 0",
]


def shell_session(p4info: Path, config: Path, program: str = "tutorial") -> list[str]:
    if not SHELL_PY.exists():
        pytest.skip("p4runtime-shell venv missing: run `make p4rtsh` (make test does)")
    with switch_process(["--no-p4"]) as sw:
        done = subprocess.run(
            [
                str(SHELL_PY),
                str(SESSION),
                f"127.0.0.1:{sw.grpc_port}",
                str(p4info),
                str(config),
                program,
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr[-3000:]
    return [line[3:] for line in done.stdout.splitlines() if line.startswith("@@ ")]


def test_p4runtime_shell_on_kvswitch_p4c_outputs(tmp_path: Path) -> None:
    info, out = tmp_path / "basic.p4info.txtpb", tmp_path / "basic.json"
    argv = ["p4c", str(TUTORIAL), "-o", str(out), "--p4runtime-files", str(info)]
    assert cli.main(argv) == 0
    assert shell_session(info, out) == EXPECTED


def test_p4runtime_shell_on_p4c_json(tmp_path: Path) -> None:
    from tests.p4c_bmv2.tools import p4c_compile  # skips without p4c-bm2-ss

    json_path, _ = p4c_compile(TUTORIAL, tmp_path)
    assert shell_session(tmp_path / f"{TUTORIAL.stem}.p4info.txtpb", json_path) == EXPECTED


def test_p4runtime_shell_on_kvswitch_p4(tmp_path: Path) -> None:
    source = ROOT / "p4src" / "kvswitch.p4"
    info, out = tmp_path / "kv.p4info.txtpb", tmp_path / "kv.json"
    argv = ["p4c", str(source), "-I", str(source.parent), "-o", str(out)]
    assert cli.main([*argv, "--p4runtime-files", str(info)]) == 0
    assert shell_session(info, out, "kvswitch") == [
        "hot hot-key 03",
        "hot counter 0 0",
        "replicas [(1, 0), (2, 1)]",
        "hot keys after delete 0",
    ]
