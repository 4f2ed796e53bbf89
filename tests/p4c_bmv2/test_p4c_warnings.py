"""p4c-bm2-ss compiles the spine's program (p4src/kvswitch_spine.p4, docs/fabric.md "Spine
program") without a warning, and a fabric leaf's (kvswitch_leaf.p4) and the rack switch's
(kvswitch.p4) too. The compile is the one the
data-plane tests load (the same sizes, cached by content with the compiler's messages:
controller/program.py), so a run that already compiled it pays nothing here. Skipped where
p4c-bm2-ss is not on PATH."""

from __future__ import annotations

import pytest

from kvswitch.controller.program import cached_p4c_bm2_ss, compiler_log
from kvswitch.paths import p4src_dir
from tests.dataplane.base import DEFINES
from tests.dataplane.spine import SPINE_DEFINES

from .tools import need


@pytest.mark.parametrize(
    ("program", "defines"),
    [("kvswitch_spine.p4", SPINE_DEFINES), ("kvswitch_leaf.p4", DEFINES), ("kvswitch.p4", DEFINES)],
)
def test_p4c_bm2_ss_compiles_without_warnings(program: str, defines: dict[str, str]) -> None:
    need("p4c-bm2-ss")
    source = p4src_dir() / program
    json_path, _info = cached_p4c_bm2_ss(source, defines, [source.parent])
    messages = compiler_log(json_path).read_text()
    assert "warning" not in messages.lower(), messages
    assert messages.strip() == "", messages
