"""A switch port of the rack holds a burst while BMv2 is not reading it: BMv2 (libpcap) reads
each port through a kernel receive ring sized by the largest frame the interface can hand it,
32 frames with veth's segmentation offload on, 1 311 without (docs/rack.md "BMv2's receive
ring"); the rack turns the offloads off on the switch's side (:func:`port_offloads_off`).

The test stops BMv2 (SIGSTOP, as a busy machine does for a few milliseconds), sends a burst into
its port and reads the port socket's own counters (PACKET_STATISTICS, through a duplicate of
BMv2's descriptor): every frame arrived, none dropped. With the offloads left on it drops all
but 32 (measured: 168 of 200). About 1 s.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import socket
import struct
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from kvsrack.procs import wait_tcp
from kvswitch.agent.backend_procs import free_port
from kvswitch.ports import port_offloads_off

pytestmark = [pytest.mark.netns, pytest.mark.bmv2]

SOL_PACKET, PACKET_STATISTICS = 263, 6
SYS_PIDFD_GETFD = 438  # the same number on every architecture (Linux >= 5.6)
BURST = 200


def _sh(*args: str) -> None:
    subprocess.run(args, check=True, capture_output=True)


@pytest.fixture
def veth() -> Iterator[tuple[str, str]]:
    if os.geteuid() != 0:
        pytest.skip("needs root (veth pairs)")
    for tool in ("simple_switch_grpc", "ethtool", "ip"):
        if shutil.which(tool) is None:
            pytest.skip(f"needs {tool} on PATH")
    tag = uuid.uuid4().hex[:6]
    sw, host = f"kvp{tag}a", f"kvp{tag}b"
    _sh("ip", "link", "add", sw, "type", "veth", "peer", "name", host)
    try:
        for dev in (sw, host):
            with contextlib.suppress(OSError):
                Path(f"/proc/sys/net/ipv6/conf/{dev}/disable_ipv6").write_text("1")
            _sh("ip", "link", "set", dev, "up")
        yield sw, host
    finally:
        subprocess.run(["ip", "link", "del", sw], capture_output=True)


def _port_socket(pid: int, ifname: str) -> socket.socket:
    """A duplicate of process ``pid``'s packet socket on ``ifname``."""
    ifindex = socket.if_nametoindex(ifname)
    inodes = {}  # inode -> ifindex, /proc/net/packet: sk RefCnt Type Proto Iface R Rmem User Inode
    for line in Path("/proc/net/packet").read_text().splitlines()[1:]:
        f = line.split()
        inodes[int(f[8])] = int(f[4])
    libc = ctypes.CDLL(None, use_errno=True)
    pidfd = os.pidfd_open(pid)
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if link.startswith("socket:[") and inodes.get(int(link[8:-1])) == ifindex:
                    mine = libc.syscall(SYS_PIDFD_GETFD, pidfd, int(fd), 0)
                    if mine < 0:
                        pytest.skip(f"pidfd_getfd: {os.strerror(ctypes.get_errno())}")
                    return socket.socket(fileno=mine)
    finally:
        os.close(pidfd)
    pytest.fail(f"BMv2 has no packet socket on {ifname}")


def _stats(sock: socket.socket) -> tuple[int, int]:
    """(frames that reached the socket, frames it dropped) since the last call."""
    return struct.unpack("II", sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8))


def test_a_stalled_bmv2_port_holds_a_burst(veth: tuple[str, str], tmp_path: Path) -> None:
    sw, host = veth
    _sh(*port_offloads_off(sw))
    grpc = free_port()
    log = (tmp_path / "bmv2.log").open("wb")
    proc = subprocess.Popen(
        ["simple_switch_grpc", "--no-p4", "-i", f"1@{sw}", "--device-id", "0",
         "--thrift-port", str(free_port()), "--", "--grpc-server-addr", f"127.0.0.1:{grpc}"],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    sender = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    try:
        wait_tcp(grpc, proc, "simple_switch_grpc")
        port = _port_socket(proc.pid, sw)
        _stats(port)  # from now on
        sender.bind((host, 0))
        frame = b"\xff" * 6 + b"\x02" + b"\x00" * 5 + b"\x88\xb5" + b"\x00" * 100
        os.kill(proc.pid, signal.SIGSTOP)
        try:
            for _ in range(BURST):
                sender.send(frame)
            time.sleep(0.2)
            arrived, dropped = _stats(port)
        finally:
            os.kill(proc.pid, signal.SIGCONT)
        port.close()
    finally:
        sender.close()
        proc.terminate()
        proc.wait(10)
        log.close()
    print(f"{arrived} frames reached the stopped BMv2's port, {dropped} dropped")
    assert arrived >= BURST and dropped == 0, (arrived, dropped)
