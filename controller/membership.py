"""Which servers are up: a failure detector fed once per period, without I/O.

Each period the runtime hands :meth:`Membership.observe` one :class:`Observation` per server: the
packets the switch sent it (LoadcountTable), the replies it sent (ReplycountTable, liveness.p4) and
the answer of its agent's control API to a ``ping`` (the agent's *incarnation*, a random number it
picks at start; ``None`` when the ping failed; :data:`NO_PROBE` for a server without a control
endpoint). Rules (docs/controller_runtime.md "Failure detection"):

- A period is a **miss** for a server when its ping failed, or when the switch sent it at least
  ``min_sent`` packets and it sent no reply at all.
- ``misses`` consecutive misses (default 2) declare it **down**: one missed period (a slow process, a
  ping lost under load, a period cut short) is not enough.
- A down server is **up** again from the first period whose ping answers. It is reported
  ``restarted`` when its incarnation changed.
- A server without a control endpoint (:data:`NO_PROBE`) is never declared down: once down, the
  switch refuses its requests, so nothing but a ping could ever show it back.
- An up server whose incarnation changed **restarted** (however fast: faster than a period too); its
  copies must be invalidated before anything is redirected to it again.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final


class _NoProbe(enum.Enum):
    NO_PROBE = "no probe"


#: The server has no control endpoint: only the counters speak for it.
NO_PROBE: Final = _NoProbe.NO_PROBE

Probe = int | None | _NoProbe


class State(enum.Enum):
    UP = "up"
    SUSPECT = "suspect"  # missed at least one period, fewer than ``misses``
    DOWN = "down"


class Event(enum.Enum):
    DOWN = "down"  # declared dead: leaves every replica set, its requests are refused
    UP = "up"  # a down server answers again (``restarted``: with a new incarnation)
    RESTART = "restart"  # an up server came back with a new incarnation before it was missed


@dataclass(frozen=True)
class Observation:
    sent: int  # KVSwitch packets the switch sent the server this period
    replied: int  # replies the server sent this period
    probe: Probe  # incarnation from the agent's ping; None: the ping failed


@dataclass(frozen=True)
class Change:
    server: int
    event: Event
    restarted: bool = False  # UP only: the incarnation changed while it was down
    incarnation: int | None = None


@dataclass
class _Server:
    state: State = State.UP
    misses: int = 0
    incarnation: int | None = None


class Membership:
    def __init__(self, servers: int, misses: int = 2, min_sent: int = 5) -> None:
        if servers <= 0:
            raise ValueError("servers must be > 0")
        if misses < 1:
            raise ValueError("misses must be >= 1")
        if min_sent < 1:
            raise ValueError("min_sent must be >= 1")
        self.misses = misses
        self.min_sent = min_sent
        self._servers = [_Server() for _ in range(servers)]

    @property
    def servers(self) -> int:
        return len(self._servers)

    def state(self, server: int) -> State:
        return self._servers[server].state

    def incarnation(self, server: int) -> int | None:
        return self._servers[server].incarnation

    @property
    def down(self) -> frozenset[int]:
        return frozenset(i for i, s in enumerate(self._servers) if s.state is State.DOWN)

    def mark_down(self, server: int) -> None:
        """Take the switch's word for it (a DownTable entry found at start-up): down until its
        ping answers again."""
        self._servers[server].state = State.DOWN
        self._servers[server].misses = self.misses

    def mark_up(self, server: int, incarnation: int) -> None:
        """Take a ping's word for it outside a period (a down server added back to the ring)."""
        s = self._servers[server]
        s.state, s.misses, s.incarnation = State.UP, 0, incarnation

    def observe(self, observations: Sequence[Observation]) -> list[Change]:
        """One period's observations (one per server, in server order) -> what changed."""
        if len(observations) != len(self._servers):
            raise ValueError(f"{len(observations)} observations for {len(self._servers)} servers")
        changes: list[Change] = []
        for server, (s, obs) in enumerate(zip(self._servers, observations, strict=True)):
            change = self._observe_one(server, s, obs)
            if change is not None:
                changes.append(change)
        return changes

    def _observe_one(self, server: int, s: _Server, obs: Observation) -> Change | None:
        if obs.probe is NO_PROBE:
            return None
        answered = isinstance(obs.probe, int) and not isinstance(obs.probe, bool)
        silent = obs.sent >= self.min_sent and obs.replied <= 0
        new_incarnation = obs.probe if answered else None
        changed = (
            new_incarnation is not None
            and s.incarnation is not None
            and new_incarnation != s.incarnation
        )
        if new_incarnation is not None:
            s.incarnation = new_incarnation
        if s.state is State.DOWN:
            # requests for it are refused by the switch, so its counters stay near 0: the ping
            # decides
            if not answered:
                return None
            s.state, s.misses = State.UP, 0
            return Change(server, Event.UP, restarted=changed, incarnation=s.incarnation)
        missed = not answered or silent
        if missed:
            s.misses += 1
            if s.misses >= self.misses:
                s.state = State.DOWN
                return Change(server, Event.DOWN, incarnation=s.incarnation)
            s.state = State.SUSPECT
        else:
            s.misses = 0
            s.state = State.UP
        if changed:
            return Change(server, Event.RESTART, incarnation=s.incarnation)
        return None
