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
``map_change``, once, while no write of the key is on its way to a server (the drain the
controller's round trips give, as F4's): ``"remove"`` takes the last holder out of the map,
``"add"`` puts one more in (its cell 0, the floor at global_ver, as plan.diff does), ``"on"`` and
``"off"`` turn the rotation on (the key starts with rule 1: the origin takes every write, copies
to every replica) or off (rule 1 from then on). The spine's state then carries the slot's
``rotated`` cell (which the controller writes with the flag) and ``done_by``; replies, confirms
and syncs are judged by the cell as it is when they arrive, so a reply sent before the change is
judged by the new flag (the explorer records what crossed a change: :attr:`FabricExplorer.
crossed`). With ``freeze="frozen"`` (the rule) the change is one step inside the write freeze:
every holder's request ids and newest item imported into every holder of both maps (items only
if newer, ids merged), then the spine, then the release; ``"unfrozen"`` (broken) skips the export
and import, ``"items-only"`` (broken) imports the item but not the ids. Caught: removing
without the import (``map-change-unfrozen``: the origin, now the only writer, answers at
origin_ver with the value from before the removed holder's write), with the item only
(``map-change-items-only``, ``add-items-only``: a repeat meets a writer that never saw its id and
is applied a second time after another write), turning the rotation off without the import
(``off-unfrozen``: the stale origin is authoritative again). Turning it on without the import is
caught only when a copy was lost too (two losses, 4 772 698 states; not a test): replicas
remember the ids of the copies they apply.

Found: turning the rotation off lets a read reply of the origin sent before the import (the
origin stale, the reply one R6 would drop) cross the change and pass rule 2, which passes any
read reply of the origin (``off-undrained``, 7 steps). A Get reaches a stale origin after a
write was acknowledged only through R4's fallback when done_by's holder is skipped (a down
holder, not built yet), so ``reads="any"`` (which covers it) finds it and ``reads="done_by"``
(R4 as built) does not (preset ``rotation-off-built``). The fix, ``drain_reads``: the freeze
keeps the key rotated until no read reply of the origin sent before the import is on its way,
then turns it off (preset ``rotation-off``).

A push (``sync``): the controller reads the spine's registers and asks the holder
:func:`kvswitch.controller.rotation.sync_source` names for a SYNC, once, at any moment; the spine
stamps it only from done_by's holder while origin_ver != 0 (R5), the holder sends SYNC_DONE
(R2), the controller pushes its item into every other holder, which confirm (rule 3). With
``sync_from_any`` (broken) the spine stamps a SYNC from any holder: the origin, asked while it
was done_by, has its SYNC stamped after c0's write completed at the replica, and the old value
gets the newest version (``sync-from-any-holder``).

Not modelled for the rotation: hot-set changes, a switch restart (so no SYNC at origin_ver 0),
the controller's repair of a replica above origin_ver, SYNC retries and a dead holder (the
presets turn them off); docs/fabric.md "Write rotation" says what they need.
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
    SW,
    Agents,
    AgentState,
    Explorer,
    Msg,
    Report,
    Rules,
    Scenario,
    State,
    Switch,
    _Memo,
    _scenario,
    describe_msg,
)
from kvswitch.controller.plan import KeyPlan
from kvswitch.controller.rotation import sync_source

#: FabricScenario.rotation: who takes a write of the key.
ROTATION = {
    "": "the origin, copies to every replica (rule 1)",
    "by-id": "one holder, a function of the request id (F7)",
    "any": "any one holder per attempt (broken)",
}

#: FabricScenario.map_change: what the controller changes in the key's writer map, once.
MAP_CHANGE = {
    "": "never",
    "remove": "the last holder leaves the writer map",
    "add": "a holder joins the writer map (floor = global_ver, its cell 0)",
    "on": "the rotation turned on (the key starts with rule 1)",
    "off": "the rotation turned off (rule 1 from then on)",
}

