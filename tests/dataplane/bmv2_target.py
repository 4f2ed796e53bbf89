"""The data-plane tests' switch API (base.SwitchTarget) on BMv2's ``simple_switch_grpc``.

The switch runs as a process on the BMv2 JSON that p4c-bm2-ss writes. Each of its ports is one end
of a veth pair (unique names, IPv6 and offloads off on both ends, removed by name at the end); the
tests send and receive on the other ends over AF_PACKET raw sockets, as PTF does. Tables, the
multicast engine, registers and counters go through BMv2's Thrift runtime (``bm_runtime``): the
same calls ``simple_switch_CLI`` makes.

The in-process switch returns exactly the packets one input produced; here they come back over
the wire, so :meth:`BMv2Target.process` collects them PTF's way: it waits (up to ``POSITIVE``
seconds) for the packets the test expects, then a quiet time (``QUIET``; ``NEGATIVE`` when the test
expects nothing) to see that nothing else came. A packet that comes out later still fails: every
send first checks that nothing arrived since the last wait ended, and the fixture checks once more
at the end of the test (:meth:`BMv2Target.assert_quiet`).
"""

from __future__ import annotations

import contextlib
import select
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from bm_runtime.simple_pre_lag import SimplePreLAG
from bm_runtime.standard import Standard
from bm_runtime.standard.ttypes import (
    BmAddEntryOptions,
    BmMatchParam,
    BmMatchParamExact,
    BmMatchParamLPM,
    BmMatchParamRange,
    BmMatchParamTernary,
    BmMatchParamType,
)
from thrift.protocol import TBinaryProtocol, TMultiplexedProtocol
from thrift.transport import TSocket, TTransport

from kvswitch.bench.runtime_bench import can_build_namespaces
from tests.p4c_bmv2.tools import simple_switch_grpc

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_IGNORE_OUTGOING = 23
PACKET_OUTGOING = 4

POSITIVE = 2.0  # how long a packet the test expects may take
NEGATIVE = 0.1  # how long to watch for a packet when the test expects none (PTF's default)
QUIET = 0.03  # after the expected packets: how long nothing else may come
FIRST = 0.25  # process() without an expectation: how long to wait for the first packet

# the ports the test rack uses (base.py: servers 1-4, the client 8, and 7 in one group), and the
# ones between so that any port a test names has a wire
PORTS = tuple(range(1, 9))


def bmv2_missing() -> str:
    """'' where the BMv2 target can run here, else why not (one line)."""
    import shutil

    for tool in ("simple_switch_grpc", "p4c-bm2-ss"):
        if shutil.which(tool) is None:
            return f"{tool} is not on PATH"
    why = can_build_namespaces()
    return f"BMv2 ports on veth pairs {why}" if why else ""


def _sh(*cmd: str) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {done.stderr.strip()}")


@dataclass
class Wires:
    """veth pairs in this namespace: port p is ``kd<tag>s<p>`` (the switch's end) and
    ``kd<tag>h<p>`` (the tests' end, one AF_PACKET socket each)."""

    ports: Sequence[int]
    tag: str = field(default_factory=lambda: uuid.uuid4().hex[:6])
    socks: dict[int, socket.socket] = field(default_factory=dict)
    made: list[str] = field(default_factory=list)

    def switch_end(self, port: int) -> str:
        return f"kd{self.tag}s{port}"

    def host_end(self, port: int) -> str:
        return f"kd{self.tag}h{port}"

    def up(self) -> None:
        for port in self.ports:
            sw, host = self.switch_end(port), self.host_end(port)
            _sh("ip", "link", "add", sw, "type", "veth", "peer", "name", host)
            self.made.append(sw)
            for dev in (sw, host):
                # no IPv6 (router solicitations, DAD), no checksum/segmentation offloads
                if Path(f"/proc/sys/net/ipv6/conf/{dev}").exists():  # absent: no IPv6 at all
                    _sh("sysctl", "-qw", f"net.ipv6.conf.{dev}.disable_ipv6=1")
                subprocess.run(
                    ["ethtool", "-K", dev, "rx", "off", "tx", "off", "sg", "off", "tso", "off",
                     "gso", "off", "gro", "off"],
                    capture_output=True,
                )  # fmt: skip
            for dev in (sw, host):
                _sh("ip", "link", "set", dev, "up")
            sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
            with contextlib.suppress(OSError):  # Linux >= 4.20; outgoing frames are filtered anyway
                sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
            sock.bind((host, ETH_P_ALL))
            sock.setblocking(False)
            self.socks[port] = sock

    def interfaces(self) -> list[str]:
        return [f"{port}@{self.switch_end(port)}" for port in self.ports]

    def close(self) -> None:
        for sock in self.socks.values():
            sock.close()
        self.socks.clear()
        for dev in self.made:  # one end's removal removes the pair
            subprocess.run(["ip", "link", "del", dev], capture_output=True)
        self.made.clear()


