"""The files of the hand-off between a rack controller and the fabric controller (docs/fabric.md
"Runtime"), each JSON object written whole (a temporary file renamed over the old one, so a
reader sees the old or the new file, never half of one), their writers next to their readers.

The rack's inputs (``kvswitch controller --fabric-out FILE``; the rack's ``inputs`` in the fabric
file), one per rack period:

    {"period": 17, "time": 1700000000.5,
     "observed": {"<key hex>": count, ...}, "writes": {"<key hex>": count, ...},
     "loads": [packets per server of the rack, in the rack file's order],
     "cold": [each server's cold load as the rack's plan estimates it, the fabric's share out],
     "replicas": [rack-hot replicas per server],
     "down": [servers of the rack its failure detector declared dead, by their index in "loads"]}

(``cold``, ``replicas``, ``down`` and ``time`` may be left out: a file without ``down`` names no
dead server; without ``time`` a file's age is its modification time's.) The fabric's share for
one rack (``kvswitch fabric-controller``, the rack's ``share`` in the fabric file;
``kvswitch controller --fabric-in FILE``), one per fabric period:

    {"period": 9, "time": 1700000000.7, "keys": ["<key hex>", ...],
     "measured": [load the spines sent each server of the rack last period],
     "expected": [load the new fabric plan puts on each server next period]}

(``measured`` and ``expected`` both empty: the fabric has not planned yet, the keys hold.)

A file that is missing, older than its reader's ``max_age`` seconds, or malformed is logged and
ignored (:func:`read_inputs`, :func:`read_share` return None): never an exception.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kvswitch import protocol as p
from kvswitch.controller import statefile
from kvswitch.controller.period import FabricShare

LOG = logging.getLogger("kvswitch.handoff")


@dataclass
class RackInput:
    """What one rack controller hands the fabric controller each period (docs/fabric.md
    "Controllers"): its candidates (hot-key counters and HashPipe, merged), their Sets and
    Deletes where counted, the packets each of its servers received, optionally each server's
    cold load and rack replicas as its plan has them, and its servers declared dead (indices
    into ``loads``; docs/fabric.md "Failures": the fabric planner takes them out of every key's
    holders)."""

    observed: dict[bytes, int]
    loads: list[float]
    writes: dict[bytes, int] = field(default_factory=dict)
    cold: list[float] | None = None
    replicas: list[int] | None = None
    down: frozenset[int] = frozenset()


def stale_after(period: float) -> float:
    """Seconds after which a reader running every ``period`` seconds ignores a hand-off file:
    three periods, at least 5 s (a process's start-up, its pipelines loaded, takes seconds)."""
    return max(3.0 * period, 5.0)


def next_boundary(period: float, now: float) -> float:
    """The first multiple of ``period`` seconds of the wall clock after ``now`` (Unix time). A rack
    controller of a fabric ends its periods there, so that every rack's inputs count the same
    second and the fabric controller, planning just after the boundary, reads them all fresh
    (on free-running clocks it read some racks' inputs a whole period old, and its first plans
    overshot: docs/fabric.md "Mininet fabric")."""
    return (math.floor(now / period) + 1.0) * period


def fresh_since(paths: list[str | Path], since: float) -> bool:
    """Whether every file of ``paths`` was written at or after ``since`` (Unix time)."""
    try:
        return all(Path(x).stat().st_mtime >= since for x in paths)
    except OSError:
        return False


class HandoffError(ValueError):
    """A hand-off file that does not say what its format says."""


def write_inputs(path: Path, period: int, x: RackInput, now: float | None = None) -> None:
    """The rack's inputs for the fabric (module docstring), written whole."""
    record: dict[str, Any] = {
        "period": period,
        "time": time.time() if now is None else now,
        "observed": _keyed(x.observed),
        "writes": _keyed(x.writes),
        "loads": [float(v) for v in x.loads],
    }
    if x.cold is not None:
        record["cold"] = [float(v) for v in x.cold]
    if x.replicas is not None:
        record["replicas"] = [int(v) for v in x.replicas]
    if x.down:
        record["down"] = sorted(int(s) for s in x.down)
    statefile.save(path, record)


def read_inputs(
    path: str | Path | None, servers: int, max_age: float | None = None, now: float | None = None
) -> RackInput | None:
    """A rack's inputs; None (logged) if absent, older than ``max_age`` seconds, or malformed."""
    if path is None:
        return None
    try:
        raw = _load(path, max_age, now)
        loads = _numbers(raw.get("loads"), servers, "loads")
        cold = raw.get("cold")
        replicas = raw.get("replicas")
        return RackInput(
            _counts(raw.get("observed", {}), "observed"),
            loads,
            _counts(raw.get("writes", {}), "writes"),
            None if cold is None else _numbers(cold, servers, "cold"),
            None if replicas is None else [int(v) for v in _numbers(replicas, servers, "replicas")],
            _servers(raw.get("down", []), servers, "down"),
        )
    except HandoffError as exc:
        LOG.warning("rack inputs %s: %s: the rack counts as idle", path, exc)
        return None


def write_share(path: Path, period: int, share: FabricShare, now: float | None = None) -> None:
    """The fabric's share for one rack (module docstring), written whole."""
    statefile.save(
        path,
        {
            "period": period,
            "time": time.time() if now is None else now,
            "keys": sorted(key.hex() for key in share.keys),
            "measured": [float(v) for v in share.measured],
            "expected": [float(v) for v in share.expected],
        },
    )


def read_share(
    path: str | Path, servers: int, max_age: float | None = None, now: float | None = None
) -> FabricShare | None:
    """The fabric's share for a rack of ``servers``; None (logged) if absent, older than
    ``max_age`` seconds, or malformed."""
    try:
        raw = _load(path, max_age, now)
        keys = raw.get("keys")
        if not isinstance(keys, list):
            raise HandoffError("keys must be a list of key hex strings")
        measured, expected = raw.get("measured"), raw.get("expected")
        if measured == [] and expected == []:  # the fabric has not planned yet: keys only
            return FabricShare(frozenset(_key(k) for k in keys))
        return FabricShare(
            frozenset(_key(k) for k in keys),
            tuple(_numbers(measured, servers, "measured")),
            tuple(_numbers(expected, servers, "expected")),
        )
    except HandoffError as exc:
        LOG.warning("fabric share %s: %s: planning without the fabric's loads", path, exc)
        return None


def _load(path: str | Path, max_age: float | None, now: float | None) -> dict[str, Any]:
    try:
        raw = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise HandoffError(str(exc).splitlines()[0] if str(exc) else repr(exc)) from exc
    if not isinstance(raw, dict):
        raise HandoffError("not a JSON object")
    stamp = raw.get("time")
    if max_age is not None:
        if not _number(stamp):  # a file written by hand: its modification time
            try:
                stamp = Path(path).stat().st_mtime
            except OSError as exc:
                raise HandoffError(str(exc)) from exc
        age = (time.time() if now is None else now) - float(stamp)
        if age > max_age:
            raise HandoffError(f"stale ({age:.1f} s old, at most {max_age:g} s)")
    return raw


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _numbers(value: Any, servers: int, what: str) -> list[float]:
    if (
        not isinstance(value, list)
        or len(value) != servers
        or not all(_number(v) and v >= 0 for v in value)
    ):
        raise HandoffError(f"{what} must be {servers} numbers >= 0")
    return [float(v) for v in value]


def _servers(value: Any, servers: int, what: str) -> frozenset[int]:
    if not isinstance(value, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) and 0 <= v < servers for v in value
    ):
        raise HandoffError(f"{what} must be a list of server indices 0 .. {servers - 1}")
    return frozenset(value)


def _key(text: Any) -> bytes:
    try:
        key = bytes.fromhex(text)
    except (TypeError, ValueError) as exc:
        raise HandoffError(f"key {text!r} is not hex") from exc
    if len(key) != p.KEY_LEN:
        raise HandoffError(f"a key is {p.KEY_LEN} bytes, not {len(key)}")
    return key


def _counts(raw: Any, what: str) -> dict[bytes, int]:
    if not isinstance(raw, dict) or not all(
        isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in raw.values()
    ):
        raise HandoffError(f"{what} must map key hex strings to counts >= 0")
    return {_key(k): v for k, v in raw.items()}


def _keyed(counts: Mapping[bytes, int]) -> dict[str, int]:
    return {key.hex(): int(v) for key, v in counts.items()}