#: FabricScenario.freeze: how the controller changes it.
FREEZE = {
    "frozen": "inside the write freeze: ids and newest item imported into every holder (F7)",
    "unfrozen": "without the export and import (broken)",
    "items-only": "inside the write freeze, the newest item imported but not the ids (broken)",
}

#: FabricScenario.reads: where the spine sends a rotated key's Get.
READS = {
    "any": "any holder of the read set or the origin (over-approximated)",
    "done_by": "done_by's holder if its cell is in the read set, else the origin (R4)",
}


@dataclass(frozen=True)
class FabricScenario:
    scenario: Scenario
    local: frozenset[int] = field(default_factory=frozenset)  # clients in the origin's rack
    steering: bool = True  # the home leaf steers them through the key's spine (rule F3)
    rotation: str = ""  # the write rotation (F7): a key of ROTATION
    rotated_settled: bool = False  # broken: rotated writes flagged F_SETTLED as in rule 1
    origin_authoritative: bool = False  # broken: the origin keeps its one-rack role
    map_change: str = ""  # the writer map changes once: a key of MAP_CHANGE
    freeze: str = "frozen"  # how: a key of FREEZE
    reads: str = "any"  # where a rotated key's Get goes: a key of READS
    # the controller asks rotation.sync_source's holder for a SYNC once, at any moment, and
    # pushes its item into every other holder (R5)
    sync: bool = False
    sync_from_any: bool = False  # broken: the spine stamps a rotated key's SYNC from any holder
    # the change waits until no read reply of the origin is on its way to the spine (the freeze
    # keeps the key rotated for a drain after the import): without it, turning the rotation off
    # lets an origin's read reply from before the import pass rule 2 (module docstring)
    drain_reads: bool = False

    def __post_init__(self) -> None:
        for name, allowed in (
            ("rotation", ROTATION),
            ("map_change", MAP_CHANGE),
            ("freeze", FREEZE),
            ("reads", READS),
        ):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} is one of {list(allowed)}, not {getattr(self, name)!r}")
        if self.map_change and not (self.rotation and self.scenario.replicas >= 1):
            raise ValueError("a writer map change needs the rotation and a replica")
        if self.sync and not (self.rotation and self.reads == "done_by"):
            raise ValueError("a SYNC of a rotated key needs the rotation and reads='done_by'")
        if self.sync_from_any and not self.sync:
            raise ValueError("sync_from_any needs sync")
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
        if self.rotation:
            text += f"; Gets to {READS[self.reads]}"
        if self.map_change:
            text += f"; {MAP_CHANGE[self.map_change]} {FREEZE[self.freeze]}"
        if self.drain_reads:
            text += ", once no read reply of the origin is on its way"
        if self.sync:
            text += "; one SYNC from done_by's holder, pushed to the others"
            text += " (stamped from any holder)" if self.sync_from_any else ""
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
        map_change="remove",
    ),
    # the mirror: a second replica joins the map at some quiet moment; c2's write goes to the
    # origin over two holders, to the new one over three, and its reply may be lost
    "rotation-add": FabricScenario(
        _scenario(((b"a1",), (_G,), (b"a2", _G)), replicas=2, losses=1, retries=1, retriers=(2,)),
        rotation="by-id",
        map_change="add",
    ),
    # a key that starts with rule 1 (the origin takes every write, copies to the replica) is
    # rotated at some quiet moment: c0's write (to the origin under rule 1, to the replica
    # rotated) may lose its reply and be repeated across the change; replies, confirms and
    # reads sent under rule 1 reach the spine under the rotation
    "rotation-on": FabricScenario(
        _scenario(((b"a1",), (b"a2", _G)), replicas=1, losses=1, retries=1, retriers=(0,)),
        rotation="by-id",
        map_change="on",
    ),
    # the reverse: a rotated key goes back to rule 1 at some quiet moment; the replica's write
    # reply and the origin's read reply sent under the rotation reach the spine under rule 1.
    # Gets as in "any" (the origin whatever done_by: R4 with done_by's holder in DownTable).
    # The change waits until no read reply of the origin is on its way (the fabric runtime's
    # drain; without it: "off-undrained")
    "rotation-off": FabricScenario(
        _scenario(((b"a1",), (_G,), (b"a2", _G)), replicas=1),
        rotation="by-id",
        map_change="off",
        drain_reads=True,
    ),
    # R4 as the spine is built (done_by's holder if in the read set, else the origin: no
    # DownTable for done_by yet) without the drain: linearizable, as no Get reaches a stale
    # origin after an acknowledged write (the drain is for R4 with DownTable)
    "rotation-off-built": FabricScenario(
        _scenario(((b"a1",), (_G,), (b"a2", _G)), replicas=1),
        rotation="by-id",
        map_change="off",
        reads="done_by",
    ),
    # a push of the rotated key (R5: the SYNC asked of done_by's holder) at any moment, racing
    # c0's write (to the replica) and c2's (to the origin), which may make the other done_by
    "rotation-sync": FabricScenario(
        _scenario(((b"a1",), (_G,), (b"a2", _G)), replicas=1),
        rotation="by-id",
        reads="done_by",
        sync=True,
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
    "map-change-unfrozen": ("rotation-map-change", {"freeze": "unfrozen"}),
    "map-change-items-only": ("rotation-map-change", {"freeze": "items-only"}),
    "add-items-only": ("rotation-add", {"freeze": "items-only"}),
    "off-unfrozen": ("rotation-off", {"freeze": "unfrozen"}),
    "off-undrained": ("rotation-off", {"drain_reads": False}),
    "sync-from-any-holder": ("rotation-sync", {"sync_from_any": True}),
}

