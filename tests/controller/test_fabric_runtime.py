"""The fabric controller's runtime (controller/fabric_runtime.py) against two spines and three
leaves of the software switch behind P4Runtime and Thrift (fabric_net.py), through the rack
controller's P4Runtime driver: a period makes a key fabric-hot (spine tables, every leaf's
steering, the pushes as packets), Gets from a client spread over holders in several racks, a
write from another rack is stamped by the key's spine and copied to every holder, a restarted
runtime recovers the same state from the switches and its state file, and a refused write is
reported and read back, never counted as done."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kvswitch import protocol as p
from kvswitch.controller import names
from kvswitch.controller.driver import DriverError
from kvswitch.controller.fabric import FabricConfig
from kvswitch.controller.fabric_runtime import FabricRuntime, RackInput
from kvswitch.controller.handoff import read_share
from kvswitch.controller.ops import EntryOp, RegisterWrite, TableEntry
from kvswitch.controller.p4rt_driver import P4RuntimeDriver, Program
from kvswitch.controller.startup import SPINE_EPOCH_BASE
from tests.controller.fabric_net import (
    LEAF_DEFINES,
    MAX_HOLDERS,
    RACKS,
    SERVERS,
    SPINE_DEFINES,
    Net,
    PacketAgents,
    leaf_drivers,
    spine_drivers,
)

HOT = p.pad_key(b"fabric-hot")
ORIGIN = 0  # server 0 of rack 0


def origin_of(key: bytes) -> int:
    return ORIGIN if key == HOT else p.HashRing.of(range(RACKS * SERVERS)).origin(key)


def config() -> FabricConfig:
    return FabricConfig(k=16, t0=10.0, holder_share=0.1)


def inputs(hot: int = 1000) -> list[RackInput]:
    """Rack 0 carries HOT's Gets on its origin; every server has 100 packets of its own."""
    racks = [RackInput({}, [100.0] * SERVERS) for _ in range(RACKS)]
    racks[0].observed[HOT] = hot
    racks[0].loads[0] += hot
    return racks


class Fabric:
    def __init__(
        self,
        net: Net,
        progs: tuple[Program, Program],
        state: Path,
        leaf_cls: type[P4RuntimeDriver] = P4RuntimeDriver,
        runtime_cls: type[FabricRuntime] = FabricRuntime,
        spine_cls: type[P4RuntimeDriver] = P4RuntimeDriver,
    ):
        self.agents = PacketAgents(net)
        self.spines = spine_drivers(net, progs[0], self.agents, spine_cls)
        self.leaves = leaf_drivers(net, progs[1], leaf_cls)
        self.runtime = runtime_cls(net.fabric, self.spines, self.leaves, config(), origin_of, state)

    def close(self) -> None:
        self.runtime.close()
        for d in self.spines + self.leaves:
            d.close()


def held(drivers: list[P4RuntimeDriver], table: str) -> list[dict]:
    return [drv.read_entries(table) for drv in drivers]


@contextlib.contextmanager
def unnoticed_hot(net: Net, progs: tuple[Program, Program], state: Path) -> Iterator[Fabric]:
    """A fabric whose spines are :class:`Unnoticed`, started, HOT made fabric-hot by a period."""
    f = Fabric(net, progs, state, spine_cls=Unnoticed)
    try:
        f.runtime.start()
        f.runtime.period(inputs())
        yield f
    finally:
        for drv in f.spines:
            drv.gone = False
        f.close()


