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
    "rotation-add",
    "rotation-off-built",
    "rotation-sync",
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


@pytest.mark.parametrize(
    ("name", "crossing"),
    [
        # a write reply and a confirm sent under rule 1, judged under the rotation
        ("rotation-on", ("SET_REPLY origin->switch(->c0)", "CONFIRM r1->switch")),
        # the writer's reply sent under the rotation, judged under rule 1
        ("rotation-off", ("SET_REPLY r1->switch(->c0)", "GET_REPLY r1->switch(->c1)")),
    ],
)
def test_replies_cross_the_rotation_flag_change(name: str, crossing: tuple[str, ...]) -> None:
    """The flag presets are linearizable, and they explore the window the spine's rotated cell leaves: a reply of a request
    sent before the change reaches the spine after it (judged by the new flag)."""
    from kvswitch.consistency.explore_fabric import FabricExplorer

    ex = FabricExplorer(PRESETS[name])
    rep = ex.run()
    assert rep.ok, rep.summary()
    assert rep.histories > 1
    assert set(crossing) <= ex.crossed, sorted(ex.crossed)


def test_turning_the_rotation_off_lets_an_undrained_origin_read_through() -> None:
    """The defect the explorer found (docs/fabric.md "Write rotation", "Checked"): a Get sent to
    the origin while it was stale (R4's fallback, e.g. done_by's holder in DownTable) is
    answered v0 after c0's a1 was acknowledged; the reply crosses the change to rule 1, which
    passes any read reply of the origin. Shortest trace, 7 steps."""
    rep = explore_rotation_broken("off-undrained")
    assert rep.violation is not None
    assert rep.violation[-2:] == [
        "controller: writer map rotated 1 -> 0 frozen",
        "deliver GET_REPLY origin->switch(->c1) id=(2,19) v0 v=(1,1)",
    ]


def test_the_rotation_writes_to_one_holder_and_no_other() -> None:
    """What the presets rest on: the rotation's writes of one request id reach one holder, and
    the presets' ids reach the holders explore_fabric.py's comment says (else the presets would
    not rotate anything)."""
    from kvswitch.consistency import rules
    from kvswitch.consistency.explore_fabric import ROTATION_CIDS, ROTATION_SEQ0

    def writer(c: int, idx: int, n: int) -> int:
        return rules.rotated_write(0, [0], [0], ROTATION_CIDS[c], ROTATION_SEQ0 + idx, n)[1]

    assert [writer(0, 0, 2), writer(1, 0, 2)] == [1, 1]
    assert [writer(0, 1, 2), writer(1, 1, 2), writer(2, 0, 2)] == [0, 0, 0]
    assert [writer(0, 0, 3), writer(2, 0, 3)] == [1, 2]
    # rotation-add: c2's first write moves from the origin to the joining holder
    assert [writer(2, 0, 2), writer(2, 0, 3)] == [0, 2]


def test_the_writer_hash_is_crc32_low_byte_mod_n() -> None:
    """rules.rotated_write's writer is the spine's (docs/protocol.md F7): zlib's CRC-32 of (cid,
    seq) as big-endian words, its low 8 bits, mod n."""
    import zlib

    from kvswitch.consistency import rules

    for cid, seq, n in ((1, 1, 2), (0xDEADBEEF, 77, 5), (12345, 678, 7), (2**32 - 1, 0, 64)):
        crc = zlib.crc32(cid.to_bytes(4, "big") + seq.to_bytes(4, "big"))
        assert rules.rotated_write(0, [0], [0], cid, seq, n)[1] == (crc & 0xFF) % n


def test_the_command_runs_a_preset_and_a_broken_rule(capsys: pytest.CaptureFixture[str]) -> None:
    from kvswitch.bench.sim_cli import main

    assert main(["explore-fabric", "--preset", "rotation"]) == 0
    assert "linearizable" in capsys.readouterr().out
    assert main(["explore-fabric", "--broken", "origin-authoritative"]) == 1
    assert "counterexample" in capsys.readouterr().out