# A rotated key's switch state: Switch and two registers, (..., rotated, done_by): the slot's
# flag (1: rotated) and the ordinal of the holder whose report last raised origin_ver.
RotSwitch = tuple[Any, ...]


class FabricExplorer(Explorer):
    def __init__(self, fabric: FabricScenario, rules: Rules | None = None) -> None:
        super().__init__(fabric.scenario, rules)
        self.fabric = fabric
        self._controls = self._controls or bool(fabric.map_change) or fabric.sync
        # the messages in flight at each writer map change, by kind (what crossed it)
        self.crossed: set[str] = set()
        self._origin_reads = _Memo(self._origin_reading)

    def _origin_reading(self, ms: int) -> bool:
        """A read reply of the origin on its way to the spine (interned messages ``ms``)."""
        msgs = (self._m.values[m] for m in self._msgs.values[ms])
        return any(m[0] == 0 and m[2] == ORIGIN and m[3] == p.Op.GET_REPLY for m in msgs)

    def _controller(
        self, s: tuple[int, ...], gets_to_leaving: bool, quiet: bool
    ) -> Iterator[tuple[tuple[Any, ...], tuple[int, ...]]]:
        yield from super()._controller(s, gets_to_leaving, quiet)
        phase = self._ctl.values[s[3]][0]
        drained = not (self.fabric.drain_reads and self._origin_reads[s[2]])
        if self.fabric.map_change and not phase & 1 and quiet and drained:
            yield self._map_change(s)
        if self.fabric.sync and not phase & 2:
            yield from self._ask_sync(s)

    def _map_change(self, s: tuple[int, ...]) -> tuple[tuple[Any, ...], tuple[int, ...]]:
        """The writer map change (module docstring), once, with no write on its way to a
        server: inside the freeze, one step (export, import, the spine's tables, release)."""
        sw_id, cl, ms, ctl_id = s[:4]
        phase, restarted, sync_for, pushes = self._ctl.values[ctl_id]
        gver, slot_ver, origin_ver, valid, epoch, floor, holders, rot, done_by = self._sw.values[
            sw_id
        ]
        agents = list(s[9:])
        kind, after, vv, rot2 = self.fabric.map_change, holders, valid, rot
        if kind == "remove":
            after = holders[:-1]
            vv = tuple(0 if i == holders[-1] else v for i, v in enumerate(valid))
        elif kind == "add":  # the joining holder's cell 0, the floor at global_ver (plan.diff)
            joining = self.sc.replicas
            after, floor = (*holders, joining), gver
            vv = tuple(0 if i == joining else v for i, v in enumerate(valid))
        else:
            rot2 = int(kind == "on")
        if self.fabric.freeze != "unfrozen":
            merged = _merged([self._ag.values[agents[h]] for h in holders])
            for h in dict.fromkeys((*holders, *after)):
                own = self._ag.values[agents[h]]
                ids = merged[1] if self.fabric.freeze == "frozen" else own[1]
                agents[h] = self._ag((merged[0], ids, own[2]))
        for m in self._msgs.values[ms]:
            self.crossed.add(describe_msg(self._m.values[m]).split(" id=")[0].split(" v=")[0])
        sw2 = (gver, slot_ver, origin_ver, vv, epoch, floor, after, rot2, done_by)
        c2 = self._ctl((phase | 1, restarted, sync_for, pushes))
        what = f"{holders} -> {after}" if after != holders else f"rotated {rot} -> {rot2}"
        label = ("controller: writer map", what, self.fabric.freeze)
        return label, (self._sw(sw2), cl, ms, c2, *s[4:9], *agents)

    def _ask_sync(self, s: tuple[int, ...]) -> Iterator[tuple[tuple[Any, ...], tuple[int, ...]]]:
        """The controller reads the spine's registers and asks the holder R5 lets SYNC
        (:func:`kvswitch.controller.rotation.sync_source`) for a SYNC, whose item it then pushes
        into every other holder (FabricRuntime._sync_sources); none if no holder qualifies."""
        sw_id, ctl_id = s[0], s[3]
        phase, restarted, _sync_for, pushes = self._ctl.values[ctl_id]
        _, _, origin_ver, valid, _, _, holders, rot, done_by = self._sw.values[sw_id]
        kp = KeyPlan(SLOT, holders, rotate=bool(rot))
        j = sync_source(kp, origin_ver, done_by, [valid[h] for h in holders])
        if j is None:
            return
        source = holders[j]
        a, new = self._agent_steps["sync", source, s[9 + source]]
        others = tuple(h for h in holders if h != source)
        c2 = self._ctl((phase | 2, restarted, others, pushes))
        ag = (*s[9 : 9 + source], a, *s[10 + source :])
        label = ("controller: SYNC asked of", f"r{source}" if source else "the origin")
        yield label, (sw_id, s[1], self._add[s[2], new], c2, *s[4:9], *ag)

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
        agents = s[1]
        rot = int(self.fabric.map_change != "on")
        if rot:  # the origin holds the key at (1, 1) and has a cell like every holder
            valid = (1,) * len(valid)
        if self.fabric.map_change == "add":  # the last server holds nothing yet
            holders, valid = holders[:-1], (*valid[:-1], 0)
            agents = (*agents[:-1], Agents.initial(None))
        sw = (gver, slot_ver, origin_ver, valid, epoch, floor, holders, rot, 0)
        return (sw, agents, *s[2:])

    def _request(
        self, sw: Switch, c: int, idx: int, attempt: int
    ) -> Iterator[tuple[Switch, list[Msg], int]]:
        if self.fabric.rotation:
            if sw[7]:
                yield from self._rotated(sw, c, idx, attempt)
                return
            for sw2, out, d in super()._request(sw[:7], c, idx, attempt):  # rule 1
                yield (*sw2, *sw[7:]), out, d
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
        self, sw: RotSwitch, c: int, idx: int, attempt: int
    ) -> Iterator[tuple[RotSwitch, list[Msg], int]]:
        """A client's request of a rotated key crossing the spine (F7)."""
        gver, slot_ver, origin_ver, valid, epoch, floor, holders, rot, done_by = sw
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
            sw2 = (g[0], sv[0], origin_ver, valid, epoch, floor, holders, rot, done_by)
            for w in writers:
                yield (
                    sw2,
                    [(1, w, me, int(p.Op.SET), cid, seq, value, 0, epoch, ver, flags, att)],
                    None,
                )
            return
        ov, vv = [origin_ver], list(valid)
        if self.fabric.reads == "done_by":  # R4: done_by's holder if in the read set
            last = holders[done_by] if done_by < len(holders) else None
            ok = last is not None and self.rules.in_read_set(SLOT, last, ov, vv)
            dests = {last if ok else ORIGIN}
        else:  # any holder of the read set or the origin (covers done_by and the fallback)
            dests = {h for h in holders if self.rules.in_read_set(SLOT, h, ov, vv)} | {ORIGIN}
        for d in sorted(dests):  # type: ignore[type-var]
            yield sw, [(1, d, me, int(p.Op.GET), cid, seq, b"", 0, 0, 0, 0, att)], d

    def _at_switch(self, sw: Switch, m: Msg) -> tuple[Switch, list[Msg], bool]:
        if self.fabric.rotation:
            if sw[7]:
                return self._rotated_report(sw, m)
            return self._rule_1_report(sw, m)
        dst, src = m[1], m[2]
        if src == ORIGIN and dst >= CLIENT0 and self._bypass(dst - CLIENT0):
            return sw, [], True  # back through the home leaf only: the spine never sees it
        return super()._at_switch(sw, m)

    def _rule_1_report(self, sw: RotSwitch, m: Msg) -> tuple[RotSwitch, list[Msg], bool]:
        """The one-rack rules on a spine's key that is not rotated (now); a report that raises
        origin_ver (the origin's, rule 2) makes done_by the origin's ordinal, as the spine's
        P4 writes it on any raise."""
        sw2, out, onward = super()._at_switch(sw[:7], m)
        done_by = 0 if sw2[2] > sw[2] else sw[8]
        return (*sw2, sw[7], done_by), out, onward

    def _rotated_report(self, sw: RotSwitch, m: Msg) -> tuple[RotSwitch, list[Msg], bool]:
        """A holder's message about a rotated key reaching the spine (F7)."""
        _, _dst, src, op, cid, seq, _value, status, epoch, ver, flags, _ = m
        gver, slot_ver, origin_ver, valid, cur, floor, holders, rot, done_by = sw
        current = epoch == cur
        if op == p.Op.GET_REPLY:
            if self.fabric.origin_authoritative and src == ORIGIN:
                return self._rule_1_report(sw, m)  # rule 2 on its reply, which always passes
            passes = self.rules.replica_reply_passes(SLOT, current, ver, [origin_ver])
            return sw, [], bool(passes)  # rule 6, for every holder
        if op in (p.Op.SET_REPLY, p.Op.DEL_REPLY, p.Op.SYNC_DONE):
            good = (p.Status.OK,) if op == p.Op.SYNC_DONE else (p.Status.OK, p.Status.STALE)
            if src in holders and status in good:  # rule 2 of the rotation
                ov, vv = [origin_ver], list(valid)
                raised = self.rules.holder_report(
                    SLOT, src, current, ver, floor, [slot_ver], ov, vv
                )
                if raised and self.fabric.reads == "done_by":
                    done_by = holders.index(src)
                sw = (gver, slot_ver, ov[0], tuple(vv), cur, floor, holders, rot, done_by)
            return sw, [], op != p.Op.SYNC_DONE
        if op == p.Op.SYNC:  # R5: from done_by's holder, or from the origin at origin_ver 0
            if self.fabric.sync_from_any:
                allowed = src in holders
            elif origin_ver == 0:
                allowed = src == ORIGIN
            else:
                allowed = done_by < len(holders) and src == holders[done_by]
            if not allowed:
                return sw, [], False
            g, sv = [gver], [slot_ver]
            stamped = self.rules.sync(SLOT, g, sv, [origin_ver])  # rule 5's stamp
            e = cur if stamped else 0
            back = (1, src, SW, int(p.Op.SYNC), cid, seq, b"", 0, e, stamped, flags, 0)
            return (
                (g[0], sv[0], origin_ver, valid, cur, floor, holders, rot, done_by),
                [back],
                False,
            )
        return self._rule_1_report(sw, m)  # CONFIRM (rule 3)


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
