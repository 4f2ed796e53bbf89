"""pcap file mode, like BMv2's ``--use-files``: read ``<port>_in.pcap`` for each port, push the
packets through the switch in timestamp order, write what leaves each port to ``<port>_out.pcap``.

The pcap format (libpcap, Ethernet link type) is read and written here directly: microsecond and
nanosecond variants, either byte order, on input; microsecond little-endian on output.
"""

from __future__ import annotations

import heapq
import struct
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from softswitch.errors import SwitchError
from softswitch.switch import Switch

LINKTYPE_ETHERNET = 1
_MAGICS = {
    b"\xd4\xc3\xb2\xa1": ("<", 1_000),  # microseconds, little endian
    b"\xa1\xb2\xc3\xd4": (">", 1_000),
    b"\x4d\x3c\xb2\xa1": ("<", 1),  # nanoseconds
    b"\xa1\xb2\x3c\x4d": (">", 1),
}


@dataclass(order=True)
class PcapRecord:
    ts_ns: int
    data: bytes


def read_pcap(path: str | Path, partial: bool = False) -> Iterator[PcapRecord]:
    """The records of a pcap file. ``partial``: the file may still be being written, so a
    truncated last record ends the iteration instead of raising."""
    with open(path, "rb") as f:
        head = f.read(24)
        if len(head) < 24 or head[:4] not in _MAGICS:
            raise SwitchError(f"{path}: not a pcap file")
        endian, scale = _MAGICS[head[:4]]
        linktype = struct.unpack(endian + "I", head[20:24])[0]
        # BMv2's --use-files writes link type 0 (pcap_open_dead(0, 0)) for Ethernet frames
        if linktype not in (LINKTYPE_ETHERNET, 0):
            raise SwitchError(f"{path}: link type {linktype} is not Ethernet")
        rec = struct.Struct(endian + "IIII")
        while True:
            h = f.read(16)
            if not h:
                return
            if len(h) < 16:
                if partial:
                    return
                raise SwitchError(f"{path}: truncated record header")
            sec, frac, incl, _orig = rec.unpack(h)
            data = f.read(incl)
            if len(data) < incl:
                if partial:
                    return
                raise SwitchError(f"{path}: truncated packet")
            yield PcapRecord(sec * 1_000_000_000 + frac * scale, data)


class PcapWriter:
    """A classic pcap file (microsecond timestamps, Ethernet). Thread-safe; with ``flush`` every
    frame reaches the file at once (live captures that others read while the switch runs)."""

    def __init__(self, path: str | Path, snaplen: int = 65535, flush: bool = False) -> None:
        self.f = open(path, "wb")  # noqa: SIM115 - closed by close()
        self.f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, snaplen, LINKTYPE_ETHERNET))
        self.flush = flush
        self.lock = threading.Lock()
        if flush:
            self.f.flush()

    def write(self, data: bytes, ts_ns: int | None = None) -> None:
        """One frame; ``ts_ns`` defaults to now."""
        ts = time.time_ns() if ts_ns is None else ts_ns
        sec, usec = divmod(ts // 1000, 1_000_000)
        with self.lock:
            self.f.write(struct.pack("<IIII", sec, usec, len(data), len(data)) + data)
            if self.flush:
                self.f.flush()

    def close(self) -> None:
        with self.lock:
            self.f.close()

    def __enter__(self) -> PcapWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def write_pcap(path: str | Path, packets: Iterable[bytes | tuple[int, bytes]]) -> None:
    """Write packets (bytes, or (timestamp_ns, bytes)) to a pcap file."""
    with PcapWriter(path) as w:
        for i, p in enumerate(packets):
            ts, data = p if isinstance(p, tuple) else (i * 1000, p)
            w.write(data, ts)


def merge_inputs(inputs: dict[int, Path]) -> Iterator[tuple[int, int, bytes]]:
    """``(ts_ns, port, frame)`` of every port's input pcap, in the order BMv2's ``--use-files``
    replays them (``PcapFilesReader::scan``): the earliest timestamp first, compared in
    microseconds (libpcap hands nanosecond files over in microseconds), ties to the lowest port
    number (BMv2 keeps its interfaces in a map ordered by port), each file in its own order."""

    def stream(port: int, path: Path) -> Iterator[tuple[int, int, int, bytes]]:
        for r in read_pcap(path):
            yield r.ts_ns // 1000, port, r.ts_ns, r.data

    streams = [stream(port, path) for port, path in sorted(inputs.items())]
    for _us, port, ts_ns, data in heapq.merge(*streams, key=lambda r: (r[0], r[1])):
        yield ts_ns, port, data


def run_pcap_files(sw: Switch, directory: str | Path, ports: Iterable[int]) -> dict[int, int]:
    """Process ``<port>_in.pcap`` of every port (in :func:`merge_inputs` order) and write
    ``<port>_out.pcap`` for every port (empty when nothing left by it). Packets sent to a port not
    in ``ports`` are dropped, as BMv2 drops packets for ports without an interface.

    Returns the number of packets written per port."""
    d = Path(directory)
    ports = sorted(set(ports))
    inputs = {port: d / f"{port}_in.pcap" for port in ports}
    writers = {port: PcapWriter(d / f"{port}_out.pcap") for port in ports}
    written = dict.fromkeys(ports, 0)
    try:
        for ts, port, data in merge_inputs({p: f for p, f in inputs.items() if f.exists()}):
            for eport, out in sw.process(port, data):
                if eport in writers:
                    writers[eport].write(out, ts)
                    written[eport] += 1
    finally:
        for w in writers.values():
            w.close()
    return written
