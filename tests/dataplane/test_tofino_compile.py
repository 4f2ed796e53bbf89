"""The TNA builds through a Tofino P4 compiler (bf-p4c, or p4c with its open-source backends/tofino),
when one is on PATH: the ToR program at the defaults and at the paper's K = 10 000, a fabric's
spine and leaf; each compiles, and its P4Info has the control-plane names the software switch
gives the same program. Skipped with a message where no such compiler is installed (`make tofino`
runs the same compile). p4c's open-source back end places tables in as many stages as the
dependencies need and leaves the device's limit to the assembler (not part of it), so the test
also counts the stages the placement used (the assembly's `stage N ingress:` sections) against
Tofino 1's twelve."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from finsy.proto import p4i
from google.protobuf import text_format

from kvswitch.paths import p4src_dir

KINDS = ("tables", "actions", "registers", "counters", "direct_counters")
TOFINO_STAGES = 12  # match-action stages per pipe, shared by ingress and egress


def stages_used(out: Path) -> dict[str, int]:
    """MAU stages per gress in the compiler's assembly output (pipe/*.bfa)."""
    used: dict[str, int] = {"ingress": 0, "egress": 0}
    for bfa in out.glob("**/*.bfa"):
        for m in re.finditer(r"^stage (\d+) (ingress|egress):", bfa.read_text(), re.M):
            used[m[2]] = max(used[m[2]], int(m[1]) + 1)
    return used


def tofino_compiler() -> list[str] | None:
    """The command that compiles for Tofino 1, or None."""
    bf = shutil.which("bf-p4c")
    if bf:
        return [bf]
    p4c = shutil.which("p4c")
    if p4c is None:
        return None
    probe = subprocess.run(
        [p4c, "--target", "tofino", "--arch", "tna", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return [p4c] if probe.returncode == 0 else None


@pytest.mark.parametrize(
    ("program", "defines"),
    [
        ("kvswitch_tna.p4", {}),
        ("kvswitch_tna.p4", {"HOT_KEYS": "10000"}),  # the paper's K: valid_ver in three parts
        ("kvswitch_spine_tna.p4", {}),
        ("kvswitch_leaf_tna.p4", {}),
    ],
    ids=["defaults", "paper-K", "spine", "leaf"],
)
def test_tofino_compiler_accepts_the_tna_build(
    tmp_path: Path, program: str, defines: dict[str, str]
) -> None:
    cmd = tofino_compiler()
    if cmd is None:
        pytest.skip(
            "no Tofino P4 compiler on PATH (bf-p4c, or p4c built with backends/tofino): "
            "the TNA build is checked by the software switch only"
        )
    source = p4src_dir() / program
    info_path = tmp_path / "p4info.txtpb"
    done = subprocess.run(
        [*cmd, "--std", "p4-16", "--target", "tofino", "--arch", "tna", "-I", str(source.parent),
         *(f"-D{k}={v}" for k, v in defines.items()),
         "--p4runtime-files", str(info_path), "--p4runtime-force-std-externs",
         "-o", str(tmp_path / "out"), str(source)],
        capture_output=True,
        text=True,
        timeout=3600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    used = stages_used(tmp_path / "out")
    assert used["ingress"] > 0 and max(used.values()) <= TOFINO_STAGES, used
    compiled = text_format.Parse(info_path.read_text(), p4i.P4Info())
    from softswitch import Switch

    ours = Switch.from_file(str(source), defines=defines, include_dirs=[str(source.parent)]).p4info
    for kind in KINDS:
        assert {e.preamble.name for e in getattr(compiled, kind)} == {
            e.preamble.name for e in getattr(ours, kind)
        }, kind
