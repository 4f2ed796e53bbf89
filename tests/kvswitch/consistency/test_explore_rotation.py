"""The write rotation of a fabric-hot key (docs/protocol.md F7) under the exhaustive explorer
(kvswitch/consistency/explore_fabric.py): a write goes to one holder chosen by its request id,
its reply completes it, every holder's read reply passes rule 6 at exactly origin_ver. Every
preset is linearizable; each broken variant of the new rules is caught."""

from __future__ import annotations

import pytest

from kvswitch.consistency.explore_fabric import (
    PRESETS,
    ROTATION_BROKEN,
    explore_fabric,
    explore_rotation_broken,
)

FAST = (
    "rotation",
    "rotation-two-writers",
    "rotation-retry",
    "rotation-reread",
    "rotation-map-change",
)


@pytest.mark.parametrize("name", FAST)
def test_the_rotation_keeps_every_history_linearizable(name: str) -> None:
    rep = explore_fabric(PRESETS[name])
    assert rep.ok, rep.summary()
    assert rep.histories > 1


@pytest.mark.explore_heavy
def test_the_rotation_with_faults_over_three_holders_is_linearizable() -> None:
    rep = explore_fabric(PRESETS["rotation-faults"])  # 948 400 states, about 17 s of CPU
    assert rep.ok, rep.summary()


@pytest.mark.parametrize("name", sorted(ROTATION_BROKEN))
def test_a_broken_rotation_rule_is_caught(name: str) -> None:
    rep = explore_rotation_broken(name)
    assert rep.violation is not None, rep.summary()
    assert rep.complete


def test_the_rotation_writes_to_one_holder_and_no_other() -> None:
    """What the presets rest on: the rotation's writes of one request id reach one holder, and
    two writers reach different ones (else the presets would not rotate anything)."""
    from kvswitch.consistency import rules

    assert rules.rotated_write(0, [0], [0], 1, 1, 2)[1] == 1
    assert rules.rotated_write(0, [0], [0], 3, 1, 2)[1] == 0
    assert (
        rules.rotated_write(0, [0], [0], 1, 1, 3)[1] != rules.rotated_write(0, [0], [0], 3, 1, 3)[1]
    )


def test_the_command_runs_a_preset_and_a_broken_rule(capsys: pytest.CaptureFixture[str]) -> None:
    from kvswitch.bench.sim_cli import main

    assert main(["explore-fabric", "--preset", "rotation"]) == 0
    assert "linearizable" in capsys.readouterr().out
    assert main(["explore-fabric", "--broken", "origin-authoritative"]) == 1
    assert "counterexample" in capsys.readouterr().out
