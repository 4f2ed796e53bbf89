"""A fabric's leaf under test (p4src/kvswitch_leaf.p4, docs/fabric.md "Leaf program"): base.py's
test rack, with two spines above it on ports 5 and 6 (UplinkTable), a route to another rack
through the first, and FabricHotTable's default set to NoAction (the fabric controller installed
the steering table) unless a test holds it.

    spine 0: port 5, 02:00:00:00:0f:05    spine 1: port 6, 02:00:00:00:0f:06
    rack 2 (10.2.0.0/16) through spine 0; a host there: 10.2.0.1 (REMOTE)
"""

from __future__ import annotations

from dataclasses import dataclass

from kvswitch.controller import names

from .base import SWITCH_MAC, Dataplane, Host, ip_int, key16, mac_int

SPINE0 = Host("spine0", "10.255.0.1", "02:00:00:00:0f:05", 5)
SPINE1 = Host("spine1", "10.255.0.2", "02:00:00:00:0f:06", 6)
# a host of rack 2 as this leaf sees it: behind spine 0
REMOTE = Host("remote", "10.2.0.1", SPINE0.mac, SPINE0.port)


@dataclass
class LeafPlane(Dataplane):
    """base.Dataplane on a fabric's leaf: the rack's entries, the uplinks, the route to rack 2."""

    def setup_rack(self) -> None:
        super().setup_rack()
        for spine in (SPINE0, SPINE1):
            self.sw.table_add(
                names.UPLINK_TABLE, {names.MATCH_PORT: spine.port}, names.ACT_SET_UPLINK, {}
            )
        self.sw.table_add(
            "ipv4_lpm",
            {"dst_addr": (ip_int("10.2.0.0"), 16)},
            "set_next_hop",
            {"port": SPINE0.port, "dmac": mac_int(SPINE0.mac), "smac": mac_int(SWITCH_MAC)},
        )
        self.ready()

    def ready(self, installed: bool = True) -> None:
        """The steering table installed (its default NoAction), or not yet (``hold``)."""
        action = names.ACT_PASS if installed else names.ACT_HOLD
        self.sw.table_set_default(names.FABRIC_HOT_TABLE, action, {})

    def make_fabric_hot(self, key: bytes | str, spine: Host) -> None:
        k = int.from_bytes(key16(key), "big")
        self.sw.table_add(
            names.FABRIC_HOT_TABLE,
            {names.MATCH_KEY: k},
            names.ACT_SET_SPINE,
            {names.PARAM_PORT: spine.port, names.PARAM_DMAC: mac_int(spine.mac)},
        )
