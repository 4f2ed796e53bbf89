"""The bounded exhaustive check of the coherence protocol (kvswitch/consistency/explore.py).

The real rules pass the checked presets; every deliberately broken variant of them is caught (a
non-linearizable end-state history is found) in a scenario the real rules pass.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest

from kvswitch import protocol as p
from kvswitch.agent.backends import Item
from kvswitch.bench import coherence
from kvswitch.bench.sim_cli import main
from kvswitch.consistency import explore as ex
from kvswitch.consistency import rules as real

G = None
# The explorer's runs of a minute or more (figures in docs/protocol.md): make test runs them in a
# pytest process of their own (-m explore_heavy), at low priority, beside the rack tests. Each
# is a few minutes at most on a loaded core; the limit leaves room for a busy machine.
HEAVY = (pytest.mark.explore_heavy, pytest.mark.timeout(1200))
HEAVY_PRESETS = ("ahead", "resend-overtaken", "resend-reread", "ahead-reread")


def heavy(test: Any) -> Any:
    for mark in HEAVY:
        test = mark(test)
    return test


# Reads under one write, no faults: small enough to run per variant.
SMALL = ex.Scenario(
    programs=((b"a1",), (G, G)),
    losses=0,
    dups=0,
    retries=0,
    hotset_change=False,
    restart=False,
)


def test_explorer_runs_the_real_rules() -> None:
    """The explorer's default rules are the product's, the very functions the simulator's kernel
    compiles (bench/coherence.py wraps them; their ``.py_func`` is each one)."""
    rules = ex.Rules()
    for name in (
        "write",
        "origin_report",
        "confirm",
        "in_read_set",
        "sync",
        "replica_reply_passes",
    ):
        assert getattr(rules, name) is getattr(real, name)
        assert getattr(coherence, name).py_func is getattr(real, name)


def _mark(name: str) -> Any:
    return pytest.param(name, marks=HEAVY) if name in HEAVY_PRESETS else name


@pytest.mark.parametrize("preset", [_mark(n) for n in ex.CHECKED])
def test_real_rules_linearizable(preset: str) -> None:
    rep = ex.explore(ex.PRESETS[preset])
    print(f"{preset}: {rep.summary()}")
    assert rep.violation is None, "\n".join(rep.violation or [])
    assert rep.complete
    assert rep.states > 1000 and rep.end_states > 0 and rep.histories > 1


@pytest.mark.parametrize(
    ("variant", "scenario"),
    [
        ("unconfirmed-read-set", SMALL),
        ("no-origin-report", SMALL),
        ("no-rule-6", SMALL),
        ("no-floor", ex.PRESETS["hotset"]),
    ],
)
def test_broken_variant_caught(variant: str, scenario: ex.Scenario) -> None:
    assert ex.explore(scenario).ok  # the real rules pass this scenario ...
    rep = ex.explore(scenario, ex.BROKEN[variant])
    print(f"{variant}: {rep.summary()}")
    assert rep.violation is not None  # ... the broken ones do not
    assert not ex.Explorer(scenario).linearizable(_records(rep))


@pytest.mark.parametrize(
    ("variant", "scenario"),
    [("unconfirmed-read-set", SMALL), ("no-floor", ex.PRESETS["hotset"])],
)
def test_read_set_guards_are_not_what_keeps_reads_safe(variant: str, scenario: ex.Scenario) -> None:
    """Rule 6 passes a replica's reply only at exactly the version the origin last reported, a
    version whose value every holder shares: the read set's confirm and the floor decide where
    Gets go, not what a client may see. Without them the real rule 6 stays linearizable; beside
    rule 6 as it was (ver <= origin_ver, ``BROKEN``) each is caught
    (test_broken_variant_caught)."""
    real_rule_6 = ex.Rules().replica_reply_passes
    rep = ex.explore(
        scenario, dataclasses.replace(ex.BROKEN[variant], replica_reply_passes=real_rule_6)
    )
    print(f"{variant} with the real rule 6: {rep.summary()}")
    assert rep.ok and rep.end_states > 0


@heavy
def test_adopting_the_version_of_a_replica_above_a_live_origin_is_caught() -> None:
    """The controller's answer to a replica above origin_ver is to zero its cell (preset ahead,
    checked); taking its version as origin_ver, as for a dead origin's keys, is not linearizable."""
    rep = ex.explore(dataclasses.replace(ex.PRESETS["ahead"], ahead="adopt"))
    print(f"adopt: {rep.summary()}")
    assert rep.violation is not None


def test_explorer_passes_the_settled_flag() -> None:
    """Rule 1's F_SETTLED reaches the origin and the copies: set while nothing is on its way."""
    ex_ = ex.Explorer(SMALL)
    sw = ex_.initial()[0]
    ((sw2, out, _),) = ex_._request(sw, 0, 0, 1)
    assert {m[10] for m in out} == {p.F_SETTLED}
    ((_, out2, _),) = ex_._request(sw2, 0, 0, 2)  # the first write is still on its way
    assert {m[10] for m in out2} == {0}


