"""Packet I/O for the software switch: ports on real interfaces (AF_PACKET raw sockets) and pcap files.

One selector loop reads every port, so frames are processed one at a time in the order the loop
sees them; frames the switch itself sent are not read back (``PACKET_OUTGOING`` is skipped).
With ``--use-files`` (BMv2's option) a port ``N@NAME`` reads ``NAME_in.pcap`` and writes
``NAME_out.pcap`` instead of touching an interface.
"""

from __future__ import annotations

import contextlib
import logging
import selectors
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from softswitch.pcap import PcapWriter, merge_inputs

LOG = logging.getLogger("softswitch.io")

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
SOL_PACKET = 263
PACKET_IGNORE_OUTGOING = 23
MAX_FRAME = 65536 + 64

Processor = Callable[[int, bytes], list[tuple[int, bytes]]]


# ---------------------------------------------------------------- ports


@dataclass
class Port:
    num: int
    name: str
    sock: socket.socket | None = None  # None for file ports
    pcap_in: PcapWriter | None = None
    pcap_out: PcapWriter | None = None
    rx: int = 0
    tx: int = 0


def parse_port_spec(spec: str) -> tuple[int, str]:
    """'3@veth0' -> (3, 'veth0')."""
    num, sep, name = spec.partition("@")
    if not sep or not num.isdigit() or not name:
        raise ValueError(f"bad interface {spec!r}: expected PORT@IFACE, e.g. 1@veth0")
    return int(num), name


def open_raw(iface: str) -> socket.socket:
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    try:
        sock.bind((iface, 0))
        with contextlib.suppress(OSError):  # Linux >= 4.20: do not even queue our own frames
            sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


@dataclass
class PortIO:
    """All ports of one switch and the loop that feeds them to ``process``."""

    process: Processor
    pcap_dir: Path | None = None
    ports: dict[int, Port] = field(default_factory=dict)
    stopped: threading.Event = field(default_factory=threading.Event)

    def add_interface(self, num: int, iface: str) -> None:
        if num in self.ports:
            raise ValueError(f"port {num} given twice")
        port = Port(num, iface, open_raw(iface))
        self._open_pcaps(port)
        self.ports[num] = port

    def add_file_port(self, num: int, name: str) -> None:
        if num in self.ports:
            raise ValueError(f"port {num} given twice")
        if not Path(f"{name}_in.pcap").is_file():  # BMv2 opens every input at start-up too
            raise ValueError(f"--use-files: {name}_in.pcap (input of port {num}) does not exist")
        port = Port(num, name, pcap_out=PcapWriter(f"{name}_out.pcap", flush=True))
        self.ports[num] = port

    def _open_pcaps(self, port: Port) -> None:
        if self.pcap_dir is not None:
            self.pcap_dir.mkdir(parents=True, exist_ok=True)
            port.pcap_in = PcapWriter(self.pcap_dir / f"{port.name}_in.pcap", flush=True)
            port.pcap_out = PcapWriter(self.pcap_dir / f"{port.name}_out.pcap", flush=True)

    def names(self) -> dict[int, str]:
        return {n: p.name for n, p in self.ports.items()}

    def transmit(self, num: int, frame: bytes) -> None:
        """Send a frame out of port ``num`` (unknown ports drop it, as BMv2 does)."""
        port = self.ports.get(num)
        if port is None:
            LOG.debug("egress port %d has no interface: dropped", num)
            return
        port.tx += 1
        if port.pcap_out is not None:
            port.pcap_out.write(frame)
        if port.sock is not None:
            try:
                port.sock.send(frame)
            except OSError as exc:  # interface down, frame too big...
                LOG.warning("port %d (%s): send failed: %s", num, port.name, exc)

    def receive(self, port: Port, frame: bytes) -> None:
        port.rx += 1
        if port.pcap_in is not None:
            port.pcap_in.write(frame)
        out = self.process(port.num, frame)
        if LOG.isEnabledFor(logging.DEBUG):
            LOG.debug(
                "port %d: %d bytes in -> %s",
                port.num,
                len(frame),
                [(p, len(d)) for p, d in out] or "dropped",
            )

    def run_files(self) -> None:
        """Feed every ``NAME_in.pcap`` of the file ports through the switch, in BMv2's order
        (:func:`softswitch.pcap.merge_inputs`). The switch keeps running afterwards, as BMv2
        does: its state stays readable over Thrift and P4Runtime until it is stopped."""
        inputs = {
            port.num: Path(f"{port.name}_in.pcap")
            for port in self.ports.values()
            if port.sock is None and Path(f"{port.name}_in.pcap").exists()
        }
        for _ts, num, frame in merge_inputs(inputs):
            if self.stopped.is_set():
                return
            try:
                self.receive(self.ports[num], frame)
            except Exception:  # one bad frame must never stop the switch
                LOG.exception("port %d: frame of %d bytes failed", num, len(frame))

    def run(self) -> None:
        """Read all interface ports until :meth:`stop`; one frame per ready port per round."""
        sel = selectors.DefaultSelector()
        for port in self.ports.values():
            if port.sock is not None:
                sel.register(port.sock, selectors.EVENT_READ, port)
        if not sel.get_map():
            self.stopped.wait()
            return
        try:
            while not self.stopped.is_set():
                for key, _ in sel.select(timeout=0.2):
                    port: Port = key.data
                    try:
                        frame, addr = port.sock.recvfrom(MAX_FRAME)  # type: ignore[union-attr]
                    except (BlockingIOError, InterruptedError):
                        continue
                    except OSError as exc:
                        LOG.warning("port %d (%s): receive failed: %s", port.num, port.name, exc)
                        continue
                    if addr[2] == PACKET_OUTGOING:
                        continue  # our own transmission (or the host's) seen on the way out
                    try:
                        self.receive(port, frame)
                    except Exception:  # one bad frame must never stop the switch
                        LOG.exception("port %d: frame of %d bytes failed", port.num, len(frame))
        finally:
            sel.close()

    def stop(self) -> None:
        self.stopped.set()

    def close(self) -> None:
        self.stopped.set()
        for port in self.ports.values():
            if port.sock is not None:
                port.sock.close()
            for w in (port.pcap_in, port.pcap_out):
                if w is not None:
                    w.close()
