"""Shared base of the data-plane tests (PTF rhythm): build a packet with Scapy, build the packet(s)
expected out of the switch, send, verify exactly those came out (and nothing else), then read the
counter or register that must have changed.

Expected packets are compared byte for byte: what the switch legitimately rewrites (MACs, TTL,
addresses, checksums) is fully specified by the program, so the expected packet is built with those
rewrites and Scapy recomputes the checksums; a wrong checksum is a failure, not a masked field.

Every test runs on each build of conftest.py: the in-process software switch on the program from
source, on p4c-bm2-ss's JSON, on the TNA build, and BMv2's ``simple_switch_grpc`` itself on
p4c-bm2-ss's JSON (bmv2_target.py: real ports on veth pairs, skipped with a message where BMv2 or
p4c-bm2-ss is not on PATH). The program is built once per session with small ``-D`` sizes so that
every test runs fast, and each test starts from empty tables, zeroed registers and counters.

Test rack (one switch, servers on ports 1-4, a client on port 8):

    s0 10.0.0.1 port 1   s1 10.0.0.2 port 2   s2 10.0.0.3 port 3   s3 10.0.0.4 port 4
    c0 10.0.1.1 port 8   switch 10.0.0.254 / 02:00:00:00:00:fe (not routed: CONFIRM/SYNC target)
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from functools import cache
from typing import Any, Protocol

import pytest
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Packet, Raw

from kvswitch.bench.kernel import hashpipe_width
from kvswitch.paths import p4src_dir
from kvswitch.protocol import Message, pad_key

# Small build: K = 64 hot slots, M = 8 servers, d = 4 HashPipe stages of w = 16 slots, and
# valid_ver's 512 cells in four parts of 128 (p4src/shared/sizes.p4, as K = 10 000 x M = 32 has
# three of 2^17): every test reaches them through the one index space the controller uses.
HOT_KEYS = 64
MAX_SERVERS = 8
HP_STAGES = 4
HP_SLOTS = hashpipe_width(HOT_KEYS, HP_STAGES)
VALID_VER_PART_BITS = 7
DEFINES = {
    "HOT_KEYS": str(HOT_KEYS),
    "MAX_SERVERS": str(MAX_SERVERS),
    "HP_STAGES": str(HP_STAGES),
    "VALID_VER_PART_BITS": str(VALID_VER_PART_BITS),
}

SWITCH_MAC = "02:00:00:00:00:fe"
SWITCH_IP = "10.0.0.254"
CLIENT_PORT = 8
EPOCH = 7  # the switch epoch every test rack starts with


def _protocol_p4() -> str:
    return (p4src_dir() / "shared" / "protocol.p4").read_text()


def _p4_enum(name: str) -> dict[str, int]:
    match = re.search(r"enum\s+bit<8>\s+" + name + r"\s*\{(.*?)\}", _protocol_p4(), re.S)
    assert match, f"enum {name} not found in protocol.p4"
    return {k: int(v, 0) for k, v in re.findall(r"(\w+)\s*=\s*(\w+)", match.group(1))}


def _p4_const(name: str) -> int:
    match = re.search(r"const\s+bit<\d+>\s+" + name + r"\s*=\s*(\w+)\s*;", _protocol_p4())
    assert match, f"const {name} not found in protocol.p4"
    return int(match.group(1), 0)


@dataclass(frozen=True)
class P4Protocol:
    """The protocol values as the P4 program defines them (one place: p4src/shared/protocol.p4)."""

    op: type[IntEnum]
    status: type[IntEnum]
    kvs_port: int
    f_tcp: int
    f_settled: int
    f_redirect: int
    hp_seeds: tuple[int, ...]
    hp_tag_seed: int


@cache
def proto() -> P4Protocol:
    return P4Protocol(
        op=IntEnum("KvsOp", _p4_enum("KvsOp")),  # type: ignore[misc]
        status=IntEnum("KvsStatus", _p4_enum("KvsStatus")),  # type: ignore[misc]
        kvs_port=_p4_const("KVS_PORT"),
        f_tcp=_p4_const("KVS_F_TCP"),
        f_settled=_p4_const("KVS_F_SETTLED"),
        f_redirect=_p4_const("KVS_F_REDIRECT"),
        hp_seeds=tuple(_p4_const(f"HP_SEED_{s}") for s in range(8)),
        hp_tag_seed=_p4_const("HP_TAG_SEED"),
    )


@dataclass(frozen=True)
class Host:
    name: str
    ip: str
    mac: str
    port: int


SERVERS = [Host(f"s{i}", f"10.0.0.{i + 1}", f"02:00:00:00:00:{i + 1:02x}", i + 1) for i in range(4)]
CLIENT = Host("c0", "10.0.1.1", "02:00:00:00:01:01", CLIENT_PORT)


def ip_int(ip: str) -> int:
    a, b, c, d = (int(x) for x in ip.split("."))
    return a << 24 | b << 16 | c << 8 | d


def mac_int(mac: str) -> int:
    return int(mac.replace(":", ""), 16)


def key16(key: bytes | str) -> bytes:
    return pad_key(key)


def kvs(
    op: int,
    key: bytes | str,
    value: bytes = b"",
    *,
    status: int = 0,
    vlen: int | None = None,
    cid: int = 0x1234,
    seq: int = 1,
    epoch: int = 0,
    flags: int = 0,
    ver: int = 0,
) -> bytes:
    """A KVSwitch message (header + value); ``vlen`` overrides the length field (malformed tests)."""
    wire = Message(op, pad_key(key), value, status, cid, seq, epoch, flags, ver).encode()
    if vlen is None:
        return wire
    return wire[:2] + vlen.to_bytes(2, "big") + wire[4:]


def udp_packet(
    src: Host,
    dst_ip: str,
    payload: bytes,
    *,
    sport: int = 40000,
    dport: int | None = None,
    ttl: int = 64,
) -> Packet:
    return (
        Ether(src=src.mac, dst=SWITCH_MAC)
        / IP(src=src.ip, dst=dst_ip, ttl=ttl)
        / UDP(sport=sport, dport=proto().kvs_port if dport is None else dport)
        / Raw(payload)
    )


def tcp_packet(
    src: Host,
    dst_ip: str,
    payload: bytes,
    *,
    sport: int = 40001,
    dport: int | None = None,
    flags: str = "PA",
    options: Sequence[tuple[str, Any]] = (),
) -> Packet:
    pkt = (
        Ether(src=src.mac, dst=SWITCH_MAC)
        / IP(src=src.ip, dst=dst_ip)
        / TCP(
            sport=sport,
            dport=proto().kvs_port if dport is None else dport,
            flags=flags,
            seq=1000,
            ack=2000,
            options=list(options),
        )
    )
    return pkt / Raw(payload) if payload else pkt


def fresh(pkt: Packet) -> Packet:
    """A copy with IPv4/UDP/TCP checksums and lengths left for Scapy to recompute."""
    out = pkt.copy()
    for layer, fields in ((IP, ("chksum", "len")), (UDP, ("chksum", "len")), (TCP, ("chksum",))):
        if layer in out:
            for name in fields:
                setattr(out[layer], name, None)
    return Ether(bytes(out))


def routed(pkt: Packet, to: Host, *, redirect: bool = False) -> Packet:
    """What plain forwarding makes of ``pkt`` towards ``to``: MACs rewritten, TTL - 1; with
    ``redirect``, also the destination address and the KVSwitch flag F_REDIRECT (a Get sent to a
    replica, rule 4)."""
    out = pkt.copy()
    out[Ether].src = SWITCH_MAC
    out[Ether].dst = to.mac
    out[IP].ttl -= 1
    if redirect:
        out[IP].dst = to.ip
        msg = bytearray(bytes(out[UDP].payload))
        flags = int.from_bytes(msg[14:16], "big") | _p4_const("KVS_F_REDIRECT")
        msg[14:16] = flags.to_bytes(2, "big")
        out = with_kvs(out, bytes(msg))
    return fresh(out)


def with_kvs(pkt: Packet, message: bytes) -> Packet:
    """``pkt`` with its L4 payload replaced by ``message``."""
    out = pkt.copy()
    l4 = out[UDP] if UDP in out else out[TCP]
    l4.remove_payload()
    l4.add_payload(Raw(message))
    return fresh(out)


class SwitchTarget(Protocol):
    """The slice of the software switch's in-process API the tests use."""

    p4info: Any

    def process(self, port: int, data: bytes) -> list[tuple[int, bytes]]: ...
    def table_add(
        self, table: str, match: dict[str, Any], action: str, params: dict[str, int], **kw: Any
    ) -> int: ...
    def table_clear(self, table: str) -> None: ...
    def table_set_default(
        self, table: str, action: str, params: dict[str, int] | None = None
    ) -> None: ...
    def mc_group_set(self, group: int, replicas: list[tuple[int, int]]) -> None: ...
    def mc_group_delete(self, group: int) -> None: ...
    def register_read(self, name: str, index: int | None = None) -> Any: ...
    def register_write(self, name: str, index: int, value: int) -> None: ...
    def register_reset(self, name: str) -> None: ...
    def counter_reset(self, name: str) -> None: ...
    def counter_read(self, name: str, index: int) -> tuple[int, int]: ...
    def direct_counter_read(self, table: str, handle: int) -> tuple[int, int]: ...
    def direct_counter_reset(self, table: str) -> None: ...


