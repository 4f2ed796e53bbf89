"""Differential test: the simulator's model and the software switch executing ``p4src/`` end in
the same state (registers, HashPipe, hot-key and load counters) on the same trace and the same
controller batches.

The controller's operations are applied to the switch by a small adapter (what a real driver
does); the agents' part of a push (SYNC, SYNC_DONE, CONFIRM) is played with real packets on the
switch and by :meth:`Model.push` on the model. Writes get no replies in the trace (the model's
confirm lag is longer than the trace), so the version registers must agree exactly.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from kvswitch.bench.model import Model
from kvswitch.controller import names
from kvswitch.controller.hashring import key16, origins_of_ids
from kvswitch.controller.ops import (
    EntryOp,
    MulticastGroupDelete,
    MulticastGroupSet,
    Operation,
    PushRequest,
    RegisterWrite,
    RemoveRequest,
    TableEntry,
)
from kvswitch.controller.plan import Plan, build_plan, diff, rack_setup
from kvswitch.controller.rack import Rack
from kvswitch.paths import p4src_dir
from kvswitch.protocol import KVS_PORT, Message, Op, Status

softswitch = pytest.importorskip("softswitch")

K, M, D, KEYS = 64, 8, 4, 5000
RACK = Rack.synthetic(M)
ORIGIN = origins_of_ids(np.arange(KEYS), M)
CLIENT_IP, CLIENT_MAC, CLIENT_PORT = 0x0A000101, 0x020000000101, 20
SWITCH_IP, SWITCH_MAC = 0x0A0000FE, 0x0200000000FE


def _ip(x: int) -> str:
    return ".".join(str(x >> s & 0xFF) for s in (24, 16, 8, 0))


def _mac(x: int) -> str:
    return ":".join(f"{x >> s & 0xFF:02x}" for s in range(40, -8, -8))


class SwitchAdapter:
    """Applies controller operations to the in-process software switch; plays the agents."""

    def __init__(self, sw: Any) -> None:
        self.sw = sw
        self.handles: dict[tuple[str, tuple], int] = {}
        regs = [r.preamble.name for r in sw.p4info.registers]
        self.regs = {
            n.rsplit(".", 1)[-1] if "hp_stage" not in n else n.split(".", 2)[-1]: n for n in regs
        }
        for host_ip, mac, port in [(CLIENT_IP, CLIENT_MAC, CLIENT_PORT)] + [
            (a.ip, a.mac, a.port) for a in RACK.servers
        ]:
            sw.table_add(
                "ipv4_lpm",
                {"dst_addr": (host_ip, 32)},
                "set_next_hop",
                {"port": port, "dmac": mac, "smac": SWITCH_MAC},
            )
            sw.table_add(  # trust.p4: where each source hangs off, and whether it is a server
                "HostportTable",
                {"src_addr": (host_ip, 32)},
                "set_source",
                {"port": port, "server": int(host_ip != CLIENT_IP)},
            )

    def reg(self, name: str) -> list[int]:
        return [int(x) for x in self.sw.register_read(self.regs[name])]

    def apply(self, ops: list[Operation]) -> None:
        for op in ops:
            if isinstance(op, TableEntry):
                match = {
                    k: int.from_bytes(v, "big") if isinstance(v, bytes) else v for k, v in op.match
                }
                ident = (op.table, tuple(sorted(match.items())))
                if op.op is EntryOp.ADD:
                    self.handles[ident] = self.sw.table_add(
                        op.table, match, op.action, op.param_dict()
                    )
                elif op.op is EntryOp.MODIFY:
                    self.sw.table_modify(op.table, self.handles[ident], op.action, op.param_dict())
                else:
                    self.sw.table_delete(op.table, self.handles.pop(ident))
            elif isinstance(op, MulticastGroupSet):
                self.sw.mc_group_set(op.group, list(op.members))
            elif isinstance(op, MulticastGroupDelete):
                self.sw.mc_group_delete(op.group)
            elif isinstance(op, RegisterWrite):
                for i in range(op.index, op.index + op.count):
                    self.sw.register_write(self.regs[op.name], i, op.value)
            elif isinstance(op, PushRequest):
                self.push(op)
            elif not isinstance(op, RemoveRequest):
                raise TypeError(op)

    def send(self, src_server: int | None, dst_ip: int, msg: Message) -> list[tuple[int, bytes]]:
        if src_server is None:
            ip, mac, port = CLIENT_IP, CLIENT_MAC, CLIENT_PORT
        else:
            a = RACK.servers[src_server]
            ip, mac, port = a.ip, a.mac, a.port
        pkt = (
            Ether(src=_mac(mac), dst=_mac(SWITCH_MAC))
            / IP(src=_ip(ip), dst=_ip(dst_ip))
            / UDP(sport=40000, dport=KVS_PORT)
            / msg.encode()
        )
        return self.sw.process(port, bytes(pkt))

    def push(self, op: PushRequest) -> None:
        """Origin: SYNC (reflected with a fresh version), SYNC_DONE; replicas: CONFIRM."""
        out = self.send(op.origin, SWITCH_IP, Message(Op.SYNC, op.key, cid=1, seq=1))
        assert len(out) == 1
        stamped = Message.decode(bytes(Ether(out[0][1])[UDP].payload))
        done = Message(Op.SYNC_DONE, op.key, status=Status.OK, epoch=stamped.epoch, ver=stamped.ver)
        assert self.send(op.origin, SWITCH_IP, done) == []
        for s in op.replicas:
            confirm = Message(Op.CONFIRM, op.key, epoch=stamped.epoch, ver=stamped.ver)
            assert self.send(s, SWITCH_IP, confirm) == []


@pytest.fixture(scope="module")
def switch() -> Any:
    source = p4src_dir() / "kvswitch.p4"
    defines = {"HOT_KEYS": str(K), "MAX_SERVERS": str(M), "HP_STAGES": str(D)}
    return softswitch.Switch.from_file(
        str(source), defines=defines, include_dirs=[str(source.parent)]
    )


def test_model_and_software_switch_agree(switch: Any) -> None:
    rng = np.random.default_rng(2)
    sw = SwitchAdapter(switch)
    model = Model(RACK, K, D, ORIGIN, lag=10**9)  # replies never land inside the trace
    setup = rack_setup(RACK, epoch=1)
    sw.apply(setup)
    model.apply(setup)
    current = Plan(M, K)
    for _round in range(3):
        holders = []
        for kid in rng.choice(300, size=40, replace=False):
            origin = int(ORIGIN[kid])
            others = [s for s in range(M) if s != origin]
            extra = rng.choice(others, size=int(rng.integers(0, 4)), replace=False).tolist()
            holders.append((key16(int(kid)), (origin, *extra)))
        nxt = build_plan(holders, current, M, K)
        ops = diff(current, nxt, RACK)
        current = nxt
        sw.apply(ops)
        model.apply(ops)
        kids = np.concatenate([rng.integers(0, 300, 300), rng.integers(0, KEYS, 200)])
        writes = rng.random(kids.size) < 0.15
        for kid, write in zip(kids.tolist(), writes.tolist(), strict=True):
            op = Op.SET if write else Op.GET
            msg = Message(op, key16(kid), b"v" if write else b"", cid=7, seq=1)
            sw.send(None, RACK.servers[int(ORIGIN[kid])].ip, msg)
        model.run_trace(kids, writes)

        for name, mine in [
            (names.REG_RR, model.rr),
            (names.REG_SLOT_VER, model.slot_ver),
            (names.REG_ORIGIN_VER, model.origin_ver),
            (names.REG_VALID_VER, model.valid_ver),
            (names.REG_GLOBAL_VER, model.gver),
        ]:
            assert sw.reg(name) == [int(x) for x in mine], name
        for s in range(D):
            assert sw.reg(names.reg_hp_cnt(s)) == [int(x) for x in model.hp_cnt[s]], s
            words = [sw.reg(names.reg_hp_key(s, w)) for w in range(names.HP_KEY_WORDS)]
            keys = [
                int.from_bytes(names.hp_key_from_words(ws), "big") if c else 0
                for *ws, c in zip(*words, sw.reg(names.reg_hp_cnt(s)), strict=True)
            ]
            want = [
                int(k) if c else 0 for k, c in zip(model.hp_key[s], model.hp_cnt[s], strict=True)
            ]
            assert keys == want, s
        hot = {
            int(dict(ident[1])["key"]): switch.direct_counter_read(names.HOTKEY_TABLE, h)[1]
            for ident, h in sw.handles.items()
            if ident[0] == names.HOTKEY_TABLE
        }
        assert hot == {kid: int(model.hot_cnt[slot]) for kid, (slot, _) in model.tables.hot.items()}
        loads = {
            dict(ident[1])["dst_addr"]: switch.direct_counter_read(names.LOADCOUNT_TABLE, h)[1]
            for ident, h in sw.handles.items()
            if ident[0] == names.LOADCOUNT_TABLE
        }
        assert [loads[a.ip] for a in RACK.servers] == model.read_load_counters()
        assert sum(model.read_load_counters()) > kids.size  # write copies reached replicas
