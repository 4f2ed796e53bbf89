"""The controller's state file (``--state``, docs/controller_runtime.md): the last epoch, the ring
(and ``ring_next``, a change past its copy), the threshold and last period's per-key counts, so
a restarted controller carries on as the old one would have. :func:`load` and :func:`save` do the
file's I/O; the rest reads a loaded record, malformed parts left out."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from kvswitch import protocol as p

LOG = logging.getLogger("kvswitch.controller")

Ring = tuple[int, frozenset[int]]  # (version, members)


def load(path: Path | None) -> dict[str, Any]:
    """The saved record; {} when there is none or it is unreadable (logged)."""
    if path is None or not path.exists():
        return {}
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        LOG.warning("state file %s unreadable (%s): ignored", path, exc)
        return {}
    return state if isinstance(state, dict) else {}


def save(path: Path, state: dict[str, Any]) -> None:
    """Write ``state`` whole (a temporary file renamed over the old one)."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state) + "\n")
    tmp.replace(path)


def record(
    epoch: int,
    ring: Ring,
    committing: Ring | None,
    threshold: float | None,
    observed: dict[bytes, float],
) -> dict[str, Any]:
    """What :func:`save` writes."""
    version, members = ring
    state: dict[str, Any] = {
        "epoch": epoch,
        "ring": {"version": version, "members": sorted(members)},
    }
    if committing is not None:
        version, members = committing
        state["ring_next"] = {"version": version, "members": sorted(members)}
    if threshold is not None:
        state["threshold"] = threshold
    if observed:
        state["observed"] = {k.hex(): v for k, v in observed.items()}
    return state


def saved_int(state: dict[str, Any], name: str, top: int) -> int:
    value = state.get(name, 0)
    return value if isinstance(value, int) and 0 <= value <= top else 0


def saved_threshold(state: dict[str, Any], floor: float) -> float | None:
    """The saved threshold T, if it is a number in [floor, inf)."""
    value = state.get("threshold")
    if (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and floor <= value < float("inf")
    ):
        return float(value)
    return None


def saved_observations(state: dict[str, Any]) -> dict[bytes, float]:
    """Saved per-key counts ({key hex: count}); anything malformed is left out."""
    raw = state.get("observed")
    out: dict[bytes, float] = {}
    if isinstance(raw, dict):
        for key, count in raw.items():
            try:
                wire = bytes.fromhex(key)
            except (TypeError, ValueError):
                continue
            if len(wire) == p.KEY_LEN and isinstance(count, int | float) and count >= 0:
                out[wire] = float(count)
    return out


def saved_ring(state: dict[str, Any], servers: int) -> Ring | None:
    """The ring a restarted controller serves: the one it was switching to when it stopped
    (``ring_next``, past the copy: finishing the change is what keeps no write hidden), else the
    one it last activated; None if absent or malformed."""
    return _ring(state.get("ring_next"), servers) or _ring(state.get("ring"), servers)


def _ring(raw: Any, servers: int) -> Ring | None:
    if not isinstance(raw, dict):
        return None
    version, members = raw.get("version"), raw.get("members")
    if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version < 1 << 32:
        return None
    if not isinstance(members, list) or not members:
        return None
    if not all(
        isinstance(s, int) and not isinstance(s, bool) and 0 <= s < servers for s in members
    ):
        return None
    return version, frozenset(members)
