"""``kvswitch bench runtime``: control-plane and forwarding figures of the software switch.

1. P4Runtime write rate: N table entries pushed in batches to an in-process P4Runtime server
   (over real gRPC on loopback) -> entries/s.
2. Forwarding between two network namespaces (needs root): the switch process on two veth
   ports; a UDP sender saturates it for packets/s, a UDP echo gives round-trip p50/p99.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from kvswitch import argtypes as t
from kvswitch.agent.backend_procs import free_port
from kvswitch.paths import repo_root
from kvswitch.ports import listens, port_offloads_off

PROGRAM = (repo_root() or Path.cwd()) / "tests" / "softswitch" / "runtime" / "p4" / "runtime.p4"


# ---------------------------------------------------------------- namespaces


def sh(*cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, check=check)


@dataclass
class Host:
    ns: str
    iface: str  # inside the namespace
    ip: str
    mac: str
    port_iface: str  # the switch's end, in the root namespace
    port: int


@dataclass
class Topology:
    """Hosts in their own namespaces, each on a veth pair whose other end is a switch port.

    Names carry a random tag so that concurrent runs do not collide; :meth:`close` removes
    exactly what was created.
    """

    hosts: list[Host] = field(default_factory=list)
    tag: str = field(default_factory=lambda: uuid.uuid4().hex[:6])

    @classmethod
    def build(cls, n: int = 2, specs: list[tuple[str, str, int]] | None = None) -> Topology:
        """``n`` hosts 10.77.0.i on port i, or one host per (ip, mac, port) of ``specs``.

        Every host gets a route to every other (on-link, default route) and a static
        neighbour entry for each, so no ARP crosses the switch.
        """
        topo = cls()
        specs = specs or [(f"10.77.0.{i}", f"02:00:00:00:00:{i:02x}", i) for i in range(1, n + 1)]
        try:
            for i, (ip, mac, port) in enumerate(specs, start=1):
                topo.add(Host(f"kvsrt-{topo.tag}-h{i}", "eth0", ip, mac, f"ks{topo.tag}p{i}", port))
            for h in topo.hosts:
                topo.exec(h, "ip", "route", "add", "default", "dev", h.iface)
                for other in topo.hosts:
                    if other is not h:
                        topo.exec(
                            h,
                            "ip",
                            "neigh",
                            "replace",
                            other.ip,
                            "lladdr",
                            other.mac,
                            "dev",
                            h.iface,
                        )
        except BaseException:
            topo.close()
            raise
        return topo

    def add(self, h: Host) -> None:
        sh("ip", "netns", "add", h.ns)
        self.hosts.append(h)
        sh("ip", "link", "add", h.port_iface, "type", "veth", "peer", "name", f"{h.port_iface}x")
        sh("ip", "link", "set", f"{h.port_iface}x", "netns", h.ns)
        self.exec(h, "ip", "link", "set", f"{h.port_iface}x", "name", h.iface)
        self.exec(h, "ip", "link", "set", h.iface, "address", h.mac)
        self.exec(h, "ip", "addr", "add", f"{h.ip}/24", "dev", h.iface)
        for ns_cmd, dev in ((self.exec_args(h), h.iface), ((), h.port_iface)):
            sh(*ns_cmd, "sysctl", "-qw", f"net.ipv6.conf.{dev}.disable_ipv6=1", check=False)
            if shutil.which("ethtool"):
                sh(*ns_cmd, *port_offloads_off(dev), check=False)
        self.exec(h, "ip", "link", "set", h.iface, "up")
        self.exec(h, "ip", "link", "set", "lo", "up")
        sh("ip", "link", "set", h.port_iface, "up")

    @staticmethod
    def exec_args(h: Host) -> tuple[str, ...]:
        return ("ip", "netns", "exec", h.ns)

    def exec(self, h: Host, *cmd: str) -> subprocess.CompletedProcess[str]:
        return sh(*self.exec_args(h), *cmd)

    def python(self, h: Host, script: str, *args: str) -> subprocess.Popen[str]:
        """Run a Python snippet inside a host's namespace."""
        return subprocess.Popen(
            [*self.exec_args(h), sys.executable, "-c", script, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def interfaces(self) -> list[str]:
        return [f"{h.port}@{h.port_iface}" for h in self.hosts]

    def close(self) -> None:
        for h in self.hosts:
            sh("ip", "link", "del", h.port_iface, check=False)
            sh("ip", "netns", "del", h.ns, check=False)
        self.hosts.clear()


def can_build_namespaces() -> str:
    """'' when this process may create namespaces, else why not."""
    if os.geteuid() != 0:
        return "needs root (ip netns add, raw sockets)"
    if not shutil.which("ip"):
        return "needs iproute2 (ip)"
    return ""


# ---------------------------------------------------------------- host programs

UDP_ECHO = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", int(sys.argv[1])))
print("ready", flush=True)
while True:
    data, addr = s.recvfrom(4096)
    s.sendto(data, addr)
"""

UDP_PINGER = """
import json, socket, sys, time
dst, port, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(0.5)
rtts, lost = [], 0
for i in range(count):
    msg = i.to_bytes(4, "big") + bytes(60)
    t0 = time.perf_counter()
    s.sendto(msg, (dst, port))
    try:
        while True:
            data, _ = s.recvfrom(4096)
            if data[:4] == msg[:4]:
                rtts.append((time.perf_counter() - t0) * 1e6)
                break
    except socket.timeout:
        lost += 1
print(json.dumps({"rtts_us": rtts, "lost": lost}))
"""

UDP_SINK = """
import json, socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
s.bind(("0.0.0.0", int(sys.argv[1])))
print("ready", flush=True)
s.settimeout(float(sys.argv[2]))
n, first, last = 0, None, None
try:
    while True:
        s.recv(4096)
        last = time.perf_counter()
        first = first or last
        n += 1
        s.settimeout(1.0)
except socket.timeout:
    pass
print(json.dumps({"received": n, "seconds": (last - first) if n > 1 else 0.0}))
"""

UDP_BLAST = """
import socket, sys, time
dst, port, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rate = float(sys.argv[4])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
payload = bytes(64)
t0 = time.perf_counter()
for i in range(count):
    if rate:
        while time.perf_counter() - t0 < i / rate:
            pass
    s.sendto(payload, (dst, port))
print(count)
"""


def read_json(proc: subprocess.Popen[str], timeout: float) -> dict[str, object]:
    out, err = proc.communicate(timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"host program failed: {err.strip()}")
    return dict(json.loads(out.strip().splitlines()[-1]))


def wait_ready(proc: subprocess.Popen[str]) -> None:
    line = proc.stdout.readline() if proc.stdout else ""
    if line.strip() != "ready":
        raise RuntimeError(
            f"host program did not start: {proc.stderr.read() if proc.stderr else ''}"
        )


# ---------------------------------------------------------------- the switch process


@contextlib.contextmanager
def switch_process(
    interfaces: list[str], program: Path, log_level: str = "warn", extra: list[str] | None = None
) -> Iterator[tuple[subprocess.Popen[bytes], int, int]]:
    """``kvswitch switch`` on the given ports; yields (process, thrift port, grpc port)."""

    thrift, grpc_port = free_port(), free_port()
    cmd = [
        sys.executable,
        "-m",
        "kvswitch",
        "switch",
        "--thrift-port",
        str(thrift),
        "-L",
        log_level,
        "--log-console",
    ]
    for spec in interfaces:
        cmd += ["-i", spec]
    cmd += [*(extra or []), str(program), "--", "--grpc-server-addr", f"127.0.0.1:{grpc_port}"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"switch exited: {proc.stderr.read().decode() if proc.stderr else ''}"
                )
            if listens("127.0.0.1", grpc_port, 0.2):
                break
            if time.monotonic() > deadline:
                raise TimeoutError("switch did not start")
            time.sleep(0.05)
        yield proc, thrift, grpc_port
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def thrift_commands(thrift_port: int, commands: list[str]) -> str:
    cli = shutil.which("simple_switch_CLI") or str(
        Path(sys.executable).parent / "simple_switch_CLI"
    )
    done = subprocess.run(
        [cli, "--thrift-port", str(thrift_port)],
        input="\n".join(commands) + "\n",
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout


def cross_connect(topo: Topology, thrift_port: int) -> None:
    """l2 entries: host 1's port forwards to host 2's and back."""
    a, b = topo.hosts[0], topo.hosts[1]
    thrift_commands(
        thrift_port,
        [
            f"table_add l2 forward {a.port} => {b.port}",
            f"table_add l2 forward {b.port} => {a.port}",
        ],
    )


# ---------------------------------------------------------------- benchmarks


def bench_entries(program: Path, total: int, batch: int) -> float:
    """Insert ``total`` /32 routes in batches of ``batch`` over P4Runtime; entries/s."""
    import grpc
    from finsy.proto import p4r, p4r_grpc

    from softswitch.runtime.bundle import Bundle
    from softswitch.runtime.device import Device
    from softswitch.runtime.p4info_index import P4InfoIndex
    from softswitch.runtime.p4runtime_server import P4RuntimeServer

    bundle = Bundle.from_file(program, {"TABLE_SIZE": str(max(total, 1024))})
    device = Device(device_id=0)
    address = f"127.0.0.1:{free_port()}"
    server = P4RuntimeServer(device, address)
    server.start()
    channel = grpc.insecure_channel(address)
    stub = p4r_grpc.P4RuntimeStub(channel)
    done = threading.Event()
    arbitration = p4r.StreamMessageRequest(
        arbitration=p4r.MasterArbitrationUpdate(device_id=0, election_id=p4r.Uint128(low=1))
    )
    stream = stub.StreamChannel(_hold(arbitration, done))
    next(stream)  # the arbitration answer: we are primary
    try:
        info = bundle.compile().p4info
        config = p4r.ForwardingPipelineConfig(p4info=info, p4_device_config=bundle.to_bytes())
        stub.SetForwardingPipelineConfig(
            p4r.SetForwardingPipelineConfigRequest(
                device_id=0,
                election_id=p4r.Uint128(low=1),
                action=p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT,
                config=config,
            )
        )
        index = P4InfoIndex(info)
        table, action = index.table("ipv4_lpm"), index.action("ipv4_forward")
        assert table is not None and action is not None
        updates = []
        for i in range(total):
            te = p4r.TableEntry(table_id=table.id)
            fm = te.match.add(field_id=table.keys[0].id)
            fm.lpm.value, fm.lpm.prefix_len = (0x0A000000 + i).to_bytes(4, "big"), 32
            te.action.action.action_id = action.id
            te.action.action.params.add(param_id=1, value=(i + 1).to_bytes(6, "big"))
            te.action.action.params.add(param_id=2, value=(i % 8 + 1).to_bytes(2, "big"))
            updates.append(p4r.Update(type=p4r.Update.INSERT, entity=p4r.Entity(table_entry=te)))
        started = time.perf_counter()
        for start in range(0, total, batch):
            stub.Write(
                p4r.WriteRequest(
                    device_id=0,
                    election_id=p4r.Uint128(low=1),
                    updates=updates[start : start + batch],
                )
            )
        elapsed = time.perf_counter() - started
        got = sum(
            len(r.entities)
            for r in stub.Read(
                p4r.ReadRequest(
                    device_id=0,
                    entities=[p4r.Entity(table_entry=p4r.TableEntry(table_id=table.id))],
                )
            )
        )
        if got != total:
            raise RuntimeError(f"read back {got} entries, wrote {total}")
        return total / elapsed
    finally:
        done.set()
        stream.cancel()
        channel.close()
        server.stop(grace=0)


def _hold(first: object, done: threading.Event) -> Iterator[object]:
    """A request stream that sends ``first`` and stays open until ``done``."""
    yield first
    done.wait()


def bench_forwarding(program: Path, packets: int, pings: int, rate: float) -> dict[str, float]:
    topo = Topology.build(2)
    try:
        with switch_process(topo.interfaces(), program) as (_proc, thrift, _grpc):
            cross_connect(topo, thrift)
            a, b = topo.hosts
            echo = topo.python(b, UDP_ECHO, "7001")
            try:
                wait_ready(echo)
                ping = read_json(
                    topo.python(a, UDP_PINGER, b.ip, "7001", str(pings)), timeout=pings * 0.6 + 30
                )
            finally:
                echo.terminate()
                echo.wait()
            sink = topo.python(b, UDP_SINK, "7002", "10")
            wait_ready(sink)
            blast = topo.python(a, UDP_BLAST, b.ip, "7002", str(packets), str(rate))
            blast.communicate(timeout=120)
            got = read_json(sink, timeout=120)
        rtts = sorted(float(x) for x in ping["rtts_us"])  # type: ignore[union-attr]
        received, seconds = int(got["received"]), float(got["seconds"])  # type: ignore[arg-type]
        return {
            "pps": received / seconds if seconds else 0.0,
            "received": received,
            "sent": packets,
            "p50_us": statistics.median(rtts) if rtts else float("nan"),
            "p99_us": rtts[min(len(rtts) - 1, int(len(rtts) * 0.99))] if rtts else float("nan"),
            "pings": len(rtts),
            "lost": int(ping["lost"]),  # type: ignore[arg-type]
        }
    finally:
        topo.close()


def main(argv: list[str] | None = None) -> int:
    p = t.Parser(prog="kvswitch bench runtime", description=__doc__.split("\n\n")[0])
    p.add_argument("--program", type=Path, default=PROGRAM, help="P4 program (source)")
    p.add_argument(
        "--entries", type=t.positive_int, default=10_000, help="routes written over P4Runtime"
    )
    p.add_argument("--batch", type=t.positive_int, default=500, help="updates per Write")
    p.add_argument(
        "--packets", type=t.nonneg_int, default=20_000, help="UDP datagrams blasted h1 -> h2"
    )
    p.add_argument(
        "--rate",
        type=t.nonneg_float,
        default=0.0,
        help="sender pacing in packets/s (0: as fast as possible)",
    )
    p.add_argument(
        "--pings", type=t.nonneg_int, default=1000, help="UDP echo round trips for latency"
    )
    args = p.parse_args(argv)

    eps = bench_entries(args.program, args.entries, args.batch)
    print(
        f"p4runtime write: {args.entries} entries in batches of {args.batch}: {eps:,.0f} entries/s"
    )
    why = can_build_namespaces()
    if why:
        print(f"forwarding between namespaces: skipped ({why})")
        return 0
    fwd = bench_forwarding(args.program, args.packets, args.pings, args.rate)
    print(
        f"forwarding h1 -> switch -> h2: {fwd['pps']:,.0f} packets/s "
        f"({fwd['received']:.0f} of {fwd['sent']:.0f} datagrams delivered)"
    )
    print(
        f"UDP echo round trip through the switch (2 traversals): p50 {fwd['p50_us']:.0f} us, "
        f"p99 {fwd['p99_us']:.0f} us over {fwd['pings']:.0f} pings, {fwd['lost']:.0f} lost"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