def test_a_period_makes_a_key_fabric_hot_and_spreads_its_reads(
    net: Net, progs: tuple[Program, Program], tmp_path: Path
) -> None:
    ProbeLeaf.net, ProbeLeaf.seen = net, []
    f = Fabric(net, progs, tmp_path / "state.json", ProbeLeaf)
    try:
        rt = f.runtime
        rt.start()
        # the racks' shares are written once the plans are decided, before any push: every
        # rack is told of HOT before a copy of it exists (a rack controller drops copies of keys
        # it is not told of; test_fabric_handoff.py)
        announced: list[tuple[int, list[frozenset[bytes]]]] = []
        rt.announce = lambda: announced.append(
            (len(f.agents.pushes), [rt.share(r).keys for r in range(RACKS)])
        )
        m = rt.period(inputs())
        assert m.errors == []
        assert [(n, [HOT in keys for keys in ks]) for n, ks in announced] == [(0, [True] * RACKS)]
        # from the moment the origin's leaf steered HOT, a write from the origin's own rack reached
        # the origin stamped by the spine (docs/fabric.md F3; test_steering_first_is_caught)
        assert len(ProbeLeaf.seen) == 1
        assert all(msg.epoch == rt.epochs[rt.spine_of[HOT]] and msg.ver for msg in ProbeLeaf.seen)
        assert HOT in rt.spine_of
        s = rt.spine_of[HOT]
        holders = rt.plans[s].keys[HOT].holders
        assert holders[0] == ORIGIN and len({h // SERVERS for h in holders}) >= 2
        # place_fabric wanted more holders than the spine's MAX_HOLDERS: cut to them
        assert m.capped == 1 and len(holders) == MAX_HOLDERS
        # every leaf steers HOT to its spine's port, and forwards KVSwitch packets
        for r, entries in enumerate(held(f.leaves, names.FABRIC_HOT_TABLE)):
            [entry] = entries.values()
            assert entry.params[names.PARAM_PORT] == net.fabric.racks[r].uplinks[s]
        # the spine holds exactly the plan (read back the way a restarted runtime does)
        assert len(f.spines[s].read_entries(names.SERVEROFFSET_TABLE)) == len(holders)
        assert f.agents.pushes == [(HOT, ORIGIN, holders[1:])]
        assert f.agents.stamps[0][0] == rt.epochs[s]

        # Gets from a client of rack 2: round-robin over every holder, in several racks
        for seq in range(2 * len(holders)):
            net.from_host("c3", net.server_ip(ORIGIN), p.Message(p.Op.GET, HOT, cid=9, seq=seq))
        served = [name for name, msg in net.take() if msg.op == p.Op.GET]
        assert sorted(set(served)) == sorted(net.server_name(h) for h in holders)

        # a write from rack 2: stamped by the spine with its epoch, copied to every holder
        net.from_host("c3", net.server_ip(ORIGIN), p.Message(p.Op.SET, HOT, b"v2", cid=9, seq=99))
        got = net.take()
        ver = f.agents.stamps[0][1] + 1
        assert sorted((n, m.op, m.epoch, m.ver) for n, m in got) == sorted(
            [(net.server_name(ORIGIN), p.Op.SET, rt.epochs[s], ver)]
            + [(net.server_name(h), p.Op.UPDATE, rt.epochs[s], ver) for h in holders[1:]]
        )
        # until the origin completes it, Gets go to the origin only
        net.from_host("c3", net.server_ip(ORIGIN), p.Message(p.Op.GET, HOT, cid=9, seq=100))
        assert [n for n, _ in net.take()] == [net.server_name(ORIGIN)]
    finally:
        f.close()


def test_a_restarted_runtime_recovers_the_fabric(
    net: Net, progs: tuple[Program, Program], tmp_path: Path
) -> None:
    state = tmp_path / "state.json"
    f = Fabric(net, progs, state)
    try:
        f.runtime.start()
        f.runtime.period(inputs())
        epochs, plans = list(f.runtime.epochs), [dict(pl.keys) for pl in f.runtime.plans]
        tables = (
            names.HOTKEY_TABLE,
            names.KEYINDEX_TABLE,
            names.SERVERMAP_TABLE,
            names.SERVEROFFSET_TABLE,
            "ipv4_lpm",
            names.HOSTPORT_TABLE,
            names.RIDTOSERVER_TABLE,
        )
        # a write the origin completes and the replicas never confirm: after the restart the
        # replicas are not valid, and are pushed again
        s = f.runtime.spine_of[HOT]
        origin = net.server_name(ORIGIN)
        net.from_host("c3", net.server_ip(ORIGIN), p.Message(p.Op.SET, HOT, b"v3", cid=9, seq=7))
        [stamped] = [m for n, m in net.take() if n == origin]
        reply = p.Message(p.Op.SET_REPLY, HOT, cid=9, seq=7, epoch=stamped.epoch, ver=stamped.ver)
        net.from_host(origin, "10.3.1.1", reply, p.KVS_PORT, 40000)
        assert [n for n, _ in net.take()] == ["c3"]
        spine_before = {t: held(f.spines, t) for t in tables}
        leaf_before = held(f.leaves, names.FABRIC_HOT_TABLE)
        groups = [d.read_groups() for d in f.spines]
    finally:
        f.close()
    g = Fabric(net, progs, state)
    try:
        rt = g.runtime
        rt.start()
        assert rt.epochs == epochs  # the spines did not restart: same epochs
        holders = plans[s][HOT].holders
        assert g.agents.pushes == [(HOT, holders[0], holders[1:])]
        assert g.agents.stamps == [(epochs[s], stamped.ver + 1)]
        assert [dict(pl.keys) for pl in rt.plans] == plans
        after = {t: held(g.spines, t) for t in tables}
        # a recovered key's floor is the spine's global_ver when it took over (as a rack's:
        # confirms sent before validate nothing); the rest is what was there, nothing twice
        for i, entries in enumerate(after.pop(names.KEYINDEX_TABLE)):
            for match, entry in entries.items():
                assert entry.params[names.PARAM_FLOOR] == stamped.ver
                before = spine_before[names.KEYINDEX_TABLE][i][match]
                assert {**entry.params, names.PARAM_FLOOR: 0} == {**before.params, "floor": 0}
            assert entries.keys() == spine_before[names.KEYINDEX_TABLE][i].keys()
        del spine_before[names.KEYINDEX_TABLE]
        assert after == spine_before
        assert held(g.leaves, names.FABRIC_HOT_TABLE) == leaf_before
        assert [d.read_groups() for d in g.spines] == groups
        # the same load: the spine counts HOT's Gets (its count of a key it holds is the one the
        # plan uses; with only the Set above, HOT would look all writes and lose its holders)
        for seq in range(1000):
            net.from_host("c3", net.server_ip(ORIGIN), p.Message(p.Op.GET, HOT, cid=9, seq=seq))
        net.take()
        m = rt.period(inputs())  # the same plan, nothing to write
        assert m.errors == [] and m.updates == 0 and [dict(pl.keys) for pl in rt.plans] == plans
        # a spine that restarted (its epoch register back to 0) gets a new epoch
        g.spines[0].apply([RegisterWrite(names.REG_EPOCH, 0, 0)])
        rt.start()
        assert rt.epochs == [epochs[0] + 1, epochs[1]]
        assert g.spines[0].read_register(names.REG_EPOCH)[0] == epochs[0] + 1
    finally:
        g.close()


def test_a_refused_write_is_reported_and_read_back(
    net: Net, progs: tuple[Program, Program], tmp_path: Path
) -> None:
    """A spine refuses part of the batch that makes HOT fabric-hot (an entry it already holds):
    the period reports it, the spine's plan is read back (HOT's half-made entries deleted, its
    HotkeyTable entry too if it went in), no leaf steers HOT, nobody is pushed; the next period
    makes it properly."""
    f = Fabric(net, progs, tmp_path / "state.json")
    try:
        rt = f.runtime
        rt.start()
        stray = TableEntry(
            EntryOp.ADD,
            names.SERVERMAP_TABLE,
            ((names.MATCH_SLOT, 0), (names.MATCH_ORDINAL, 1)),
            names.ACT_SET_SERVER,
            (
                (names.PARAM_VIDX, 1),
                (names.PARAM_IP, 1),
                (names.PARAM_MAC, 1),
                (names.PARAM_PORT, 1),
            ),
        )
        f.spines[0].apply([stray])  # HOT takes slot 0 of spine 0: its ordinal 1 is refused
        m = rt.period(inputs())
        assert len(m.errors) == 1 and m.errors[0].startswith("spine spine1: P4Runtime")
        assert m.updates == 0 and HOT not in rt.spine_of and rt.plans[0].keys == {}
        assert held(f.spines, names.HOTKEY_TABLE) == [{}, {}]
        assert held(f.spines, names.SERVERMAP_TABLE) == [{}, {}]
        assert held(f.leaves, names.FABRIC_HOT_TABLE) == [{}] * RACKS
        assert f.agents.pushes == []
        m = rt.period(inputs())
        assert m.errors == [] and HOT in rt.spine_of
        assert all(len(entries) == 1 for entries in held(f.leaves, names.FABRIC_HOT_TABLE))
        assert len(f.agents.pushes) == 1
    finally:
        f.close()


def test_a_key_a_leaf_does_not_steer_is_broken_at_its_spine(
    net: Net, progs: tuple[Program, Program], tmp_path: Path
) -> None:
    """Leaf 2 refuses HOT's steering entry (it holds another one for HOT): HOT is taken off its
    spine again and its entries off the other leaves (a write from its origin's rack could
    otherwise reach the origin unstamped while the spine serves reads from replicas), nobody
    is pushed; the next period reconciles leaf 2 and makes HOT properly."""
    f = Fabric(net, progs, tmp_path / "state.json")
    try:
        rt = f.runtime
        rt.start()
        stray = TableEntry(
            EntryOp.ADD,
            names.FABRIC_HOT_TABLE,
            ((names.MATCH_KEY, HOT),),
            names.ACT_SET_SPINE,
            ((names.PARAM_PORT, 7), (names.PARAM_DMAC, 1)),
        )
        f.leaves[1].apply([stray])
        m = rt.period(inputs())
        assert [e.split(":")[0] for e in m.errors] == ["leaf leaf2"]
        assert rt.spine_of == {} and held(f.spines, names.HOTKEY_TABLE) == [{}, {}]
        assert [len(x) for x in held(f.leaves, names.FABRIC_HOT_TABLE)] == [0, 1, 0]
        assert f.agents.pushes == []
        m = rt.period(inputs())
        assert m.errors == [] and HOT in rt.spine_of
        s = rt.spine_of[HOT]
        for r, entries in enumerate(held(f.leaves, names.FABRIC_HOT_TABLE)):
            [entry] = entries.values()
            assert entry.params[names.PARAM_PORT] == net.fabric.racks[r].uplinks[s]
        assert len(f.agents.pushes) == 1
    finally:
        f.close()


class LogLeaf(P4RuntimeDriver):
    """A leaf driver that logs its steering writes in the agents' event log."""

    log: list[tuple]

    def apply(self, ops) -> None:
        super().apply(ops)
        self.log += [
            ("steer", op.op)
            for op in ops
            if isinstance(op, TableEntry) and op.table == names.FABRIC_HOT_TABLE
        ]


def test_a_key_changing_level_is_rebased_between_its_steering_and_its_push(
    net: Net, progs: tuple[Program, Program], tmp_path: Path
) -> None:
    """docs/fabric.md "Moving a key between levels": a key that comes to a spine is rebased at
    every holder after every leaf steers it (its home leaf stops stamping it) and before its
    push; one that leaves is rebased at its origin after every leaf stopped steering it."""
    LogLeaf.log = []
    f = Fabric(net, progs, tmp_path / "state.json", LogLeaf)
    f.agents.events = LogLeaf.log
    try:
        rt = f.runtime
        rt.start()
        rt.period(inputs())
        holders = rt.plans[rt.spine_of[HOT]].keys[HOT].holders
        kinds = [e[0] for e in f.agents.events]
        assert kinds == ["steer"] * RACKS + ["rebase"] * len(holders) + ["push"]
        assert {e[2] for e in f.agents.events if e[0] == "rebase"} == set(holders)
        f.agents.events.clear()
        for _ in range(12):  # no more load: HOT leaves the spine
            rt.period(inputs(hot=0))
            if HOT not in rt.spine_of:
                break
        assert HOT not in rt.spine_of
        assert f.agents.events == [("steer", EntryOp.DELETE)] * RACKS + [("rebase", HOT, ORIGIN)]
    finally:
        f.close()


class ProbeLeaf(P4RuntimeDriver):
    """The origin's leaf's driver: right after each write of steering entries, it sends a Set of
    HOT from the client in the origin's rack (c1, the client F3 is about) and keeps what reached
    the origin. Only the home leaf probes: the runtime writes the leaves in parallel, and c1's
    write goes through its own leaf whatever the others hold (a probe after another leaf's
    write raced the home leaf's, failing 2 runs in 6 under load)."""

    net: Net
    seen: list[p.Message]

    def apply(self, ops) -> None:
        super().apply(ops)
        if self.address != self.net.leaves[ORIGIN // SERVERS].address:
            return
        if any(
            isinstance(op, TableEntry)
            and op.table == names.FABRIC_HOT_TABLE
            and op.op is EntryOp.ADD
            for op in ops
        ):
            set_ = p.Message(p.Op.SET, HOT, b"probe", cid=5, seq=len(self.seen) + 1)
            self.net.from_host("c1", self.net.server_ip(ORIGIN), set_)
            origin = self.net.server_name(ORIGIN)
            got = [m for n, m in self.net.take() if n == origin and m.op == p.Op.SET]
            self.seen += got
            for m in got:  # the origin completes the write (the spine's origin_ver follows)
                reply = p.Message(p.Op.SET_REPLY, HOT, cid=5, seq=m.seq, epoch=m.epoch, ver=m.ver)
                self.net.from_host(origin, "10.1.1.1", reply, p.KVS_PORT, 40000)
                self.net.take()


class SteerFirst(FabricRuntime):
    """Deliberately broken: the leaves steer before the spines hold the key's entries."""

    def _write(self, m, batches, before) -> None:
        held = self.controller.spine_of
        self.controller.spine_of = {
            key: s for s, plan in enumerate(self.plans) for key in plan.keys
        }
        self._write_steering(m)
        self.controller.spine_of = held
        self._write_spines(m, batches)
        self._write_agents(m, batches)


def test_steering_first_is_caught(net: Net, progs: tuple[Program, Program], tmp_path: Path) -> None:
    """The probe of the first test on a runtime that writes the leaves' steering before the
    spines' entries: the near client's write reaches the origin unstamped (the hazard F3 names)."""
    ProbeLeaf.net, ProbeLeaf.seen = net, []
    f = Fabric(net, progs, tmp_path / "state.json", ProbeLeaf, SteerFirst)
    try:
        f.runtime.start()
        f.runtime.period(inputs())
        assert ProbeLeaf.seen and any(msg.ver == 0 and msg.epoch == 0 for msg in ProbeLeaf.seen)
    finally:
        f.close()


def test_the_fabric_controller_process(
    net: Net, progs: tuple[Program, Program], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``kvswitch fabric-controller --config``: the racks' hand-off files name a heavy key of
    rack 0; one period makes it fabric-hot on the switches; a second run from the state file
    keeps the spines' epochs. A bad fabric file is one line on stderr and exit 2."""
    from kvswitch.controller import fabric_main

    raw = json.loads((tmp_path / "fabric.json").read_text())
    shape = net.fabric.shape
    ring = p.HashRing.of(range(shape.total))
    key = next(
        k for k in (p.pad_key(b"cli-%d" % i) for i in range(100)) if ring.origin(k) < SERVERS
    )
    for r, rack in enumerate(raw["racks"]):
        rack["inputs"] = str(tmp_path / f"r{r}.json")
        loads = [100.0] * SERVERS
        observed = {}
        if r == 0:
            loads[ring.origin(key)] += 1000
            observed = {key.hex(): 1000}
        (tmp_path / f"r{r}.json").write_text(json.dumps({"loads": loads, "observed": observed}))
    raw["racks"][2]["inputs"] = str(tmp_path / "missing.json")  # idle, said in the log
    raw["racks"][0]["share"] = str(tmp_path / "r0.share.json")  # for rack 0's controller
    (tmp_path / "cli.json").write_text(json.dumps(raw))
    argv = ["--config", str(tmp_path / "cli.json"), "--state", str(tmp_path / "cli-state.json")]
    argv += ["--period", "0.01", "--periods", "1", "--max-age", "3600"]  # files by hand
    argv += [f"--spine-define={k}={v}" for k, v in SPINE_DEFINES.items()]
    argv += [f"--leaf-define={k}={v}" for k, v in LEAF_DEFINES.items()]
    # a leaf's pipeline is its rack controller's: the fabric controller waits for it
    status: list[int] = []
    started = threading.Thread(target=lambda: status.append(fabric_main.main(argv)))
    started.start()
    deadline = time.monotonic() + 60
    while any(sw.device.pipeline is None for sw in net.spines) and time.monotonic() < deadline:
        time.sleep(0.1)  # the spines first
    time.sleep(3.0)
    assert not status and all(sw.device.pipeline is None for sw in net.leaves)
    for drv in leaf_drivers(net, progs[1]):  # as the rack controllers do
        drv.close()
    started.join(timeout=60)
    assert status == [0]
    state = json.loads((tmp_path / "cli-state.json").read_text())
    share = read_share(tmp_path / "r0.share.json", SERVERS)
    assert share is not None and key in share.keys and len(share.expected) == SERVERS
    with P4RuntimeDriver(net.leaves[2].address, progs[1], net.racks[2].rack()) as drv:
        assert list(drv.read_entries(names.FABRIC_HOT_TABLE)) != []
    assert fabric_main.main(argv) == 0
    assert (
        json.loads((tmp_path / "cli-state.json").read_text())["spine_epochs"]
        == state["spine_epochs"]
    )
    (tmp_path / "bad.json").write_text(json.dumps({**raw, "k": 10_000}))
    assert fabric_main.main(["--config", str(tmp_path / "bad.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("kvswitch fabric-controller:") and "\n" not in err


def test_a_dead_spines_keys_are_no_longer_steered(
    net: Net, progs: tuple[Program, Program], tmp_path: Path
) -> None:
    """docs/fabric.md "Failures": the spine of HOT goes away; the period reports it, the leaves
    stop steering HOT (its requests would be lost in a dead link) and its origin is rebased."""
    f = Fabric(net, progs, tmp_path / "state.json")
    try:
        rt = f.runtime
        rt.start()
        rt.period(inputs())
        s = rt.spine_of[HOT]
        net.spines[s].stop()
        f.agents.events.clear()
        m = rt.period(inputs())
        assert any(e.startswith(f"spine {net.spines[s].name}") for e in m.errors)
        assert HOT not in rt.spine_of
        assert held(f.leaves, names.FABRIC_HOT_TABLE) == [{}] * RACKS
        assert f.agents.events == [("rebase", HOT, ORIGIN)]
    finally:
        f.close()


def test_a_leaf_s_version_steered_to_its_spine_does_not_count_there(
    net: Net, progs: tuple[Program, Program], tmp_path: Path
) -> None:
    """The origin answers a Get with the version its home leaf stamped before the key moved to
    the spine (epoch 1: a fabric's rack controller gives its leaf 1 first); steered up, it must
    not raise the spine's origin_ver (rule 2 counts its own epoch only), or no replica would
    ever be valid again and every read would go to the origin (seen in the Mininet fabric with
    the rack controllers balancing: spine and leaf both at epoch 1). Spines take their epochs
    from SPINE_EPOCH_BASE up; with the spines' epochs from 1, as before, this fails."""
    f = Fabric(net, progs, tmp_path / "state.json")
    try:
        rt = f.runtime
        rt.start()
        rt.period(inputs())
        assert all(e >= SPINE_EPOCH_BASE for e in rt.epochs)
        s = rt.spine_of[HOT]
        slot = rt.plans[s].keys[HOT].slot
        before = f.spines[s].read_register(names.REG_ORIGIN_VER)[slot]
        leaf_version = p.Message(p.Op.GET_REPLY, HOT, b"v0", cid=9, seq=1, epoch=1, ver=before + 50)
        net.from_host(net.server_name(ORIGIN), "10.3.1.1", leaf_version, p.KVS_PORT, 40000)
        net.take()
        assert f.spines[s].read_register(names.REG_ORIGIN_VER)[slot] == before
    finally:
        f.close()


HANG = 3.0  # seconds a call to a dead spine waits while its stream has not noticed


class Unnoticed(P4RuntimeDriver):
    """A spine driver whose stream has not noticed its switch went away (``gone``): it says
    it is connected and every call waits ``HANG`` seconds before it fails, as a period's calls
    to a killed spine did in the Mininet fabric (4.5 s). ``slow``: seconds its counters'
    read takes, a live switch slower than the liveness check."""

    gone = False
    slow = 0.0

    @property
    def connected(self) -> bool:
        return True if self.gone else super().connected

    def _run(self, coro):
        if self.gone:
            coro.close()
            time.sleep(HANG)
            raise DriverError("no answer from the switch")
        return super()._run(coro)

    def read_hot_counters(self) -> dict[bytes, int]:
        time.sleep(self.slow)
        return super().read_hot_counters()


def test_a_dead_spine_is_noticed_without_waiting_for_a_call(
    net: Net, progs: tuple[Program, Program], tmp_path: Path
) -> None:
    """A spine whose process is gone is lost at the next period's start by its closed control
    port (``reachable``), with no call to it: its keys' steering goes from the leaves at once
    instead of after the calls' timeouts. A live spine that answers slower than the check's
    0.5 s is not lost. Without the check the period waits HANG s per call (fails)."""
    with unnoticed_hot(net, progs, tmp_path / "state.json") as f:
        rt = f.runtime
        s = rt.spine_of[HOT]
        f.spines[s].slow = 0.8
        m = rt.period(inputs())
        assert m.errors == [] and rt.spine_of.get(HOT) == s and all(rt.spine_ok)
        f.spines[s].slow = 0.0
        net.spines[s].stop()
        f.spines[s].gone = True
        began = time.monotonic()
        m = rt.period(inputs())
        took = time.monotonic() - began
        assert took < HANG, f"the period waited {took:.1f} s on the dead spine"
        assert m.errors[0] == f"spine {net.spines[s].name}: its control port takes no connection"
        assert HOT not in rt.spine_of and not rt.spine_ok[s]
        assert held(f.leaves, names.FABRIC_HOT_TABLE) == [{}] * RACKS


def test_no_plan_while_a_leaf_is_away_and_its_keys_come_back_after(
    net: Net, progs: tuple[Program, Program], tmp_path: Path
) -> None:
    """docs/fabric.md "Failures": leaf 3 goes away; the next period breaks HOT at its spine (a
    leaf that cannot be written could forward without steering), takes its steering off the
    other leaves and rebases its origin, and makes no plan while the leaf is away; HOT is
    remembered for the first plan once the leaf is back."""
    f = Fabric(net, progs, tmp_path / "state.json")
    try:
        rt = f.runtime
        rt.start()
        rt.period(inputs())
        s, holders = rt.spine_of[HOT], rt.plans[rt.spine_of[HOT]].keys[HOT].holders
        net.leaves[2].stop()
        # the P4Runtime client learns of the lost stream on its own time (under load, after the
        # next period began): what is tested is the period once the leaf is known to be away
        deadline = time.monotonic() + 10
        while rt.leaves[2].connected and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not rt.leaves[2].connected
        f.agents.events.clear()
        for _ in range(2):
            m = rt.period(inputs())
            assert "a leaf is not started: no plan this period" in m.errors
            assert rt.spine_of == {} and held(f.spines, names.HOTKEY_TABLE) == [{}, {}]
            assert held(f.leaves[:2], names.FABRIC_HOT_TABLE) == [{}, {}]
        assert f.agents.events == [("rebase", HOT, ORIGIN)]  # once
        assert rt.controller.restore == {HOT: (s, holders)}
    finally:
        f.close()


def test_a_spine_reached_again_does_not_adopt_the_keys_dropped_meanwhile(
    net: Net, progs: tuple[Program, Program], tmp_path: Path
) -> None:
    """A spine whose control channel fails while its process lives (tables and registers kept):
    the period loses it, HOT goes cold and its origin takes writes the spine never sees. Reached
    again, the spine still holds HOT with its replicas valid at the version of before: adopted,
    they would serve that older value (rule 6 passes them: their version is the spine's
    ``origin_ver``). HOT is deleted from it instead, its origin rebased, and the period's plan
    makes it again with a push from its origin. Adopting it (no rebase, no push) fails."""
    with unnoticed_hot(net, progs, tmp_path / "state.json") as f:
        rt = f.runtime
        s = rt.spine_of[HOT]
        assert len(f.agents.pushes) == 1
        f.spines[s].gone = True
        m = rt.period(inputs())
        assert HOT not in rt.spine_of and not rt.spine_ok[s]
        f.spines[s].gone = False
        f.agents.events.clear()
        m = rt.period(inputs())
        assert all(rt.spine_ok) and HOT in rt.spine_of
        # the drop's rebase of the origin, then the make's (each holder, docs/fabric.md F4), push
        holders = rt.plans[rt.spine_of[HOT]].keys[HOT].holders
        made = [("rebase", HOT, h) for h in holders] + [("push", HOT)]
        assert f.agents.events == [("rebase", HOT, ORIGIN), *made], m.errors
