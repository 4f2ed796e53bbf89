"""The fabric controller's side of the write rotation (docs/protocol.md F7; docs/fabric.md "Write
rotation"): which keys' writer maps a new plan changes, the write freeze that such a change
happens in, the plans with a change that could not be frozen put off, and the holder a rotated
key's SYNC is asked of.

A rotated key's write goes to the holder ``h(cid, seq) mod n``, which remembers its request id;
a repeat of that write must meet a holder that knows the id. So a change of the map (rotation on
or off, holders added or removed, the key leaving its spine) is made only while every holder of
the old and the new map answers the key's writes RETRY (:meth:`WriteFreeze.freeze`): the
controller exports each holder's ids of the key and its item, imports all of them into every
holder (the origin included; items applied only if newer), writes the switches, then releases
the holders (:meth:`WriteFreeze.release`). Planning here is pure; the agents are reached
through :class:`FreezeHooks`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from kvswitch.agent.control import KeyExport
from kvswitch.controller.plan import KeyPlan, Plan

T = TypeVar("T")
R = TypeVar("R")


class FreezeHooks(Protocol):
    """The agents' control operations of the write freeze (``controller.agents.AgentPool``)."""

    def key_freeze(self, key: bytes, server: int) -> None: ...

    def key_export(self, key: bytes, server: int) -> KeyExport: ...

    def key_import(self, key: bytes, server: int, export: KeyExport) -> None: ...

    def key_release(self, key: bytes, server: int) -> None: ...

    def key_frozen(self, server: int) -> list[bytes]: ...


@dataclass(frozen=True)
class MapChange:
    """A key whose writer map changes: its holders before and after (origin first; a key that
    was not fabric-hot, or leaves, is its origin alone) and whether it rotated before and after."""

    key: bytes
    before: tuple[int, ...]
    after: tuple[int, ...]
    rotated_before: bool
    rotated_after: bool

    @property
    def servers(self) -> tuple[int, ...]:
        """Every holder of either map, the origin first, each once: frozen, exported from and
        imported into (whichever map the switch holds if its write is refused, every holder of
        it knows every id)."""
        return tuple(dict.fromkeys(self.before + self.after))


def map_changes(
    before: Sequence[Plan], after: Sequence[Plan], origin_of: Callable[[bytes], int]
) -> dict[bytes, MapChange]:
    """The keys whose writer map ``after`` changes from ``before`` (one plan per spine): a key
    rotated before or after whose rotation flag, holders or spine change, or that comes or
    goes. A key that rotates neither before nor after sends every write to its origin: no
    change of writer."""
    old = {key: kp for plan in before for key, kp in plan.keys.items()}
    new = {key: kp for plan in after for key, kp in plan.keys.items()}
    old_spine = {key: s for s, plan in enumerate(before) for key in plan.keys}
    new_spine = {key: s for s, plan in enumerate(after) for key in plan.keys}
    out: dict[bytes, MapChange] = {}
    for key in old.keys() | new.keys():
        a, b = old.get(key), new.get(key)
        was, now = a is not None and a.rotate, b is not None and b.rotate
        if not (was or now):
            continue
        if (
            a is not None
            and b is not None
            and (a.holders, was, old_spine[key]) == (b.holders, now, new_spine[key])
        ):
            continue
        origin = (origin_of(key),)
        out[key] = MapChange(
            key,
            a.holders if a is not None else origin,
            b.holders if b is not None else origin,
            was,
            now,
        )
    return out


def _id(row: Mapping[str, Any]) -> tuple[str, int, int]:
    """An exported row's request id: (source address, cid, seq)."""
    return str(row["ip"]), int(row["cid"]), int(row["seq"])


def merge(exports: Iterable[KeyExport]) -> KeyExport:
    """One export holding every id of ``exports`` (each once) and the newest item (by version)."""
    ids: dict[tuple[str, int, int], dict[str, Any]] = {}
    item: dict[str, Any] | None = None
    for export in exports:
        for row in export.ids:
            ids.setdefault(_id(row), row)
        got = export.item
        if got is not None and (
            item is None or (got["epoch"], got["ver"]) > (item["epoch"], item["ver"])
        ):
            item = got
    return KeyExport(list(ids.values()), item)


def lacking(merged: KeyExport, held: KeyExport) -> KeyExport:
    """``merged`` without the ids of ``held`` (a holder's own export): what importing the merge
    adds to that holder (its own ids would be skipped there one by one)."""
    own = {_id(row) for row in held.ids}
    return KeyExport([row for row in merged.ids if _id(row) not in own], merged.item)


