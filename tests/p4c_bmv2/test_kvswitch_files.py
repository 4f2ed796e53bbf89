"""p4src/kvswitch.p4 in ``--use-files`` mode on BMv2's simple_switch and on the software switch
(p4c's JSON and the source), configured by one simple_switch_CLI session: a rack with a hot key
held by three servers; five ports' pcaps of Gets, Sets and Deletes from the client and replies
from the servers, with timestamp ties across ports. Output packets per port and the version
registers must be identical. Needs p4c-bm2-ss, simple_switch and the ``ipaddr`` package (the
CLI's 128-bit keys)."""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from kvswitch.bench import dataplane_bench as rack
from kvswitch.paths import p4src_dir
from kvswitch.protocol import KVS_PORT, Message, Op, pad_key
from softswitch.runtime.p4info_index import P4InfoIndex

from .test_differential import read_out, write_ns_pcap
from .tools import need, p4c_compile, run_use_files

PORTS = (1, 2, 3, 4, 8)
REGISTERS = ("global_ver", "slot_ver", "origin_ver", "valid_ver", "epoch")


class CliRecorder:
    """The in-process switch API that ``install_rack`` calls, written as CLI commands."""

    def __init__(self, index: P4InfoIndex) -> None:
        self.index = index
        self.lines: list[str] = []

    def table_add(
        self, table: str, match: dict[str, Any], action: str, params: dict[str, int]
    ) -> int:
        info = self.index.table(table)
        act = self.index.action(action)
        assert info is not None and act is not None, (table, action)
        keys = []
        for k in info.keys:
            v = match[k.name]
            keys.append(
                f"{v[0]}/{v[1]}" if k.kind == "lpm" else hex(v) if k.bitwidth == 128 else str(v)
            )
        args = [str(params.get(p.name, 0)) for p in act.params]  # missing: 0, as the engine
        self.lines.append(f"table_add {table} {action} {' '.join(keys)} => {' '.join(args)}")
        return 0

    def register_write(self, name: str, index: int, value: int) -> None:
        self.lines.append(f"register_write {name} {index} {value}")


def traffic(seed: int = 7) -> dict[int, list[tuple[int, bytes]]]:
    rnd = random.Random(seed)
    t0 = 1_700_000_000 * 10**9
    ins: dict[int, list[tuple[int, bytes]]] = {p: [] for p in PORTS}
    client_ip, _client_mac, client_port = rack.CLIENT
    keys = [rack.HOT_KEY, pad_key("cold-a"), pad_key("cold-b")]
    for i in range(120):
        ts = t0 + (i // 2) * 1000 + rnd.choice((0, 100, 900))  # ties within a microsecond
        key = rnd.choice(keys)
        if i < 40:  # first reads only: hot Gets go round-robin over the three holders
            key = rnd.choice(keys[:2])
        if i >= 40 and i % 4 == 3:  # a server's reply to a write of the hot key
            ip, _mac, port = rack.SERVERS[rnd.randrange(3)]
            op = rnd.choice((Op.SET_REPLY, Op.DEL_REPLY))
            msg = Message(op, rack.HOT_KEY, cid=0x1234, seq=i, ver=rnd.randrange(1, 4))
            pkt = (
                Ether(src=f"02:00:00:00:00:0{port}", dst="02:00:00:00:00:fe")
                / IP(src=ip, dst=client_ip)
                / UDP(sport=KVS_PORT, dport=40000)
                / msg.encode()
            )
            ins[port].append((ts, bytes(pkt)))
        else:  # the client's request to the key's origin
            op = Op.GET if i < 40 else rnd.choice((Op.GET, Op.GET, Op.SET, Op.DEL))
            value = b"v" * rnd.randrange(0, 40) if op == Op.SET else b""
            msg = Message(op, key, value, cid=0x1234, seq=i)
            pkt = (
                Ether(src="02:00:00:00:01:01", dst="02:00:00:00:00:fe")
                / IP(src=client_ip, dst=rack.SERVERS[0][0])
                / UDP(sport=40000, dport=KVS_PORT)
                / msg.encode()
            )
            ins[client_port].append((ts, bytes(pkt)))
    for recs in ins.values():
        recs.sort(key=lambda r: r[0])
    return ins


def run(
    argv0: list[str], program: Path, tmp: Path, setup: str
) -> tuple[dict[int, list[bytes]], str]:
    tmp.mkdir()
    for port, recs in traffic().items():
        write_ns_pcap(tmp / f"p{port}_in.pcap", recs)
    readback = "".join(f"register_read {r}\n" for r in REGISTERS)
    out = run_use_files(argv0, program, tmp, PORTS, setup, readback, settle=4.0)
    return {p: read_out(tmp / f"p{p}_out.pcap") for p in PORTS}, out


@pytest.mark.slow
def test_kvswitch_use_files_matches_bmv2(tmp_path: Path) -> None:
    pytest.importorskip("ipaddr", reason="simple_switch_CLI needs ipaddr for 128-bit keys")
    simple_switch = need("simple_switch")
    source = p4src_dir() / "kvswitch.p4"
    json_path, info = p4c_compile(source, tmp_path, include_dirs=[source.parent])
    recorder = CliRecorder(P4InfoIndex(info))
    rack.install_rack(recorder)
    setup = "\n".join(recorder.lines) + "\n"
    bmv2 = run([simple_switch], json_path, tmp_path / "bmv2", setup)
    kvswitch = [sys.executable, "-m", "kvswitch", "switch"]
    from_json = run(kvswitch, json_path, tmp_path / "json", setup)
    from_source = run([*kvswitch, "-I", str(source.parent)], source, tmp_path / "src", setup)
    total = sum(len(v) for v in bmv2[0].values())
    assert total > 60, bmv2[1]
    assert bmv2[0][2] and bmv2[0][3]  # hot Gets were redirected to the other holders
    assert "valid_ver=" in bmv2[1] or "valid_ver" in bmv2[1]
    assert from_json == bmv2
    assert from_source == bmv2
