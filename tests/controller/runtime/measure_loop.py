"""Measure the controller's periods at full build size (prints figures; not a timed test).

    .venv/bin/python -m tests.controller.runtime.measure_loop [--servers 8] [--periods 6]

The default P4 build (K = 1024, MAX_SERVERS = 32, d = 4) in this process behind its loopback
P4Runtime and Thrift servers; Gets of 200 keys with Zipf-like counts (400/rank per period) are
injected before each period; the agents' part of a push is played with packets (``PacketAgents``).
"""

from __future__ import annotations

import argparse
import time

from kvswitch import protocol as p
from kvswitch.controller.p4rt_driver import P4RuntimeDriver, Program, SwitchAddress
from kvswitch.controller.period import ControllerConfig
from kvswitch.controller.rackfile import RackFile
from kvswitch.controller.runtime import Runtime
from kvswitch.paths import p4src_dir
from softswitch.runtime.bundle import Bundle
from softswitch.runtime.device import Device
from softswitch.runtime.p4runtime_server import P4RuntimeServer
from softswitch.runtime.thrift_server import ThriftServer
from tests.controller.runtime.test_driver import get_frame
from tests.controller.runtime.test_runtime import PacketAgents
from tests.softswitch.runtime.conftest import free_port


def rack_of(servers: int) -> RackFile:
    return RackFile.parse(
        {
            "switch": {"ip": "10.0.0.254", "mac": "02:00:00:00:00:fe"},
            "servers": [
                {
                    "name": f"s{i}",
                    "ip": f"10.0.0.{i + 1}",
                    "mac": f"02:00:00:00:00:{i + 1:02x}",
                    "port": i + 1,
                }
                for i in range(servers)
            ],
            "clients": [{"name": "c1", "ip": "10.0.1.1", "mac": "02:00:00:00:01:01", "port": 100}],
        }
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--servers", type=int, default=8)
    ap.add_argument("--periods", type=int, default=6)
    ap.add_argument("--keys", type=int, default=200)
    args = ap.parse_args()
    rack = rack_of(args.servers)
    bundle = Bundle.from_file(p4src_dir() / "kvswitch.p4", {})
    program = Program(bundle.compile().p4info, bundle.to_bytes())
    device = Device(device_id=0)
    grpc_addr, thrift_port = f"127.0.0.1:{free_port()}", free_port()
    servers = (P4RuntimeServer(device, grpc_addr), ThriftServer(device, thrift_port, "127.0.0.1"))
    for server in servers:
        server.start()
    agents = PacketAgents(device, rack)
    address = SwitchAddress(grpc_addr, 0, "127.0.0.1", thrift_port)
    try:
        with P4RuntimeDriver(address, program, rack.rack(), agents) as drv:
            runtime = Runtime(drv, rack, ControllerConfig(k=64, t0=5.0))
            began = time.perf_counter()
            runtime.start()
            print(f"start-up {1000 * (time.perf_counter() - began):.1f} ms")
            keys = [p.pad_key(b"k%d" % i) for i in range(args.keys)]
            for _ in range(args.periods):
                pushes, writes = len(agents.pushes), drv.p4rt_writes
                for rank, key in enumerate(keys):
                    origin = runtime.ring.origin(key)
                    for i in range(max(1, 400 // (rank + 1))):
                        device.process(100, get_frame(rack, key, origin, seq=i))
                m = runtime.period()
                print(
                    f"{m.line()}  ({m.period_ms:.1f} ms, {drv.p4rt_writes - writes} Write, "
                    f"{len(agents.pushes) - pushes} pushes)"
                )
    finally:
        servers[1].stop()
        servers[0].stop(grace=0)


if __name__ == "__main__":
    main()