def test_explorer_copies_as_the_candidate_says() -> None:
    """Scenario.copies and repeat_confirms_ignored (candidate fixes for resend-reread, switch
    side): an unsettled repeat goes without copies under "first-or-settled", a settled one with
    them; under "first" no repeat has copies; a repeat's copy carries its attempt number."""
    sc = dataclasses.replace(ex.PRESETS["resend-reread"], copies="first-or-settled")
    ex_ = ex.Explorer(sc)
    sw = ex_.initial()[0]
    ((sw2, out, _),) = ex_._request(sw, 0, 0, 1)
    assert [m[3] for m in out] == [p.Op.SET, p.Op.UPDATE]
    ((_, out2, _),) = ex_._request(sw2, 0, 0, 2)  # unsettled repeat: the origin's only
    assert [m[3] for m in out2] == [p.Op.SET]
    ((_, settled, _),) = ex_._request(sw, 0, 0, 2)  # settled repeat: copied
    assert [m[3] for m in settled] == [p.Op.SET, p.Op.UPDATE]
    first = ex.Explorer(dataclasses.replace(sc, copies="first"))
    assert [m[3] for m in next(iter(first._request(sw, 0, 0, 2)))[1]] == [p.Op.SET]
    flagged = ex.Explorer(dataclasses.replace(sc, repeat_confirms_ignored=True))
    ((_, out3, _),) = flagged._request(sw, 0, 0, 2)
    assert out3[1][3] == p.Op.UPDATE and out3[1][11] == 2
    with pytest.raises(ValueError):
        dataclasses.replace(sc, copies="some")


@heavy
@pytest.mark.parametrize(
    ("candidate", "preset"),
    [
        ("rule-6-at-most", "ahead-reread"),
        ("unsettled-repeats-uncopied", "ahead-reread"),
        ("repeat-confirms-uncounted", "ahead-reread"),
        ("read-set-exact", "ahead-reread"),
    ],
)
def test_rejected_fixes_for_resend_reread_are_caught(candidate: str, preset: str) -> None:
    """resend-reread (a repeat's copy at a replica at a version the origin never held, readable
    once a later write is reported) is closed by rule 6 at exactly origin_ver (CHECKED). Rule 6
    as it was (ver <= origin_ver) and the other candidates, each tried on it, are caught: the
    switch sending no copies of an unsettled repeat (ahead-reread's resend is settled), a
    replica's confirm of a repeat's copy not counted and a replica in the read set only at
    exactly origin_ver (the replica confirmed the second write before the repeat's copy came)."""
    scenario, rules = ex.PRESETS[preset], ex.RULE_6_AT_MOST
    if candidate == "unsettled-repeats-uncopied":
        scenario = dataclasses.replace(scenario, copies="first-or-settled")
    elif candidate == "repeat-confirms-uncounted":
        scenario = dataclasses.replace(scenario, repeat_confirms_ignored=True)
    elif candidate == "read-set-exact":
        rules = ex.BROKEN["read-set-exact"]
    rep = ex.explore(scenario, rules)
    print(f"{candidate} on {preset}: {rep.summary()}")
    assert rep.violation is not None


def test_switch_not_stamping_a_repeat_loses_a_write() -> None:
    """Rejected fix for resend-overtaken: a repeat goes to the origin unstamped and uncopied. When
    the first attempt died on its way to the origin, the repeat is applied at the old version and
    the replicas keep serving the value before it after the write was acknowledged."""
    scenario = dataclasses.replace(ex.PRESETS["faults"], unstamped_repeats=True)
    rep = ex.explore(scenario)
    print(f"unstamped repeats: {rep.summary()}")
    assert rep.violation is not None  # the real rules pass faults: test_real_rules_linearizable


@heavy
@pytest.mark.parametrize("variant", ["adopt-unsettled", "adopt-unchecked"])
def test_adoption_variant_caught(variant: str) -> None:
    """The adoption rule's tempting wrong variants, each in a scenario the real rules pass
    (resend-overtaken): adopting without F_SETTLED (the rule before; caught beside rule 6 as it
    was, which it needed: with rule 6 at exactly origin_ver it passes, docs/protocol.md "Agent
    rules"), F_SETTLED trusted without the stored-version check (a second writer's write
    applied and reported between the attempts: the origin moves another write's value to a
    version a replica holds the repeat's value at, against the real rule 6 too)."""
    rep = ex.explore(ex.PRESETS["resend-overtaken"], ex.BROKEN[variant])
    print(f"{variant}: {rep.summary()}")
    assert rep.violation is not None


