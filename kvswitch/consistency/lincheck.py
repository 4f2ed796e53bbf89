"""Linearizability checking of key-value histories (Wing & Gong, with Lowe's memoisation).

A history is a list of :class:`Op`: each operation a client invoked, with the time it was invoked and
the time its reply arrived (``math.inf`` when the outcome is unknown, e.g. a timed-out write: it may
have taken effect at any point after its call, or never). Linearizability is local, so a key-value
history is checked key by key against a single-register model.

The search is the one of Lowe's "Testing for linearizability" (2017) as used by Porcupine: walk the
history in call/return order, try to linearize each pending call, back-track on a return that cannot be
explained, and memoise (set of linearized ops, model state) so that no configuration is explored twice.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

#: The model state of one key: its value, or None when absent.
State = bytes | None


@dataclass(frozen=True)
class Op:
    """One client operation on one key.

    Times are comparable numbers and intervals are closed, as in Porcupine: an operation that returns
    at the very time another is called overlaps it (monotonic clocks can repeat a reading).
    ``kind`` is ``"get"``, ``"set"`` or ``"delete"``. For a get, ``output`` is the value read (None:
    not found). For a set, ``value`` is the value written. For a delete, ``output`` is True when the
    server said the key existed, False when it said not found, and None when either is accepted.
    """

    kind: str
    key: bytes
    call: float
    ret: float = math.inf
    value: bytes | None = None
    output: object = None
    client: int = 0

    def __post_init__(self) -> None:
        if self.kind not in ("get", "set", "delete"):
            raise ValueError(f"unknown operation kind {self.kind!r}")
        if self.ret < self.call:
            raise ValueError(f"operation returns before it is called: {self}")


def step(state: State, op: Op) -> tuple[bool, State]:
    """The sequential register: may ``op`` run in ``state``, and the state after it."""
    if op.kind == "set":
        return True, op.value
    if op.kind == "delete":
        if op.ret == math.inf or op.output is None:
            return True, None
        return bool(op.output) == (state is not None), None
    # get
    if op.ret == math.inf:  # a read with no reply constrains nothing
        return True, state
    return op.output == state, state


@dataclass
class _Entry:
    op_id: int
    is_call: bool
    time: float
    match: _Entry | None = None
    prev: _Entry | None = None
    next: _Entry | None = None


@dataclass
class Result:
    """The verdict for one key; ``linearization`` is a witness order when ``ok``."""

    key: bytes
    ok: bool
    linearization: list[Op] = field(default_factory=list)
    explored: int = 0


def _build_list(ops: list[Op]) -> _Entry:
    events: list[tuple[float, int, int, bool]] = []
    for i, op in enumerate(ops):
        # Intervals are closed: at equal times calls sort before returns (the two overlap).
        events.append((op.call, 0, i, True))
        events.append((op.ret, 1, i, False))
    events.sort()
    head = _Entry(op_id=-1, is_call=False, time=-math.inf)
    calls: dict[int, _Entry] = {}
    tail = head
    for time, _, op_id, is_call in events:
        entry = _Entry(op_id=op_id, is_call=is_call, time=time, prev=tail)
        tail.next = entry
        tail = entry
        if is_call:
            calls[op_id] = entry
        else:
            calls[op_id].match = entry
    return head


def _lift(entry: _Entry) -> None:
    """Unlink a call and its return from the list."""
    assert entry.prev is not None and entry.match is not None
    entry.prev.next = entry.next
    if entry.next is not None:
        entry.next.prev = entry.prev
    ret = entry.match
    assert ret.prev is not None
    ret.prev.next = ret.next
    if ret.next is not None:
        ret.next.prev = ret.prev


def _unlift(entry: _Entry) -> None:
    """Undo :func:`_lift` (in reverse order)."""
    ret = entry.match
    assert ret is not None and ret.prev is not None and entry.prev is not None
    ret.prev.next = ret
    if ret.next is not None:
        ret.next.prev = ret
    entry.prev.next = entry
    if entry.next is not None:
        entry.next.prev = entry


def check_register(
    key: bytes, ops: list[Op], initial: State = None, max_states: int = 2_000_000
) -> Result:
    """Check the operations on one key; raise RuntimeError past ``max_states`` explored states."""
    if not ops:
        return Result(key=key, ok=True)
    head = _build_list(ops)
    state = initial
    linearized = 0  # bit i set: op i is linearized
    cache: set[tuple[int, State]] = set()
    stack: list[tuple[_Entry, State]] = []
    explored = 0
    entry = head.next
    while head.next is not None:
        explored += 1
        if explored > max_states:
            raise RuntimeError(
                f"linearizability search for key {key!r} exceeded {max_states} states"
            )
        assert entry is not None
        if entry.is_call:
            ok, new_state = step(state, ops[entry.op_id])
            if ok:
                bits = linearized | (1 << entry.op_id)
                if (bits, new_state) not in cache:
                    cache.add((bits, new_state))
                    stack.append((entry, state))
                    state = new_state
                    linearized = bits
                    _lift(entry)
                    entry = head.next
                    continue
            entry = entry.next
        else:
            # A return whose call is not linearized yet: back-track.
            if not stack:
                return Result(key=key, ok=False, explored=explored)
            entry, state = stack.pop()
            linearized &= ~(1 << entry.op_id)
            _unlift(entry)
            entry = entry.next
    order = [ops[e.op_id] for e, _ in stack]
    return Result(key=key, ok=True, linearization=order, explored=explored)


def check_history(ops: Iterable[Op], initial: dict[bytes, State] | None = None) -> list[Result]:
    """Check a whole key-value history key by key; the list holds one result per key."""
    by_key: dict[bytes, list[Op]] = defaultdict(list)
    for op in ops:
        by_key[op.key].append(op)
    start = initial or {}
    return [check_register(key, kops, start.get(key)) for key, kops in sorted(by_key.items())]


def is_linearizable(ops: Iterable[Op], initial: dict[bytes, State] | None = None) -> bool:
    return all(result.ok for result in check_history(ops, initial))
