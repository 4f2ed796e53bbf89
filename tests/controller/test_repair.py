"""controller/repair.py: what the runtime does with replicas out of step (pure, no switch)."""

from __future__ import annotations

from kvswitch.controller import names
from kvswitch.controller.ops import PushRequest, RegisterWrite
from kvswitch.controller.plan import KeyPlan
from kvswitch.controller.repair import (
    PUSH_ATTEMPTS,
    Repair,
    ReplicaRepair,
    adopt_versions,
    replica_repair,
    restore_sources,
    unconfirmed_pushes,
)

M = 4  # servers
A, B = b"a" * 16, b"b" * 16


def test_replica_above_a_live_origin_is_zeroed() -> None:
    assert replica_repair(7, {1: 9, 2: 7, 3: 5}, origin_died=False) == Repair((1,), 7)
    assert replica_repair(7, {3: 8, 1: 9}, origin_died=False) == Repair((3, 1), 7)


def test_dead_origin_adopts_the_newest_version_above_it() -> None:
    assert replica_repair(7, {1: 9, 2: 8, 3: 5}, origin_died=True) == Repair((), 9)


def test_nothing_to_repair() -> None:
    for died in (False, True):
        assert replica_repair(7, {1: 7, 2: 3}, died) == Repair((), 7)  # in step or below
        assert replica_repair(0, {1: 9}, died) == Repair((), 0)  # no version completed yet
        assert replica_repair(7, {}, died) == Repair((), 7)


def _cells(values: dict[tuple[int, int], int]) -> list[int]:
    """valid_ver with ``values`` at (slot, server), the rest 0."""
    cells = [0] * (4 * M)
    for (slot, server), v in values.items():
        cells[names.valid_base(slot, M) + server] = v
    return cells


def test_adopt_versions_of_a_dead_origins_keys() -> None:
    keys = [KeyPlan(0, (0, 1, 2)), KeyPlan(1, (0, 3)), KeyPlan(2, (0, 1))]
    origin_ver = [5, 6, 0, 0]
    valid = _cells({(0, 1): 8, (0, 2): 7, (1, 3): 6, (2, 1): 4})
    # slot 0: 8 > 5 adopted; slot 1: in step; slot 2: origin_ver 0, nothing completed
    assert adopt_versions(keys, M, origin_ver, valid) == [RegisterWrite(names.REG_ORIGIN_VER, 0, 8)]


def test_restore_sources_are_the_live_read_set_then_the_other_live_servers() -> None:
    kp = KeyPlan(1, (0, 1, 2, 3))
    origin_ver = [0, 5]
    valid = _cells({(1, 1): 5, (1, 2): 4, (1, 3): 6})
    # rule 4: 1 (5 >= 5) and 3 (6 >= 5) are in the read set, 2 (4) is not; 3 is down
    assert restore_sources(kp, M, {3}, origin_ver, valid) == ([1], [2])
    assert restore_sources(kp, M, set(), origin_ver, valid) == ([1, 3], [2])


def test_unconfirmed_pushes_at_start_up() -> None:
    plan = {A: KeyPlan(0, (0, 1)), B: KeyPlan(1, (2, 3)), b"c" * 16: KeyPlan(2, (1,))}
    slot_ver, origin_ver = [4, 6, 0, 0], [4, 6, 0, 0]
    valid = _cells({(0, 1): 4, (1, 3): 5})
    assert unconfirmed_pushes(plan, M, slot_ver, origin_ver, valid) == [PushRequest(B, 2, (3,))]
    assert unconfirmed_pushes(plan, M, [4, 6, 0, 0], [3, 6, 0, 0], valid) == [
        PushRequest(A, 0, (1,)),
        PushRequest(B, 2, (3,)),
    ]


def _period(
    r: ReplicaRepair, ov: int, sv: int, cells: dict[int, int], **kw: object
) -> tuple[list[object], list[PushRequest]]:
    """One period of a key on slot 0 held by 0, 1, 2; replicas missing from ``cells`` are at
    ``ov`` (in step)."""
    keyed = [(A, KeyPlan(0, (0, 1, 2)))]
    valid = {names.valid_base(0, M) + s: cells.get(s, ov) for s in (1, 2)}
    out = r.out_of_step(
        keyed,
        M,
        {0: ov},
        {0: sv},
        valid,
        kw.get("down", set()),  # type: ignore[arg-type]
        kw.get("skip", set()),  # type: ignore[arg-type]
        kw.get("not_held", set()),  # type: ignore[arg-type]
    )
    return list(out.zero), out.push


def test_out_of_step_acts_on_the_second_period_with_the_same_origin_ver() -> None:
    r = ReplicaRepair()
    assert _period(r, 5, 5, {1: 9, 2: 3}) == ([], [])  # first seen: may be only slower
    assert r.lagging == {(A, 1): 5, (A, 2): 5}
    zero, push = _period(r, 5, 5, {1: 9, 2: 3})
    assert zero == [RegisterWrite(names.REG_VALID_VER, names.valid_base(0, M) + 1, 0)]
    assert push == [PushRequest(A, 0, (1, 2))]  # replica 2 is below: pushed again
    # a write in between (origin_ver changed): not stuck
    r = ReplicaRepair()
    _period(r, 5, 5, {2: 3})
    assert _period(r, 6, 6, {2: 3}) == ([], [])


def test_no_push_while_a_write_is_pending_the_origin_is_down_or_nothing_is_held() -> None:
    for ov, sv, kw in (
        (5, 6, {}),  # slot_ver > origin_ver: the switch refuses the SYNC
        (5, 5, {"down": {0}}),
        (5, 5, {"skip": {A}}),  # its failed push is retried apart
        (0, 0, {"not_held": {A}}),
    ):
        r = ReplicaRepair()
        _period(r, ov, sv, {1: 3}, **kw)
        assert _period(r, ov, sv, {1: 3}, **kw) == ([], [])


def test_out_of_step_pushes_are_given_up_after_push_attempts() -> None:
    r = ReplicaRepair()
    pushes = [len(_period(r, 5, 5, {1: 3})[1]) for _ in range(PUSH_ATTEMPTS + 3)]
    assert pushes == [0] + [1] * PUSH_ATTEMPTS + [0, 0]
    assert _period(r, 5, 5, {1: 5, 2: 5}) == ([], []) and r.repushes == {}  # in step: reset


def test_failed_pushes_are_retried_then_given_up() -> None:
    r = ReplicaRepair()
    plan = {A: KeyPlan(0, (0, 1)), B: KeyPlan(1, (2, 3))}
    retry, drop, given_up = r.retries([A, B, b"x" * 16], plan, {2}, pushed={B})
    assert (retry, drop, given_up) == ([PushRequest(A, 0, (1,))], [B, b"x" * 16], [])
    for _ in range(PUSH_ATTEMPTS - 1):
        r.retries([A], plan, set(), pushed=set())
    assert r.retries([A], plan, set(), pushed=set()) == ([], [A], [(A, PUSH_ATTEMPTS)])