@heavy
def test_latest_attempt_reply_only_is_caught() -> None:
    """Rejected fix: an attempt number in the header, a client taking only its latest attempt's
    reply, the old adoption rule (and rule 6 as it was). The adoption still re-writes the first
    value after a second writer's: a reader sees the first value, the second, then the first
    again."""
    scenario = dataclasses.replace(
        ex.PRESETS["resend-overtaken"],
        programs=((b"a1",), (b"a2",), (G, G, G)),
        latest_reply_only=True,
    )
    rep = ex.explore(scenario, ex.BROKEN["adopt-unsettled"])
    print(f"latest reply only: {rep.summary()}")
    assert rep.violation is not None


def _records(rep: ex.Report) -> tuple[ex.Record, ...]:
    """The failing history back as explorer records (checked again from scratch)."""
    ids = {}
    for op in rep.history:
        prog = rep.scenario.programs[op.client]
        idx = next(
            i
            for i, v in enumerate(prog)
            if (v is None) == (op.kind == "get")
            and (op.kind == "get" or v == op.value)
            and (op.client, i) not in ids.values()
        )
        ids[op] = (op.client, idx)
    out = []
    for op in sorted(rep.history, key=lambda o: o.call):
        c, idx = ids[op]
        ret = None if op.ret == float("inf") else int(op.ret)
        out.append((c, idx, int(op.call), ret, op.output if op.kind == "get" else True))
    return tuple(out)


def test_floor_variant_needs_the_hot_set_change() -> None:
    """Without a membership change the floor plays no part: the variant passes."""
    assert ex.explore(SMALL, ex.BROKEN["no-floor"]).ok


def test_agent_snapshots_are_canonical() -> None:
    agents = ex.Agents()
    start = ex.Agents.initial(Item(b"v0", 1, 1))
    set_a = p.Message(p.Op.SET, ex.KEY, b"a", cid=1, seq=1, epoch=1, ver=2).encode()
    state, out, _ = agents.handle(start, set_a, ex.CLIENT0)
    assert [p.Message.decode(raw).status for raw, _ in out] == [p.Status.OK]
    again, out2, _ = agents.handle(state, set_a, ex.CLIENT0)  # the same id: F_DUP, not applied
    assert again == state and p.Message.decode(out2[0][0]).flags & p.F_DUP
    assert agents.handle(start, set_a, ex.CLIENT0) == (state, out, None)  # memoised
    assert ex.Agents._snapshot(ex.Agents._restore(state)) == state
    pending, sync = agents.start_sync(state)
    assert ex.Agents.sync_pending(pending) and len(sync) == 1
    reflected = p.Message(p.Op.SYNC, ex.KEY, epoch=1, ver=3).encode()
    done, out3, synced = agents.handle(pending, reflected, ex.SW)
    assert not ex.Agents.sync_pending(done) and synced == (b"a", 1, 3)
    assert p.Message.decode(out3[0][0]).op == p.Op.SYNC_DONE
    _, confirm = agents.push(start, synced)
    assert p.Message.decode(confirm[0][0]).version == (1, 3)


def test_stale_write_has_an_unknown_outcome() -> None:
    """A Set answered STALE raises StaleWrite: a newer write stands and this one's outcome is
    unknown (its return is open); the earlier clients' "done, ordered before the newer write" is
    ``stale_is_success``."""
    hist = ((0, 0, 0, 2, ex.STALE), (1, 0, 1, 3, True), (0, 1, 4, 5, b"v0"))
    programs = ((b"a1", None), (b"a2",))
    ops = ex.Explorer(ex.Scenario(programs=programs)).history(hist)
    assert [(op.kind, op.value, op.ret) for op in ops] == [
        ("set", b"a1", math.inf),
        ("set", b"a2", 3.0),
        ("get", None, 5.0),
    ]
    done = ex.Explorer(ex.Scenario(programs=programs, stale_is_success=True)).history(hist)
    assert done[0].ret == 2.0


def test_stale_readings_each_fail_a_preset() -> None:
    """Neither "not applied" nor "done" is a sound reading of STALE: "done" loses a write across a
    switch restart (preset restart), and unknown is what passes both (CHECKED)."""
    restart = ex.PRESETS["restart"]
    assert ex.explore(dataclasses.replace(restart, stale_is_success=True)).violation is not None


def test_parse_program() -> None:
    assert ex.parse_program("set a1, get ,set b2") == (b"a1", None, b"b2")
    with pytest.raises(ValueError):
        ex.parse_program("put x")
    with pytest.raises(ValueError):
        ex.Scenario(programs=((b"a",), (b"a",)))


def test_cli_prints_states(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["explore", "--preset", "writes", "--client", "set a1", "--client", "get,get"]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "states" in text and "linearizable" in text
    assert main([*args, "--broken", "no-rule-6"]) == 1
    assert "counterexample" in capsys.readouterr().out
