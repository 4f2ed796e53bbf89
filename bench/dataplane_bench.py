"""``kvswitch bench dataplane``: packets/s of the KVSwitch program in the software switch, in-process
on one core, for (a) a hot Get (HotkeyTable hit, round-robin, version checks, redirect, UDP checksum
recomputed), (b) a cold Get (HotkeyTable miss; one key, which HashPipe's first stage absorbs) and
(c) cold Gets of 5000 keys drawn Zipf(0.99) (every HashPipe stage at work: evictions, carries,
later stages merging), plus where the time goes for (a) and (b) (the software switch bench's
`profile_stages`: ns per packet in each pipeline stage).

The rack is the data-plane tests' one: four servers on ports 1-4, a client on port 8; the hot key
has three holders that all confirmed the current version, so two Gets in three are redirected.
"""

from __future__ import annotations

import random
import subprocess
import time
from collections.abc import Sequence
from typing import Any

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from kvswitch import argtypes as t
from kvswitch.paths import p4src_dir
from kvswitch.protocol import KVS_PORT, Message, Op, pad_key

SWITCH_MAC = 0x0200000000FE
CLIENT = ("10.0.1.1", 0x020000000101, 8)
SERVERS = [(f"10.0.0.{i + 1}", 0x020000000001 + i, i + 1) for i in range(4)]
MAX_SERVERS = 32  # the program's default MAX_SERVERS (valid_ver base = slot * MAX_SERVERS)
HOT_KEY = pad_key("bench-hot-key")
COLD_KEYS, COLD_PACKETS = 5000, 20_000  # the cold mix: keys, and packets sent in turn
HOT_SLOT = 1


def _ip(text: str) -> int:
    return int.from_bytes(bytes(int(x) for x in text.split(".")), "big")


PROGRAMS = {"v1model": "kvswitch.p4", "tna": "kvswitch_tna.p4"}


def build_switch(defines: dict[str, str] | None = None, arch: str = "v1model") -> Any:
    from softswitch import Switch  # imported here: the engine is optional for `kvswitch bench`

    source = p4src_dir() / PROGRAMS[arch]
    return Switch.from_file(str(source), defines=defines, include_dirs=[str(source.parent)])


def install_rack(sw: Any) -> None:
    """Routes, server tables, and one hot key held by s0 (origin), s1 and s2, all valid."""
    for ip, mac, port in [*SERVERS, CLIENT]:
        sw.table_add(
            "ipv4_lpm",
            {"dst_addr": (_ip(ip), 32)},
            "set_next_hop",
            {"port": port, "dmac": mac, "smac": SWITCH_MAC},
        )
        sw.table_add(
            "HostportTable",
            {"src_addr": (_ip(ip), 32)},
            "set_source",
            {"port": port, "server": int((ip, mac, port) in SERVERS)},
        )
    for offset, (ip, mac, port) in enumerate(SERVERS):
        sw.table_add(
            "ServeroffsetTable",
            {"server_ip": _ip(ip)},
            "set_server_offset",
            {"offset": offset, "port": port},
        )
        sw.table_add(
            "PorttoserverTable", {"port": port}, "set_replica", {"ip": _ip(ip), "mac": mac}
        )
        sw.table_add("LoadcountTable", {"dst_addr": _ip(ip)}, "count_load", {})
    key = int.from_bytes(HOT_KEY, "big")
    holders = SERVERS[:3]
    base = HOT_SLOT * MAX_SERVERS
    sw.table_add("HotkeyTable", {"key": key}, "set_hot", {"slot": HOT_SLOT, "n": len(holders)})
    sw.table_add(
        "KeyindexTable",
        {"key": key},
        "set_key_index",
        {"slot": HOT_SLOT, "base": base, "floor": 0},
    )
    for ordinal, (ip, mac, port) in enumerate(holders):
        sw.table_add(
            "ServermapTable",
            {"slot": HOT_SLOT, "ordinal": ordinal},
            "set_server",
            {"vidx": base + ordinal, "ip": _ip(ip), "mac": mac, "port": port},
        )
        sw.register_write("valid_ver", base + ordinal, 1)
    sw.register_write("global_ver", 0, 1)
    sw.register_write("slot_ver", HOT_SLOT, 1)
    sw.register_write("origin_ver", HOT_SLOT, 1)


