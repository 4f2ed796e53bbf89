"""The spine's test fabric (p4src/kvswitch_spine.p4, docs/fabric.md "Spine program"): the spine
with three leaves below it, as the spine's tables see them. A host is named by its address and,
for the spine, by the port and MAC of its leaf (every packet from rack r arrives on port r from
leaf r's MAC; every packet to rack r leaves on port r to that MAC), so base.py's packet helpers
build the spine's packets as they build a rack switch's.

    rack 1 (leaf port 1, 02:00:00:00:01:fe): a 10.1.0.1 (server 0), b 10.1.0.2 (server 1)
    rack 2 (leaf port 2, 02:00:00:00:02:fe): c 10.2.0.1 (server 2), d 10.2.0.2 (server 3)
    rack 3 (leaf port 3, 02:00:00:00:03:fe): e 10.3.0.1 (server 4), client 10.3.1.1
    spine: 02:00:00:00:00:fe (base.SWITCH_MAC)

The entries are the ones a fabric controller writes (docs/fabric.md "Spine program"): routes and
HostportTable per rack subnet, a /32 per server; RidtoserverTable per server; per hot key its
HotkeyTable, KeyindexTable, ServermapTable and ServeroffsetTable (slot, holder) entries and its
group (origin's leaf port with rid 0, each replica's leaf port with rid = server + 1); and
SpineHoldTable's default set to NoAction (the controller reinstalled the spine) unless a test
holds it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from kvswitch.controller import names

from .base import (
    EPOCH,
    SWITCH_MAC,
    VALID_VER_PART_BITS,
    Dataplane,
    Host,
    ip_int,
    key16,
    mac_int,
)

# Small spine build: K = 64 slots, 16 servers in the fabric, at most 8 holders per key, and a
# valid_ver pool of 256 cells, half of K rows of 8: slot 32 and above have no row at slot x 8, a
# key there needs a row from the pool (docs/fabric.md "Holders per key"). valid_ver in parts of
# 128 cells as the rack's test build (base.VALID_VER_PART_BITS): the pool is two registers.
HOT_KEYS = 64
MAX_SERVERS = 16
MAX_HOLDERS = 8
HOLDER_CELLS = 256
SPINE_DEFINES = {
    "HOT_KEYS": str(HOT_KEYS),
    "MAX_SERVERS": str(MAX_SERVERS),
    "MAX_HOLDERS": str(MAX_HOLDERS),
    "HOLDER_CELLS": str(HOLDER_CELLS),
    "VALID_VER_PART_BITS": str(VALID_VER_PART_BITS),
}


def valid_ver_parts() -> list[int]:
    """The cells of each ``valid_ver`` register of this build's pool (sizes.p4's parts)."""
    part = 1 << VALID_VER_PART_BITS
    return [min(part, HOLDER_CELLS - i) for i in range(0, HOLDER_CELLS, part)]


# a spine's names beyond the rack switch's (docs/protocol.md F7)
PARAM_ROTATE = names.PARAM_ROTATE
REG_DONE_BY = names.REG_DONE_BY
REG_ROTATED = names.REG_ROTATED

RACKS = (1, 2, 3)  # rack r hangs off the spine's port r


def leaf_mac(rack: int) -> str:
    return f"02:00:00:00:{rack:02x}:fe"


def _host(name: str, rack: int, ip: str) -> Host:
    return Host(name, ip, leaf_mac(rack), rack)


A = _host("a", 1, "10.1.0.1")
B = _host("b", 1, "10.1.0.2")
C = _host("c", 2, "10.2.0.1")
D = _host("d", 2, "10.2.0.2")
E = _host("e", 3, "10.3.0.1")
FABRIC_SERVERS = (A, B, C, D, E)  # server number = index
FAR_CLIENT = _host("client", 3, "10.3.1.1")


def server_id(host: Host) -> int:
    return FABRIC_SERVERS.index(host)


@dataclass
class SpinePlane(Dataplane):
    """base.Dataplane on the spine: its static entries (:meth:`setup_rack`) and hot keys."""

    holders: dict[int, list[Host]] = field(default_factory=dict)
    bases: dict[int, int] = field(default_factory=dict)  # each slot's valid_ver row

    def reset(self) -> None:
        super().reset()
        self.holders.clear()
        self.bases.clear()

    def setup_rack(self) -> None:
        for rack in RACKS:
            subnet = (ip_int(f"10.{rack}.0.0"), 16)
            self.sw.table_add(
                "ipv4_lpm",
                {"dst_addr": subnet},
                "set_next_hop",
                {"port": rack, "dmac": mac_int(leaf_mac(rack)), "smac": mac_int(SWITCH_MAC)},
            )
            # rule S at the spine (F5): a rack's addresses arrive from its leaf's port only
            self.sw.table_add(
                names.HOSTPORT_TABLE,
                {names.MATCH_SRC: subnet},
                names.ACT_SET_SOURCE,
                {names.PARAM_PORT: rack, names.PARAM_SERVER: 0},
            )
        for number, server in enumerate(FABRIC_SERVERS):
            ip = ip_int(server.ip)
            self.sw.table_add(
                names.HOSTPORT_TABLE,
                {names.MATCH_SRC: (ip, 32)},
                names.ACT_SET_SOURCE,
                {names.PARAM_PORT: server.port, names.PARAM_SERVER: 1},
            )
            self.sw.table_add(
                names.RIDTOSERVER_TABLE,
                {names.MATCH_RID: names.spine_rid(number)},
                names.ACT_SET_REPLICA,
                {names.PARAM_IP: ip, names.PARAM_MAC: mac_int(server.mac)},
            )
            self.handles[(names.LOADCOUNT_TABLE, server.ip.encode())] = self.sw.table_add(
                names.LOADCOUNT_TABLE, {names.MATCH_DST: ip}, names.ACT_COUNT_LOAD, {}
            )
            self.handles[(names.REPLYCOUNT_TABLE, server.ip.encode())] = self.sw.table_add(
                names.REPLYCOUNT_TABLE, {names.MATCH_SRC: ip}, names.ACT_COUNT_REPLY, {}
            )
        self.sw.register_write(self.register(names.REG_EPOCH), 0, EPOCH)
        self.ready()

    def ready(self, installed: bool = True) -> None:
        """The spine reinstalled (SpineHoldTable's default NoAction), or not yet (``hold``: what
        a restarted spine starts with; spine_hold.p4)."""
        action = names.ACT_PASS if installed else names.ACT_HOLD
        self.sw.table_set_default(names.SPINE_HOLD_TABLE, action, {})

    def make_hot(
        self,
        key: bytes | str,
        slot: int,
        holders: Sequence[Host],
        floor: int = 0,
        *,
        rotate: bool = False,
        base: int | None = None,
    ) -> None:
        """A fabric-hot key as the fabric controller installs it: ``holders[0]`` the origin;
        valid_ver row at ``base`` (default ``slot * MAX_HOLDERS``), one cell per ordinal;
        ``rotate``: its writes rotate over its holders (docs/protocol.md F7)."""
        k = int.from_bytes(key16(key), "big")
        base = slot * MAX_HOLDERS if base is None else base
        self.holders[slot] = list(holders)
        self.bases[slot] = base
        self.handles[(names.HOTKEY_TABLE, key16(key))] = self.sw.table_add(
            names.HOTKEY_TABLE,
            {names.MATCH_KEY: k},
            names.ACT_SET_HOT,
            {names.PARAM_SLOT: slot, names.PARAM_HOLDERS: len(holders), PARAM_ROTATE: int(rotate)},
        )
        self.sw.table_add(
            names.KEYINDEX_TABLE,
            {names.MATCH_KEY: k},
            names.ACT_SET_BASE,
            {names.PARAM_SLOT: slot, names.PARAM_BASE: base, names.PARAM_FLOOR: floor},
        )
        for ordinal, server in enumerate(holders):
            self.sw.table_add(
                names.SERVERMAP_TABLE,
                {names.MATCH_SLOT: slot, names.MATCH_ORDINAL: ordinal},
                names.ACT_SET_SERVER,
                {
                    names.PARAM_VIDX: base + ordinal,
                    names.PARAM_IP: ip_int(server.ip),
                    names.PARAM_MAC: mac_int(server.mac),
                    names.PARAM_PORT: server.port,
                },
            )
            self.sw.table_add(
                names.SERVEROFFSET_TABLE,
                {names.MATCH_SLOT: slot, names.MATCH_SERVER_IP: ip_int(server.ip)},
                names.ACT_SET_OFFSET,
                {names.PARAM_OFFSET: ordinal, names.PARAM_PORT: server.port},
            )
        self.set_flag(slot, rotate)
        if len(holders) > 1:
            group = names.multicast_group(slot)
            self.sw.table_add(
                names.MULTIGROUP_TABLE,
                {names.MATCH_KEY: k},
                names.ACT_SET_GROUP,
                {names.PARAM_GROUP: group},
            )
            members = [(holders[0].port, 0)]
            members += [(s.port, names.spine_rid(server_id(s))) for s in holders[1:]]
            self.sw.mc_group_set(group, members)
            self.groups.add(group)

    def set_flag(self, slot: int, rotate: bool) -> None:
        """The slot's ``rotated`` cell set to its key's flag, as the fabric controller does right
        after each HotkeyTable entry it adds or modifies (fabric_ops.spine_diff)."""
        self.sw.register_write(self.register(REG_ROTATED), slot, int(rotate))

    def make_valid(self, slot: int, holders: Sequence[Host], ver: int) -> None:
        """Registers as after a write of version ``ver`` that ``holders`` of the slot confirmed."""
        base = self.bases[slot]
        self.sw.register_write(self.register(names.REG_GLOBAL_VER), 0, ver)
        self.sw.register_write(self.register(names.REG_SLOT_VER), slot, ver)
        self.sw.register_write(self.register(names.REG_ORIGIN_VER), slot, ver)
        for server in holders:
            cell = base + self.holders[slot].index(server)
            self.set_valid_ver(cell, ver)