@dataclass
class Dataplane:
    """One test's view of the switch: the rack's static entries plus send/verify/read helpers."""

    sw: SwitchTarget
    groups: set[int] = field(default_factory=set)
    handles: dict[tuple[str, bytes], int] = field(default_factory=dict)

    @property
    def arch(self) -> str:
        """The build under test: v1model or tna (P4Info's pkg_info.arch)."""
        return str(self.sw.p4info.pkg_info.arch)

    # -- state ---------------------------------------------------------------------------------
    def names(self, kind: str) -> list[str]:
        return [entity.preamble.name for entity in getattr(self.sw.p4info, kind)]

    def _named(self, kind: str, suffix: str) -> str:
        found = [n for n in self.names(kind) if n == suffix or n.endswith("." + suffix)]
        assert len(found) == 1, f"{kind} {suffix!r}: {found}"
        return found[0]

    def register(self, suffix: str) -> str:
        """The register whose fully qualified name ends with ``suffix`` (one only)."""
        return self._named("registers", suffix)

    def counter(self, suffix: str) -> str:
        """The indexed counter whose fully qualified name ends with ``suffix`` (one only)."""
        return self._named("counters", suffix)

    def reset(self) -> None:
        for table in self.sw.p4info.tables:
            if not table.is_const_table:  # a const table's entries are the program's
                self.sw.table_clear(table.preamble.name)
        for reg in self.names("registers"):
            self.sw.register_reset(reg)
        for ctr in self.names("counters"):
            self.sw.counter_reset(ctr)
        for group in self.groups:
            self.sw.mc_group_delete(group)
        self.groups.clear()
        self.handles.clear()

    def snapshot(self) -> dict[str, list[int]]:
        """Every register's contents, for "nothing changed" checks."""
        return {reg: list(self.sw.register_read(reg)) for reg in self.names("registers")}

    def reg(self, name: str, index: int = 0) -> int:
        """Cell ``index`` of register ``name``; valid_ver's in the controller's index space."""
        if name == "valid_ver":
            return int(self.sw.register_read(*self.valid_ver_cell(index)))
        return int(self.sw.register_read(self.register(name), index))

    def valid_ver_cell(self, index: int) -> tuple[str, int]:
        """The register and cell that hold valid_ver's cell ``index``: cell ``index mod 2^b`` of
        part ``index >> b`` (``valid_ver``, ``valid_ver_1``, ...)."""
        part, cell = divmod(index, 1 << VALID_VER_PART_BITS)
        return self.register(f"valid_ver_{part}" if part else "valid_ver"), cell

    def set_valid_ver(self, index: int, ver: int) -> None:
        self.sw.register_write(*self.valid_ver_cell(index), ver)

    # -- entries -------------------------------------------------------------------------------
    def setup_rack(self) -> None:
        for host in [*SERVERS, CLIENT]:
            self.sw.table_add(
                "ipv4_lpm",
                {"dst_addr": (ip_int(host.ip), 32)},
                "set_next_hop",
                {"port": host.port, "dmac": mac_int(host.mac), "smac": mac_int(SWITCH_MAC)},
            )
        for host in [*SERVERS, CLIENT]:
            self.sw.table_add(
                "HostportTable",
                {"src_addr": (ip_int(host.ip), 32)},
                "set_source",
                {"port": host.port, "server": int(host in SERVERS)},
            )
        for offset, server in enumerate(SERVERS):
            self.sw.table_add(
                "ServeroffsetTable",
                {"server_ip": ip_int(server.ip)},
                "set_server_offset",
                {"offset": offset, "port": server.port},
            )
            self.sw.table_add(
                "PorttoserverTable",
                {"port": server.port},
                "set_replica",
                {"ip": ip_int(server.ip), "mac": mac_int(server.mac)},
            )
            self.handles[("LoadcountTable", server.ip.encode())] = self.sw.table_add(
                "LoadcountTable", {"dst_addr": ip_int(server.ip)}, "count_load", {}
            )
            self.handles[("ReplycountTable", server.ip.encode())] = self.sw.table_add(
                "ReplycountTable", {"src_addr": ip_int(server.ip)}, "count_reply", {}
            )
        self.sw.register_write(self.register("epoch"), 0, EPOCH)

    def make_hot(
        self, key: bytes | str, slot: int, holders: Sequence[Host], floor: int = 0
    ) -> None:
        """Install a hot key the way the controller does: ``holders[0]`` is the origin."""
        k = int.from_bytes(key16(key), "big")
        base = slot * MAX_SERVERS
        self.handles[("HotkeyTable", key16(key))] = self.sw.table_add(
            "HotkeyTable", {"key": k}, "set_hot", {"slot": slot, "n": len(holders)}
        )
        self.sw.table_add(
            "KeyindexTable",
            {"key": k},
            "set_key_index",
            {"slot": slot, "base": base, "floor": floor},
        )
        for ordinal, server in enumerate(holders):
            self.sw.table_add(
                "ServermapTable",
                {"slot": slot, "ordinal": ordinal},
                "set_server",
                {
                    "vidx": base + SERVERS.index(server),
                    "ip": ip_int(server.ip),
                    "mac": mac_int(server.mac),
                    "port": server.port,
                },
            )
        if len(holders) > 1:
            group = slot + 1
            self.sw.table_add("MultigroupTable", {"key": k}, "set_mcast_group", {"group": group})
            self.sw.mc_group_set(group, [(s.port, rid) for rid, s in enumerate(holders)])
            self.groups.add(group)

    def make_valid(self, slot: int, holders: Sequence[Host], ver: int) -> None:
        """Registers as after a write of version ``ver`` acknowledged by all ``holders``."""
        base = slot * MAX_SERVERS
        self.sw.register_write(self.register("global_ver"), 0, ver)
        self.sw.register_write(self.register("slot_ver"), slot, ver)
        self.sw.register_write(self.register("origin_ver"), slot, ver)
        for server in holders:
            self.set_valid_ver(base + SERVERS.index(server), ver)

    def hot_count(self, key: bytes | str) -> tuple[int, int]:
        return self.sw.direct_counter_read("HotkeyTable", self.handles[("HotkeyTable", key16(key))])

    def load_count(self, server: Host) -> tuple[int, int]:
        handle = self.handles[("LoadcountTable", server.ip.encode())]
        return self.sw.direct_counter_read("LoadcountTable", handle)

    def reply_count(self, server: Host) -> tuple[int, int]:
        handle = self.handles[("ReplycountTable", server.ip.encode())]
        return self.sw.direct_counter_read("ReplycountTable", handle)

    def set_down(self, server: Host) -> None:
        """The controller declared ``server`` dead (liveness.p4's DownTable)."""
        self.sw.table_add("DownTable", {"dst_addr": ip_int(server.ip)}, "set_down", {})

    # -- packets -------------------------------------------------------------------------------
    @property
    def wired(self) -> bool:
        """The switch is a process behind real ports (BMv2, bmv2_target.py): what comes out is
        collected within bounded waits, which the expected packet count shortens."""
        return bool(getattr(self.sw, "wired", False))

    def send(self, port: int, pkt: Packet | bytes) -> list[tuple[int, bytes]]:
        return self.sw.process(port, bytes(pkt))

    def send_expect(
        self, port: int, pkt: Packet | bytes, expected: Sequence[tuple[int, Packet | bytes]]
    ) -> list[tuple[int, bytes]]:
        """Send, then check that exactly ``expected`` came out (any order across ports)."""
        if self.wired:
            out = self.sw.process(port, bytes(pkt), expect=len(expected))  # type: ignore[call-arg]
        else:
            out = self.send(port, pkt)
        verify_packets(out, expected)
        return out

    def send_stream(self, port: int, frames: Sequence[bytes]) -> list[tuple[int, bytes]]:
        """Send ``frames`` on ``port`` one after another; everything that came out. Each port's
        packets are in the order of the frames that made them; across ports the order is the
        software switch's but undefined on BMv2 (compare per port)."""
        if self.wired:
            return self.sw.process_stream(port, frames)  # type: ignore[attr-defined]
        return [sent for data in frames for sent in self.sw.process(port, data)]


def _show(data: bytes) -> str:
    return Ether(data).show2(dump=True)


def verify_packets(
    out: list[tuple[int, bytes]], expected: Sequence[tuple[int, Packet | bytes]]
) -> None:
    left = list(out)
    for port, want in expected:
        for i, (got_port, data) in enumerate(left):
            if got_port == port and data == bytes(want):
                del left[i]
                break
        else:
            got = "\n".join(f"port {p}:\n{_show(d)}" for p, d in out) or "nothing"
            pytest.fail(f"expected on port {port}:\n{_show(bytes(want))}\ngot:\n{got}")
    if left:
        extra = "\n".join(f"port {p}:\n{_show(d)}" for p, d in left)
        pytest.fail(f"unexpected packets:\n{extra}")
