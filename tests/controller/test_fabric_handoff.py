"""The hand-off between a rack controller and the fabric controller (controller/handoff.py,
docs/fabric.md "Runtime"): the two files round trip and a bad one is ignored, never raised; a
rack controller (``Runtime`` on leaf 0 of fabric_net.py) and the fabric runtime in one process:
a heavy key the rack made hot becomes fabric-hot and leaves the rack's HotkeyTable; a corrupt
share file changes nothing."""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import replace
from pathlib import Path

import pytest

from kvswitch import protocol as p
from kvswitch.controller import names
from kvswitch.controller.context import Context
from kvswitch.controller.fabric import FabricConfig
from kvswitch.controller.fabric_main import write_shares
from kvswitch.controller.fabric_ops import steering_of
from kvswitch.controller.fabric_runtime import FabricRuntime
from kvswitch.controller.fabricfile import FabricFile
from kvswitch.controller.handoff import (
    RackInput,
    fresh_since,
    next_boundary,
    read_inputs,
    read_share,
    write_inputs,
    write_share,
)
from kvswitch.controller.membership import Membership
from kvswitch.controller.p4rt_driver import P4RuntimeDriver
from kvswitch.controller.period import Controller, ControllerConfig, FabricShare
from kvswitch.controller.rackfile import RackFile
from kvswitch.controller.runtime import Runtime
from tests.controller.fabric_net import (
    RACKS,
    SERVERS,
    PacketAgents,
    fabric_net,
    leaf_drivers,
    programs,
    rack_json,
    spine_drivers,
)

A = p.pad_key(b"handoff-a")
B = p.pad_key(b"handoff-b")