def get_packet(key: bytes) -> bytes:
    message = Message(Op.GET, key, cid=0x1234, seq=1).encode()
    origin_ip = SERVERS[0][0]
    return bytes(
        Ether(src="02:00:00:00:01:01", dst="02:00:00:00:00:fe")
        / IP(src=CLIENT[0], dst=origin_ip)
        / UDP(sport=40000, dport=KVS_PORT)
        / message
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = t.Parser(prog="kvswitch bench dataplane", description=__doc__)
    parser.add_argument("--seconds", type=t.positive_float, default=0.5, help="time per run")
    parser.add_argument(
        "--runs", type=t.positive_int, default=5, help="runs per packet kind (best and median)"
    )
    parser.add_argument(
        "--profile", type=t.nonneg_int, default=5000, help="packets to profile (0: none)"
    )
    parser.add_argument(
        "--p4c-json",
        action="store_true",
        help="compare with the program loaded from p4c-bm2-ss's BMv2 JSON (p4c on PATH)",
    )
    parser.add_argument(
        "--arch", choices=sorted(PROGRAMS), default="v1model", help="the build: kvswitch(_tna).p4"
    )
    args = parser.parse_args(list(argv) if argv is not None else None)
    if args.p4c_json and args.arch != "v1model":
        parser.error("--p4c-json compares the v1model build (p4c-bm2-ss compiles v1model only)")

    started = time.perf_counter()
    try:
        sw = build_switch(arch=args.arch)
    except ImportError as exc:
        print(f"software switch engine not available: {exc}")
        return 2
    print(f"program loaded in {time.perf_counter() - started:.2f} s")
    install_rack(sw)
    hot = get_packet(HOT_KEY)
    cold = get_packet(pad_key("bench-cold-key"))
    rng = random.Random(1)
    weights = [1 / (rank + 1) ** 0.99 for rank in range(COLD_KEYS)]
    cold_mix = [
        get_packet(pad_key(f"cold-{i}"))
        for i in rng.choices(range(COLD_KEYS), weights, k=COLD_PACKETS)
    ]
    outs = [sw.process(CLIENT[2], hot)[0][0] for _ in range(3)]
    if sorted(outs) != [1, 2, 3]:
        print(f"hot Get did not go round-robin over ports 1-3: {outs}")
        return 1
    if [port for port, _ in sw.process(CLIENT[2], cold)] != [1]:
        print("cold Get did not go to its origin")
        return 1
    from kvswitch.bench.softswitch_bench import compare, measure, p4c_json_switch, profile_stages

    if args.p4c_json:
        source = p4src_dir() / "kvswitch.p4"
        try:
            from_json = p4c_json_switch(source, [source.parent])
        except (OSError, subprocess.CalledProcessError) as exc:
            print(f"cannot compile with p4c-bm2-ss: {exc}")
            return 2
        install_rack(from_json)
        switches = {"source": sw, "p4c JSON": from_json}
        print(f"alternating windows, {args.runs * 2} per program, {args.seconds} s in all")
        for pkt, name in ((hot, "hot Get"), (cold, "cold Get")):
            if sw.process(CLIENT[2], pkt) != from_json.process(CLIENT[2], pkt):
                print(f"{name}: source and p4c JSON give different packets")
                return 1
            for prog, rates in compare(
                switches, CLIENT[2], pkt, args.seconds, args.runs * 2
            ).items():
                print(
                    f"{name:9s} {prog:9s} median {rates[len(rates) // 2]:10,.0f}"
                    f"  best {rates[-1]:10,.0f} packets/s"
                )
        return 0
    print(f"best and median of {args.runs} runs of {args.seconds} s, one core")
    kinds: list[tuple[bytes | list[bytes], str]] = [
        (hot, "hot Get"),
        (cold, "cold Get"),
        (cold_mix, f"cold Gets of {COLD_KEYS} keys"),
    ]
    for pkt, name in kinds:
        measure(sw, CLIENT[2], pkt, 0.2)  # warm-up
        runs = range(max(1, args.runs))
        rates = sorted(measure(sw, CLIENT[2], pkt, args.seconds)["pps"] for _ in runs)
        best, median = rates[-1], rates[len(rates) // 2]
        print(f"{name:24s} best {best:10,.0f} packets/s   median {median:10,.0f} packets/s")
    if args.profile:
        for pkt, name in ((hot, "hot Get"), (cold, "cold Get")):
            print(
                f"\nwhere the time goes ({name}, {args.profile} packets, ns/packet under cProfile):"
            )
            for stage, ns in profile_stages(sw, CLIENT[2], pkt, args.profile).items():
                print(f"  {stage:40s} {ns:8,.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