def _each(pool: ThreadPoolExecutor, step: Callable[[T], R], items: Sequence[T]) -> list[R]:
    """``step`` of every item at once (one agent each); every call ended before the first
    error, if any, is raised (none is left running)."""
    futures = [pool.submit(step, item) for item in items]
    wait(futures)
    return [future.result() for future in futures]


@dataclass
class WriteFreeze:
    """The write freeze of one period's map changes over ``hooks``: which (key, server) pairs
    are frozen now, and the keys whose freeze, export or import failed (their change is put
    off: :func:`put_off`)."""

    hooks: FreezeHooks
    frozen: set[tuple[bytes, int]] = field(default_factory=set)
    failed: dict[bytes, str] = field(default_factory=dict)
    # servers their rack controllers declared dead: neither frozen, exported from nor imported
    # into (a dead holder cannot answer; its ids are lost, as a dead origin's: docs/fabric.md
    # "Write rotation", "Failures"), so that its removal does not wait for it
    dead: frozenset[int] = frozenset()
    # a key's exports (and imports) made at once at up to this many holders (1: one after the
    # other)
    workers: int = 16

    def freeze(self, changes: Mapping[bytes, MapChange]) -> None:
        """Freeze every holder of each change, export from each, import the merge into each
        (docs/protocol.md F7, steps 1-3); the :attr:`dead` ones left out. The exports and the
        imports of a key go to its holders at once (an import carries only the ids that holder
        lacks: :func:`lacking`); the freezes one after the other. A key any step fails for is in
        :attr:`failed` and is released at once."""
        if not changes:
            return
        with ThreadPoolExecutor(self.workers, thread_name_prefix="freeze") as pool:
            for key, change in changes.items():
                live = [s for s in change.servers if s not in self.dead]
                try:
                    for server in live:
                        self.hooks.key_freeze(key, server)
                        self.frozen.add((key, server))
                    exports = _each(pool, lambda s, k=key: self.hooks.key_export(k, s), live)
                    merged = merge(exports)
                    _each(
                        pool,
                        lambda pair, k=key: self.hooks.key_import(k, pair[0], pair[1]),
                        [(s, lacking(merged, e)) for s, e in zip(live, exports, strict=True)],
                    )
                except Exception as exc:  # an agent refused or is unreachable: reported
                    self.failed[key] = f"{type(exc).__name__}: {first_line(exc)}"
                    self.release([key])

    def release(self, keys: Iterable[bytes] | None = None) -> dict[tuple[bytes, int], str]:
        """Release the frozen holders (of ``keys`` only, if given); the pairs whose release
        failed, with the error (they stay in :attr:`frozen`, to be released again)."""
        wanted = set(keys) if keys is not None else None
        errors: dict[tuple[bytes, int], str] = {}
        for key, server in sorted(self.frozen):
            if wanted is not None and key not in wanted:
                continue
            try:
                self.hooks.key_release(key, server)
                self.frozen.discard((key, server))
            except Exception as exc:
                errors[(key, server)] = f"{type(exc).__name__}: {first_line(exc)}"
        return errors


@dataclass
class Recovery:
    """What :func:`recover` found and did: per key, the servers it was frozen at; the servers
    whose frozen keys could not be listed (to be listed again), with the errors; the keys whose
    finishing failed, with the errors (released where they could be, as a failed freeze is;
    a release that failed stays in :attr:`WriteFreeze.frozen`, to be released again)."""

    found: dict[bytes, tuple[int, ...]] = field(default_factory=dict)
    unlisted: dict[int, str] = field(default_factory=dict)
    failed: dict[bytes, str] = field(default_factory=dict)


def recover(
    freeze: WriteFreeze, servers: Iterable[int], holders_of: Callable[[bytes], tuple[int, ...]]
) -> Recovery:
    """Finish the write freezes a crashed controller left (docs/fabric.md "Write rotation",
    "Failures"): every key frozen at any of ``servers`` is frozen again at those servers and at
    the holders of the map the spine holds now (``holders_of``: origin first; the origin alone
    for a key no spine holds), the merge of all their exports imported into each, then all of
    them released.

    Why this is correct whatever step the crash interrupted: while a key is frozen nowhere
    applies one of its writes, and the old controller wrote a switch only after every holder of
    both maps was frozen and imported. So either the switches hold the old map (the new one was
    never written; extra ids and a newer item at a holder change no writer's answer), or they
    hold (part of) the new one and every holder of both maps already knows every id; the
    import again is idempotent (ids added once, the item only if newer). After it every holder
    of the map the switches hold knows every id of the key and holds its newest item: a repeat
    meets a writer that knows its id, and no acknowledged write is lost. If a holder does not
    answer, the others are released all the same (by the same argument they know every id the
    map needs; the key's writes to the silent one go unanswered, as to a dead holder). A
    server whose list cannot be read is in :attr:`Recovery.unlisted` (its freezes stay until
    it answers)."""
    out = Recovery()
    for server in servers:
        try:
            keys = freeze.hooks.key_frozen(server)
        except Exception as exc:  # unreachable or refused: reported by the caller, tried again
            out.unlisted[server] = f"{type(exc).__name__}: {first_line(exc)}"
            continue
        for key in keys:
            out.found[key] = (*out.found.get(key, ()), server)
    changes = {}
    for key, at in out.found.items():
        now = holders_of(key)
        changes[key] = MapChange(key, tuple(dict.fromkeys(now[:1] + at)), now, True, True)
        freeze.frozen.update((key, server) for server in at)
    freeze.freeze(changes)
    out.failed = {key: freeze.failed.pop(key) for key in list(freeze.failed)}
    released = freeze.release([key for key in changes if key not in out.failed])
    for (key, server), why in released.items():
        out.failed.setdefault(key, f"release at server {server}: {why}")
    return out