def test_the_files_round_trip_and_a_bad_one_is_ignored(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "r0.inputs.json"
    x = RackInput({A: 7, B: 3}, [10.0, 2.5], {A: 1}, [1.0, 2.0], [0, 1])
    write_inputs(path, 4, x)
    assert read_inputs(path, 2, max_age=5.0) == x
    assert not list(tmp_path.glob("*.tmp"))  # written whole, then renamed
    share = FabricShare(frozenset({A}), (4.0, 0.0), (3.5, 1.0))
    write_share(tmp_path / "r0.share.json", 9, share)
    assert read_share(tmp_path / "r0.share.json", 2, max_age=5.0) == share
    assert read_share(tmp_path / "r0.share.json", 3) is None  # another rack's size

    # without a time (a file written by hand): its modification time is its age
    (tmp_path / "hand.json").write_text(json.dumps({"loads": [1, 2], "observed": {A.hex(): 5}}))
    assert read_inputs(tmp_path / "hand.json", 2, max_age=5.0) == RackInput({A: 5}, [1.0, 2.0])
    old = time.time() - 60
    os.utime(tmp_path / "hand.json", (old, old))
    caplog.set_level(logging.WARNING, "kvswitch.handoff")
    caplog.clear()
    assert read_inputs(tmp_path / "hand.json", 2, max_age=5.0) is None
    assert "stale" in caplog.text

    write_share(tmp_path / "old.json", 1, share, now=time.time() - 60)
    bad = {
        "missing": None,
        "not json": "{",
        "not an object": "[]",
        "a short key": json.dumps({"keys": ["ab"], "measured": [0, 0], "expected": [0, 0]}),
        "not hex": json.dumps({"keys": ["zz"], "measured": [0, 0], "expected": [0, 0]}),
        "no keys": json.dumps({"measured": [0, 0], "expected": [0, 0]}),
        "a negative load": json.dumps({"keys": [], "measured": [0, -1], "expected": [0, 0]}),
        "a string load": json.dumps({"keys": [], "measured": [0, "1"], "expected": [0, 0]}),
    }
    for name, text in bad.items():
        if text is not None:
            (tmp_path / f"{name}.json").write_text(text)
        assert read_share(tmp_path / f"{name}.json", 2) is None, name
        assert read_inputs(tmp_path / f"{name}.json", 2) is None, name
    assert read_share(tmp_path / "old.json", 2, max_age=5.0) is None
    assert read_share(tmp_path / "old.json", 2) == share  # no max_age: any age
    bad_counts = {"loads": [1, 1], "observed": {A.hex(): -1}}
    (tmp_path / "counts.json").write_text(json.dumps(bad_counts))
    assert read_inputs(tmp_path / "counts.json", 2) is None
    assert all("\n" not in r.getMessage() for r in caplog.records)


def test_a_racks_dead_servers_are_handed_to_the_fabric(tmp_path: Path) -> None:
    """``down`` (docs/fabric.md "Failures"): written when some server is dead, read back; a file
    without it (an older rack controller's) names none; a bad list is one log line and None."""
    path = tmp_path / "r0.inputs.json"
    x = RackInput({A: 7}, [10.0, 2.5, 0.0], down=frozenset({2}))
    write_inputs(path, 4, x)
    assert json.loads(path.read_text())["down"] == [2]
    assert read_inputs(path, 3) == x
    write_inputs(path, 5, RackInput({A: 7}, [10.0, 2.5, 0.0]))
    assert "down" not in json.loads(path.read_text())
    assert read_inputs(path, 3) == RackInput({A: 7}, [10.0, 2.5, 0.0])
    for bad in ([3], [-1], ["1"], [True], 1, {"0": 1}):
        path.write_text(json.dumps({"loads": [1, 2, 3], "down": bad}))
        assert read_inputs(path, 3) is None, bad


def test_the_planning_loads_take_the_fabrics_next_share() -> None:
    share = FabricShare(frozenset(), (30.0, 0.0), (10.0, 5.0))
    assert share.planning_loads([100, 20]) == [80.0, 25.0]
    assert share.planning_loads([10, 20]) == [10.0, 25.0]  # never below the fabric's own
    assert FabricShare(frozenset()).planning_loads([3, 4]) == [3.0, 4.0]


def origin_of(key: bytes) -> int:
    """The fabric's origins: A in rack 0 where rack 0's ring puts it, others over the fabric."""
    if key == A:
        return p.HashRing.of(range(SERVERS)).origin(key)
    return p.HashRing.of(range(RACKS * SERVERS)).origin(key)


def test_a_rack_hot_key_that_becomes_fabric_hot_leaves_the_racks_table(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    progs = programs()
    with fabric_net(tmp_path) as net:
        agents = PacketAgents(net)
        spines = spine_drivers(net, progs[0], agents)
        leaves = leaf_drivers(net, progs[1])
        inputs, share = tmp_path / "r0.inputs.json", tmp_path / "r0.share.json"
        racks = (replace(net.fabric.racks[0], share=str(share)), *net.fabric.racks[1:])
        layout = replace(net.fabric, racks=racks)
        fabric = FabricRuntime(
            layout,
            spines,
            leaves,
            FabricConfig(k=16, t0=10.0, holder_share=0.1),
            origin_of,
            tmp_path / "fabric-state.json",
        )
        # the rack controller of rack 0 shares leaf 0's driver with the fabric runtime (one
        # P4Runtime primary per switch in this process); no agents: its pushes fail, reported
        rack = Runtime(
            leaves[0],
            net.racks[0],
            ControllerConfig(k=8, t0=5.0),
            fabric_out=inputs,
            fabric_in=share,
            fabric_max_age=60.0,
        )
        try:
            fabric.start()
            write_shares(fabric)  # as kvswitch fabric-controller does after its start
            rack.start()
            assert not rack.ctx.fabric_unknown

            origin = net.racks[0].servers[origin_of(A)]
            for seq in range(200):
                net.from_host("c1", origin.ip_text, p.Message(p.Op.GET, A, cid=1, seq=seq))
            net.take()
            m = rack.period()
            assert m.error == ""
            assert A in rack.controller.plan.keys  # rack-hot
            assert A in _hot_keys(leaves[0])
            sent = read_inputs(inputs, SERVERS, max_age=60.0)
            assert sent is not None and sent.observed.get(A, 0) >= 150
            assert sum(sent.loads) >= 200 and sent.replicas is not None

            idle = RackInput({}, [20.0] * SERVERS)
            fm = fabric.period([sent, idle, idle])
            assert fm.errors == [] and A in fabric.spine_of
            write_shares(fabric)
            got = read_share(share, SERVERS)
            assert got is not None and A in got.keys
            assert sum(got.expected) > 0  # A's holders in rack 0 carry its share next period

            m = rack.period()
            assert m.error == ""
            assert A not in _hot_keys(leaves[0])  # broken at the leaf: the spine serializes it
            assert A not in rack.controller.plan.keys
            assert rack.controller.foreign == got.keys
            assert A in _steered(leaves[0], layout)

            # a corrupt share: logged, the fabric's keys last read stay out, nothing else moves
            share.write_text("{not json")
            caplog.set_level(logging.WARNING, "kvswitch.handoff")
            caplog.clear()
            before = dict(rack.controller.plan.keys)
            for seq in range(200):
                net.from_host("c1", origin.ip_text, p.Message(p.Op.GET, A, cid=1, seq=1000 + seq))
            net.take()
            m = rack.period()
            assert m.error == "" and "fabric share" in caplog.text
            assert rack.controller.foreign == got.keys
            assert A not in rack.controller.plan.keys and A not in _hot_keys(leaves[0])
            assert dict(rack.controller.plan.keys) == before

            # a server its failure detector declares dead is handed to the fabric
            assert read_inputs(inputs, SERVERS).down == frozenset()  # type: ignore[union-attr]
            rack.ctx.membership.mark_down(1)
            assert rack.period().down == [1]
            assert read_inputs(inputs, SERVERS).down == {1}  # type: ignore[union-attr]
        finally:
            fabric.close()
            for d in spines + leaves:
                d.close()


def _hot_keys(driver: P4RuntimeDriver) -> set[bytes]:
    return set(driver.read_plan()[0].keys)


def _steered(driver: P4RuntimeDriver, fabric: FabricFile) -> set[bytes]:
    return set(steering_of(driver.read_entries(names.FABRIC_HOT_TABLE), fabric, 0))


class HeldCopies:
    """The agents' side of :meth:`Context.drop_stale_copies`: what each server holds, and the
    removals asked for."""

    def __init__(self, held: dict[int, dict[bytes, object]]) -> None:
        self.held = held
        self.removed: list[tuple[bytes, int]] = []

    def holdings(self, servers: set[int] | None = None) -> dict[int, dict[bytes, object]]:
        return self.held

    def remove(self, key: bytes, server: int) -> None:
        self.removed.append((key, server))


def _rack_context(agents: HeldCopies) -> Context:
    """Rack 0's controller context, no switch, ``agents`` for its agents."""
    rack = RackFile.parse(rack_json(0))
    return Context(
        None,  # type: ignore[arg-type]
        rack,
        Controller(ControllerConfig(k=4), p.HashRing.of(range(SERVERS)).origin, rack.rack(), 16),
        agents,  # type: ignore[arg-type]
        Membership(SERVERS),
        frozenset(range(SERVERS)),
    )


def test_no_copy_of_a_fabric_key_is_dropped_as_stale() -> None:
    """A rack controller drops copies of keys it neither originates nor replicates; a copy of a
    fabric-hot key may be a spine's holder's (the fabric removes those), and while the fabric's
    keys are unknown it cannot tell, so it drops none."""
    ring = p.HashRing.of(range(SERVERS))
    agents = HeldCopies({})
    ctx = _rack_context(agents)
    for key in (A, B):  # each on the server that is not its origin: stale in the rack's eyes
        agents.held.setdefault(SERVERS - 1 - ring.origin(key), {})[key] = object()
    ctx.controller.foreign = frozenset({A})
    ctx.fabric_unknown = True
    ctx.drop_stale_copies()
    assert agents.removed == []
    ctx.fabric_unknown = False
    ctx.drop_stale_copies()
    assert agents.removed == [(B, SERVERS - 1 - ring.origin(B))]


def test_a_copy_pushed_while_the_rack_reads_its_agents_is_not_dropped() -> None:
    """The fabric controller names a key in the racks' shares before it pushes a copy of it
    (``FabricRuntime.announce``), and the rack controller reads the share after what its agents
    hold: a copy pushed since its last read of the share is named in it. Read only before the
    holdings (as before 2026-11-26), such a copy was dropped under a spine that counts it valid:
    its Gets found nothing until the key's next write (docs/fabric.md, the fabric test's CI
    reruns). Fails without the read after the holdings."""
    ring = p.HashRing.of(range(SERVERS))
    holder = SERVERS - 1 - ring.origin(B)  # not B's origin: stale in the rack's eyes
    share: dict[str, frozenset[bytes]] = {"keys": frozenset()}

    class PushedMeanwhile(HeldCopies):
        def holdings(self, servers: set[int] | None = None) -> dict[int, dict[bytes, object]]:
            share["keys"] = frozenset({B})  # the fabric: B in the shares, then B pushed
            self.held.setdefault(holder, {})[B] = object()
            return self.held

    agents = PushedMeanwhile({})
    ctx = _rack_context(agents)
    ctx.refresh_fabric = lambda: setattr(ctx.controller, "foreign", share["keys"])
    ctx.drop_stale_copies()  # the rack's last share read named nothing (foreign is empty)
    assert agents.removed == []


def test_the_racks_and_the_fabric_meet_on_the_wall_clock_s_period_boundaries(
    tmp_path: Path,
) -> None:
    """Every rack controller of a fabric ends its periods on the multiples of the period, and
    the fabric controller plans once every rack's inputs are newer than the boundary."""
    assert next_boundary(2.0, 5.3) == 6.0
    assert next_boundary(1.0, 7.0) == 8.0  # strictly after
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text("{}")
    assert not fresh_since([a, b], 0.0)  # b absent
    b.write_text("{}")
    os.utime(a, (100.0, 100.0))
    os.utime(b, (103.0, 103.0))
    assert fresh_since([a, b], 100.0) and not fresh_since([a, b], 101.0)
