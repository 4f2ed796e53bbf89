"""What the switch's side of a link needs, for every harness that builds links (the Mininet rack,
the runtime benchmark's namespaces), and whether a switch's control port listens yet."""

from __future__ import annotations

import socket

#: ethtool features off on the switch's side of every link: the switch reads and writes whole
#: frames (no checksum offload), and BMv2 reads each port through libpcap, which sizes the
#: port's receive ring by the largest frame the interface can hand it: 64 KiB while any
#: segmentation or receive offload is on (veth's GSO is, by default), which leaves 32 frames
#: in its 2 MiB ring, about 25 ms of the client port's packets in the rack; without, 1 311
#: frames. A full ring drops what comes (docs/rack.md "BMv2's receive ring").
PORT_OFFLOADS_OFF = ("rx", "tx", "sg", "tso", "gso", "gro")


def port_offloads_off(intf: str) -> list[str]:
    """The ethtool command that turns :data:`PORT_OFFLOADS_OFF` off on ``intf``."""
    return ["ethtool", "--offload", intf, *(x for f in PORT_OFFLOADS_OFF for x in (f, "off"))]


def listens(host: str, port: int, timeout: float) -> bool:
    """Something listens on TCP ``host``:``port`` (a connection made within ``timeout`` seconds
    and closed at once). A loopback connection whose source port the kernel picked equal to
    ``port`` connects to itself while nothing listens (TCP simultaneous open); that is not
    counted."""
    try:
        with socket.create_connection((host, port), timeout) as conn:
            return conn.getsockname() != conn.getpeername()
    except (OSError, ValueError):
        return False
