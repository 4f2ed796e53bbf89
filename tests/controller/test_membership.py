"""controller/membership.py: the failure detector, period by period."""

from __future__ import annotations

import pytest

from kvswitch.controller.membership import (
    NO_PROBE,
    Change,
    Event,
    Membership,
    Observation,
    State,
)

OK = Observation(sent=100, replied=100, probe=7)


def _period(m: Membership, *obs: Observation) -> list[Change]:
    return m.observe(list(obs))


def test_healthy_rack_reports_nothing() -> None:
    m = Membership(3)
    for _ in range(5):
        assert _period(m, OK, OK, OK) == []
    assert m.down == frozenset()
    assert m.incarnation(0) == 7


def test_one_missed_period_is_not_death() -> None:
    m = Membership(2, misses=2)
    slow = Observation(sent=100, replied=0, probe=None)  # ping timed out, no replies
    assert _period(m, OK, slow) == []
    assert m.state(1) is State.SUSPECT
    assert _period(m, OK, OK) == []  # it answered again: the count starts over
    assert m.state(1) is State.UP
    assert _period(m, OK, slow) == []
    assert _period(m, OK, slow) == [Change(1, Event.DOWN, incarnation=7)]
    assert m.down == frozenset({1})


@pytest.mark.parametrize("misses", [1, 3])
def test_misses_is_the_number_of_consecutive_periods(misses: int) -> None:
    m = Membership(1, misses=misses)
    dead = Observation(sent=10, replied=0, probe=None)
    for _ in range(misses - 1):
        assert _period(m, dead) == []
    assert _period(m, dead) == [Change(0, Event.DOWN)]


def test_a_failed_ping_alone_is_a_miss() -> None:
    # An idle server (nothing sent to it) whose agent is gone.
    m = Membership(1)
    gone = Observation(sent=0, replied=0, probe=None)
    assert _period(m, gone) == []
    assert _period(m, gone) == [Change(0, Event.DOWN)]


def test_silence_under_load_is_a_miss_even_if_the_ping_answers() -> None:
    m = Membership(1, min_sent=5)
    wedged = Observation(sent=50, replied=0, probe=7)
    assert _period(m, wedged) == []
    assert _period(m, wedged) == [Change(0, Event.DOWN, incarnation=7)]


def test_an_idle_server_is_not_silent() -> None:
    m = Membership(1, min_sent=5)
    idle = Observation(sent=4, replied=0, probe=7)
    for _ in range(5):
        assert _period(m, idle) == []


def test_down_server_back_with_a_new_incarnation_is_restarted() -> None:
    m = Membership(1, misses=2)
    _period(m, OK)
    gone = Observation(sent=0, replied=0, probe=None)
    _period(m, gone)
    assert _period(m, gone) == [Change(0, Event.DOWN, incarnation=7)]
    assert _period(m, gone) == []  # stays down, no repeat
    back = Observation(sent=0, replied=0, probe=9)
    assert _period(m, back) == [Change(0, Event.UP, restarted=True, incarnation=9)]
    assert m.down == frozenset()


def test_down_server_back_with_the_same_incarnation_was_only_unreachable() -> None:
    m = Membership(1, misses=1)
    _period(m, OK)
    assert _period(m, Observation(0, 0, None)) == [Change(0, Event.DOWN, incarnation=7)]
    assert _period(m, OK) == [Change(0, Event.UP, restarted=False, incarnation=7)]


def test_restart_faster_than_a_period_is_seen_by_its_incarnation() -> None:
    m = Membership(2)
    _period(m, OK, OK)
    assert _period(m, OK, Observation(100, 80, probe=8)) == [Change(1, Event.RESTART, False, 8)]
    assert m.state(1) is State.UP
    assert _period(m, OK, Observation(100, 80, probe=8)) == []


def test_restart_after_one_missed_period() -> None:
    m = Membership(1, misses=2)
    _period(m, OK)
    assert _period(m, Observation(100, 3, probe=None)) == []  # killed: the ping failed
    assert _period(m, Observation(100, 60, probe=11)) == [Change(0, Event.RESTART, False, 11)]


def test_without_control_endpoint_never_down() -> None:
    # Nothing could show it back (its requests would be refused): it is not monitored.
    m = Membership(1, misses=1)
    for _ in range(3):
        assert _period(m, Observation(sent=30, replied=0, probe=NO_PROBE)) == []
    assert m.down == frozenset()


def test_mark_down_waits_for_a_ping() -> None:
    m = Membership(2)
    m.mark_down(1)
    assert m.down == frozenset({1})
    assert _period(m, OK, Observation(0, 0, None)) == []
    assert _period(m, OK, OK) == [Change(1, Event.UP, incarnation=7)]


def test_bad_arguments() -> None:
    with pytest.raises(ValueError):
        Membership(0)
    with pytest.raises(ValueError):
        Membership(2, misses=0)
    with pytest.raises(ValueError):
        Membership(2, min_sent=0)
    with pytest.raises(ValueError):
        Membership(2).observe([OK])
