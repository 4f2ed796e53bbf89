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

The write rotation (docs/protocol.md F7) is explored here too, since only a spine rotates:
with ``rotation="by-id"`` a write of the key goes to one holder, its writer, chosen from the
request id by :func:`kvswitch.consistency.rules.rotated_write`, and to no other; that holder's
reply completes it (:func:`~kvswitch.consistency.rules.holder_report`: origin_ver rises and the
holder's own cell records the version, the origin's as any other's); a Get goes to a holder in
the read set or to the origin, and every holder's read reply, the origin's included, passes rule
6 only at exactly origin_ver. The initial state has every holder, the origin too, valid at
(1, 1). A Get's destination is over-approximated: the spine sends it to the holder whose report
last raised origin_ver if that one is still in the read set, else to the origin; the explorer
lets it go to any holder of the read set or to the origin, which covers both. Three broken
variants must be caught:

- ``rotation="any"``: each attempt of a write goes to any holder (a writer chosen per packet, by
  load as in Pegasus, or by a counter): a repeat after a lost reply reaches a holder that never
  saw the request id and is applied a second time, after a second writer's write (preset
  ``rotation-retry``);
- ``rotated_settled``: rotated writes flagged ``F_SETTLED`` as rule 1 flags the origin's: the
  repeat's writer, which did not apply the second writer's write, moves the first value to the
  repeat's newer version (the adoption), and reads return it after the second write (preset
  ``rotation-retry``);
- ``origin_authoritative``: the origin kept its one-rack role (Gets fall back to it, its read
  replies pass whatever their version): it misses the writes other holders took, and serves
  the value from before them (preset ``rotation``).

A change of the key's writer map (docs/protocol.md F7, "Changing the writer map") is modelled by
``map_change``: once, while no write of the key is on its way to a server (the drain the
controller's round trips give, as F4's), the controller takes the last holder out of the map.
With ``"frozen"`` (the rule) it does so inside the write freeze, as one step: every holder's
request ids and newest item imported into every holder (items only if newer, ids merged), then
the spine's map (the holder's cell zeroed, n - 1 holders), then the release; no write is applied
in between, which is what the freeze's RETRY guarantees. ``"unfrozen"`` (broken) changes the
map without the export and import, which the explorer catches on preset ``rotation-map-change``
(1 171 states): the replica took c0's write, the map loses it, its reply (no longer a holder's
report) acknowledges the write, and the origin, now the only writer and never given the value,
answers a read at origin_ver with the value from before it. ``"items-only"`` (broken) imports
the newest item but not the ids: c0's repeat, its first reply lost, meets the origin, which never
saw its id, and is applied a second time after c2's write (105 874 states): c1 read a1, c2's a2
completed, c2 then reads a1.

Not modelled for the rotation: hot-set changes, a switch restart, the controller's repair of a
replica above origin_ver and SYNCs (the presets turn them off); docs/fabric.md "Write rotation"
says what they need.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from kvswitch import protocol as p
from kvswitch.agent.backends import Item
from kvswitch.consistency.explore import (
    CLIENT0,
    ORIGIN,
    SLOT,
    AgentState,
    Explorer,
    Msg,
    Report,
    Rules,
    Scenario,
    State,
    Switch,
    _scenario,
)

#: FabricScenario.rotation: who takes a write of the key.
ROTATION = {
    "": "the origin, copies to every replica (rule 1)",
    "by-id": "one holder, a function of the request id (F7)",
    "any": "any one holder per attempt (broken)",
}

#: FabricScenario.map_change: how the controller takes the last holder out of the writer map.
MAP_CHANGE = {
    "": "never",
    "frozen": "inside the write freeze: ids and newest item imported into every holder (F7)",
    "unfrozen": "without the export and import (broken)",
    "items-only": "inside the write freeze, the newest item imported but not the ids (broken)",
}


