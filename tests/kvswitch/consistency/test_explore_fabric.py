"""The fabric's write path under the exhaustive explorer (kvswitch/consistency/explore_fabric.py):
clients in the origin's rack and elsewhere, the home leaf steering the key's packets through its
spine (rule F3). Every preset is linearizable with steering and not without it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kvswitch.consistency.explore_fabric import CHECKED, PRESETS, explore_fabric


@pytest.mark.parametrize("name", CHECKED)
def test_steering_through_the_spine_keeps_every_history_linearizable(name: str) -> None:
    rep = explore_fabric(PRESETS[name])
    assert rep.ok, rep.summary()
    assert rep.histories > 1


@pytest.mark.parametrize("name", CHECKED)
def test_a_home_leaf_that_does_not_steer_is_caught(name: str) -> None:
    rep = explore_fabric(replace(PRESETS[name], steering=False))
    assert rep.violation is not None, rep.summary()
