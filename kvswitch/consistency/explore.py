"""Bounded exhaustive check of the coherence protocol (docs/protocol.md "Consistency").

A small rack: clients issuing Gets and Sets of one hot key, its origin (server 0) and replicas
(servers 1 .. R), and the switch (the registers of the key's slot, its holders and its floor).
Every reachable state is visited once (breadth first, an exact visited set over the whole state,
each state packed into a few bytes: :class:`_Visited`): each step delivers any one message in flight (so every interleaving and reordering), or, within the
bounds, loses or duplicates one, lets a client invoke its next operation or retry the pending one
(same request id), or lets the controller act (a replica removed and re-added; a switch restart;
one push of a synced item into one replica).

Nothing here re-states a rule:
- the switch's rules are the functions of :mod:`kvswitch.consistency.rules` (the source the
  simulator's numba kernel compiles, bench/coherence.py), passed in a :class:`Rules` so that a test
  can hand in a deliberately broken variant; only the routing around them (which ordinal a Get may
  pick, who gets a write's copies, what is forwarded where) is written here, as
  p4src/features/replicas.p4 does it;
- each server is a real :class:`~kvswitch.agent.core.AgentCore` fed the wire bytes. Its state is
  snapshotted into a canonical tuple (items, applied request ids, pending SYNCs) and every
  (state, input) -> (state, outputs) transition is memoised, so the agent's code runs once per
  distinct transition and the explorer stays fast without a second copy of the agent's rules.
  The controller reaches the agents as server.py's control channel does (``remove_local``,
  ``start_sync``, ``push_item``), each call one atomic step.

Speed: a state is a tuple of numbers, one per part (switch, clients, messages in flight,
controller, history, fault counters, each agent), each part interned; a step on a part (the
switch's rules on a message, the agent on a message, a reply ending an operation) is computed
once per distinct input and memoised, as the agent's transitions are. The rules and the agent
still decide every step; they run once per distinct (part, input) instead of once per state.

Messages: a server's message goes to the switch (hop 0: replies, CONFIRM, SYNC, SYNC_DONE), which
applies its rules when it is delivered and forwards a reply to its client at once; a request, a
write's copy or a reflected SYNC travels from the switch to a server (hop 1). The client -> switch
and switch -> client links are
not separate hops: delaying a request before the switch is the same as invoking it later, and
delaying a reply after the switch is the same as answering later, and both only widen the
operation's interval (a history that is linearizable with the narrower interval stays so with the
wider one); a loss on the last hop to the client is explored apart (the switch applied the reply,
the client never saw it and retries). A Get's round-robin turn is explored as any ordinal, which
covers every round-robin position. A client times out (and resends, if the retry bound allows)
once nothing in flight can answer it any more; ``eager_retries`` lets it time out at any moment.

History: an operation's call is the step the client invoked it, its return the step the reply
reached it (steps numbered by history events, so equal histories are equal states); an operation
never answered has an unknown outcome. The history is part of the state, so two paths merge only
when their histories are equal too. A run ends when every client has its last reply (nothing
later can change the history) or when nothing can move; each distinct end history is checked with
:func:`kvswitch.consistency.lincheck.check_register`. So is each history so far, the first time a
new state holds it: one that is not linearizable stays so in every end history after it
(linearizability is prefix-closed: :meth:`Explorer._prefix_linearizable`), so the search stops
there with the same verdict, sooner (a broken rule's counterexample then ends where the history
went wrong, with the operations still open shown open).

Findings, each reproduced by ``kvswitch sim explore --preset NAME`` (:data:`CHECKED` are the
presets the rules pass):
- ``two-writers`` (checked): a write overtaken at the origin by a newer one is answered ``STALE``,
  but its UPDATE copy can reach a replica before the newer one's, and a Get routed there while the
  replica was in the read set returns it. Linearizable only if the client takes STALE as "outcome
  unknown" (client_lib: StaleWrite) and not as "not applied"; the explorer found both the
  violation under "not applied" and, with ``stale_is_success``, the one of ``restart`` below. (Before
  rule 2 counted STALE replies, a read after the STALE reply could return the value before both
  writes; p4src and the rules count them now.)
- ``restart`` (checked) with ``stale_is_success``: a write stamped in epoch e is on its way to the
  origin when the switch restarts; the controller's SYNC gets the *old* value stamped (e+1, 1) (the
  registers are 0, so no write looks in flight) and the late write is answered ``STALE``: lost, so
  STALE must not mean success either.
- ``hotset-undrained``: a Get sent to a replica before it leaves the hot set arrives after the
  controller removed its copy and after an old ``UPDATE`` re-created an older one; its reply's
  version is below origin_ver, so rule 6 as it was (``ver <= origin_ver``) let the stale value
  through (rule 6 now drops it: see below). The controller therefore
  removes copies one period after the tables stopped pointing at them (controller/p4rt_driver.py),
  which ``hotset`` (checked) models as draining; the rack's delays are far below a period. A removal
  that leaves a tombstone with the stored version passes this scenario with one replica (checked
  with a patched agent); so does rule 6 with ``ver == origin_ver``, today's rule, within 1.5M
  states (an earlier run; the drain stays).
- ``ahead`` (checked): a reply lost, the write re-sent while a second writer's write is stamped:
  the origin answers the resend with its first result, so the replica that applied the resend's
  copy confirms a version the origin never reports (above origin_ver; rule 6 drops its replies).
  The controller zeroing that replica's cell at any moment keeps every history linearizable
  (8.3M states); adopting its version as origin_ver instead (``ahead="adopt"``, the rule for a dead
  origin's keys) is caught.
- ``resend-overtaken`` (checked): a client re-sends a Set while its first attempt is still on
  its way (a timeout shorter than a delay), and gets the first attempt's reply. A second writer's
  Set is stamped between the two attempts; the resend reaches the origin first. The rule before
  adopted the resend's newer version for the same value (the first application was still the
  origin's last write), so the second write was answered ``STALE`` at the origin while its UPDATE
  copy made the replica confirm it; a Get routed to the replica before the STALE reply raised
  origin_ver returned the second value, a later Get at the origin the first one: not
  linearizable (``BROKEN["adopt-unsettled"]``). Now rule 1 flags a write ``F_SETTLED`` only when
  no earlier write of the key is on its way to the origin (rules.write), and only the origin
  adopts, only a settled repeat (AgentCore.adopts): the resend above is not settled. The other
  candidates, tried here and rejected: clients taking only their latest attempt's reply
  (``latest_reply_only``, an attempt number in the header), the switch not stamping a repeat
  (``unstamped_repeats``: a write whose first attempt was lost is applied at the old version),
  the flag trusted without the stored-version check (``BROKEN``); never adopting
  (``NEVER_ADOPT``) is linearizable too but leaves more replicas above origin_ver
  (``Report.ahead_ends``). Replicas adopting like the origin (``ADOPT_AT_REPLICAS``) failed only
  where rule 6 as it was failed anyway (resend-reread); with rule 6 at exactly origin_ver it
  passes ahead-reread (5 522 134 states): a value a replica moves to a version its origin never
  held is never read there.
- ``resend-reread`` (checked): the same eager resend, not settled (the first attempt and a
  second writer's write are on their way). The replica's copy of the *first* attempt is late, so
  the first copy it applies is the resend's, at the resend's version v4, above the second
  writer's v3; it confirms v4. The origin holds the second value at v3 and answers the resend
  with its first result. The resending client, answered, reads the second value at the origin;
  the second writer's next write is stamped v5 and reported; the client's next Get, routed to the
  replica while origin_ver was 3 (valid_ver 4 >= 3), returned the first value at v4, which rule 6
  as it was (``ver <= origin_ver``) passed: the first value, the second, then the first again
  (``BROKEN["rule-6-at-most"]``). A version the origin never held names no place in the order of
  writes; rule 6 now passes a replica's reply only at exactly origin_ver (rules.
  replica_reply_passes). ``ahead-reread`` (checked) is the same after a lost reply and a later,
  settled resend. The other candidates, tried here and caught (tests/kvswitch/consistency/
  test_explore.py): no copies for an unsettled repeat (``Scenario.copies``, on ahead-reread: the
  settled resend's copy does the same), a replica's confirm of a repeat's copy not counted
  (``Scenario.repeat_confirms_ignored``: the replica confirmed the second write first and is in
  the read set holding the repeat's copy), a replica in the read set only at exactly origin_ver
  (``BROKEN["read-set-exact"]``: it applies the repeat's copy after confirming).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import struct
import sys
import time
from array import array
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from kvswitch import protocol as p
from kvswitch.agent.backends import Item, MemoryBackend
from kvswitch.agent.core import AgentCore, RecentIds
from kvswitch.consistency import rules
from kvswitch.consistency.lincheck import Op, check_register
from kvswitch.controller.repair import replica_repair

KEY = p.pad_key(b"hot")
STALE = "stale"  # a write's outcome in a history: answered STALE
SLOT = 0
ORIGIN = 0
SW = -1  # the switch as an end point
CLIENT0 = 100  # client c is entity CLIENT0 + c
INITIAL = b"v0"  # the key's value before any client acts, held at (epoch 1, ver 1) everywhere
SWITCH_ADDR = ("10.0.0.254", p.KVS_PORT)


def _addr(entity: int) -> tuple[str, int]:
    if entity == SW:
        return SWITCH_ADDR
    if entity >= CLIENT0:
        return (f"10.0.1.{entity - CLIENT0 + 1}", 40000)
    return (f"10.0.0.{entity + 1}", p.KVS_PORT)


def _entity(addr: tuple[str, int]) -> int:
    if addr == SWITCH_ADDR:
        return SW
    last = int(addr[0].rsplit(".", 1)[1]) - 1
    return CLIENT0 + last if addr[0].startswith("10.0.1.") else last


# -- the rules under test -------------------------------------------------------------------------


@dataclass(frozen=True)
class Rules:
    """The switch's coherence rules; the defaults are the real ones
    (:mod:`kvswitch.consistency.rules`). And the agent's one rule about versions that is not "newer
    wins": when a repeated request id moves its first application to the repeat's version
    (``AgentCore.adopts``, run by the real agent)."""

    write: Callable[..., tuple[int, bool]] = rules.write
    origin_report: Callable[..., None] = rules.origin_report
    confirm: Callable[..., None] = rules.confirm
    in_read_set: Callable[..., bool] = rules.in_read_set
    sync: Callable[..., int] = rules.sync
    replica_reply_passes: Callable[..., bool] = rules.replica_reply_passes
    adopts: Callable[..., bool] = AgentCore.adopts
    # the write rotation of a fabric-hot key (docs/protocol.md F7; explore_fabric.py)
    rotated_write: Callable[..., tuple[int, int]] = rules.rotated_write
    holder_report: Callable[..., bool] = rules.holder_report


#: Scenario.copies: which writes the switch copies to the replicas.
COPIES = {
    "all": "every write",
    "settled": "settled writes",
    "first": "first attempts",
    "first-or-settled": "first attempts and settled repeats",
}

# -- the scenario -----------------------------------------------------------------------------------

Program = tuple[bytes | None, ...]  # per client: None = Get, bytes = Set of that value


@dataclass(frozen=True)
class Scenario:
    """What runs and the bounds. Values of Sets must be distinct (and not :data:`INITIAL`)."""

    programs: tuple[Program, ...] = ((b"a1", b"a2"), (None, None))
    replicas: int = 2
    losses: int = 1  # messages lost per run
    dups: int = 1  # messages duplicated per run
    retries: int = 1  # client resends (same request id) per run
    sync_retries: int = 0  # the origin asks the switch again for a SYNC version
    hotset_change: bool = True  # the last replica is removed, then re-added (floor, SYNC flow)
    restart: bool = True  # the switch restarts (registers 0, epoch + 1), then the origin SYNCs
    # a client times out only when nothing in flight can answer it any more (its request or reply
    # was lost or dropped); eager: at any time, also while the first attempt is still on its way
    eager_retries: bool = False
    # the clients that may resend (None: every client)
    retriers: tuple[int, ...] | None = None
    # the controller removes the leaving replica's copy only once no Get sent to it is still on
    # its way (without this, a Get routed before the removal can read a stale copy that an old
    # UPDATE re-created after it: the module docstring's "hotset-undrained")
    drain_before_remove: bool = False
    # the switch restarts only while no write is on its way to a server (without this, the
    # controller's SYNC after the restart can stamp the old value newer than that write: the
    # module docstring's "restart")
    restart_when_quiet: bool = False
    # a Set answered STALE counts as done, ordered before the newer write (the clients before
    # StaleWrite); by default its outcome is unknown, as StaleWrite says
    stale_is_success: bool = False
    # what the controller does, at any moment, with a replica that confirmed a version above
    # origin_ver (a re-sent write its origin answered with its first result): "zero" its cell
    # (controller/repair.py replica_repair), "adopt" that version as origin_ver (the rule for a
    # dead origin's keys, wrong for a live one: the explorer must catch it), or "" nothing
    ahead: str = ""
    # two candidates for resend-overtaken that were tried and rejected (module docstring):
    # an attempt number in the header, the client taking only the reply to its latest attempt
    latest_reply_only: bool = False
    # the switch does not stamp a repeat (attempt > 1): it goes to the origin unstamped, no copies
    unstamped_repeats: bool = False
    # candidate fixes for resend-reread (module docstring), the switch's side: which writes it
    # copies to the replicas: "all" (rule 1), "settled" (only writes flagged F_SETTLED),
    # "first" (no repeat: an attempt number in the header), "first-or-settled" (no unsettled
    # repeat)
    copies: str = "all"
    # a replica's CONFIRM of a repeat's copy is not counted (the copy carries the attempt
    # number, the replica flags its confirm, rule 3 ignores it)
    repeat_confirms_ignored: bool = False

    def __post_init__(self) -> None:
        values = [v for prog in self.programs for v in prog if v is not None]
        if len(set(values)) != len(values) or INITIAL in values:
            raise ValueError("the values of Sets must be distinct and differ from the initial one")
        if self.replicas < 1 and self.hotset_change:
            raise ValueError("a hot-set change needs a replica")
        if self.ahead not in ("", "zero", "adopt"):
            raise ValueError(f"ahead is '', 'zero' or 'adopt', not {self.ahead!r}")
        if self.copies not in COPIES:
            raise ValueError(f"copies is one of {', '.join(COPIES)}, not {self.copies!r}")

    def describe(self) -> str:
        progs = "; ".join(
            f"c{c}: " + ", ".join("get" if v is None else f"set {v.decode()}" for v in prog)
            for c, prog in enumerate(self.programs)
        )
        return (
            f"{progs} | {self.replicas} replicas, losses {self.losses}, dups {self.dups}, "
            f"retries {self.retries}{' (eager)' if self.eager_retries else ''}"
            + (f" by c{', c'.join(map(str, self.retriers))}" if self.retriers is not None else "")
            + f", sync retries {self.sync_retries}, "
            f"hot-set change {'on' if self.hotset_change else 'off'}, "
            f"restart {'on' if self.restart else 'off'}"
            + (", removal drains Gets" if self.drain_before_remove else "")
            + (", restart with no write in flight" if self.restart_when_quiet else "")
            + (", STALE is success" if self.stale_is_success else "")
            + (f", a replica above origin_ver: {self.ahead}" if self.ahead else "")
            + (", clients take only their latest attempt's reply" if self.latest_reply_only else "")
            + (", repeats go unstamped" if self.unstamped_repeats else "")
            + (f", copies of {COPIES[self.copies]} only" if self.copies != "all" else "")
            + (", a repeat's confirm not counted" if self.repeat_confirms_ignored else "")
        )


_G = None


def _scenario(programs: tuple[Program, ...], **bounds: Any) -> Scenario:
    """A scenario with no faults, no hot-set change and no restart unless ``bounds`` says so."""
    quiet = {"losses": 0, "dups": 0, "retries": 0, "hotset_change": False, "restart": False}
    return Scenario(programs=programs, **{**quiet, **bounds})


#: Named scenarios; :data:`CHECKED` are the ones the real rules pass.
PRESETS: dict[str, Scenario] = {
    # reads under writes, every interleaving and reordering, no faults
    "writes": _scenario(((b"a1", b"a2"), (_G, _G))),
    # one loss, one duplication, one client retry (same request id)
    "faults": _scenario(((b"a1",), (_G,)), losses=1, dups=1, retries=1),
    # a replica removed and re-added (floor, cell reset, SYNC/PUSH/CONFIRM) under two writes;
    # one replica keeps it fast (two: kvswitch sim explore --preset hotset --replicas 2)
    "hotset": _scenario(
        ((b"a1", b"a2"), (_G,)), replicas=1, hotset_change=True, drain_before_remove=True
    ),
    # the same, two replicas, without draining the Gets on their way to the leaving replica
    "hotset-undrained": _scenario(((b"a1", b"a2"), (_G,)), hotset_change=True),
    # two concurrent writers and a reader
    "two-writers": _scenario(((b"a1",), (b"a2",), (_G,))),
    # a switch restart (registers 0, epoch + 1, the controller pushes the key again)
    "restart": _scenario(((b"a1",), (_G,)), restart=True),
    # the same while no write is on its way (old-epoch replies, confirms and reads after it)
    "restart-quiet": _scenario(((b"a1",), (_G, _G)), restart=True, restart_when_quiet=True),
    # a lost reply and a re-sent write under a second writer: the origin answers the resend with
    # its first result, the replica confirms the resend's newer version; the controller zeroes
    # the cell of a replica above origin_ver (kvswitch sim explore --preset ahead)
    "ahead": _scenario(
        ((b"a1",), (b"a2",), (_G, _G)), replicas=1, losses=1, retries=1, ahead="zero"
    ),
    # the same with a resend while the first attempt is still on its way (no loss): the module
    # docstring's "resend-overtaken", found with or without the controller's zeroing
    "resend-overtaken": _scenario(
        ((b"a1",), (b"a2",), (_G, _G)), replicas=1, retries=1, eager_retries=True, retriers=(0,)
    ),
    # the same resend, the second writer writes twice, the resending client reads twice: the
    # module docstring's "resend-reread" (closed by rule 6 at exactly origin_ver)
    "resend-reread": _scenario(
        ((b"a1", _G, _G), (b"a2", b"a3")),
        replicas=1,
        retries=1,
        eager_retries=True,
        retriers=(0,),
    ),
    # the same reread after a lost reply and a later resend (not eager): the resend is settled
    # (the second writer's write was reported before it), the replica's first copy is late
    "ahead-reread": _scenario(
        ((b"a1", _G, _G), (b"a2", b"a3")), replicas=1, losses=1, retries=1, retriers=(0,)
    ),
}

#: The presets the real rules pass (``make test``, ``kvswitch sim explore``).
CHECKED: tuple[str, ...] = (
    "writes",
    "faults",
    "hotset",
    "restart",
    "two-writers",
    "ahead",
    "resend-overtaken",
    "resend-reread",
    "ahead-reread",
)


def _confirm_without_floor(slot, cell, current, ver, floor, slot_ver, valid_ver) -> None:
    rules.confirm(slot, cell, current, ver, 0, slot_ver, valid_ver)


def _adopts_unsettled(msg: p.Message, seen: Any, stored: Item) -> bool:
    """The adoption rule before F_SETTLED: whenever the first application is still the key's last
    write here (preset resend-overtaken's violation)."""
    return stored.version == (seen.epoch, seen.ver) and msg.version > stored.version


def _adopts_unchecked(msg: p.Message, seen: Any, stored: Item) -> bool:
    """The flag alone: a settled repeat moves whatever is stored to its version, even when another
    write was applied here since the first application."""
    origin = msg.op in (p.Op.SET, p.Op.DEL)
    return origin and bool(msg.flags & p.F_SETTLED) and msg.version > stored.version


def _rule_6_at_most(slot, current, ver, origin_ver) -> bool:
    """Rule 6 before resend-reread was closed: any version the origin has reported or an older
    one (0 < ver <= origin_ver)."""
    return current and ver != 0 and ver <= origin_ver[slot]


def _read_set_exact(slot, cell, origin_ver, valid_ver) -> bool:
    """Rule 4 taking a replica only at exactly the version the origin reported."""
    ov = origin_ver[slot]
    return ov != 0 and valid_ver[cell] == ov


#: Rule 6 as it was (``ver <= origin_ver``): the rules that fail resend-reread. The other
#: candidate fixes for it are tried on top of these (tests/kvswitch/consistency/test_explore.py).
RULE_6_AT_MOST = Rules(replica_reply_passes=_rule_6_at_most)

#: Deliberately broken variants of the rules, each of which the check must catch. Rule 6
#: alone decides what a client may see (docs/protocol.md "Why this is linearizable"): the read
#: set's confirm and the floor only decide where Gets go, and F_SETTLED only which repeats are
#: adopted, so their variants are broken only beside rule 6 as it was (``ver <= origin_ver``);
#: with the real rule 6 they pass (tests, docs/protocol.md "Agent rules").
BROKEN: dict[str, Rules] = {
    # a replica joins the read set before confirming the latest completed version (rule 6 as
    # it was)
    "unconfirmed-read-set": dataclasses.replace(
        RULE_6_AT_MOST, in_read_set=lambda slot, cell, ov, vv: ov[slot] != 0
    ),
    # a completed write never moves the read set forward (origin_ver stays where it was)
    "no-origin-report": Rules(origin_report=lambda slot, current, ver, ov: None),
    # rule 6 off: a replica's reply newer than the origin's version reaches the client
    "no-rule-6": Rules(replica_reply_passes=lambda slot, current, ver, ov: current and ver != 0),
    # the floor ignored: a late confirm from an earlier membership validates the new one (rule
    # 6 as it was)
    "no-floor": dataclasses.replace(RULE_6_AT_MOST, confirm=_confirm_without_floor),
    # a repeat adopted without the switch's F_SETTLED (the rule before resend-overtaken was
    # closed), beside rule 6 as it was: with the real rule 6 it passes resend-overtaken
    # (6 129 842 states), as the value it moves is never read at the version it skips
    "adopt-unsettled": dataclasses.replace(RULE_6_AT_MOST, adopts=_adopts_unsettled),
    # F_SETTLED trusted alone: the stored version is not checked against the first application's
    "adopt-unchecked": Rules(adopts=_adopts_unchecked),
    # rule 6 as it was: a replica's older version passes (resend-reread, ahead-reread)
    "rule-6-at-most": RULE_6_AT_MOST,
    # rule 6 as it was, and rule 4 taking a replica only at exactly origin_ver (a candidate fix)
    "read-set-exact": dataclasses.replace(RULE_6_AT_MOST, in_read_set=_read_set_exact),
}


def _adopts_at_replicas(msg: p.Message, seen: Any, stored: Item) -> bool:
    """The real rule, and replicas adopting a settled repeat's UPDATE copy as the origin does."""
    if msg.op in (p.Op.UPDATE, p.Op.UPDATE_DEL):
        op = p.Op.SET if msg.op == p.Op.UPDATE else p.Op.DEL
        return AgentCore.adopts(dataclasses.replace(msg, op=op), seen, stored)
    return AgentCore.adopts(msg, seen, stored)


#: Replicas adopting a settled repeat like the origin: not linearizable beside rule 6 as it was
#: (their first copy may be older than the origin's report), linearizable with the real rule 6
#: (module docstring); compared, not a failure.
ADOPT_AT_REPLICAS = Rules(adopts=_adopts_at_replicas)

#: A repeat never adopted: linearizable too, but more replicas are left above origin_ver (their
#: replies dropped until the next write or the controller zeroes them); compared, not a failure.
NEVER_ADOPT = Rules(adopts=lambda msg, seen, stored: False)


def parse_program(text: str) -> Program:
    """``"set a1,get,set a2"`` -> (b"a1", None, b"a2")."""
    ops: list[bytes | None] = []
    for part in filter(None, (s.strip() for s in text.split(","))):
        words = part.split()
        if words == ["get"]:
            ops.append(None)
        elif len(words) == 2 and words[0] == "set":
            ops.append(words[1].encode())
        else:
            raise ValueError(f"not an operation: {part!r} (use 'get' or 'set VALUE')")
    return tuple(ops)


# -- the servers: the real agent, memoised ------------------------------------------------------

AgentState = tuple[Any, ...]  # (items, applied ids, pending SYNCs), canonical


class _Ids(RecentIds):
    """RecentIds that also keeps a plain copy of what it holds, to snapshot it."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: dict[tuple[int, int], Any] = {}

    def add(self, cid: Any, seq: int, result: Any, key: bytes = b"") -> None:
        super().add(cid, seq, result, key)
        self.seen[(cid, seq)] = result


class Agents:
    """AgentCore transitions over canonical snapshots, each computed once."""

    def __init__(self, adopts: Callable[..., bool] = AgentCore.adopts) -> None:
        self.memo: dict[tuple[Any, ...], tuple[AgentState, tuple, Any]] = {}
        self.calls = 0
        self.adopts = adopts

    @staticmethod
    def initial(item: Item | None) -> AgentState:
        return (((KEY, item),) if item is not None else (), (), ())

    @staticmethod
    def _restore(state: AgentState) -> AgentCore:
        items, ids, pending = state
        core = AgentCore(MemoryBackend(), SWITCH_ADDR, recent_ids=_Ids())
        for key, item in items:
            core.backend.put(key, item)
        for (cid, seq), result in ids:
            core.ids.add(cid, seq, result)
        for key in pending:
            core.start_sync(key)
        return core

    @staticmethod
    def _snapshot(core: AgentCore) -> AgentState:
        assert isinstance(core.ids, _Ids)
        items = tuple(sorted(core.backend.items()))
        ids = tuple(sorted(core.ids.seen.items()))
        pending = tuple(sorted(core.pending_syncs))
        return (items, ids, pending)

    def _run(self, state: AgentState, what: tuple[Any, ...]) -> tuple[AgentState, tuple, Any]:
        """(state after, outputs as (bytes, entity), the item a SYNC just completed with)."""
        memo = self.memo.get((state, what))
        if memo is not None:
            return memo
        self.calls += 1
        core = self._restore(state)
        if self.adopts is not AgentCore.adopts:
            core.adopts = self.adopts  # type: ignore[method-assign]  # a variant under test
        synced = None
        if what[0] == "msg":
            pending = core.pending_syncs.get(KEY)
            out = core.handle(what[1], what[2])
            if pending is not None and pending.done.is_set() and pending.found:
                assert pending.version is not None
                synced = (pending.value, *pending.version)
        elif what[0] == "sync":  # the control channel's "sync"
            _, out = core.start_sync(KEY)
        elif what[0] == "push":  # the control channel's "push" (a replica's half)
            _, _, out = core.push_item(KEY, *what[1:])
        else:  # the control channel's "remove"
            core.remove_local(KEY)
            out = []
        result = (self._snapshot(core), tuple((raw, _entity(addr)) for raw, addr in out), synced)
        self.memo[(state, what)] = result
        return result

    def handle(self, state: AgentState, raw: bytes, src: int) -> tuple[AgentState, tuple, Any]:
        return self._run(state, ("msg", raw, _addr(src)))

    def start_sync(self, state: AgentState) -> tuple[AgentState, tuple]:
        return self._run(state, ("sync",))[:2]

    def push(self, state: AgentState, item: tuple[bytes, int, int]) -> tuple[AgentState, tuple]:
        return self._run(state, ("push", *item))[:2]

    def remove(self, state: AgentState) -> AgentState:
        return self._run(state, ("remove",))[0]

    @staticmethod
    def sync_pending(state: AgentState) -> bool:
        return KEY in state[2]


# -- messages and states ----------------------------------------------------------------------------

# (hop, dst, src, op, cid, seq, value, status, epoch, ver, flags, attempt); hop 0: to the switch
# (dst is where the switch forwards it: a client, or SW for what it consumes), hop 1: to server
# dst. attempt: which attempt of a client's request this is or answers (latest_reply_only; else 0).
Msg = tuple[int, int, int, int, int, int, bytes, int, int, int, int, int]
# (gver, slot_ver, origin_ver, valid_ver per server, epoch, floor, holders (origin first))
Switch = tuple[int, int, int, tuple[int, ...], int, int, tuple[int, ...]]
# (switch, agents, clients (invoked, waiting, attempt: 0 unless latest_reply_only), messages (sorted), used (loss, dup, retry,
#  sync retry), controller (hot-set phase 0/1/2, restarted 0/1, replicas a running sync will
#  push to, pushes to make), history)
State = tuple[Any, ...]
# history: one record per invoked operation: (client, index, call, ret or None, output)
Record = tuple[int, int, int, int | None, Any]


def _raw(m: Msg) -> bytes:
    _, _, _, op, cid, seq, value, status, epoch, ver, flags, _ = m
    return p.Message(op, KEY, value, status, cid, seq, epoch, flags, ver).encode()


def _msg(hop: int, dst: int, src: int, raw: bytes, attempt: int = 0) -> Msg:
    d = p.Message.decode(raw)
    return (hop, dst, src, d.op, d.cid, d.seq, d.value, d.status, d.epoch, d.ver, d.flags, attempt)


def _remove(msgs: tuple[Any, ...], m: Any) -> tuple[Any, ...]:
    """``msgs`` without one ``m``."""
    i = msgs.index(m)
    return msgs[:i] + msgs[i + 1 :]


def _events(hist: tuple[Record, ...]) -> int:
    return sum(1 if r[3] is None else 2 for r in hist)


def _op_name(op: int) -> str:
    try:
        return p.Op(op).name
    except ValueError:
        return str(op)


def _who(e: int) -> str:
    if e == SW:
        return "switch"
    return f"c{e - CLIENT0}" if e >= CLIENT0 else ("origin" if e == ORIGIN else f"r{e}")


def describe_msg(m: Msg) -> str:
    hop, dst, src, op, cid, seq, value, status, epoch, ver, flags, attempt = m
    text = f"{_op_name(op)} {_who(src)}->{_who(dst) if hop else 'switch'}"
    if hop == 0 and dst != SW:
        text += f"(->{_who(dst)})"
    if cid:
        text += f" id=({cid},{seq})"
    if value:
        text += f" {value.decode(errors='replace')}"
    text += f" v=({epoch},{ver})"
    if status:
        text += f" {p.Status(status).name}"
    if flags & p.F_DUP:
        text += " F_DUP"
    if flags & p.F_SETTLED:
        text += " F_SETTLED"
    if attempt:
        text += f" attempt {attempt}"
    return text


def describe_step(label: tuple[Any, ...]) -> str:
    kind = label[0]
    if kind in ("deliver", "lose", "dup", "lose-last-hop"):
        return f"{kind} {describe_msg(label[1])}"
    if kind in ("invoke", "retry"):
        c, idx, op, dst = label[1:]
        what = "get" if op is None else f"set {op.decode()}"
        routed = f" -> {_who(dst)}" if dst is not None else ""
        return f"{kind} c{c} op{idx} {what}{routed}"
    return " ".join(str(x) for x in label)


# -- the explorer -----------------------------------------------------------------------------------


class _Interned:
    """Each distinct value numbered once, from 0: the search's states hold the numbers."""

    __slots__ = ("ids", "values")

    def __init__(self) -> None:
        self.ids: dict[Any, int] = {}
        self.values: list[Any] = []

    def __call__(self, value: Any) -> int:
        i = self.ids.get(value)
        if i is None:
            i = self.ids[value] = len(self.values)
            self.values.append(value)
        return i


class _Memo(dict):
    """A function of one (hashable) argument, computed once per argument: ``memo[arg]``."""

    def __init__(self, compute: Callable[[Any], Any]) -> None:
        super().__init__()
        self.compute = compute

    def __missing__(self, key: Any) -> Any:
        value = self[key] = self.compute(key)
        return value


class _Visited:
    """Every state reached, exactly: each packed state once, in a set (the index) and in a list in
    the order it was first reached (so also the breadth-first queue, and a state's number is its
    place there), with each one's parent (the number of the state it was first reached from, for
    a counterexample). The set's look-up runs in C, where the open-addressing index over a
    bytearray of records it had before (60 to 85 bytes a state) ran in Python; the price is
    memory (a bytes object, a set slot and a list slot: 120 to 150 bytes a state; both measured
    in docs/protocol.md). No state is ever confused with another (no hash compaction)."""

    __slots__ = ("index", "order", "parents")

    def __init__(self) -> None:
        self.index: set[bytes] = set()
        self.order: list[bytes] = []
        self.parents = array("I")

    def __len__(self) -> int:
        return len(self.order)

    def add(self, state: bytes, parent: int) -> bool:
        """Add a packed state first reached from state number ``parent``; False if known.
        (:meth:`Explorer.run` does the same inline.)"""
        if state in self.index:
            return False
        self.index.add(state)
        self.order.append(state)
        self.parents.append(parent)
        return True

    def state(self, n: int) -> bytes:
        return self.order[n]

    def nbytes(self) -> int:
        """What it holds in memory, as sys.getsizeof counts: the states' bytes objects, the set,
        the list and the parents."""
        each = sys.getsizeof(self.order[0]) if self.order else 0
        containers = sys.getsizeof(self.index) + sys.getsizeof(self.order)
        return each * len(self.order) + containers + self.parents.itemsize * len(self.parents)


@dataclass
class Report:
    scenario: Scenario
    states: int = 0
    transitions: int = 0
    end_states: int = 0
    histories: int = 0  # distinct end histories
    prefixes: int = 0  # distinct histories of states (Explorer._prefix_linearizable)
    agent_calls: int = 0
    seconds: float = 0.0
    visited_bytes: int = 0  # the visited set's memory (the states, their parents, the index)
    # end states with a replica in the read set above origin_ver: rule 6 drops its replies until
    # the key's next write or the controller zeroes its cell (what a repeat not adopted costs)
    ahead_ends: int = 0
    complete: bool = True  # False when max_states stopped the search
    # the trace to the first state found whose history is not linearizable (an end state, or
    # earlier: Explorer._prefix_linearizable)
    violation: list[str] | None = None
    history: list[Op] = field(default_factory=list)  # its history

    @property
    def ok(self) -> bool:
        return self.violation is None and self.complete

    def summary(self) -> str:
        verdict = "linearizable" if self.violation is None else "NOT LINEARIZABLE"
        if not self.complete:
            verdict += " (incomplete: state bound reached)"
        return (
            f"{self.states} states, {self.transitions} transitions, {self.end_states} end states, "
            f"{self.histories} end histories and {self.prefixes} histories so far checked, "
            f"{self.agent_calls} agent transitions, "
            f"{self.ahead_ends} end states with a replica above origin_ver, "
            f"{self.seconds:.1f} s, visited set {self.visited_bytes / 2**20:.0f} MB: {verdict}"
        )


class Explorer:
    def __init__(self, scenario: Scenario, rules: Rules | None = None) -> None:
        self.sc = scenario
        self.rules = rules or Rules()
        self.agents = Agents(self.rules.adopts)
        self.checked: dict[tuple[Record, ...], bool] = {}
        # the parts of the search's states, each numbered once (:meth:`_encode`)
        self._sw, self._cl, self._ctl = _Interned(), _Interned(), _Interned()
        self._hist, self._ag, self._m, self._msgs = (
            _Interned(),
            _Interned(),
            _Interned(),
            _Interned(),
        )
        # every step on a part, computed once per distinct input
        self._add = _Memo(self._added)
        self._moves = _Memo(self._in_flight)
        self._shared: dict[Any, Any] = {}  # one copy of each small value many parts hold
        self._req = _Memo(self._requested)
        self._to_switch = _Memo(self._at_switch_delivered)
        self._to_server = _Memo(self._at_server_delivered)
        self._agent_steps = _Memo(self._agent_step)
        self._call = _Memo(self._called)
        self._client = _Memo(self._with_client)
        self._done = _Memo(self._finished)
        self._above = _Memo(self._ahead)
        self._lin = _Memo(lambda hist: self.linearizable(self._hist.values[hist]))
        # whether the controller (or the origin's SYNC retry) ever acts: its pushes follow only a
        # re-add or a restart, so without those, the ahead repair and SYNC retries it never moves
        self._controls = bool(
            scenario.hotset_change or scenario.restart or scenario.ahead or scenario.sync_retries
        )
        self._prefix_ok = _Memo(lambda hist: self._prefix_linearizable(self._hist.values[hist]))
        # switch, clients, messages, controller, history: 4 bytes; the four fault counters: 1
        # byte; each server's agent state: 4 bytes
        self._packed = struct.Struct(f"<5I4B{1 + scenario.replicas}I")

    # -- the initial state: the key hot and synced at (1, 1) on every holder -------------------

    def initial(self) -> State:
        n = 1 + self.sc.replicas
        held = Agents.initial(Item(INITIAL, 1, 1))
        valid = (0,) + (1,) * self.sc.replicas
        switch: Switch = (1, 1, 1, valid, 1, 0, tuple(range(n)))
        clients = tuple((0, False, 0) for _ in self.sc.programs)
        return (switch, (held,) * n, clients, (), (0, 0, 0, 0), (0, 0, None, ()), ())

    # -- the switch -------------------------------------------------------------------------------

    def _ids(self, c: int, idx: int) -> tuple[int, int]:
        """Client ``c``'s request ``idx``'s id (cid, seq)."""
        return c + 1, idx + 1

    def _request(
        self, sw: Switch, c: int, idx: int, attempt: int
    ) -> Iterator[tuple[Switch, list[Msg], int]]:
        """A client's request (its ``attempt``-th, from 1) crossing the switch: (switch after,
        messages, Get's server)."""
        gver, slot_ver, origin_ver, valid, epoch, floor, holders = sw
        value = self.sc.programs[c][idx]
        me, (cid, seq) = CLIENT0 + c, self._ids(c, idx)
        att = attempt if self.sc.latest_reply_only else 0
        set_op = int(p.Op.SET)
        if value is not None and attempt > 1 and self.sc.unstamped_repeats:
            yield sw, [(1, ORIGIN, me, set_op, cid, seq, value, 0, 0, 0, 0, att)], None
            return
        if value is not None:  # rule 1: stamped; to the origin, copies to every replica
            g, sv = [gver], [slot_ver]
            ver, settled = self.rules.write(SLOT, g, sv, [origin_ver])
            fl = p.F_SETTLED if settled else 0
            out = [(1, ORIGIN, me, set_op, cid, seq, value, 0, epoch, ver, fl, att)]
            up, first = int(p.Op.UPDATE), attempt <= 1
            copied = {
                "all": True,
                "settled": settled,
                "first": first,
                "first-or-settled": first or settled,
            }[self.sc.copies]
            catt = attempt if self.sc.repeat_confirms_ignored else 0
            if copied:
                out += [
                    (1, r, me, up, cid, seq, value, 0, epoch, ver, fl, catt) for r in holders[1:]
                ]
            yield (g[0], sv[0], origin_ver, valid, epoch, floor, holders), out, None
            return
        dests = {ORIGIN}
        for server in holders[1:]:  # rule 4 for every round-robin turn
            if self.rules.in_read_set(SLOT, server, [origin_ver], list(valid)):
                dests.add(server)
        for d in sorted(dests):
            yield sw, [(1, d, me, int(p.Op.GET), cid, seq, b"", 0, 0, 0, 0, att)], d

    def _at_switch(self, sw: Switch, m: Msg) -> tuple[Switch, list[Msg], bool]:
        """A server's message reaches the switch: (switch after, forwarded messages, whether it
        goes on to its client)."""
        _, dst, src, op, cid, seq, _value, status, epoch, ver, flags, _ = m
        gver, slot_ver, origin_ver, valid, cur_epoch, floor, holders = sw
        current = epoch == cur_epoch
        ov = [origin_ver]
        from_origin = src == ORIGIN
        if op == p.Op.GET_REPLY:
            if from_origin:  # rule 2, found or not
                self.rules.origin_report(SLOT, current, ver, ov)
                return (gver, slot_ver, ov[0], valid, cur_epoch, floor, holders), [], True
            return sw, [], bool(self.rules.replica_reply_passes(SLOT, current, ver, ov))  # rule 6
        if op in (p.Op.SET_REPLY, p.Op.DEL_REPLY):
            # rule 2: OK, or STALE (a newer write got there first; the reply carries the version
            # the origin holds)
            if from_origin and status in (p.Status.OK, p.Status.STALE):
                self.rules.origin_report(SLOT, current, ver, ov)
            return (gver, slot_ver, ov[0], valid, cur_epoch, floor, holders), [], True
        if op == p.Op.CONFIRM:  # rule 3, consumed
            if m[11] > 1:  # repeat_confirms_ignored: a confirm of a repeat's copy
                return sw, [], False
            vv = list(valid)
            self.rules.confirm(SLOT, src, current, ver, floor, [slot_ver], vv)
            return (gver, slot_ver, origin_ver, tuple(vv), cur_epoch, floor, holders), [], False
        if op == p.Op.SYNC:  # rule 5: only the origin's, reflected stamped or with version 0
            if not from_origin:
                return sw, [], False
            g, sv = [gver], [slot_ver]
            stamped = self.rules.sync(SLOT, g, sv, ov)
            e = cur_epoch if stamped else 0
            back = (1, ORIGIN, SW, int(p.Op.SYNC), cid, seq, b"", 0, e, stamped, flags, 0)
            return (g[0], sv[0], origin_ver, valid, cur_epoch, floor, holders), [back], False
        if op == p.Op.SYNC_DONE:  # rule 2, consumed
            if from_origin and status == p.Status.OK:
                self.rules.origin_report(SLOT, current, ver, ov)
            return (gver, slot_ver, ov[0], valid, cur_epoch, floor, holders), [], False
        return sw, [], dst != SW

    # -- the search's states: numbers of interned parts ------------------------------------------

    # A state in the search is a flat tuple of small ints, packed into bytes for the visited set:
    # (switch, clients, messages, controller, history, loss, dup, retry, sync retry, agent per
    # server). Each part is interned (numbered once, :class:`_Interned`), and each step on a part
    # is computed once per distinct input and memoised (the rules, the agent, the history), so a
    # step of the search is a few dict look-ups; the rules and the agent still decide every one.

    def _encode(self, s: State) -> tuple[int, ...]:
        sw, agents, clients, msgs, used, ctl, hist = s
        ms = self._msgs(tuple(sorted(self._m(m) for m in msgs)))
        parts = (self._sw(sw), self._cl(clients), ms, self._ctl(ctl), self._hist(hist))
        return (*parts, *used, *(self._ag(a) for a in agents))

    def _added(self, key: tuple[int, tuple[int, ...]]) -> int:
        ms, new = key
        return self._msgs(tuple(sorted(self._msgs.values[ms] + new))) if new else ms

    def _in_flight(
        self, ms: int
    ) -> tuple[tuple[int, ...], tuple[int, ...], tuple[tuple[bool, ...], bool, bool]]:
        """What the messages in flight ``ms`` allow: (the distinct messages, the messages left
        without each, and (per client whether nothing in flight can answer it, a Get on its way
        to the leaving replica, no write on its way to a server)). Kept for every distinct
        ``ms``, so kept small: the last part is shared between all that have the same."""
        ids = self._msgs.values[ms]
        msgs = tuple(self._m.values[m] for m in ids)
        distinct = tuple(dict.fromkeys(ids))
        rests = tuple(self._msgs(_remove(ids, m)) for m in distinct)
        silent = tuple(self._silent(msgs, c) for c in range(len(self.sc.programs)))
        quiet = not any(m[0] == 1 and m[3] in (p.Op.SET, p.Op.UPDATE) for m in msgs)
        flags = (silent, self._gets_to(msgs, self.sc.replicas), quiet)
        return (
            ids if len(distinct) == len(ids) else distinct,
            rests,
            self._shared.setdefault(flags, flags),
        )

    def _requested(self, key: tuple[int, int, int, int]) -> tuple[Any, ...]:
        """:meth:`_request` over interned switch states and messages."""
        sw, c, idx, attempt = key
        return tuple(
            (self._sw(sw2), tuple(self._m(m) for m in out), d)
            for sw2, out, d in self._request(self._sw.values[sw], c, idx, attempt)
        )

    def _at_switch_delivered(
        self, key: tuple[int, int, int, int]
    ) -> tuple[int, tuple[int, ...], int, int]:
        """Message ``m`` (a server's, hop 0) reaches the switch in switch state ``sw``, clients
        ``cl`` and history ``hist``: (switch after, messages it sends on, clients after, history
        after). The history changes only when ``m`` is the reply its client waits for."""
        sw, cl, hist, m = key
        msg = self._m.values[m]
        sw2, out, onward = self._at_switch(self._sw.values[sw], msg)
        out_ids = tuple(self._m(x) for x in out)
        if onward:
            c = msg[1] - CLIENT0
            invoked, waiting, attempt = self._cl.values[cl][c]
            # the pending request's reply (latest_reply_only: to its latest attempt)
            if waiting and (msg[4], msg[5], msg[11]) == (*self._ids(c, invoked - 1), attempt):
                cl = self._client[cl, c, (invoked, False, attempt)]
                hist = self._hist(self._returned(self._hist.values[hist], c, invoked - 1, msg))
        return self._sw(sw2), out_ids, cl, hist

    def _at_server_delivered(self, key: tuple[int, int, int]) -> tuple[int, tuple[int, ...], int]:
        """Message ``m`` (hop 1) reaches server ``m[1]`` in agent state ``a`` with controller
        state ``ctl``: the real agent's answer (to the switch or a client; a reply answers the
        request's attempt), as (agent state after, messages, controller state after: a SYNC the
        controller started returns its item, to push into every replica)."""
        a, ctl, m = key
        msg = self._m.values[m]
        st, out, synced = self.agents.handle(self._ag.values[a], _raw(msg), msg[2])
        att = msg[11]
        # a reply answers the request's attempt; repeat_confirms_ignored: a replica's confirm of
        # a copy says which attempt's copy it confirms
        flagged = self.sc.repeat_confirms_ignored and msg[3] == p.Op.UPDATE
        new = tuple(
            self._m(_msg(0, to, msg[1], raw, att if to >= CLIENT0 or flagged else 0))
            for raw, to in out
        )
        phase, restarted, sync_for, pushes = self._ctl.values[ctl]
        if synced is not None and sync_for is not None:
            pushes = tuple(sorted(pushes + tuple((r, *synced) for r in sync_for)))
            ctl = self._ctl((phase, restarted, None, pushes))
        return self._ag(st), new, ctl

    def _agent_step(self, key: tuple[Any, ...]) -> tuple[int, tuple[int, ...]]:
        """The control channel's sync (origin), push (replica ``r``) or remove, on an interned
        agent state: (state after, its messages to the switch)."""
        what, r, a, *args = key
        st = self._ag.values[a]
        if what == "sync":
            st2, out = self.agents.start_sync(st)
        elif what == "push":
            st2, out = self.agents.push(st, args[0])
        else:
            st2, out = self.agents.remove(st), ()
        return self._ag(st2), tuple(self._m(_msg(0, SW, r, raw)) for raw, _ in out)

    def _called(self, key: tuple[int, int, int]) -> int:
        hist, c, idx = key
        h = self._hist.values[hist]
        return self._hist((*h, (c, idx, _events(h), None, None)))

    def _with_client(self, key: tuple[int, int, tuple[int, bool, int]]) -> int:
        cl, c, state = key
        clients = self._cl.values[cl]
        return self._cl((*clients[:c], state, *clients[c + 1 :]))

    # -- successors -----------------------------------------------------------------------------

    def successors(self, s: tuple[int, ...]) -> Iterator[tuple[tuple[Any, ...], tuple[int, ...]]]:
        """Every step from search state ``s``: (label, next search state)."""
        sw, cl, ms, ctl, hist, loss, dup, retry, sretry = s[:9]
        agents = s[9:]
        sc, add = self.sc, self._add
        distinct, rests, (silent, gets_to_leaving, quiet) = self._moves[ms]
        msg_values = self._m.values
        may_lose, may_dup = loss < sc.losses, dup < sc.dups
        # clients: invoke the next operation, or resend the pending one
        for c, (invoked, waiting, attempt) in enumerate(self._cl.values[cl]):
            prog = sc.programs[c]
            if not waiting and invoked < len(prog):
                first = 1 if sc.latest_reply_only else 0
                cl2 = self._client[cl, c, (invoked + 1, True, first)]
                h2 = self._call[hist, c, invoked]
                for sw2, out, d in self._req[sw, c, invoked, 1]:
                    label = ("invoke", c, invoked, prog[invoked], d)
                    yield label, (sw2, cl2, add[ms, out], ctl, h2, *s[5:])
            may_retry = sc.retriers is None or c in sc.retriers
            if waiting and may_retry and retry < sc.retries and (sc.eager_retries or silent[c]):
                cl2 = cl
                if sc.latest_reply_only:
                    cl2 = self._client[cl, c, (invoked, True, attempt + 1)]
                # the attempt number only matters to the candidates that read it
                for sw2, out, d in self._req[sw, c, invoked - 1, max(attempt, 1) + 1]:
                    label = ("retry", c, invoked - 1, prog[invoked - 1], d)
                    nxt = (sw2, cl2, add[ms, out], ctl, hist, loss, dup, retry + 1, sretry)
                    yield label, (*nxt, *agents)
        # messages: deliver, lose or duplicate any one
        for m, rest in zip(distinct, rests, strict=True):
            hop, dst = msg_values[m][:2]
            if hop == 1:  # a server handles it: the real agent
                a, new, ctl2 = self._to_server[agents[dst], ctl, m]
                ag = (*agents[:dst], a, *agents[dst + 1 :])
                nxt = (sw, cl, add[rest, new], ctl2, hist, loss, dup, retry, sretry)
                yield ("deliver", m), (*nxt, *ag)
            else:  # the switch's rules; a reply goes on to its client at once
                sw2, out, cl2, h2 = self._to_switch[sw, cl, hist, m]
                rest2 = add[rest, out]
                yield ("deliver", m), (sw2, cl2, rest2, ctl, h2, *s[5:])
                if h2 != hist and may_lose:  # lost between the switch and the client
                    yield ("lose-last-hop", m), (sw2, cl, rest2, ctl, hist, loss + 1, *s[6:])
            if may_lose:
                yield ("lose", m), (sw, cl, rest, ctl, hist, loss + 1, *s[6:])
            if may_dup:
                nxt = (sw, cl, add[ms, (m,)], ctl, hist, loss, dup + 1, retry, sretry)
                yield ("dup", m), (*nxt, *agents)
        if self._controls:
            yield from self._controller(s, gets_to_leaving, quiet)

    @staticmethod
    def _gets_to(msgs: tuple[Msg, ...], server: int) -> bool:
        return any(m[0] == 1 and m[1] == server and m[3] == p.Op.GET for m in msgs)

    @staticmethod
    def _silent(msgs: tuple[Msg, ...], c: int) -> bool:
        """Nothing in flight can bring client ``c`` the reply it waits for."""
        me = CLIENT0 + c
        for m in msgs:
            if (m[0] == 0 and m[1] == me) or (m[0] == 1 and m[2] == me and m[3] != p.Op.UPDATE):
                return False
        return True

    def _returned(self, hist: tuple[Record, ...], c: int, idx: int, m: Msg) -> tuple[Record, ...]:
        op, status, value = m[3], m[7], m[6]
        if op == p.Op.GET_REPLY:
            if status not in (p.Status.OK, p.Status.NOT_FOUND):
                raise AssertionError(f"unexpected Get reply {describe_msg(m)}")
            output: Any = value if status == p.Status.OK else None
        else:
            if status not in (p.Status.OK, p.Status.STALE):
                raise AssertionError(f"unexpected Set reply {describe_msg(m)}")
            # STALE: the client reports StaleWrite, "superseded, outcome unknown"
            # (client_lib/python/errors.py); stale_is_success: the earlier clients' "done"
            output = True if status == p.Status.OK else STALE
        now = _events(hist)
        return tuple(
            (rc, ri, call, now, output) if (rc, ri) == (c, idx) else (rc, ri, call, ret, out)
            for rc, ri, call, ret, out in hist
        )

    def _controller(
        self, s: tuple[int, ...], gets_to_leaving: bool, quiet: bool
    ) -> Iterator[tuple[tuple[Any, ...], tuple[int, ...]]]:
        """The controller's steps (and the origin's SYNC retry) from ``s``; ``gets_to_leaving``
        and ``quiet`` are :meth:`_in_flight`'s."""
        sw_id, cl, ms, ctl_id = s[:4]
        sretry = s[8]
        agents = s[9:]
        # (a fabric's rotated key adds registers after these: explore_fabric.py)
        gver, slot_ver, origin_ver, valid, epoch, floor, holders = self._sw.values[sw_id][:7]
        phase, restarted, sync_for, pushes = self._ctl.values[ctl_id]
        sc = self.sc
        for item in dict.fromkeys(pushes):  # the control channel's push into one replica
            r = item[0]
            a, new = self._agent_steps["push", r, agents[r], item[1:]]
            ag = (*agents[:r], a, *agents[r + 1 :])
            c2 = self._ctl((phase, restarted, sync_for, _remove(pushes, item)))
            yield (
                ("controller: push", f"r{r}", item),
                (sw_id, cl, self._add[ms, new], c2, *s[4:9], *ag),
            )
        if (
            sc.hotset_change
            and phase == 0
            and sync_for is None
            and not pushes
            and not (sc.drain_before_remove and gets_to_leaving)
        ):
            # break: the last replica leaves (its cell 0; the floor is set only when holders are
            # added, as controller/plan.py does), then its copy is removed
            r = sc.replicas
            vv = tuple(0 if i == r else v for i, v in enumerate(valid))
            sw2 = (
                gver,
                slot_ver,
                origin_ver,
                vv,
                epoch,
                floor,
                tuple(h for h in holders if h != r),
            )
            a, _ = self._agent_steps["remove", r, agents[r]]
            ag = (*agents[:r], a, *agents[r + 1 :])
            c2 = self._ctl((1, restarted, None, ()))
            yield (("controller: remove", f"r{r}"), (self._sw(sw2), cl, ms, c2, *s[4:9], *ag))
        if sc.hotset_change and phase == 1:
            # make: it is back (floor = global_ver, then its cell 0); the origin SYNCs, the
            # controller pushes. (plan.py reads global_ver before planning: the versions handed
            # out since went to the current holders only, so no earlier-membership confirm
            # carries one and reading it here instead admits no more confirms.)
            r = sc.replicas
            vv = tuple(0 if i == r else v for i, v in enumerate(valid))
            sw2 = (gver, slot_ver, origin_ver, vv, epoch, gver, (*holders, r))
            c2 = self._ctl((2, restarted, sw2[6][1:], pushes))
            yield self._sync(("controller: re-add", f"r{r}"), self._sw(sw2), c2, s)
        for r in holders[1:] if sc.ahead else ():
            # the controller's own decision (controller/repair.py); "adopt" asks it as for a
            # dead origin's keys, wrong for a live one (the explorer must catch it)
            fix = replica_repair(origin_ver, {r: valid[r]}, origin_died=sc.ahead == "adopt")
            if not fix.zero and fix.origin_ver == origin_ver:
                continue  # not above origin_ver (or origin_ver 0): nothing to repair
            vv = tuple(0 if i in fix.zero else v for i, v in enumerate(valid))
            sw2 = (gver, slot_ver, fix.origin_ver, vv, epoch, floor, holders)
            yield (
                (f"controller: {sc.ahead} the version of a replica above origin_ver", f"r{r}"),
                (self._sw(sw2), *s[1:]),
            )
        if sc.restart and not restarted and (quiet or not sc.restart_when_quiet):
            # switch restart: registers 0, epoch + 1; the controller re-pushes the hot key
            sw2 = (0, 0, 0, (0,) * len(valid), epoch + 1, 0, holders)
            c2 = self._ctl((phase, 1, holders[1:], pushes))
            label = ("controller: switch restart", f"epoch {epoch + 1}")
            yield self._sync(label, self._sw(sw2), c2, s)
        if sretry < sc.sync_retries and Agents.sync_pending(self._ag.values[agents[ORIGIN]]):
            s2 = (*s[:8], sretry + 1, *agents)
            yield self._sync(("origin: SYNC again",), sw_id, ctl_id, s2)

    def _sync(
        self, label: tuple[Any, ...], sw: int, ctl: int, s: tuple[int, ...]
    ) -> tuple[tuple[Any, ...], tuple[int, ...]]:
        """The origin starts a SYNC (the controller's "sync" on its control channel)."""
        a, new = self._agent_steps["sync", ORIGIN, s[9 + ORIGIN]]
        return label, (sw, s[1], self._add[s[2], new], ctl, *s[4:9], a, *s[10:])

    # -- end states -----------------------------------------------------------------------------

    def _finished(self, cl: int) -> bool:
        """Every client (interned clients ``cl``) has its last reply: nothing later can change
        the history."""
        clients = self._cl.values[cl]
        return all(
            not w and i == len(prog)
            for (i, w, _), prog in zip(clients, self.sc.programs, strict=True)
        )

    def history(self, hist: tuple[Record, ...]) -> list[Op]:
        ops = []
        for c, idx, call, ret, output in hist:
            value = self.sc.programs[c][idx]
            end = math.inf if ret is None else float(ret)
            if value is None:
                ops.append(Op("get", KEY, float(call), end, output=output, client=c))
            else:
                if output is STALE and not self.sc.stale_is_success:
                    end = math.inf  # superseded: it may or may not have taken effect
                ops.append(Op("set", KEY, float(call), end, value=value, client=c))
        return ops

    def linearizable(self, hist: tuple[Record, ...]) -> bool:
        ok = self.checked.get(hist)
        if ok is None:
            ok = check_register(KEY, self.history(hist), initial=INITIAL).ok
            self.checked[hist] = ok
        return ok

    def _prefix_linearizable(self, hist: tuple[Record, ...]) -> bool:
        """Whether the history so far (operations not answered yet open, as in an end history)
        is linearizable; kept apart from :attr:`checked`, which counts the end histories.

        Sound as an early stop: an end history reached later extends this one (the same records,
        some open ones answered, later calls appended), and linearizability is prefix-closed: a
        linearization of the end history, cut at the last event here, is one of this history
        (an operation not answered here is open, so it may take effect after the cut, or, a Get,
        constrains nothing), so if this one is not linearizable no end history through it is.
        And every state reaches an end state (each step spends a bound or moves the run on)."""
        ok = self.checked.get(hist)
        if ok is None:
            ok = check_register(KEY, self.history(hist), initial=INITIAL).ok
        return ok

    def _ahead(self, sw: int) -> bool:
        """A replica in the read set above origin_ver (interned switch state ``sw``)."""
        s = self._sw.values[sw]
        return any(s[3][r] > s[2] for r in s[6][1:])

    # -- the search -----------------------------------------------------------------------------

    def run(
        self,
        max_states: int | None = None,
        progress: Callable[[Report], None] | None = None,
        every: int = 100_000,
    ) -> Report:
        """Breadth first over every reachable state (:class:`_Visited`: each state is numbered
        in the order it was first reached, which is also the order it is expanded in)."""
        rep = Report(self.sc)
        began = time.perf_counter()
        pack, unpack = self._packed.pack, self._packed.unpack
        seen = _Visited()
        seen.add(pack(*self._encode(self.initial())), 0)
        index, order, parents = seen.index, seen.order, seen.parents
        known, remember, queue, parent_of = (
            index.__contains__,
            index.add,
            order.append,
            parents.append,
        )
        successors, done, lin = self.successors, self._done, self._lin
        prefix_ok, above = self._prefix_ok, self._above
        states = transitions = end_states = ahead_ends = 0
        bad = -1  # the number of the first state found with a non-linearizable history
        n = 0
        while n < len(order):
            s = unpack(order[n])
            states += 1
            if progress is not None and states % every == 0:
                rep.states, rep.transitions, rep.end_states = states, transitions, end_states
                rep.seconds = time.perf_counter() - began
                rep.histories, rep.agent_calls = len(self.checked), self.agents.calls
                progress(rep)
            if max_states is not None and states > max_states:
                rep.complete = False
                break
            hist = s[4]
            if not done[s[1]]:
                before = transitions
                for _, nxt in successors(s):
                    transitions += 1
                    packed = pack(*nxt)
                    if known(packed):
                        continue
                    remember(packed)  # seen.add, inline
                    queue(packed)
                    parent_of(n)
                    # a new state whose history changed: every run through it ends in a history
                    # that extends this one, so if this one is not linearizable no end is
                    # (:meth:`_prefix_linearizable`); stop at once
                    if nxt[4] != hist and not prefix_ok[nxt[4]]:
                        bad = len(order) - 1
                        break
                if bad >= 0:
                    break
                if transitions != before:
                    n += 1
                    continue
            end_states += 1
            ahead_ends += above[s[0]]
            if not lin[hist]:
                bad = n
                break
            n += 1
        if bad >= 0:
            rep.violation = self._trace(seen, bad)
            rep.history = self.history(self._hist.values[unpack(order[bad])[4]])
        rep.states, rep.transitions, rep.end_states = states, transitions, end_states
        rep.ahead_ends = ahead_ends
        rep.seconds = time.perf_counter() - began
        rep.histories, rep.agent_calls = len(self.checked), self.agents.calls
        rep.prefixes = len(self._prefix_ok)
        rep.visited_bytes = seen.nbytes()
        return rep

    def _trace(self, seen: _Visited, n: int) -> list[str]:
        """The steps from the start to state ``n``: each one found again among its
        predecessor's successors (the visited set keeps states, not steps)."""
        path = [n]
        while n:
            n = seen.parents[n]
            path.append(n)
        path.reverse()
        pack, unpack = self._packed.pack, self._packed.unpack
        steps = []
        for before, after in itertools.pairwise(path):
            want = seen.state(after)
            moves = self.successors(unpack(seen.state(before)))
            label = next(lb for lb, nxt in moves if pack(*nxt) == want)
            if label[0] in ("deliver", "lose", "dup", "lose-last-hop"):
                label = (label[0], self._m.values[label[1]])
            steps.append(describe_step(label))
        return steps


def explore(
    scenario: Scenario | None = None,
    rules: Rules | None = None,
    max_states: int | None = None,
    progress: Callable[[Report], None] | None = None,
) -> Report:
    """Explore ``scenario`` (default :class:`Scenario`) under ``rules`` (default: the real ones)."""
    return Explorer(scenario or Scenario(), rules).run(max_states, progress)


def format_history(ops: Sequence[Op]) -> list[str]:
    lines = []
    for op in sorted(ops, key=lambda o: o.call):
        ret = "?" if op.ret == math.inf else f"{op.ret:.0f}"
        if op.kind == "get":
            what = f"get -> {op.output.decode() if isinstance(op.output, bytes) else op.output}"
        else:
            what = f"set {op.value.decode() if op.value else op.value}"
        lines.append(f"c{op.client} [{op.call:.0f}, {ret}] {what}")
    return lines
