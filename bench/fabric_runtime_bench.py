"""``kvswitch bench fabric-runtime``: how long the fabric controller's periods take on real
switches (docs/fabric.md "Runtime").

S spines and R leaves of the software switch in this process, each behind its own P4Runtime and
Thrift servers on loopback (the rack controller's driver talks to them over gRPC as to
``simple_switch_grpc``). The first period makes keys fabric-hot (every spine's batch, every leaf's
steering); the same load then runs until a period writes nothing (it reads and resets every
spine's counters; 12 periods at most, the quietest is the baseline); the last period sees none of it (keys leave). Printed per period: fabric-hot keys,
updates written, the time of the writes and of the whole period, and the write time per update
against period 2 (the reads alone) as the baseline.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvswitch import argtypes as t
from kvswitch import protocol as p
from kvswitch.agent.backend_procs import free_port
from kvswitch.controller.fabric import FabricConfig
from kvswitch.controller.fabric_runtime import FabricRuntime, RackInput
from kvswitch.controller.fabricfile import FabricFile
from kvswitch.controller.p4rt_driver import P4RuntimeDriver, Program, SwitchAddress


@dataclass
class LiveSwitch:
    """A software switch with no program behind its own P4Runtime and Thrift servers."""

    name: str
    device: Any  # softswitch.runtime.device.Device (imported when a switch starts)
    address: SwitchAddress
    rt: Any
    thrift: Any

    def stop(self) -> None:
        self.thrift.stop()
        self.rt.stop(grace=0)


def start_switch(name: str) -> LiveSwitch:
    from softswitch.runtime.device import Device
    from softswitch.runtime.p4runtime_server import P4RuntimeServer
    from softswitch.runtime.thrift_server import ThriftServer

    device = Device(device_id=0)
    grpc_addr = f"127.0.0.1:{free_port()}"
    thrift_port = free_port()
    rt = P4RuntimeServer(device, grpc_addr)
    thrift = ThriftServer(device, thrift_port, host="127.0.0.1")
    rt.start()
    thrift.start()
    return LiveSwitch(
        name, device, SwitchAddress(grpc_addr, 0, "127.0.0.1", thrift_port), rt, thrift
    )


@contextlib.contextmanager
def live_switches(names: list[str]) -> Iterator[list[LiveSwitch]]:
    out: list[LiveSwitch] = []
    try:
        for name in names:
            out.append(start_switch(name))
        yield out
    finally:
        for sw in out:
            sw.stop()


def fabric_dict(
    spines: list[LiveSwitch], leaves: list[LiveSwitch], servers: int, k: int, max_holders: int
) -> dict:
    """A fabric file: rack r's subnet 10.<r+1>.0.0/16, its servers 10.<r+1>.0.<j+1>; spine s's
    port to rack r is r + 1, leaf r's port to spine s is 5 + s."""

    def ends(sw: LiveSwitch) -> dict:
        a = sw.address
        return {
            "name": sw.name,
            "p4runtime": a.grpc_addr,
            "thrift": f"{a.thrift_host}:{a.thrift_port}",
        }

    return {
        "k": k,
        "max_holders": max_holders,
        "leaf_keys": k * len(spines),
        "spines": [
            {
                **ends(sw),
                "mac": f"02:00:00:00:f0:{s + 1:02x}",
                "ports": [r + 1 for r in range(len(leaves))],
            }
            for s, sw in enumerate(spines)
        ],
        "racks": [
            {
                **ends(sw),
                "leaf_mac": f"02:00:00:00:{r + 1:02x}:fe",
                "subnet": f"10.{r + 1}.0.0/16",
                "uplinks": [5 + s for s in range(len(spines))],
                "servers": [f"10.{r + 1}.0.{j + 1}" for j in range(servers)],
            }
            for r, sw in enumerate(leaves)
        ],
    }


class NoAgents:
    """Pushes and removals counted, not carried (the switches have no servers behind them)."""

    def __init__(self) -> None:
        self.pushes = 0

    def push(self, key: bytes, origin: int, replicas: tuple[int, ...]) -> None:
        self.pushes += 1

    def remove(self, key: bytes, server: int) -> None:
        pass

    def rebase(self, key: bytes, server: int) -> None:
        pass


def _program(name: str, defines: dict[str, str]) -> Program:
    from kvswitch.controller.program import from_source
    from kvswitch.paths import p4src_dir

    return from_source(p4src_dir() / name, defines)


