"""The TNA packet path of the software switch (one Tofino pipe).

Ingress parser (the packet behind 64 bits of ``ingress_intrinsic_metadata_t`` and
``PORT_METADATA_SIZE`` bits of port metadata) → ingress → ingress deparser → traffic manager
(``drop_ctl``, resubmit, mirror, ``ucast_egress_port``, ``mcast_grp_a``/``mcast_grp_b`` through the
PRE with each node's ``rid``, ``bypass_egress``) → per copy: egress parser (the bytes the ingress
deparser emitted behind ``egress_intrinsic_metadata_t``) → egress → egress deparser
(``drop_ctl``, mirror). User metadata does not cross from ingress to egress: what egress needs
travels as a header the ingress deparser emits (bridged metadata), as on Tofino.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from softswitch.engine.codegen import Exit
from softswitch.engine.objects import AssertFailed
from softswitch.engine.program import DROP_PORT, Device
from softswitch.errors import SwitchError
from softswitch.frontend.types import StructLikeT, bit_width_of

UCAST_UNSET = 1 << 9  # ucast_egress_port until ingress sets it: not presented to the TM
PORT_METADATA_BYTES = 8  # Tofino 1: PORT_METADATA_SIZE = 64 bits
NO_PORT_MD = bytes(PORT_METADATA_BYTES)
MAX_MIRROR_DEPTH = 4

# parser errors of the P4 program -> TNA's parser_err flags
PARSER_ERR_FLAGS = {
    "NoError": 0x0000,
    "NoMatch": 0x0001,
    "PacketTooShort": 0x0002,
    "HeaderTooShort": 0x0002,
    "StackOutOfBounds": 0x0004,
    "CounterRange": 0x0004,
    "ParserTimeout": 0x0008,
    "Timeout": 0x0008,
    "PhvOwner": 0x0080,
    "MultiWrite": 0x0100,
}


class _ParserStatus:
    """What the generated parsers write when they stop on an error (``_G.sm.parser_error``)."""

    __slots__ = ("parser_error",)

    def __init__(self) -> None:
        self.parser_error = 0


def field_shifts(t: StructLikeT) -> tuple[int, dict[str, int]]:
    """Byte length of a header and the left shift of each field in its big-endian integer."""
    total = t.bit_width()
    shifts: dict[str, int] = {}
    pos = total
    for name, ft in t.flat_fields():
        pos -= bit_width_of(ft) or 0
        shifts[name] = pos
    return total // 8, shifts


@dataclass
class TnaBlocks:
    """The translated TNA pipeline: one function per block and what to pass it."""

    funcs: dict[str, Any]  # role -> generated function
    args: dict[str, list[str]]  # role -> object keys after the packet argument, in order
    types: dict[str, StructLikeT]  # object key -> its type
    classes: dict[str, Any]  # object key -> generated class
    checksums: list[list[int]]  # per-packet state of every Checksum instance
    reads_parser_err: dict[str, bool]  # "ingress"/"egress": the program reads parser_err


class TnaPipeline:
    """Runs packets through a TNA program over a device's state (its PRE, mirroring sessions,
    digest queue)."""

    def __init__(self, device: Device, t: TnaBlocks) -> None:
        self.device = device
        p = device.program
        self.ctx = p.ctx
        objs: dict[str, Any] = {k: c() for k, c in t.classes.items()}
        args = {r: tuple(objs[k] for k in keys) for r, keys in t.args.items()}
        # reset before each gress (prebound: one call each per packet)
        self.ig_resets = [o._reset for k, o in objs.items() if k.startswith("ig_")]
        self.eg_resets = [o._reset for k, o in objs.items() if k.startswith("eg_")]
        self.ig_md, self.ig_prsr, self.ig_tm, self.ig_dprsr = (
            objs[k] for k in ("ig_intr_md", "ig_prsr", "ig_tm", "ig_dprsr")
        )
        self.eg_md, self.eg_prsr, self.eg_dprsr = (
            objs[k] for k in ("eg_intr_md", "eg_prsr", "eg_dprsr")
        )
        f = t.funcs
        self.ig_parser, self.ig_parser_args = f["ingress_parser"], args["ingress_parser"]
        self.ingress, self.ingress_args = f["ingress"], args["ingress"]
        self.ig_deparser, self.ig_deparser_args = f["ingress_deparser"], args["ingress_deparser"]
        self.eg_parser, self.eg_parser_args = f["egress_parser"], args["egress_parser"]
        self.egress, self.egress_args = f["egress"], args["egress"]
        self.eg_deparser, self.eg_deparser_args = f["egress_deparser"], args["egress_deparser"]
        self.checksums = t.checksums
        self.reads_parser_err = t.reads_parser_err
        names = {v: k for k, v in p.errors.items()}
        self.err_flags = {code: PARSER_ERR_FLAGS.get(name, 0x0001) for code, name in names.items()}
        self.status = _ParserStatus()
        self.port_metadata: dict[int, bytes] = {}
        self.start = time.monotonic()
        # the intrinsic metadata headers as the parsers find them in front of the packet
        self.ig_len, sh = field_shifts(t.types["ig_intr_md"])
        self.ig_shift = (sh["resubmit_flag"], sh["ingress_port"], sh["ingress_mac_tstamp"])
        self.eg_len, sh = field_shifts(t.types["eg_intr_md"])
        self.eg_shift = (
            sh["egress_port"],
            sh["egress_rid"],
            sh["egress_rid_first"],
            sh["pkt_length"],
        )

    def set_port_metadata(self, port: int, data: bytes) -> None:
        """The PORT_METADATA_SIZE bits the ingress parser finds after the intrinsic metadata of
        packets from ``port`` (zero unless set; BfRt's port metadata table on Tofino)."""
        if not 0 <= port < DROP_PORT or len(data) > PORT_METADATA_BYTES:
            raise SwitchError(
                f"port metadata: a port 0..{DROP_PORT - 1} and at most {PORT_METADATA_BYTES} bytes"
            )
        self.port_metadata[port] = data.ljust(PORT_METADATA_BYTES, b"\x00")

    # ------------------------------------------------------------------ ingress
    def process(self, port: int, data: bytes) -> list[tuple[int, bytes]]:
        out: list[tuple[int, bytes]] = []
        now = int((time.monotonic() - self.start) * 1e9) & ((1 << 48) - 1)
        resubmit = self._ingress(port, data, None, now, out)
        if resubmit is not None:
            # Tofino resubmits a packet once: the second pass cannot resubmit again
            self._ingress(port, data, resubmit, now, out)
        return out

    def _parser_error(self, prsr: Any, gress: str) -> bool:
        """After a parser stopped on an error: record TNA's flags; True when the packet is
        dropped (Tofino drops it unless the program reads ``parser_err``)."""
        prsr.parser_err = self.err_flags.get(self.status.parser_error, 0x0001)
        return not self.reads_parser_err[gress]

    def _ingress(
        self,
        port: int,
        data: bytes,
        resubmit: bytes | None,
        now: int,
        out: list[tuple[int, bytes]],
    ) -> bytes | None:
        ctx, st = self.ctx, self.status
        for reset in self.ig_resets:
            reset()
        for c in self.checksums:
            c[0] = 0
        flag = 0 if resubmit is None else 1
        md = self.ig_md
        md.resubmit_flag, md.ingress_port, md.ingress_mac_tstamp = flag, port, now
        s_flag, s_port, s_ts = self.ig_shift
        prefix = ((flag << s_flag) | (port << s_port) | (now << s_ts)).to_bytes(self.ig_len, "big")
        second = resubmit if resubmit is not None else self.port_metadata.get(port, NO_PORT_MD)
        self.ig_prsr.global_tstamp = now
        tm = self.ig_tm
        tm.ucast_egress_port = UCAST_UNSET
        ctx.plen = len(data)
        ctx.resubmit = ctx.clone = None
        if ctx.digests:
            ctx.digests = []
        ctx.sm = st
        st.parser_error = 0
        buf = prefix + second + data
        off = self.ig_parser(buf, *self.ig_parser_args)
        if st.parser_error and self._parser_error(self.ig_prsr, "ingress"):
            return None
        payload = buf[off:]
        ctx.payload = payload
        parts: list[bytes] = []
        try:
            try:  # noqa: SIM105 - cheaper than contextlib.suppress per packet
                self.ingress(*self.ingress_args)
            except Exit:
                pass
            self.ig_deparser(parts, *self.ig_deparser_args)
        except AssertFailed:
            return None
        if ctx.digests:
            self.device.deliver_digests(ctx.digests)
            ctx.digests = []
        drop_ctl = self.ig_dprsr.drop_ctl
        mirror, resub = ctx.clone, ctx.resubmit
        if mirror is not None:
            # ingress mirroring copies the packet as it arrived, behind the mirror header
            self._mirror(mirror, data, now, out, 0)
        if drop_ctl & 1:
            return None
        if resub is not None and resubmit is None:
            return bytes(resub[:PORT_METADATA_BYTES]).ljust(PORT_METADATA_BYTES, b"\x00")
        pkt = b"".join(parts) + payload
        uport = tm.ucast_egress_port
        if not (tm.mcast_grp_a or tm.mcast_grp_b):  # the common case: one unicast copy or none
            if uport < UCAST_UNSET:
                if tm.bypass_egress:
                    out.append((uport, pkt))
                else:
                    self._egress(uport, 0, 0, pkt, now, out, 0)
            return None
        copies: list[tuple[int, int, int]] = []
        if uport < UCAST_UNSET:
            copies.append((uport, 0, 0))
        for grp in (tm.mcast_grp_a, tm.mcast_grp_b):
            if grp:
                for i, (eport, rid) in enumerate(self.device.mc_groups.get(grp, [])):
                    copies.append((eport, rid, 1 if i == 0 else 0))
        if tm.bypass_egress:
            out.extend((eport, pkt) for eport, _rid, _first in copies)
            return None
        for eport, rid, first in copies:
            self._egress(eport, rid, first, pkt, now, out, 0)
        return None

    # ------------------------------------------------------------------ egress
    def _mirror(
        self,
        mirror: tuple[int, bytes],
        pkt: bytes,
        now: int,
        out: list[tuple[int, bytes]],
        depth: int,
    ) -> None:
        session, hdr = mirror
        if depth >= MAX_MIRROR_DEPTH:
            return
        for eport, rid in self.device.session_ports(session):
            self._egress(eport, rid, 0, hdr + pkt, now, out, depth + 1)

    def _egress(
        self,
        eport: int,
        rid: int,
        first: int,
        pkt: bytes,
        now: int,
        out: list[tuple[int, bytes]],
        depth: int,
    ) -> None:
        ctx, st = self.ctx, self.status
        for reset in self.eg_resets:
            reset()
        for c in self.checksums:
            c[0] = 0
        plen = len(pkt) & 0xFFFF
        md = self.eg_md
        md.egress_port, md.egress_rid, md.egress_rid_first, md.pkt_length = eport, rid, first, plen
        s_port, s_rid, s_first, s_len = self.eg_shift
        prefix = (
            (eport << s_port) | (rid << s_rid) | (first << s_first) | (plen << s_len)
        ).to_bytes(self.eg_len, "big")
        self.eg_prsr.global_tstamp = now
        ctx.plen = len(pkt)
        ctx.clone = None
        ctx.sm = st
        st.parser_error = 0
        buf = prefix + pkt
        off = self.eg_parser(buf, *self.eg_parser_args)
        if st.parser_error and self._parser_error(self.eg_prsr, "egress"):
            return
        payload = buf[off:]
        ctx.payload = payload
        parts: list[bytes] = []
        try:
            try:  # noqa: SIM105 - cheaper than contextlib.suppress per packet
                self.egress(*self.egress_args)
            except Exit:
                pass
            self.eg_deparser(parts, *self.eg_deparser_args)
        except AssertFailed:
            return
        data = b"".join(parts) + payload
        drop_ctl = self.eg_dprsr.drop_ctl
        mirror = ctx.clone
        if mirror is not None and not drop_ctl & 4:
            # egress mirroring copies the packet the egress deparser built
            self._mirror(mirror, data, now, out, depth)
        if not drop_ctl & 1:
            out.append((eport, data))


__all__ = ["TnaBlocks", "TnaPipeline"]