@dataclass(frozen=True)
class FabricScenario:
    scenario: Scenario
    local: frozenset[int] = field(default_factory=frozenset)  # clients in the origin's rack
    steering: bool = True  # the home leaf steers them through the key's spine (rule F3)
    rotation: str = ""  # the write rotation (F7): a key of ROTATION
    rotated_settled: bool = False  # broken: rotated writes flagged F_SETTLED as in rule 1
    origin_authoritative: bool = False  # broken: the origin keeps its one-rack role
    map_change: str = ""  # the last holder leaves the writer map: a key of MAP_CHANGE

    def __post_init__(self) -> None:
        if self.rotation not in ROTATION:
            raise ValueError(f"rotation is one of {list(ROTATION)}, not {self.rotation!r}")
        if self.map_change not in MAP_CHANGE:
            raise ValueError(f"map_change is one of {list(MAP_CHANGE)}, not {self.map_change!r}")
        if self.map_change and not (self.rotation and self.scenario.replicas >= 1):
            raise ValueError("a writer map change needs the rotation and a replica")
        sc = self.scenario
        if self.rotation and (
            sc.hotset_change or sc.restart or sc.ahead or sc.sync_retries or self.local
        ):
            raise ValueError(
                "the rotation is explored without hot-set changes, restarts, repairs, SYNC "
                "retries and local clients"
            )

    def describe(self) -> str:
        where = ", ".join(f"c{c}" for c in sorted(self.local)) or "none"
        text = (
            f"{self.scenario.describe()} | in the origin's rack: {where}; home leaf steering "
            f"{'on' if self.steering else 'OFF'}"
        )
        if self.rotation:
            text += f"; writes to {ROTATION[self.rotation]}"
            text += ", flagged F_SETTLED" if self.rotated_settled else ""
            text += ", the origin authoritative" if self.origin_authoritative else ""
        if self.map_change:
            text += f"; the last holder leaves the map {MAP_CHANGE[self.map_change]}"
        return text


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

# The rotation's request ids: client c's request idx is (ROTATION_CIDS[c], ROTATION_SEQ0 + idx),
# chosen so that rules.rotated_write (a CRC's low bits mod n) spreads the presets' writes: over 2
# holders c0's and c1's first writes -> the replica, their second writes and c2's first -> the
# origin; over 3 holders c0's first write -> r1, c2's first -> r2
# (test_explore_rotation.py checks it).
ROTATION_CIDS = (1, 2, 12)
ROTATION_SEQ0 = 19

# The rotation's presets (writers as above).
_ROTATION_PRESETS: dict[str, FabricScenario] = {
    # c0's two writes taken by different holders, reads under them
    "rotation": FabricScenario(_scenario(((b"a1", b"a2"), (_G, _G)), replicas=1), rotation="by-id"),
    # two writers whose writes go to different holders, a reader
    "rotation-two-writers": FabricScenario(
        _scenario(((b"a1",), (_G, _G), (b"a2",)), replicas=1), rotation="by-id"
    ),
    # c0's write (to the replica) loses its reply on the way to c0 and is re-sent; c2's write
    # goes to the origin; c1 reads before, c2 after
    "rotation-retry": FabricScenario(
        _scenario(((b"a1",), (_G,), (b"a2", _G)), replicas=1, losses=1, retries=1, retriers=(0,)),
        rotation="by-id",
    ),
    # the one-rack explorer's resend-reread under the rotation: an eager resend (its first
    # attempt still on its way), a second writer writing twice, the resender reading twice
    "rotation-reread": FabricScenario(
        _scenario(
            ((b"a1", _G, _G), (b"a2", b"a3")),
            replicas=1,
            retries=1,
            eager_retries=True,
            retriers=(0,),
        ),
        rotation="by-id",
    ),
    # rotation-retry with the replica taken out of the writer map at some quiet moment: c0's
    # repeat may then go to the origin instead of the replica that applied its first attempt
    "rotation-map-change": FabricScenario(
        _scenario(((b"a1",), (_G,), (b"a2", _G)), replicas=1, losses=1, retries=1, retriers=(0,)),
        rotation="by-id",
        map_change="frozen",
    ),
    # three holders, two writers to different replicas, a reader; a loss, a duplicate and a
    # retry (948 400 states: explore_heavy)
    "rotation-faults": FabricScenario(
        _scenario(((b"a1",), (_G, _G), (b"a2",)), replicas=2, losses=1, dups=1, retries=1),
        rotation="by-id",
    ),
}
PRESETS.update(_ROTATION_PRESETS)

#: The presets the rules pass with steering on (and must fail with it off).
CHECKED: tuple[str, ...] = ("local-writer", "both-writers", "local-faults")