def run(spines: int, racks: int, servers: int, keys: int, k: int, holders: int) -> list[dict]:
    spine_prog = _program(
        "kvswitch_spine.p4",
        {
            "HOT_KEYS": str(k),
            "MAX_SERVERS": str(max(16, racks * servers)),
            "MAX_HOLDERS": str(holders),
        },
    )
    leaf_prog = _program(
        "kvswitch_leaf.p4",
        {
            "HOT_KEYS": "16",
            "MAX_SERVERS": str(max(4, servers)),
            "HP_STAGES": "2",
            "FABRIC_KEYS": str(k * spines),
        },
    )
    names = [f"spine{s + 1}" for s in range(spines)] + [f"leaf{r + 1}" for r in range(racks)]
    rows: list[dict] = []
    with live_switches(names) as sws, tempfile.TemporaryDirectory() as tmp:
        fabric = FabricFile.parse(fabric_dict(sws[:spines], sws[spines:], servers, k, holders))
        agents = NoAgents()
        drivers: list[P4RuntimeDriver] = []
        try:
            for sw in sws[:spines]:
                drivers.append(
                    P4RuntimeDriver(
                        sw.address, spine_prog, fabric.spine_rack(), agents, row=holders
                    )
                )
            for r, sw in enumerate(sws[spines:]):
                drivers.append(P4RuntimeDriver(sw.address, leaf_prog, fabric.leaf_rack(r)))
            hot = [p.pad_key(b"bench-%d" % i) for i in range(keys)]
            origin = {key: i % servers for i, key in enumerate(hot)}  # all in rack 0
            runtime = FabricRuntime(
                fabric,
                drivers[:spines],
                drivers[spines:],
                FabricConfig(k=k, t0=1.0, holder_share=0.5),
                lambda key: origin.get(key, 0),
                Path(tmp) / "state.json",
            )
            runtime.start()

            def period(load: int) -> dict:
                """Each key's Gets (load / rank) reach its holders as the plan spreads them: a
                fabric-hot key's as packets through its spine (which counts them), the others
                as their rack controller's candidates."""
                inputs = [RackInput({}, [10.0] * servers) for _ in range(racks)]
                holders = runtime.controller.holders()
                for i, key in enumerate(hot):
                    count = load * (keys - i) // keys + (load > 0)
                    s = runtime.spine_of.get(key)
                    if s is None:
                        inputs[0].observed[key] = count
                    else:
                        frame = _get(key, fabric.server_ip(origin[key]), fabric.spines[s].mac)
                        for _ in range(count):
                            sws[s].device.process(2, frame)  # type: ignore[attr-defined]
                    at = holders.get(key, (origin[key],))
                    for h in at:
                        inputs[h // servers].loads[h % servers] += count / len(at)
                return {**runtime.period(inputs).record(), "switches": spines + racks}

            rows.append({**period(LOAD), "phase": "make"})
            same = []
            for _ in range(12):  # the same load until nothing changes: the reads alone
                same.append(period(LOAD))
                if same[-1]["updates"] == 0:
                    break
            rows.append({**min(same, key=lambda r: r["updates"]), "phase": "same"})
            for _ in range(8):  # no load: the keys leave (the predictor halves them first)
                row = period(0)
                if row["demoted"]:
                    rows.append({**row, "phase": "leave"})
                    break
            runtime.close()
        finally:
            for d in drivers:
                d.close()
    return rows


LOAD = 40  # Gets of the hottest key per period


def _get(key: bytes, dst: int, spine_mac: int) -> bytes:
    """A Get from a client of rack 1 (10.2.1.1) as rack 1's leaf sends it up to a spine."""
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether

    mac = ":".join(f"{spine_mac:012x}"[i : i + 2] for i in range(0, 12, 2))
    dst_ip = ".".join(str(dst >> b & 255) for b in (24, 16, 8, 0))
    msg = p.Message(p.Op.GET, key, cid=1, seq=1)
    pkt = Ether(dst=mac, src="02:00:00:00:02:fe") / IP(src="10.2.1.1", dst=dst_ip)
    return bytes(pkt / UDP(sport=40000, dport=p.KVS_PORT) / msg.encode())


def main(argv: list[str] | None = None) -> int:
    ap = t.Parser(prog="kvswitch bench fabric-runtime", description=__doc__.split("\n\n")[0])
    ap.add_argument("--spines", type=t.positive_int, default=2, help="spine switches")
    ap.add_argument("--racks", type=t.positive_int, default=4, help="leaves (racks)")
    ap.add_argument("--servers", type=t.positive_int, default=4, help="servers per rack")
    ap.add_argument("--keys", type=t.positive_int, default=64, help="candidate keys in rack 0")
    ap.add_argument("--k", type=t.positive_int, default=256, help="hot-key slots per spine")
    ap.add_argument("--max-holders", type=t.positive_int, default=8, help="the spines' MAX_HOLDERS")
    args = ap.parse_args(argv)
    rows = run(args.spines, args.racks, args.servers, args.keys, args.k, args.max_holders)
    [quiet] = [r for r in rows if r["phase"] == "same"]
    base = quiet["period_ms"]
    if quiet["updates"]:
        print(f"(the plan did not settle in 12 periods: the quietest wrote {quiet['updates']})")
    print(
        f"fabric runtime: {args.spines} spines + {args.racks} leaves of the software switch over "
        f"P4Runtime, {args.servers} servers per rack, {args.keys} candidate keys"
    )
    for r in rows:
        per = r["write_ms"] / r["updates"] * 1000.0 if r["updates"] else 0.0
        print(
            f"  period {r['period']} ({r['phase']:<5}): {r['fabric_keys']:4d} fabric-hot keys, {r['updates']:5d} updates "
            f"to {r['switches']} switches in {r['write_ms']:7.1f} ms ({per:6.0f} us/update), "
            f"period {r['period_ms']:7.1f} ms = {r['period_ms'] / base:5.1f} x the reads-only period"
            + (f"; errors: {r['errors']}" if r["errors"] else "")
        )
    return 0
