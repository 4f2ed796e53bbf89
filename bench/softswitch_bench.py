"""Packet-rate harness for the software switch: packets per second on one core for one packet, and
a cProfile breakdown of where the time goes by pipeline stage.

    python -m kvswitch.bench.softswitch_bench [--seconds S]

On its own it measures the engine's L3 test program (tests/softswitch/p4/basic.p4) with one LPM
route; the KVSwitch benchmark (bench/dataplane_bench.py) calls ``measure`` and ``profile_stages``
with its own switch and packets.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time
from pathlib import Path
from typing import Any

from softswitch import Switch

STAGES = ("parser", "verify", "ingress", "egress", "compute", "deparser")
STAGE_LABELS = {
    "parser": "parser",
    "verify": "verify checksum",
    "ingress": "ingress",
    "egress": "egress",
    "compute": "compute checksum",
    "deparser": "deparser",
}


def measure(
    sw: Switch, port: int, packet: bytes, seconds: float = 2.0, windows: int = 5
) -> dict[str, Any]:
    """Push ``packet`` into ``port`` repeatedly for about ``seconds`` (one core, one thread), in
    ``windows`` equal windows: ``pps`` is the median window, ``pps_best`` the fastest one (the
    figure least disturbed by other jobs on the machine)."""
    process = sw.process
    out = process(port, packet)  # warm up, and report what the packet does
    rates: list[float] = []
    total_n = 0
    total_t = 0.0
    batch = 200
    for _ in range(max(windows, 1)):
        n = 0
        start = time.perf_counter()
        deadline = start + seconds / max(windows, 1)
        while True:
            for _ in range(batch):
                process(port, packet)
            n += batch
            now = time.perf_counter()
            if now >= deadline:
                break
        rates.append(n / (now - start))
        total_n += n
        total_t += now - start
    rates.sort()
    median = rates[len(rates) // 2]
    return {
        "packets": total_n,
        "seconds": total_t,
        "pps": median,
        "pps_best": rates[-1],
        "pps_mean": total_n / total_t,
        "ns_per_packet": 1e9 / median,
        "ns_per_packet_best": 1e9 / rates[-1],
        "outputs": [(p, len(b)) for p, b in out],
    }


def profile_stages(sw: Switch, port: int, packet: bytes, packets: int = 5000) -> dict[str, float]:
    """ns per packet spent in each stage (cumulative time of the generated functions, as cProfile
    sees it; the profiler's overhead inflates every figure about equally) and in the switch itself
    (traffic manager, replication, glue)."""
    prog = sw.program
    if prog.arch == "tna":
        funcs = {role.replace("_", " "): fn for role, fn in prog.tna.funcs.items()}
    else:
        funcs = {STAGE_LABELS[stage]: getattr(prog, stage) for stage in STAGES}
    codes = {label: fn.__code__ for label, fn in funcs.items()}
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(packets):
        sw.process(port, packet)
    prof.disable()
    stats = pstats.Stats(prof).stats  # type: ignore[attr-defined]
    result: dict[str, float] = {}
    total = 0.0
    for (file, line, func), (_cc, _nc, _tt, ct, _callers) in stats.items():
        if func == "process" and file.endswith("switch.py"):
            total = ct
        for label, code in codes.items():
            if (file, line, func) == (code.co_filename, code.co_firstlineno, code.co_name):
                result[label] = ct / packets * 1e9
    result["switch (traffic manager, copies, glue)"] = max(
        total / packets * 1e9 - sum(result.values()), 0.0
    )
    result["total (profiled)"] = total / packets * 1e9
    return result


def _default_switch() -> tuple[Switch, bytes]:
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether

    root = Path(__file__).resolve().parent.parent
    sw = Switch.from_file(root / "tests" / "softswitch" / "p4" / "basic.p4")
    sw.table_add("ipv4_lpm", {"dst": (0x0A000000, 8)}, "ipv4_forward", {"dstAddr": 2, "port": 3})
    pkt = bytes(Ether() / IP(dst="10.1.2.3") / UDP(dport=9) / (b"x" * 64))
    return sw, pkt


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=2.0)
    args = ap.parse_args(argv)
    sw, pkt = _default_switch()
    r = measure(sw, 1, pkt, args.seconds)
    print(
        f"basic L3 (LPM + IPv4 checksum verify/update): {r['pps']:,.0f} packets/s median, "
        f"{r['pps_best']:,.0f} best window, {r['ns_per_packet']:,.0f} ns/packet "
        f"({r['packets']} packets)"
    )
    for stage, ns in profile_stages(sw, 1, pkt).items():
        print(f"  {stage:40s} {ns:10,.0f} ns")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
