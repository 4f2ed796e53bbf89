"""Packet-rate harness for the software switch: packets per second on one core for one packet, and
a cProfile breakdown of where the time goes by pipeline stage.

    python -m kvswitch.bench.softswitch_bench [--seconds S] [--p4c-json]

On its own it measures the engine's L3 test program (tests/softswitch/p4/basic.p4) with one LPM
route; the KVSwitch benchmark (bench/dataplane_bench.py) calls ``measure`` and ``profile_stages``
with its own switch and packets. With ``--p4c-json`` (p4c-bm2-ss on PATH) the same program is also
compiled by p4c and loaded from its BMv2 JSON, and both are measured in alternating windows.
"""

from __future__ import annotations

import argparse
import cProfile
import itertools
import pstats
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from softswitch import Switch

STAGE_LABELS = {
    "parser": "parser",
    "verify": "verify checksum",
    "ingress": "ingress",
    "egress": "egress",
    "compute": "compute checksum",
    "deparser": "deparser",
}


def measure(
    sw: Switch, port: int, packet: bytes | Sequence[bytes], seconds: float = 2.0, windows: int = 5
) -> dict[str, Any]:
    """Push ``packet`` into ``port`` repeatedly for about ``seconds`` (one core, one thread), in
    ``windows`` equal windows: ``pps`` is the median window, ``pps_best`` the fastest one (the
    figure least disturbed by other jobs on the machine). A sequence of packets is sent in turn,
    from where the previous batch stopped."""
    process = sw.process
    packets = [packet] if isinstance(packet, bytes) else list(packet)
    out = process(port, packets[0])  # warm up, and report what the packet does
    turn = itertools.cycle(packets)
    rates: list[float] = []
    total_n = 0
    total_t = 0.0
    batch = 200
    for _ in range(max(windows, 1)):
        n = 0
        start = time.perf_counter()
        deadline = start + seconds / max(windows, 1)
        while True:
            if len(packets) == 1:
                for _ in range(batch):
                    process(port, packets[0])
            else:
                for pkt in itertools.islice(turn, batch):
                    process(port, pkt)
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
    funcs = {
        STAGE_LABELS.get(role, role.replace("_", " ")): fn for role, fn in sw.program.stages.items()
    }
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


def p4c_json_switch(
    source: Path, include_dirs: list[Path] | None = None, defines: dict[str, str] | None = None
) -> Switch:
    """The program compiled by p4c-bm2-ss (from PATH) and loaded from its BMv2 JSON and P4Info."""
    import shutil
    import subprocess
    import tempfile

    from finsy.proto import p4i
    from google.protobuf import text_format

    p4c = shutil.which("p4c-bm2-ss")
    if p4c is None:
        raise FileNotFoundError("p4c-bm2-ss is not on PATH")
    with tempfile.TemporaryDirectory(prefix="softswitch-bench-") as tmp:
        out, info = Path(tmp) / "prog.json", Path(tmp) / "prog.p4info.txtpb"
        cmd = [p4c, "--std", "p4-16", "-o", str(out), "--p4runtime-files", str(info)]
        cmd += [f"-I{d}" for d in include_dirs or []]
        cmd += [f"-D{k}={v}" for k, v in (defines or {}).items()]
        subprocess.run([*cmd, str(source)], check=True, capture_output=True)
        return Switch.from_json(out, text_format.Parse(info.read_text(), p4i.P4Info()))


def compare(
    switches: dict[str, Switch], port: int, packet: bytes, seconds: float, rounds: int
) -> dict[str, list[float]]:
    """packets/s of each switch, measured in alternating windows (``rounds`` each)."""
    rates: dict[str, list[float]] = {name: [] for name in switches}
    for _ in range(rounds):
        for name, sw in switches.items():
            rates[name].append(measure(sw, port, packet, seconds / rounds, windows=1)["pps"])
    return {name: sorted(r) for name, r in rates.items()}


BASIC = Path(__file__).resolve().parent.parent / "tests" / "softswitch" / "p4" / "basic.p4"


def _route(sw: Switch) -> Switch:
    sw.table_add("ipv4_lpm", {"dst": (0x0A000000, 8)}, "ipv4_forward", {"dstAddr": 2, "port": 3})
    return sw


def _default_packet() -> bytes:
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether

    return bytes(Ether() / IP(dst="10.1.2.3") / UDP(dport=9) / (b"x" * 64))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=2.0, help="measuring time")
    ap.add_argument(
        "--p4c-json", action="store_true", help="also run p4c's BMv2 JSON of the program"
    )
    args = ap.parse_args(argv)
    sw, pkt = _route(Switch.from_file(BASIC)), _default_packet()
    if args.p4c_json:
        switches = {"source": sw, "p4c JSON": _route(p4c_json_switch(BASIC))}
        if len({repr(s.process(1, pkt)) for s in switches.values()}) != 1:
            print("source and p4c JSON give different outputs")
            return 1
        for name, rates in compare(switches, 1, pkt, args.seconds, 10).items():
            print(f"{name:9s} median {rates[len(rates) // 2]:10,.0f}  best {rates[-1]:10,.0f}")
        return 0
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
