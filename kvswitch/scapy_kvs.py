"""A Scapy layer for the KVSwitch header, so that captures and test packets decode.

Nothing is registered at import time: call :func:`bind` once to make Scapy dissect UDP and TCP
payloads on port 8900 (source or destination) as :class:`KVS`. The value is the payload of the
layer (``Raw``), ``vlen`` is computed on build when left unset, and the header's own fields follow
``docs/protocol.md`` (the constants come from :mod:`kvswitch.protocol`).
"""

from __future__ import annotations

from scapy.fields import (
    ByteEnumField,
    FlagsField,
    IntField,
    ShortField,
    StrFixedLenField,
)
from scapy.layers.inet import TCP, UDP
from scapy.packet import Packet, Raw, bind_layers

from kvswitch import protocol as p


class KVS(Packet):
    """The 36-byte KVSwitch header; the value follows as payload (``vlen`` bytes)."""

    name = "KVSwitch"
    fields_desc = [
        ByteEnumField("op", p.Op.GET, {int(o): o.name for o in p.Op}),
        ByteEnumField("status", p.Status.OK, {int(s): s.name for s in p.Status}),
        ShortField("vlen", None),
        IntField("cid", 0),
        IntField("seq", 0),
        ShortField("epoch", 0),
        FlagsField("flags", 0, 16, ["F_TCP", "F_DUP", "F_REDIRECT", "F_SETTLED"]),
        IntField("ver", 0),
        StrFixedLenField("key", b"\0" * p.KEY_LEN, length=p.KEY_LEN),
    ]

    def post_build(self, pkt: bytes, pay: bytes) -> bytes:
        if self.vlen is None:
            pkt = pkt[:2] + len(pay).to_bytes(2, "big") + pkt[4:]
        return pkt + pay

    def extract_padding(self, s: bytes) -> tuple[bytes, bytes]:
        # The value is this message's payload; whatever follows 36 + vlen is padding.
        vlen = self.vlen or 0
        return s[:vlen], s[vlen:]

    def mysummary(self) -> str:
        return self.sprintf("KVS %op% %status% key=%key% cid=%cid% seq=%seq% ver=%epoch%.%ver%")


def bind(port: int = p.KVS_PORT) -> None:
    """Dissect UDP and TCP ``port`` (8900, either direction) as :class:`KVS`, value as Raw.

    Another port is for test setups that cannot use 8900 (several agents on one host)."""
    for l4 in (UDP, TCP):
        bind_layers(l4, KVS, dport=port)
        bind_layers(l4, KVS, sport=port)
    bind_layers(KVS, Raw)
