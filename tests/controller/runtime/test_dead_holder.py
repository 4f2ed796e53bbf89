"""A dead holder of a rotated fabric-hot key (docs/fabric.md "Write rotation", "Failures";
issue 21): its rack controller declares it dead (``RackInput.down``), and the fabric runtime's
next period takes it out of the key's map without waiting for its write freeze. The live
holders are frozen, exported from and imported into (real in-process agents, the dead one's
stopped), the spine's ``slot_ver``/``origin_ver``/``done_by`` of the key are reset so that no
Get follows ``done_by`` to the dead holder, the holders are released and the origin's SYNC
(R5 at ``origin_ver`` 0) makes the key readable again: every Get and write of it reaches a live
holder. The switches are the software switch's (tests/controller/fabric_net.py), the agents'
pushes played as packets."""

from __future__ import annotations

import time
from pathlib import Path

from kvswitch import protocol as p
from kvswitch.controller import names
from kvswitch.controller.fabric import FabricConfig
from kvswitch.controller.fabric_main import metrics_record
from kvswitch.controller.fabric_runtime import FabricRuntime
from kvswitch.controller.p4rt_driver import Program
from tests.controller import fabric_net as fn
from tests.controller.runtime.test_freeze_recovery import EPOCH, Agents
from tests.controller.test_fabric_rotation import inputs
from tests.controller.test_fabric_runtime import HOT, ORIGIN, origin_of

CLIENT, CLIENT_IP = "c3", "10.3.1.1"


def write_to(net: fn.Net, holder: int, first: int) -> p.Message:
    """A write of HOT from the client whose writer (R1, by its request id) is ``holder``, as the
    spine delivered it."""
    for seq in range(first, first + 256):
        net.from_host(CLIENT, net.server_ip(ORIGIN), p.Message(p.Op.SET, HOT, b"w", cid=7, seq=seq))
        got = net.take()
        assert len(got) == 1 and got[0][1].op == p.Op.SET
        if got[0][0] == net.server_name(holder):
            return got[0][1]
    raise AssertionError(f"no request id of 256 written by holder {holder}")


def get_goes_to(net: fn.Net, seq: int) -> str:
    net.from_host(CLIENT, net.server_ip(ORIGIN), p.Message(p.Op.GET, HOT, cid=9, seq=seq))
    got = net.take()
    assert [m.op for _, m in got] == [p.Op.GET]
    return got[0][0]


def test_a_dead_holder_leaves_a_rotated_keys_map_without_its_freeze(
    net: fn.Net, progs: tuple[Program, Program], tmp_path: Path, agents: Agents
) -> None:
    a = agents
    packets = fn.PacketAgents(net)
    spines = fn.spine_drivers(net, progs[0], packets)
    leaves = fn.leaf_drivers(net, progs[1])
    config = FabricConfig(k=16, t0=10.0, holder_share=0.1)
    pool = a.pool()
    rt = FabricRuntime(
        net.fabric, spines, leaves, config, origin_of, tmp_path / "state.json", freeze=pool
    )
    try:
        rt.start()
        assert rt.period(inputs()).errors == []
        s = rt.spine_of[HOT]
        kp = rt.plans[s].keys[HOT]
        assert kp.rotate and len(kp.holders) >= 3
        dead = kp.holders[1]
        live = tuple(h for h in kp.holders if h != dead)
        # the origin holds w1; a write whose writer is `dead` completes there: its reply raises
        # origin_ver and makes it done_by (R2), so the key's Gets go to it (R4)
        w1 = p.Message(p.Op.SET, HOT, b"one", cid=3, seq=1, epoch=EPOCH, ver=1)
        assert a.ask(ORIGIN, w1).status == p.Status.OK
        w2 = write_to(net, dead, 1)
        reply = a.ask(dead, w2)
        assert reply.status == p.Status.OK
        net.from_host(net.server_name(dead), CLIENT_IP, reply)
        assert [(n, m.op) for n, m in net.take()] == [(CLIENT, p.Op.SET_REPLY)]
        assert get_goes_to(net, 1) == net.server_name(dead)
        drv = spines[s]
        assert drv.read_register_cells(names.REG_DONE_BY, [kp.slot]) == {kp.slot: 1}

        # it dies (its process's sockets with it: an in-process agent's stop() leaves the
        # control connections it accepted served); its rack controller declares it dead
        a.agents[dead].stop()
        for control in pool.connections(dead):
            control.close()
        racks = inputs()
        racks[dead // fn.SERVERS].down = frozenset({dead % fn.SERVERS})
        packets.pushes.clear()
        began = time.perf_counter()
        m = rt.period(racks)
        took = time.perf_counter() - began
        assert m.errors == [] and metrics_record(rt, m)["dead"] == [dead]
        now = rt.plans[s].keys[HOT]
        assert rt.spine_of[HOT] == s and now.holders == live and now.slot == kp.slot
        assert a.frozen() == [set()] * len(a.agents)  # the live holders released
        for h in live:  # each holds the newest item a live holder held
            assert a.item(h, HOT) == (b"one", 1)
        # the origin's SYNC at origin_ver 0 (R5) gave the key a version; pushed to the others
        assert packets.pushes == [(HOT, ORIGIN, live[1:])]
        ov = drv.read_register_cells(names.REG_ORIGIN_VER, [kp.slot])[kp.slot]
        assert ov == packets.stamps[-1][1]
        assert drv.read_register_cells(names.REG_DONE_BY, [kp.slot]) == {kp.slot: 0}
        # no Get nor write of the key reaches the dead holder any more; the origin's read reply
        # at the completed version passes
        hosts = {get_goes_to(net, 10 + i) for i in range(8)}
        assert net.server_name(dead) not in hosts
        get = p.Message(p.Op.GET_REPLY, HOT, b"one", cid=9, seq=20, epoch=rt.epochs[s], ver=ov)
        net.from_host(net.server_name(ORIGIN), CLIENT_IP, get)
        assert [(n, m.op) for n, m in net.take()] == [(CLIENT, p.Op.GET_REPLY)]
        for i in range(16):
            net.from_host(
                CLIENT, net.server_ip(ORIGIN), p.Message(p.Op.SET, HOT, b"x", cid=8, seq=i)
            )
            got = net.take()
            assert [n for n, _ in got] and got[0][0] != net.server_name(dead)
        print(f"dead holder removed, key readable again: period {took * 1000:.0f} ms")
        # then its origin dies too: the key keeps its live holders (the origin cannot SYNC a
        # push, and leaving the spine would remove their copies), nothing is frozen, nothing
        # is reset
        a.agents[ORIGIN].stop()
        for control in pool.connections(ORIGIN):
            control.close()
        racks[ORIGIN // fn.SERVERS].down = frozenset({ORIGIN % fn.SERVERS})
        before = drv.read_register_cells(names.REG_ORIGIN_VER, [kp.slot])
        m = rt.period(racks)
        assert m.errors == [] and rt.plans[s].keys[HOT] == now
        assert drv.read_register_cells(names.REG_ORIGIN_VER, [kp.slot]) == before
    finally:
        rt.close()
        pool.close()
        for d in spines + leaves:
            d.close()