class BMv2Target:
    """simple_switch_grpc behind the in-process switch's API (base.SwitchTarget)."""

    wired = True  # base.Dataplane: outputs come back over the wire, within bounded waits

    def __init__(self, thrift_port: int, p4info: Any, wires: Wires) -> None:
        self.p4info = p4info
        self.wires = wires
        self._last_send = 0.0
        transport = TTransport.TBufferedTransport(TSocket.TSocket("127.0.0.1", thrift_port))
        proto = TBinaryProtocol.TBinaryProtocol(transport)
        self.std = Standard.Client(TMultiplexedProtocol.TMultiplexedProtocol(proto, "standard"))
        self.pre = SimplePreLAG.Client(
            TMultiplexedProtocol.TMultiplexedProtocol(proto, "simple_pre_lag")
        )
        transport.open()
        self.transport = transport
        self.groups: dict[int, tuple[int, list[int]]] = {}  # group -> (handle, node handles)
        self._polls = select.poll()
        self._by_fd = {}
        for port, sock in wires.socks.items():
            self._polls.register(sock.fileno(), select.POLLIN)
            self._by_fd[sock.fileno()] = port

    def close(self) -> None:
        self.transport.close()

    # -- names (P4Info's, which are BMv2's JSON names too) ------------------------------------
    def _entity(self, kind: str, name: str) -> Any:
        found = [
            e
            for e in getattr(self.p4info, kind)
            if e.preamble.name == name
            or e.preamble.name.endswith("." + name)
            or e.preamble.alias == name
        ]
        if len(found) != 1:
            raise KeyError(f"{kind} {name!r}: {[e.preamble.name for e in found] or 'none'}")
        return found[0]

    def _table(self, name: str) -> Any:
        return self._entity("tables", name)

    def _width(self, kind: str, name: str) -> int:
        return int(self._entity(kind, name).type_spec.bitstring.bit.bitwidth)

    # -- tables ---------------------------------------------------------------------------------
    def table_add(
        self,
        table: str,
        match: Mapping[str, Any],
        action: str,
        params: Mapping[str, int] | None = None,
        priority: int | None = None,
    ) -> int:
        t = self._table(table)
        if set(match) != {m.name for m in t.match_fields}:
            raise KeyError(f"{t.preamble.name}: match fields {sorted(match)}")
        key = [_match_param(m, match[m.name]) for m in t.match_fields]
        name, data = self._action(t, action, params)
        options = BmAddEntryOptions(priority=priority) if priority is not None else None
        return int(self.std.bm_mt_add_entry(0, t.preamble.name, key, name, data, options))

    def table_set_default(
        self, table: str, action: str, params: Mapping[str, int] | None = None
    ) -> None:
        t = self._table(table)
        name, data = self._action(t, action, params)
        self.std.bm_mt_set_default_action(0, t.preamble.name, name, data)

    def _action(
        self, t: Any, action: str, params: Mapping[str, int] | None
    ) -> tuple[str, list[bytes]]:
        """Table ``t``'s action ``action`` (by name or its last part) and its encoded data."""
        refs = {r.id for r in t.action_refs}
        acts = [a for a in self.p4info.actions if a.preamble.id in refs]
        act = next(
            (
                a
                for a in acts
                if a.preamble.name == action or a.preamble.name.endswith("." + action)
            ),
            None,
        )
        if act is None:
            raise KeyError(f"{t.preamble.name}: no action {action!r}")
        params = dict(params or {})
        if set(params) != {p.name for p in act.params}:
            raise KeyError(f"{act.preamble.name}: parameters {sorted(params)}")
        return act.preamble.name, [_bytes(params[p.name], p.bitwidth) for p in act.params]

    def table_clear(self, table: str) -> None:
        self.std.bm_mt_clear_entries(0, self._table(table).preamble.name, False)

    # -- multicast (BMv2's simple_pre_lag: one node per replication id, with its ports) ---------
    def mc_group_set(self, group: int, replicas: Sequence[tuple[int, int]]) -> None:
        if group in self.groups:
            self.mc_group_delete(group)
        handle = int(self.pre.bm_mc_mgrp_create(0, group))
        nodes: list[int] = []
        self.groups[group] = (handle, nodes)
        by_rid: dict[int, list[int]] = {}
        for port, rid in replicas:
            by_rid.setdefault(rid, []).append(port)
        for rid, ports in by_rid.items():
            node = int(self.pre.bm_mc_node_create(0, rid, _port_map(ports), ""))
            nodes.append(node)
            self.pre.bm_mc_node_associate(0, handle, node)

    def mc_group_delete(self, group: int) -> None:
        handle, nodes = self.groups.pop(group)
        for node in nodes:
            self.pre.bm_mc_node_dissociate(0, handle, node)
            self.pre.bm_mc_node_destroy(0, node)
        self.pre.bm_mc_mgrp_destroy(0, handle)

    # -- registers and counters -----------------------------------------------------------------
    def register_read(self, name: str, index: int | None = None) -> Any:
        reg = self._entity("registers", name)
        mask = (1 << self._width("registers", name)) - 1
        if index is None:
            return [v & mask for v in self.std.bm_register_read_all(0, reg.preamble.name)]
        return int(self.std.bm_register_read(0, reg.preamble.name, index)) & mask

    def register_write(self, name: str, index: int, value: int) -> None:
        reg = self._entity("registers", name)
        width = self._width("registers", name)
        if not 0 <= value < 1 << width:
            raise ValueError(f"{reg.preamble.name}: {value} does not fit bit<{width}>")
        signed = value - (1 << 64) if value >= 1 << 63 else value  # Thrift's i64
        self.std.bm_register_write(0, reg.preamble.name, index, signed)

    def register_reset(self, name: str) -> None:
        self.std.bm_register_reset(0, self._entity("registers", name).preamble.name)

    def counter_read(self, name: str, index: int) -> tuple[int, int]:
        value = self.std.bm_counter_read(0, self._entity("counters", name).preamble.name, index)
        return int(value.bytes), int(value.packets)

    def counter_reset(self, name: str) -> None:
        self.std.bm_counter_reset_all(0, self._entity("counters", name).preamble.name)

    def direct_counter_read(self, table: str, handle: int) -> tuple[int, int]:
        value = self.std.bm_mt_read_counter(0, self._table(table).preamble.name, handle)
        return int(value.bytes), int(value.packets)

    def direct_counter_reset(self, table: str) -> None:
        self.std.bm_mt_reset_counters(0, self._table(table).preamble.name)

    # -- packets --------------------------------------------------------------------------------
    def _receive(self, timeout: float) -> list[tuple[int, bytes]]:
        """Frames the switch sent (waiting up to ``timeout`` for the first one)."""
        out: list[tuple[int, bytes]] = []
        for fd, _ev in self._polls.poll(max(0.0, timeout) * 1000):
            port = self._by_fd[fd]
            sock = self.wires.socks[port]
            while True:
                try:
                    data, addr = sock.recvfrom(65535)
                except BlockingIOError:
                    break
                if addr[2] != PACKET_OUTGOING:  # what the tests sent on this end
                    out.append((port, data))
        return out

    def _collect(self, expect: int | None, quiet: bool = True) -> list[tuple[int, bytes]]:
        """What comes out: until ``expect`` frames are there (None: the first), then until nothing
        more comes for the quiet time; returns at once on one frame more than expected. Without
        ``quiet``, returns as soon as ``expect`` frames are there (at once for 0)."""
        if not quiet and expect == 0:
            return self._receive(0)
        first = NEGATIVE if expect == 0 else FIRST if expect is None else POSITIVE
        deadline = time.monotonic() + first
        out: list[tuple[int, bytes]] = []
        while (left := deadline - time.monotonic()) > 0:
            got = self._receive(left)
            if not got:
                continue
            out += got
            if expect is not None and len(out) > expect:
                break  # one too many: the test fails whatever else comes
            if expect is None or len(out) == expect:
                if not quiet and expect is not None:
                    break
                deadline = time.monotonic() + QUIET
        return out

    def _stale(self) -> None:
        late = self._receive(0)
        if late:
            shown = ", ".join(f"port {p}: {d[:64].hex()}" for p, d in late)
            pytest.fail(f"BMv2 sent packets after the wait of the previous send ended: {shown}")

    def _send(self, port: int, data: bytes) -> None:
        sock = self.wires.socks.get(port)
        if sock is None:
            raise ValueError(f"port {port} has no wire (ports {list(self.wires.ports)})")
        self._last_send = time.monotonic()
        try:
            sock.send(data)
        except OSError as exc:
            raise ValueError(f"a {len(data)}-byte frame cannot be sent on a veth: {exc}") from exc

    def process(
        self, port: int, data: bytes, expect: int | None = None, quiet: bool = True
    ) -> list[tuple[int, bytes]]:
        """Send one frame on ``port``; the frames the switch sent in return. ``expect``: how many
        the test expects (None: unknown; waits for the first, then for quiet). ``quiet=False``
        (a long trace): no quiet time, and no check for frames of an earlier send: a late frame
        is then returned by a later send, where the caller's comparison fails on it."""
        if quiet:
            self._stale()
        self._send(port, data)
        return self._collect(expect, quiet)

    def process_stream(
        self, port: int, frames: Sequence[bytes], window: int = 32
    ) -> list[tuple[int, bytes]]:
        """Send ``frames`` one after another on ``port`` with at most ``window`` of them ahead of
        the outputs seen; every frame the switch sent meanwhile, each port's in its order (BMv2
        processes one port's input in order; across ports, emission order is not defined)."""
        self._stale()
        out: list[tuple[int, bytes]] = []
        for sent, data in enumerate(frames):
            while sent - len(out) >= window:
                got = self._receive(NEGATIVE)
                if not got:
                    break  # some frames made nothing: go on
                out += got
            self._send(port, data)
            out += self._receive(0)
        while got := self._receive(NEGATIVE):
            out += got
        return out

    def drain(self) -> None:
        """Forget whatever is waiting on the wires (a failed test's leftovers)."""
        while self._receive(QUIET):
            pass

    def assert_quiet(self) -> None:
        """Nothing came out after the last send's wait, watched until ``NEGATIVE`` after that
        send at least (the end of a test)."""
        time.sleep(max(0.0, self._last_send + NEGATIVE - time.monotonic()))
        self._stale()


