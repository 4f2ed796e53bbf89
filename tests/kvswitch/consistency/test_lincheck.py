"""The linearizability checker against known histories and against a brute-force oracle."""

from __future__ import annotations

import itertools
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from kvswitch.consistency.lincheck import Op, check_history, check_register, is_linearizable, step

K = b"k"


def precedes(a: Op, b: Op) -> bool:
    """Real-time order over closed intervals: a returned strictly before b was called."""
    return a.ret < b.call


def brute_force(ops: list[Op], initial=None) -> bool:
    """Some order that respects real time and the register's semantics exists."""
    for order in itertools.permutations(range(len(ops))):
        position = {op_id: i for i, op_id in enumerate(order)}
        if any(
            precedes(a, b) and position[i] > position[j]
            for i, a in enumerate(ops)
            for j, b in enumerate(ops)
            if i != j
        ):
            continue
        state = initial
        for op_id in order:
            ok, state = step(state, ops[op_id])
            if not ok:
                break
        else:
            return True
    return False


def test_sequential_history_is_linearizable() -> None:
    ops = [
        Op("set", K, 0, 1, value=b"a"),
        Op("get", K, 2, 3, output=b"a"),
        Op("delete", K, 4, 5, output=True),
        Op("get", K, 6, 7, output=None),
    ]
    result = check_register(K, ops)
    assert result.ok
    assert [op.call for op in result.linearization] == [0, 2, 4, 6]


def test_stale_read_after_acknowledged_write_is_caught() -> None:
    ops = [
        Op("set", K, 0, 1, value=b"a"),
        Op("set", K, 2, 3, value=b"b"),
        Op("get", K, 4, 5, output=b"a"),  # b was acknowledged before this read began
    ]
    assert not check_register(K, ops).ok


def test_concurrent_write_may_be_seen_or_not() -> None:
    write = Op("set", K, 0, 10, value=b"b")
    assert is_linearizable([write, Op("get", K, 1, 2, output=b"b")])
    assert is_linearizable([write, Op("get", K, 1, 2, output=None)])


def test_new_then_old_during_a_pending_write_is_caught() -> None:
    """The paper's race: a replica serves the new value, then the origin the old one."""
    ops = [
        Op("set", K, 0, 1, value=b"old"),
        Op("set", K, 2, 20, value=b"new"),
        Op("get", K, 3, 4, output=b"new"),
        Op("get", K, 5, 6, output=b"old"),
    ]
    assert not check_register(K, ops).ok


def test_unknown_outcome_write_may_never_happen() -> None:
    ops = [
        Op("set", K, 0, 1, value=b"a"),
        Op("set", K, 2, math.inf, value=b"b"),  # timed out
        Op("get", K, 3, 4, output=b"a"),
        Op("get", K, 5, 6, output=b"b"),
        Op("get", K, 7, 8, output=b"b"),
    ]
    assert is_linearizable(ops)
    ops.append(Op("get", K, 9, 10, output=b"a"))  # b was seen, so it took effect
    assert not is_linearizable(ops)


def test_keys_are_checked_independently() -> None:
    ops = [
        Op("set", b"x", 0, 1, value=b"1"),
        Op("get", b"y", 2, 3, output=b"1"),  # y was never written
    ]
    results = {r.key: r.ok for r in check_history(ops)}
    assert results == {b"x": True, b"y": False}
    assert is_linearizable(ops, initial={b"y": b"1"})


def test_delete_result_is_checked() -> None:
    ops = [Op("delete", K, 0, 1, output=True)]  # said it existed, but the key was absent
    assert not is_linearizable(ops)
    assert is_linearizable(ops, initial={K: b"v"})


def test_invalid_operations_are_refused() -> None:
    try:
        Op("cas", K, 0, 1)
    except ValueError as exc:
        assert "unknown operation" in str(exc)
    else:
        raise AssertionError("cas accepted")
    try:
        Op("get", K, 5, 1)
    except ValueError as exc:
        assert "returns before" in str(exc)
    else:
        raise AssertionError("negative duration accepted")


@st.composite
def histories(draw) -> list[Op]:
    n = draw(st.integers(1, 6))
    ops = []
    for _ in range(n):
        call = draw(st.integers(0, 12))
        ret = draw(st.one_of(st.integers(call, 14), st.just(math.inf)))
        kind = draw(st.sampled_from(["get", "set", "delete"]))
        value = draw(st.sampled_from([b"a", b"b"]))
        if kind == "set":
            ops.append(Op("set", K, call, ret, value=value))
        elif kind == "get":
            ops.append(Op("get", K, call, ret, output=draw(st.sampled_from([None, b"a", b"b"]))))
        else:
            ops.append(
                Op("delete", K, call, ret, output=draw(st.sampled_from([None, True, False])))
            )
    return ops


@settings(max_examples=400, deadline=None)
@given(histories())
def test_agrees_with_brute_force(ops: list[Op]) -> None:
    assert check_register(K, ops).ok == brute_force(ops)


def test_large_history_is_checked_quickly() -> None:
    """Five clients, 2 000 operations, writes overlapping reads: found linearizable, not explored forever."""
    ops = []
    t = 0.0
    for i in range(400):
        value = str(i).encode()
        ops.append(Op("set", K, t, t + 3, value=value, client=0))
        for c in range(1, 5):
            # Each reader overlaps the write: it may see the previous value or the new one.
            seen = value if c % 2 else (str(i - 1).encode() if i else None)
            ops.append(Op("get", K, t + 1, t + 2, output=seen, client=c))
        t += 4
    result = check_register(K, ops)
    assert result.ok
    assert result.explored < 50_000
