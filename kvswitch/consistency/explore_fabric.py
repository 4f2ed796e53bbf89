"""The exhaustive check of the fabric's write path (docs/protocol.md "Many racks", rules F1 and F3).

In a leaf-spine fabric a fabric-hot key is version-stamped by one spine, spine(k), which runs the
rack's rules unchanged: :mod:`kvswitch.consistency.explore`'s switch *is* that spine. What the
fabric adds is who reaches it. A client in another rack comes through its own leaf and spine(k) (the
explorer's clients as they are). A client in the origin's rack talks to the origin through the home
leaf, which must steer the key's requests up to spine(k) and the origin's replies back through it
(F3): the leaf is the edge that keeps every write of the key stamped by one switch.

This module adds that home leaf. Clients listed in ``local`` sit in the origin's rack:

- with ``steering`` (the rule), their requests and the origin's replies cross spine(k), exactly as
  a remote client's: the two-level path must stay linearizable;
- without it (the broken rule: a leaf that has no FabricHotTable entry yet, or one that forgot it
  across a restart and forwards before its controller is back), their requests go straight to the
  origin, unstamped (the origin applies an unversioned write and keeps its version), and the
  origin's replies come back without crossing the spine (no rule 2): the explorer must find the
  stale read that follows (a replica still in the read set with the old value under the same
  version).

The rest (agents, messages, faults, histories, the linearizability check) is the one-rack
explorer's.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from kvswitch import protocol as p
from kvswitch.consistency.explore import (
    CLIENT0,
    ORIGIN,
    Explorer,
    Msg,
    Report,
    Rules,
    Scenario,
    Switch,
    _scenario,
)


@dataclass(frozen=True)
class FabricScenario:
    scenario: Scenario
    local: frozenset[int] = field(default_factory=frozenset)  # clients in the origin's rack
    steering: bool = True  # the home leaf steers them through the key's spine (rule F3)

    def describe(self) -> str:
        where = ", ".join(f"c{c}" for c in sorted(self.local)) or "none"
        return (
            f"{self.scenario.describe()} | in the origin's rack: {where}; home leaf steering "
            f"{'on' if self.steering else 'OFF'}"
        )


_G = None

#: Named fabric scenarios (``kvswitch sim explore-fabric --preset NAME``).
PRESETS: dict[str, FabricScenario] = {
    # a writer in the origin's rack, a reader elsewhere, reads under the write
    "local-writer": FabricScenario(_scenario(((b"a1",), (_G, _G)), replicas=1), frozenset({0})),
    # a writer in each place and a reader elsewhere
    "both-writers": FabricScenario(
        _scenario(((b"a1",), (b"a2",), (_G,)), replicas=1), frozenset({0})
    ),
    # a local writer with a loss, a duplicate and a retry
    "local-faults": FabricScenario(
        _scenario(((b"a1",), (_G,)), replicas=1, losses=1, dups=1, retries=1), frozenset({0})
    ),
}

#: The presets the rules pass with steering on (and must fail with it off).
CHECKED: tuple[str, ...] = ("local-writer", "both-writers", "local-faults")


class FabricExplorer(Explorer):
    def __init__(self, fabric: FabricScenario, rules: Rules | None = None) -> None:
        super().__init__(fabric.scenario, rules)
        self.fabric = fabric

    def _bypass(self, c: int) -> bool:
        return c in self.fabric.local and not self.fabric.steering

    def _request(
        self, sw: Switch, c: int, idx: int, attempt: int
    ) -> Iterator[tuple[Switch, list[Msg], int]]:
        if not self._bypass(c):
            yield from super()._request(sw, c, idx, attempt)
            return
        # the home leaf forwards it as plain IP: to the origin, unstamped, no copies
        value = self.sc.programs[c][idx]
        op = p.Op.GET if value is None else p.Op.SET
        me, cid, seq = CLIENT0 + c, c + 1, idx + 1
        att = attempt if self.sc.latest_reply_only else 0
        yield sw, [(1, ORIGIN, me, int(op), cid, seq, value or b"", 0, 0, 0, 0, att)], ORIGIN

    def _at_switch(self, sw: Switch, m: Msg) -> tuple[Switch, list[Msg], bool]:
        dst, src = m[1], m[2]
        if src == ORIGIN and dst >= CLIENT0 and self._bypass(dst - CLIENT0):
            return sw, [], True  # back through the home leaf only: the spine never sees it
        return super()._at_switch(sw, m)


def explore_fabric(
    fabric: FabricScenario, rules: Rules | None = None, max_states: int | None = None
) -> Report:
    return FabricExplorer(fabric, rules).run(max_states)