def _bytes(value: int, width: int) -> bytes:
    if not 0 <= value < 1 << width:
        raise ValueError(f"{value} does not fit {width} bits")
    return value.to_bytes((width + 7) // 8, "big")


def _match_param(field_info: Any, value: Any) -> BmMatchParam:
    width = field_info.bitwidth
    kind = field_info.match_type
    from finsy.proto import p4i

    mf = p4i.MatchField
    if kind == mf.EXACT:
        return BmMatchParam(BmMatchParamType.EXACT, exact=BmMatchParamExact(_bytes(value, width)))
    if kind == mf.LPM:
        v, plen = value
        return BmMatchParam(BmMatchParamType.LPM, lpm=BmMatchParamLPM(_bytes(v, width), plen))
    if kind == mf.TERNARY:
        v, mask = value
        ternary = BmMatchParamTernary(_bytes(v, width), _bytes(mask, width))
        return BmMatchParam(BmMatchParamType.TERNARY, ternary=ternary)
    if kind == mf.RANGE:
        lo, hi = value
        rng = BmMatchParamRange(_bytes(lo, width), _bytes(hi, width))
        return BmMatchParam(BmMatchParamType.RANGE, range=rng)
    raise ValueError(f"{field_info.name}: match kind {kind} not handled")


def _port_map(ports: Sequence[int]) -> str:
    """simple_pre_lag's port map: a string of 0/1, port 0 the last character."""
    bits = ["0"] * (max(ports) + 1)
    for port in ports:
        bits[port] = "1"
    return "".join(reversed(bits))


@contextlib.contextmanager
def bmv2_target(json_path: Path, p4info: Any, log: Path) -> Iterator[BMv2Target]:
    """simple_switch_grpc on ``json_path`` with wires on PORTS; removed at the end."""
    wires = Wires(PORTS)
    try:
        wires.up()
        with simple_switch_grpc(json_path, wires.interfaces(), log) as (_proc, thrift, _grpc):
            target = BMv2Target(thrift, p4info, wires)
            try:
                target.drain()
                yield target
            finally:
                target.close()
    finally:
        wires.close()
