"""Replicas out of step with their origin: what to do about them (docs/controller_runtime.md
"Replicas out of step", "Failure detection"). Pure: register values in, operations out; the
runtime reads the registers and applies what these return.

- :func:`replica_repair`: a replica whose ``valid_ver`` is above ``origin_ver`` (it confirmed a
  write its origin never reported): its cell zeroed, or, for a dead origin's key, that version
  taken as ``origin_ver``. The controller (:class:`ReplicaRepair`, :func:`adopt_versions`) and
  the exhaustive explorer call it.
- :class:`ReplicaRepair`: the per-period repair of replicas out of step two periods in a row,
  and the retry of failed pushes.
- :func:`adopt_versions`, :func:`restore_sources`: a dead origin's keys, and where its keys can
  be restored from (rule 4's read set, :mod:`kvswitch.consistency.rules`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from kvswitch.consistency import rules
from kvswitch.controller import names
from kvswitch.controller.ops import Operation, PushRequest, RegisterWrite
from kvswitch.controller.plan import KeyPlan

#: A failed push is retried in this many following periods at most, then given up (logged); a
#: key whose replicas stay out of step is pushed again this many periods in a row at most.
PUSH_ATTEMPTS = 5


@dataclass(frozen=True)
class Repair:
    """What :func:`replica_repair` decided for one key: the replicas whose ``valid_ver`` cell
    goes to 0, and the key's ``origin_ver`` afterwards (unchanged unless adopted)."""

    zero: tuple[int, ...]
    origin_ver: int


def replica_repair(origin_ver: int, valid_ver: Mapping[int, int], origin_died: bool) -> Repair:
    """One hot key's replicas whose ``valid_ver`` is above ``origin_ver != 0``: they confirmed a
    write the origin never reported (docs/protocol.md "Agent rules": a re-sent write the origin
    answered with its first result; or the origin died with the write in flight). Rule 6 drops
    every read reply they send, so they must not stay so.

    ``valid_ver``: replica -> its cell. ``origin_died``: the origin has just been declared dead,
    so it will never report that write.

    - live origin: each such replica's cell is zeroed (it leaves the read set, which is always
      safe; the key's next write brings it back). Adopting its version would be wrong: the
      origin may still apply an older value after it (the explorer's ``ahead="adopt"`` finds it).
    - dead origin: the newest such version becomes ``origin_ver``. That write was never
      acknowledged, so making it visible is allowed (it was pending), and its replicas serve.

    ``origin_ver`` 0 (no version completed, or a restarted switch): nothing to do."""
    if origin_ver == 0:
        return Repair((), origin_ver)
    ahead = {r: v for r, v in valid_ver.items() if v > origin_ver}
    if not ahead:
        return Repair((), origin_ver)
    if origin_died:
        return Repair((), max(ahead.values()))
    return Repair(tuple(ahead), origin_ver)


def adopt_versions(keys: Sequence[KeyPlan], servers: int, origin_ver, valid) -> list[Operation]:
    """The ``origin_ver`` writes for the hot keys ``keys`` of an origin just declared dead
    (:func:`replica_repair` with ``origin_died``); ``origin_ver``/``valid``: the registers."""
    ops: list[Operation] = []
    for kp in keys:
        base = names.valid_base(kp.slot, servers)
        cells = {s: valid[base + s] for s in kp.replicas}
        fix = replica_repair(origin_ver[kp.slot], cells, origin_died=True)
        if fix.origin_ver != origin_ver[kp.slot]:
            ops.append(RegisterWrite(names.REG_ORIGIN_VER, kp.slot, fix.origin_ver))
    return ops


def restore_sources(
    kp: KeyPlan, servers: int, down: Collection[int], origin_ver, valid
) -> tuple[list[int], list[int]]:
    """Where hot key ``kp``'s latest completed version may be copied from: (its live replicas in
    the read set (rule 4), every other live server but the origin, which may hold a copy)."""
    base = names.valid_base(kp.slot, servers)
    sources = [
        s
        for s in kp.replicas
        if s not in down and rules.in_read_set(kp.slot, base + s, origin_ver, valid)
    ]
    others = [s for s in range(servers) if s != kp.origin and s not in down and s not in sources]
    return sources, others


def unconfirmed_pushes(
    plan: Mapping[bytes, KeyPlan],
    servers: int,
    slot_ver,
    origin_ver,
    valid,
    bases: Mapping[bytes, int] | None = None,
) -> list[Operation]:
    """A push of every key with a replica that is not valid at the latest write or SYNC
    (``slot_ver`` 0, ``origin_ver`` or a replica's ``valid_ver`` behind ``slot_ver``): at start-up,
    a push the previous controller did not make or that was lost. ``bases``: a spine's row base of
    each key (a cell per ordinal from there, docs/fabric.md "Holders per key"; a key without
    one is pushed); None for a rack's (a cell per server)."""
    pushes: list[Operation] = []
    for key, kp in plan.items():
        ver = slot_ver[kp.slot]
        if bases is not None and key not in bases:  # its row not known: pushed again
            cells, ver = [], 0
        elif bases is not None:
            cells = [bases[key] + o for o in range(1, len(kp.holders))]
        else:
            cells = [names.valid_base(kp.slot, servers) + s for s in kp.replicas]
        if kp.replicas and (
            ver == 0 or origin_ver[kp.slot] != ver or any(valid[c] != ver for c in cells)
        ):
            pushes.append(PushRequest(key, kp.origin, kp.replicas))
    return pushes