#: The rotation's presets, which the rules pass; each broken variant below fails one of them.
ROTATION_CHECKED: tuple[str, ...] = tuple(_ROTATION_PRESETS)

#: The rotation's broken variants and the preset that catches each.
ROTATION_BROKEN: dict[str, tuple[str, dict[str, object]]] = {
    "writer-per-attempt": ("rotation-retry", {"rotation": "any"}),
    "settled-adoption": ("rotation-retry", {"rotated_settled": True}),
    "origin-authoritative": ("rotation", {"origin_authoritative": True}),
    "map-change-unfrozen": ("rotation-map-change", {"map_change": "unfrozen"}),
    "map-change-items-only": ("rotation-map-change", {"map_change": "items-only"}),
}


class FabricExplorer(Explorer):
    def __init__(self, fabric: FabricScenario, rules: Rules | None = None) -> None:
        super().__init__(fabric.scenario, rules)
        self.fabric = fabric
        self._controls = self._controls or bool(fabric.map_change)

    def _controller(
        self, s: tuple[int, ...], gets_to_leaving: bool, quiet: bool
    ) -> Iterator[tuple[tuple[Any, ...], tuple[int, ...]]]:
        yield from super()._controller(s, gets_to_leaving, quiet)
        sw_id, cl, ms, ctl_id = s[:4]
        phase, restarted, sync_for, pushes = self._ctl.values[ctl_id]
        if not self.fabric.map_change or phase != 0 or not quiet:
            return
        # the writer map change (module docstring), once, with no write on its way to a server
        gver, slot_ver, origin_ver, valid, epoch, floor, holders = self._sw.values[sw_id]
        agents = list(s[9:])
        if self.fabric.map_change != "unfrozen":
            merged = _merged([self._ag.values[agents[h]] for h in holders])
            for h in holders:
                own = self._ag.values[agents[h]]
                ids = merged[1] if self.fabric.map_change == "frozen" else own[1]
                agents[h] = self._ag((merged[0], ids, own[2]))
        gone = holders[-1]
        vv = tuple(0 if i == gone else v for i, v in enumerate(valid))
        sw2 = (gver, slot_ver, origin_ver, vv, epoch, floor, holders[:-1])
        c2 = self._ctl((1, restarted, sync_for, pushes))
        label = ("controller: writer map", f"{holders} -> {holders[:-1]}", self.fabric.map_change)
        yield label, (self._sw(sw2), cl, ms, c2, *s[4:9], *agents)

    def _bypass(self, c: int) -> bool:
        return c in self.fabric.local and not self.fabric.steering

    def _ids(self, c: int, idx: int) -> tuple[int, int]:
        if self.fabric.rotation:
            return ROTATION_CIDS[c], ROTATION_SEQ0 + idx
        return super()._ids(c, idx)

    def initial(self) -> State:
        s = super().initial()
        if not self.fabric.rotation:
            return s
        gver, slot_ver, origin_ver, valid, epoch, floor, holders = s[0]
        # the origin holds the key at (1, 1) and has a cell like every holder
        return ((gver, slot_ver, origin_ver, (1,) * len(valid), epoch, floor, holders), *s[1:])

    def _request(
        self, sw: Switch, c: int, idx: int, attempt: int
    ) -> Iterator[tuple[Switch, list[Msg], int]]:
        if self.fabric.rotation:
            yield from self._rotated(sw, c, idx, attempt)
            return
        if not self._bypass(c):
            yield from super()._request(sw, c, idx, attempt)
            return
        # the home leaf forwards it as plain IP: to the origin, unstamped, no copies
        value = self.sc.programs[c][idx]
        op = p.Op.GET if value is None else p.Op.SET
        me, (cid, seq) = CLIENT0 + c, self._ids(c, idx)
        att = attempt if self.sc.latest_reply_only else 0
        yield sw, [(1, ORIGIN, me, int(op), cid, seq, value or b"", 0, 0, 0, 0, att)], ORIGIN

    def _rotated(
        self, sw: Switch, c: int, idx: int, attempt: int
    ) -> Iterator[tuple[Switch, list[Msg], int]]:
        """A client's request of a rotated key crossing the spine (F7)."""
        gver, slot_ver, origin_ver, valid, epoch, floor, holders = sw
        value = self.sc.programs[c][idx]
        me, (cid, seq) = CLIENT0 + c, self._ids(c, idx)
        att = attempt if self.sc.latest_reply_only else 0
        if value is not None:  # rule 1 of the rotation: one writer, no copies
            g, sv = [gver], [slot_ver]
            ver, j = self.rules.rotated_write(SLOT, g, sv, cid, seq, len(holders))
            flags = p.F_REDIRECT
            if self.fabric.rotated_settled and slot_ver <= origin_ver:
                flags |= p.F_SETTLED
            writers = holders if self.fabric.rotation == "any" else (holders[j],)
            sw2 = (g[0], sv[0], origin_ver, valid, epoch, floor, holders)
            for w in writers:
                yield (
                    sw2,
                    [(1, w, me, int(p.Op.SET), cid, seq, value, 0, epoch, ver, flags, att)],
                    None,
                )
            return
        # a Get: the holder that made the latest completed version if it is in the read set,
        # else the origin; over-approximated as any holder of the read set or the origin
        ov, vv = [origin_ver], list(valid)
        dests = {h for h in holders if self.rules.in_read_set(SLOT, h, ov, vv)} | {ORIGIN}
        for d in sorted(dests):
            yield sw, [(1, d, me, int(p.Op.GET), cid, seq, b"", 0, 0, 0, 0, att)], d

    def _at_switch(self, sw: Switch, m: Msg) -> tuple[Switch, list[Msg], bool]:
        if self.fabric.rotation:
            return self._rotated_report(sw, m)
        dst, src = m[1], m[2]
        if src == ORIGIN and dst >= CLIENT0 and self._bypass(dst - CLIENT0):
            return sw, [], True  # back through the home leaf only: the spine never sees it
        return super()._at_switch(sw, m)

    def _rotated_report(self, sw: Switch, m: Msg) -> tuple[Switch, list[Msg], bool]:
        """A holder's message about a rotated key reaching the spine (F7)."""
        _, _dst, src, op, _cid, _seq, _value, status, epoch, ver, _flags, _ = m
        gver, slot_ver, origin_ver, valid, cur, floor, holders = sw
        current = epoch == cur
        if op == p.Op.GET_REPLY:
            if self.fabric.origin_authoritative and src == ORIGIN:
                return super()._at_switch(sw, m)  # rule 2 on its reply, which always passes
            passes = self.rules.replica_reply_passes(SLOT, current, ver, [origin_ver])
            return sw, [], bool(passes)  # rule 6, for every holder
        if op in (p.Op.SET_REPLY, p.Op.DEL_REPLY, p.Op.SYNC_DONE):
            good = (p.Status.OK,) if op == p.Op.SYNC_DONE else (p.Status.OK, p.Status.STALE)
            if src in holders and status in good:  # rule 2 of the rotation
                ov, vv = [origin_ver], list(valid)
                self.rules.holder_report(SLOT, src, current, ver, floor, [slot_ver], ov, vv)
                sw = (gver, slot_ver, ov[0], tuple(vv), cur, floor, holders)
            return sw, [], op != p.Op.SYNC_DONE
        return super()._at_switch(sw, m)  # CONFIRM (rule 3), SYNC (rule 5)


def _merged(states: list[AgentState]) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """The freeze's import as one step over agent states (items, ids, pending): the newest item
    of each key (by version) and every remembered request id (the first result seen)."""
    items: dict[bytes, Item] = {}
    ids: dict[Any, Any] = {}
    for held, seen, _pending in states:
        for key, item in held:
            if key not in items or item.version > items[key].version:
                items[key] = item
        for rid, result in seen:
            ids.setdefault(rid, result)
    return tuple(sorted(items.items())), tuple(sorted(ids.items(), key=lambda kv: kv[0]))


def explore_fabric(
    fabric: FabricScenario, rules: Rules | None = None, max_states: int | None = None
) -> Report:
    return FabricExplorer(fabric, rules).run(max_states)


def explore_rotation_broken(name: str, max_states: int | None = None) -> Report:
    """The rotation's broken variant ``name`` (:data:`ROTATION_BROKEN`) on its preset."""
    preset, change = ROTATION_BROKEN[name]
    return explore_fabric(dataclasses.replace(PRESETS[preset], **change), max_states=max_states)