def put_off(before: Sequence[Plan], after: Sequence[Plan], keys: Iterable[bytes]) -> list[Plan]:
    """``after`` with the map changes of ``keys`` undone: a key that was not fabric-hot is made
    without rotation (its writes all go to its origin, which knows every id); one that was goes
    back to its entry of ``before`` on its old spine (a key that took its slot there in ``after``
    is not made this period) and off any other spine."""
    out = [Plan(p.servers, p.slots, dict(p.keys)) for p in after]
    old = {key: (s, kp) for s, plan in enumerate(before) for key, kp in plan.keys.items()}
    for key in keys:
        if key not in old:
            for plan in out:
                kp = plan.keys.get(key)
                if kp is not None:
                    plan.keys[key] = KeyPlan(kp.slot, kp.holders)
            continue
        s, kp = old[key]
        for plan in out:
            plan.keys.pop(key, None)
        plan = out[s]
        for other, okp in list(plan.keys.items()):
            if okp.slot == kp.slot:
                del plan.keys[other]
        plan.keys[key] = kp
    return out


def dead_holder_repairs(
    before: Sequence[Plan], after: Sequence[Plan], dead: Collection[int]
) -> list[dict[bytes, KeyPlan]]:
    """Per spine, the rotated keys of ``before`` that held a ``dead`` server and stay on that
    spine in ``after`` without it (their entries there): the key's read state must stop naming
    the dead holder (docs/fabric.md "Write rotation", "Failures"). Its ``done_by`` may be the
    dead holder (whose write, the latest completed one, lives on it alone: lost), so after the
    freeze, which imported the live holders' newest item into every live holder, the controller
    sets the slot's ``slot_ver``, ``origin_ver`` and ``done_by`` to 0, as a key's make (R5: the
    next SYNC is the origin's, which then holds the newest item any live holder held), and
    pushes the key. Until the push's SYNC completes, the key's Gets go to its origin and are dropped
    by R6 (no version is complete): clients retry."""
    out: list[dict[bytes, KeyPlan]] = [{} for _ in after]
    if not dead:
        return out
    stays = {key: s for s, plan in enumerate(after) for key in plan.keys}
    for s, plan in enumerate(before):
        for key, kp in plan.keys.items():
            if not (kp.rotate and stays.get(key) == s and any(h in dead for h in kp.holders)):
                continue
            now = after[s].keys[key]
            # its change was not put off; and its origin lives: R5 takes a SYNC at origin_ver 0
            # from the origin alone (a dead origin's key keeps its read state: its next write
            # by a live holder makes that holder done_by)
            if not any(h in dead for h in now.holders):
                out[s][key] = now
    return out


def sync_source(kp: KeyPlan, origin_ver: int, done_by: int, valid: Sequence[int]) -> int | None:
    """The ordinal of the holder a rotated key's SYNC is asked of (docs/protocol.md F7, R5: the
    spine stamps a rotated key's SYNC only from the origin while ``origin_ver`` is 0, the key's
    make, else only from the ``done_by`` holder): the origin at 0; else ``done_by`` if its cell is
    in the read set (a holder that took that ordinal since holds no such copy); else None, no
    SYNC the spine would take from a holder known to hold the latest completed value (the key's
    next write makes its writer ``done_by``). ``valid``: the key's ``valid_ver`` cells by
    ordinal."""
    if origin_ver == 0:
        return 0
    if 0 <= done_by < len(kp.holders) and valid[done_by] >= origin_ver:
        return done_by
    return None


def first_line(exc: Exception) -> str:
    """An error's first line (its type's name when it has no text), for one-line reports."""
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