def repair_cells(
    keyed: Sequence[tuple[bytes, KeyPlan]], servers: int
) -> tuple[list[int], list[int]]:
    """The register cells :meth:`ReplicaRepair.out_of_step` reads for the hot keys ``keyed``:
    (their slots, their replicas' ``valid_ver`` cells)."""
    slots = [kp.slot for _, kp in keyed]
    cells = [names.valid_base(kp.slot, servers) + s for _, kp in keyed for s in kp.replicas]
    return slots, cells


@dataclass
class Lagging:
    """What :meth:`ReplicaRepair.lagging` decided: cells to zero and keys to push again, and
    what to log."""

    zero: list[Operation] = field(default_factory=list)
    push: list[PushRequest] = field(default_factory=list)
    given_up: list[tuple[bytes, int]] = field(default_factory=list)  # (key, pushes so far)


@dataclass
class ReplicaRepair:
    """The runtime's memory for repairs across periods: failed pushes' attempts, replicas out of
    step at the end of the last period, and how often a key was pushed again for them."""

    push_attempts: dict[bytes, int] = field(default_factory=dict)
    lagging: dict[tuple[bytes, int], int] = field(default_factory=dict)  # (key, replica) -> ov
    repushes: dict[bytes, int] = field(default_factory=dict)

    def retries(
        self,
        failed: Collection[bytes],
        plan: Mapping[bytes, KeyPlan],
        down: Collection[int],
        pushed: Collection[bytes],
    ) -> tuple[list[PushRequest], list[bytes], list[tuple[bytes, int]]]:
        """Keys whose push failed in an earlier period (``failed``), still hot with replicas:
        (pushes to their replicas now, but not of those this period pushed (``pushed``); keys
        no longer to retry (not hot, no replicas, origin down, or :data:`PUSH_ATTEMPTS` reached);
        of those, the (key, attempts) given up)."""
        retry: list[PushRequest] = []
        drop: list[bytes] = []
        given_up: list[tuple[bytes, int]] = []
        for key in list(failed):
            kp = plan.get(key)
            attempts = self.push_attempts.get(key, 0)
            if kp is None or not kp.replicas or kp.origin in down or attempts >= PUSH_ATTEMPTS:
                if kp is not None and kp.replicas and attempts >= PUSH_ATTEMPTS:
                    given_up.append((key, attempts))
                drop.append(key)
                self.push_attempts.pop(key, None)
            elif key not in pushed:
                self.push_attempts[key] = attempts + 1
                retry.append(PushRequest(key, kp.origin, kp.replicas))
        return retry, drop, given_up

    def out_of_step(
        self,
        keyed: Sequence[tuple[bytes, KeyPlan]],
        servers: int,
        origin_ver: Mapping[int, int],
        slot_ver: Mapping[int, int],
        valid: Mapping[int, int],
        down: Collection[int],
        skip: Collection[bytes],
        not_held: Collection[bytes],
    ) -> Lagging:
        """One period's repair of replicas out of step (docs/controller_runtime.md "Replicas
        out of step"). A replica is out of step when its ``valid_ver`` differs from
        ``origin_ver`` (or ``origin_ver`` is still 0); it is acted on when it was so at the end
        of two periods in a row with ``origin_ver`` unchanged, as no write or push in between
        came to repair it (a replica or origin only slower than the other is not: the write that
        made the difference changes ``origin_ver``).

        - Above (``valid_ver > origin_ver``): :func:`replica_repair` for a live origin, its cell
          zeroed.
        - Below: its key is pushed again, unless a write is pending (``slot_ver > origin_ver``:
          the switch refuses the SYNC), its push failed (``skip``: retried apart) or found no
          copy at the origin (``not_held``) and nothing was written since, or the origin is
          down; at most :data:`PUSH_ATTEMPTS` times in a row, then given up until it is in step.

        ``keyed``: the hot keys with replicas; the registers as read (slot or cell -> value)."""
        lagging: dict[tuple[bytes, int], int] = {}  # (key, replica) -> origin_ver
        for key, kp in keyed:
            ver, base = origin_ver[kp.slot], names.valid_base(kp.slot, servers)
            for s in kp.replicas:
                if ver == 0 or valid[base + s] != ver:
                    lagging[(key, s)] = ver
        stuck = [pair for pair, ver in lagging.items() if self.lagging.get(pair) == ver]
        self.lagging = lagging
        for key in set(self.repushes) - {key for key, _ in lagging}:
            del self.repushes[key]  # in step again (or no longer hot with replicas)
        plan = dict(keyed)
        out = Lagging()
        stuck_of: dict[bytes, list[int]] = {}
        for key, s in stuck:
            stuck_of.setdefault(key, []).append(s)
        for key, replicas in stuck_of.items():  # the order the pairs were found in
            kp = plan[key]
            base = names.valid_base(kp.slot, servers)
            cells = {s: valid[base + s] for s in replicas}
            fix = replica_repair(origin_ver[kp.slot], cells, origin_died=False)
            out.zero += [RegisterWrite(names.REG_VALID_VER, base + s, 0) for s in fix.zero]
        skipped = set(skip)
        for key, kp in keyed:
            ver = origin_ver[kp.slot]
            if kp.origin in down or slot_ver[kp.slot] > ver:
                skipped.add(key)  # down: it cannot SYNC; a write pending: the switch refuses it
            elif ver == 0 and key in not_held:
                skipped.add(key)  # nothing to push: its first write validates the replicas
        for key in sorted(stuck_of.keys() - skipped):
            kp = plan[key]
            tries = self.repushes.get(key, 0)
            if tries == PUSH_ATTEMPTS:
                out.given_up.append((key, tries))
            if tries < PUSH_ATTEMPTS:
                out.push.append(PushRequest(key, kp.origin, kp.replicas))
            self.repushes[key] = tries + 1
        return out
