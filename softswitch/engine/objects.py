"""Objects the generated code uses at run time."""

from __future__ import annotations

import time
from typing import Any


class PacketContext:
    """Per-packet values the generated code reads without passing them around (one packet at a
    time under the switch's lock)."""

    __slots__ = (
        "clone",
        "digests",
        "dmeter",
        "payload",
        "plen",
        "recirculate",
        "resubmit",
        "sm",
        "truncate",
    )

    def __init__(self) -> None:
        self.plen = 0
        self.payload = b""
        self.sm: Any = None
        self.resubmit: int | None = None  # field list index of a pending resubmit
        self.recirculate: int | None = None
        self.clone: tuple[int, int, int] | None = None  # (clone type, session, field list)
        self.digests: list[tuple[str, tuple[Any, ...]]] = []  # digest() calls of this packet
        self.truncate: int | None = None  # truncate(n): bytes kept of the packet that leaves
        self.dmeter = 0  # colour of the direct meter of the table entry just hit


class Stack(list):  # type: ignore[type-arg]
    """A header stack: a list of headers plus ``_n``, the next index."""

    _n: int = 0

    def _next(self) -> Any:
        from softswitch.engine.codegen import ParserError

        if self._n >= len(self):
            raise ParserError(3)  # StackOutOfBounds
        h = self[self._n]
        self._n += 1
        return h

    def _last(self) -> Any:
        if self._n == 0:
            from softswitch.engine.codegen import ParserError

            raise ParserError(3)
        return self[self._n - 1]

    def _at(self, i: int) -> Any:
        if i >= len(self):
            # out of bounds (p4c/BMv2): reads see an invalid header, writes are lost
            return type(self[0])()
        return self[i]

    def _push_front(self, n: int) -> None:
        size = len(self)
        for i in range(size - 1, -1, -1):
            if i >= n:
                self[i]._set(self[i - n])
            else:
                self[i]._inv()
        self._n = min(self._n + n, size)

    def _pop_front(self, n: int) -> None:
        size = len(self)
        for i in range(size):
            if i + n < size:
                self[i]._set(self[i + n])
            else:
                self[i]._inv()
        self._n = max(self._n - n, 0)

    def _set(self, o: Stack) -> None:
        for a, b in zip(self, o, strict=True):
            a._set(b)
        self._n = o._n

    def _copy(self) -> Stack:
        s = Stack(x._copy() for x in self)
        s._n = self._n
        return s


class AssertFailed(Exception):
    """v1model ``assert`` failed: the packet is dropped."""


class ValueSet:
    """A parser value set: the control plane fills it with values (or value/mask pairs)."""

    def __init__(self, name: str, width: int, size: int) -> None:
        self.name = name
        self.width = width
        self.size = size
        self.entries: list[tuple[int, int]] = []

    def match(self, v: int) -> bool:
        return any(v & mask == value for value, mask in self.entries)


class MeterArray:
    """``meter(n, type)``: two-rate three-colour meters (RFC 2698) as BMv2 runs them: rates in units
    (packets or bytes) per microsecond and bursts in units; an unconfigured meter says GREEN (0).
    Colours: 0 GREEN, 1 YELLOW, 2 RED."""

    def __init__(self, name: str, size: int, by_bytes: bool) -> None:
        self.name = name
        self.size = size
        self.by_bytes = by_bytes
        # per index: None (unconfigured) or [cir, cbs, pir, pbs, c_tokens, p_tokens, last_us]
        self.state: list[list[float] | None] = [None] * size
        self.t0 = time.monotonic()

    def set_rates(self, index: int, committed: tuple[float, int], peak: tuple[float, int]) -> None:
        (cir, cbs), (pir, pbs) = committed, peak
        self.state[index] = [cir, cbs, pir, pbs, float(cbs), float(pbs), self.now_us()]

    def now_us(self) -> float:
        return (time.monotonic() - self.t0) * 1e6

    def execute(self, index: int, plen: int) -> int:
        if index >= self.size:
            return 0
        st = self.state[index]
        if st is None:
            return 0
        return self._run(st, plen)

    def _run(self, st: list[float], plen: int) -> int:
        cir, cbs, pir, pbs, ct, pt, last = st
        now = self.now_us()
        ct = min(ct + (now - last) * cir, cbs)
        pt = min(pt + (now - last) * pir, pbs)
        n = plen if self.by_bytes else 1
        if pt < n:
            color = 2
        elif ct < n:
            color, pt = 1, pt - n
        else:
            color, pt, ct = 0, pt - n, ct - n
        st[4], st[5], st[6] = ct, pt, now
        return color


class DirectMeter(MeterArray):
    """``direct_meter``: one meter per entry of its table, by entry handle (GREEN when unset)."""

    def __init__(self, name: str, size: int, by_bytes: bool) -> None:
        super().__init__(name, size, by_bytes)
        self.by_handle: dict[int, list[float]] = {}

    def set_entry_rates(
        self, handle: int, committed: tuple[float, int], peak: tuple[float, int]
    ) -> None:
        (cir, cbs), (pir, pbs) = committed, peak
        self.by_handle[handle] = [cir, cbs, pir, pbs, float(cbs), float(pbs), self.now_us()]

    def execute_entry(self, handle: int, plen: int) -> int:
        st = self.by_handle.get(handle)
        if st is None:
            return 0
        return self._run(st, plen)
