"""Real packets through the switch process: two hosts in network namespaces on veth pairs,
the switch on the other ends (AF_PACKET raw sockets), entries installed by simple_switch_CLI."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from kvswitch.bench.runtime_bench import (
    UDP_ECHO,
    UDP_PINGER,
    Topology,
    can_build_namespaces,
    cross_connect,
    read_json,
    switch_process,
    thrift_commands,
    wait_ready,
)
from tests.softswitch.runtime.conftest import PROGRAM

pytestmark = [pytest.mark.netns]


@pytest.fixture
def topo() -> Topology:
    why = can_build_namespaces()
    if why:
        pytest.skip(f"network namespace test {why}")
    t = Topology.build(2)
    yield t  # type: ignore[misc]
    t.close()


def test_udp_echo_through_switch(topo: Topology) -> None:
    a, b = topo.hosts
    with switch_process(topo.interfaces(), PROGRAM) as (proc, thrift, _grpc):
        echo = topo.python(b, UDP_ECHO, "7001")
        try:
            wait_ready(echo)
            # no entries yet: l2 misses, NoAction sends to port 0, which has no interface
            lost = read_json(topo.python(a, UDP_PINGER, b.ip, "7001", "2"), timeout=30)
            assert lost["lost"] == 2
            cross_connect(topo, thrift)
            got = read_json(topo.python(a, UDP_PINGER, b.ip, "7001", "20"), timeout=30)
            assert got["lost"] == 0 and len(got["rtts_us"]) == 20  # type: ignore[arg-type]
        finally:
            echo.terminate()
            echo.wait()
        out = thrift_commands(
            thrift, [f"counter_read port_counter {a.port}", f"counter_read port_counter {b.port}"]
        )
        counts = {
            int(m[0]): int(m[1])
            for m in re.findall(r"port_counter\[(\d+)\]= \(\d+ bytes, (\d+) packets\)", out)
        }
        # 22 datagrams in from a (2 lost + 20 echoed) and 20 echoes from b; a frame the switch
        # sent and read back as input would loop between the ports and blow these numbers up
        assert 22 <= counts[a.port] <= 24 and 20 <= counts[b.port] <= 22, counts
        assert proc.poll() is None


RECEIVE_COUNT = """
import json, socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", int(sys.argv[1])))
print("ready", flush=True)
s.settimeout(float(sys.argv[2]))
n = 0
try:
    while True:
        s.recv(4096)
        n += 1
except socket.timeout:
    pass
print(json.dumps({"received": n}))
"""

RAW_SEND = """
import socket, sys
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((sys.argv[1], 0))
s.send(bytes.fromhex(sys.argv[2]))
"""


def test_frames_leaving_a_port_are_not_input(topo: Topology) -> None:
    """A frame some other socket sends out of a switch interface (towards the host) is not
    switch input; the same frame arriving from the host is."""
    a, b = topo.hosts
    udp = Ether(src=a.mac, dst=b.mac) / IP(src=a.ip, dst=b.ip) / UDP(sport=5555, dport=7003) / b"x"
    frame = bytes(udp).hex()
    with switch_process(topo.interfaces(), PROGRAM) as (_proc, thrift, _grpc):
        cross_connect(topo, thrift)
        for sender, expected in ((None, 0), (a, 1)):
            sink = topo.python(b, RECEIVE_COUNT, "7003", "1.0")
            wait_ready(sink)
            if sender is None:  # from the root namespace, out of the switch's own interface
                subprocess.run([sys.executable, "-c", RAW_SEND, a.port_iface, frame], check=True)
            else:  # from the host, into the switch
                topo.python(sender, RAW_SEND, sender.iface, frame).communicate(timeout=30)
            assert read_json(sink, timeout=30)["received"] == expected
