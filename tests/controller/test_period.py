"""The period loop against a driver: what it reads, resets and applies."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from kvswitch.controller.driver import Driver
from kvswitch.controller.hashring import OTHER_RACK
from kvswitch.controller.ops import Operation, PushRequest, TableEntry
from kvswitch.controller.period import Controller, ControllerConfig
from kvswitch.controller.rack import Rack

RACK = Rack.synthetic(4)


def key(i: int) -> bytes:
    return i.to_bytes(16, "big")


class FakeDriver(Driver):
    def __init__(self, fail: bool = False) -> None:
        self.applied: list[Operation] = []
        self.resets = 0
        self.fail = fail

    @property
    def servers(self) -> int:
        return 4

    @property
    def slots(self) -> int:
        return 8

    def read_hot_counters(self) -> dict[bytes, int]:
        return {}

    def read_hot_writes(self) -> list[int]:
        return [0] * self.slots

    def read_version(self) -> int:
        return 7

    def read_hashpipe(self) -> list[tuple[bytes, int]]:
        return [(key(1), 900), (key(2), 50), (key(3), 0)]

    def read_load_counters(self) -> list[int]:
        return [1000, 100, 100, 100]

    def reset_counters(self) -> None:
        self.resets += 1

    def apply(self, ops: Sequence[Operation]) -> None:
        if self.fail:
            raise RuntimeError("switch said no")
        self.applied += ops


def test_step_reads_resets_and_applies_one_batch() -> None:
    ctl = Controller(ControllerConfig(k=2, t0=100, alpha=1.0), lambda k: 0, RACK, 8)
    driver = FakeDriver()
    report = ctl.step(driver)
    assert driver.resets == 1
    assert [k for k, _ in report.predicted] == [key(1), key(2)]  # empty slot (count 0) ignored
    assert report.threshold == 80  # 1000 > 1.3 x mean 325: T <- 0.8 T
    assert len(report.plan.keys[key(1)].holders) == 4  # ceil(900 / 80) capped at M
    assert report.plan.keys[key(2)].holders == (0,)  # 50 < T: no replica
    assert driver.applied == report.ops
    assert any(isinstance(op, TableEntry) for op in driver.applied)
    assert PushRequest(key(1), 0, (1, 2, 3)) in driver.applied
    assert ctl.step(driver).ops == []  # same observations, same plan: nothing to do


def test_a_key_of_another_rack_is_not_planned() -> None:
    """In a fabric a leaf sees its clients' requests to other racks' servers: such a key (origin
    OTHER_RACK on the fabric's ring) is no candidate of this rack, however hot."""
    origins = {key(1): OTHER_RACK}
    ctl = Controller(ControllerConfig(k=2, t0=100, alpha=1.0), lambda k: origins.get(k, 0), RACK, 8)
    report = ctl.step(FakeDriver())
    assert [k for k, _ in report.predicted] == [key(2)]
    assert set(report.plan.keys) == {key(2)}


def test_failed_batch_keeps_the_old_plan() -> None:
    ctl = Controller(ControllerConfig(k=2, t0=100), lambda k: 0, RACK, 8)
    with pytest.raises(RuntimeError):
        ctl.step(FakeDriver(fail=True))
    assert ctl.plan.keys == {}
    with pytest.raises(ValueError):
        Controller(ControllerConfig(k=20), lambda k: 0, RACK, 8)


def test_a_server_back_from_the_dead_is_planned_with_its_load_from_before() -> None:
    """Its requests were refused until the period's end: its measured load (near 0) must not
    make it look idle, or its own hot key gets no replica and it is the most loaded next period."""
    ctl = Controller(
        ControllerConfig(k=4, t0=250, bound=10.0, alpha=1.0, policy="balance"),
        lambda k: k[-1] % 4,
        RACK,
        8,
    )
    hot = [(key(3), 300), (key(4), 10)]  # key(3)'s origin is server 3
    ctl.decide({}, hot, [410, 400, 400, 700])
    assert len(ctl.plan.keys[key(3)].holders) > 1  # 400 cold + 300 hot: replicated
    ctl.down = frozenset({3})
    ctl.decide({}, hot, [560, 500, 500, 0])  # server 3 refused all period
    ctl.down = frozenset()  # back at the period's end: refused until then
    report = ctl.decide({}, hot, [560, 500, 500, 5])
    assert len(report.plan.keys[key(3)].holders) > 1
    assert report.threshold == 250


def test_a_server_that_just_joined_the_ring_is_planned_with_the_others_mean_cold_load() -> None:
    """Keys moved to it at the period's end: its measured load (near 0) is not its cold load."""
    ctl = Controller(
        ControllerConfig(k=4, t0=250, bound=10.0, alpha=1.0, policy="balance"),
        lambda k: k[-1] % 4,
        RACK,
        8,
    )
    ctl.members = (0, 1, 2)
    hot = [(key(3), 300), (key(4), 10)]
    ctl.decide({}, [(key(4), 10)], [400, 400, 400, 0])
    ctl.members = (0, 1, 2, 3)  # joined; key(3) moved to it
    report = ctl.decide({}, hot, [400, 400, 400, 5])
    assert len(report.plan.keys[key(3)].holders) > 1  # 400 cold (the mean) + 300 hot
    assert report.threshold == 250


def test_a_ring_change_moves_the_cold_load_with_the_hash_space() -> None:
    """A dead server removed from the ring: its cold load (as it was before it died) lands on its
    keys' new origins in proportion to the hash space each takes; a new member takes its share of
    the others'."""
    from kvswitch.controller.hashring import ring_transfer

    ctl = Controller(ControllerConfig(k=4, t0=250, policy="balance"), lambda k: 0, RACK, 8)
    ctl.members = (0, 1, 2, 3)
    ctl.decide({}, [], [400, 400, 400, 600])
    ctl.down = frozenset({3})
    ctl.decide({}, [], [400, 400, 400, 0])
    ctl.members = (0, 1, 2)  # removed while down
    report = ctl.decide({}, [], [400, 400, 400, 0])
    shares = ring_transfer(range(4), range(3))[3]
    assert report.cold[:3] == pytest.approx([400 + 600 * shares.get(s, 0.0) for s in range(3)])
    ctl.down = frozenset()
    ctl.members = (0, 1, 2, 3)  # back as a new member: its share of each neighbour's
    report = ctl.decide({}, [], [500, 500, 500, 0])
    back = ring_transfer(range(3), range(4))
    assert report.cold[3] == pytest.approx(sum(500 * back[o].get(3, 0.0) for o in range(3)))
    assert sum(report.cold[:4]) == pytest.approx(1500)
