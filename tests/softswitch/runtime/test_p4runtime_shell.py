"""p4runtime-shell 0.0.6 (PyPI, unchanged) against a switch process: the software switch
(``kvswitch switch``) and BMv2's ``simple_switch_grpc`` (when on PATH; skipped with a message
otherwise). The pipeline comes from p4c's BMv2 JSON and P4Info (when p4c-bm2-ss is on PATH; BMv2
loads no other) and, on the software switch, from ``kvswitch p4c``'s outputs too; then entries, the
default action, a multicast group (read back in ``egress_port``, the field the shell writes),
counters, and on kvswitch.p4 a register written and read over P4Runtime, which BMv2 refuses
(docs/softswitch_runtime.md, "Where the software switch does more than BMv2"). The shell runs in
its own venv (.venv-p4rtsh, made by ``make p4rtsh``, which ``make test`` runs): it pins a protobuf
the project's environment cannot share."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from kvswitch import cli
from tests.p4c_bmv2.tools import p4c_compile, simple_switch_grpc
from tests.softswitch.runtime.conftest import switch_process

ROOT = Path(__file__).resolve().parents[3]
SHELL_PY = ROOT / ".venv-p4rtsh" / "bin" / "python"
SESSION = Path(__file__).parent / "p4rtsh_session.py"
TUTORIAL = ROOT / "tests" / "p4c_bmv2" / "p4" / "tutorial_basic.p4"
KVSWITCH = ROOT / "p4src" / "kvswitch.p4"
EXPECTED = [
    "entry 32 01",
    "default NoAction",
    "replicas [(3, 0), (4, 1)]",
    "counter 7 70",
    "entries after delete 0",
    "groups after delete 0",
]
KVSWITCH_EXPECTED = [
    "hot hot-key 03",
    "hot counter 0 0",
    "replicas [(1, 0), (2, 1)]",
    "hot keys after delete 0",
]
# register epoch, cell 0, written 7 then read
REGISTER = {
    "softswitch": ["register write ok", "register read [7]"],
    # PI's P4Runtime server (p4lang/PI, proto/frontend): a RegisterEntry write fails in the
    # batch (Write's UNKNOWN, with the update's own code), a read is refused outright
    "bmv2": [
        "register write refused UNIMPLEMENTED",
        "register read refused UNIMPLEMENTED Register reads are not supported yet",
    ],
}
TARGETS = ["softswitch", pytest.param("bmv2", marks=pytest.mark.bmv2)]


@contextlib.contextmanager
def _switch(target: str, log: Path) -> Iterator[int]:
    """The target's switch process with no pipeline; yields its gRPC port."""
    if target == "softswitch":
        with switch_process(["--no-p4"]) as sw:
            yield sw.grpc_port
    else:
        with simple_switch_grpc(None, log=log) as (_proc, _thrift, grpc_port):
            yield grpc_port


def shell_session(target: str, p4info: Path, config: Path, program: str = "tutorial") -> list[str]:
    if not SHELL_PY.exists():
        pytest.skip("p4runtime-shell venv missing: run `make p4rtsh` (make test does)")
    with _switch(target, config.with_suffix(".switch.log")) as grpc_port:
        done = subprocess.run(
            [str(SHELL_PY), str(SESSION), f"127.0.0.1:{grpc_port}", str(p4info), str(config),
             program],
            capture_output=True,
            text=True,
            timeout=120,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return [line[3:] for line in done.stdout.splitlines() if line.startswith("@@ ")]


def test_p4runtime_shell_on_kvswitch_p4c_outputs(tmp_path: Path) -> None:
    """The software switch only: ``kvswitch p4c``'s device config is its own format."""
    info, out = tmp_path / "basic.p4info.txtpb", tmp_path / "basic.json"
    argv = ["p4c", str(TUTORIAL), "-o", str(out), "--p4runtime-files", str(info)]
    assert cli.main(argv) == 0
    assert shell_session("softswitch", info, out) == EXPECTED


@pytest.mark.parametrize("target", TARGETS)
def test_p4runtime_shell_on_p4c_json(target: str, tmp_path: Path) -> None:
    json_path, _ = p4c_compile(TUTORIAL, tmp_path)  # skips without p4c-bm2-ss
    assert shell_session(target, tmp_path / f"{TUTORIAL.stem}.p4info.txtpb", json_path) == EXPECTED


def test_p4runtime_shell_on_kvswitch_p4(tmp_path: Path) -> None:
    info, out = tmp_path / "kv.p4info.txtpb", tmp_path / "kv.json"
    argv = ["p4c", str(KVSWITCH), "-I", str(KVSWITCH.parent), "-o", str(out)]
    assert cli.main([*argv, "--p4runtime-files", str(info)]) == 0
    got = shell_session("softswitch", info, out, "kvswitch")
    assert got == KVSWITCH_EXPECTED + REGISTER["softswitch"]


@pytest.fixture(scope="module")
def kvswitch_p4c(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """p4c-bm2-ss's JSON and P4Info file of kvswitch.p4 (skips without p4c-bm2-ss)."""
    out = tmp_path_factory.mktemp("kvswitch_p4c")
    json_path, _ = p4c_compile(KVSWITCH, out, include_dirs=[KVSWITCH.parent])
    return json_path, out / f"{KVSWITCH.stem}.p4info.txtpb"


# Found by this test: the software switch refused p4c-bm2-ss's own JSON + P4Info of kvswitch.p4
# ("p4info does not match the program: actions differ"): its JSON translator inlined p4c's hidden
# tables tbl_trust_refuse*, dropping the action KvsIngress.trust.refuse that p4c's P4Info lists.
@pytest.mark.parametrize("target", TARGETS)
def test_p4runtime_shell_on_kvswitch_p4c_json(target: str, kvswitch_p4c: tuple[Path, Path]) -> None:
    """kvswitch.p4 as p4c-bm2-ss compiles it (its default sizes), on both targets: the same
    answers, but for P4Runtime register access, which BMv2 refuses."""
    json_path, info = kvswitch_p4c
    got = shell_session(target, info, json_path, "kvswitch")
    assert got == KVSWITCH_EXPECTED + REGISTER[target]
