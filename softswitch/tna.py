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
from typing import TYPE_CHECKING, Any

from softswitch.engine.codegen import Exit
from softswitch.engine.runtime import AssertFailed

if TYPE_CHECKING:
    from softswitch.switch import Switch

UCAST_UNSET = 1 << 9  # ucast_egress_port until ingress sets it: not presented to the TM
PORT_METADATA_BYTES = 8  # Tofino 1: PORT_METADATA_SIZE = 64 bits
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


class TnaPipeline:
    """Runs packets through a TNA program; owned by a ``Switch`` (its lock, PRE, mirror sessions,
    digests)."""

    def __init__(self, sw: Switch) -> None:
        self.sw = sw
        p = sw.program
        t = p.tna
        self.ctx = p.ctx
        self.f = t.funcs
        self.objs: dict[str, Any] = {k: c() for k, c in t.classes.items()}
        self.args = {r: tuple(self.objs[k] for k in keys) for r, keys in t.args.items()}
        self.ig_objs = [o for k, o in self.objs.items() if k.startswith("ig_")]
        self.eg_objs = [o for k, o in self.objs.items() if k.startswith("eg_")]
        self.checksums = t.checksums
        self.reads_parser_err = t.reads_parser_err
        names = {v: k for k, v in p.errors.items()}
        self.err_flags = {code: PARSER_ERR_FLAGS.get(name, 0x0001) for code, name in names.items()}
        self.status = _ParserStatus()
        self.port_metadata: dict[int, bytes] = {}
        self.start = time.monotonic()

    def set_port_metadata(self, port: int, data: bytes) -> None:
        """The PORT_METADATA_SIZE bits the ingress parser finds after the intrinsic metadata of
        packets from ``port`` (zero unless set; BfRt's port metadata table on Tofino)."""
        if len(data) > PORT_METADATA_BYTES:
            raise ValueError(f"port metadata is {PORT_METADATA_BYTES} bytes on Tofino 1")
        self.port_metadata[port] = data.ljust(PORT_METADATA_BYTES, b"\x00")

    def now_ns(self) -> int:
        return int((time.monotonic() - self.start) * 1e9) & ((1 << 48) - 1)

    # ------------------------------------------------------------------ ingress
    def process(self, port: int, data: bytes) -> list[tuple[int, bytes]]:
        out: list[tuple[int, bytes]] = []
        resubmit = self._ingress(port, data, None, out)
        if resubmit is not None:
            # Tofino resubmits a packet once: the second pass cannot resubmit again
            self._ingress(port, data, resubmit, out)
        return out

    def _parse(self, role: str, buf: bytes, gress: str) -> int | None:
        """Run a parser; None when the packet is dropped for a parser error (Tofino drops it
        unless the program reads ``parser_err``)."""
        st = self.status
        st.parser_error = 0
        for c in self.checksums:
            c[0] = 0
        self.ctx.sm = st
        off: int = self.f[role](buf, *self.args[role])
        if st.parser_error:
            flags = self.err_flags.get(st.parser_error, 0x0001)
            self.objs["ig_prsr" if gress == "ingress" else "eg_prsr"].parser_err = flags
            if not self.reads_parser_err[gress]:
                return None
        return off

    def _ingress(
        self, port: int, data: bytes, resubmit: bytes | None, out: list[tuple[int, bytes]]
    ) -> bytes | None:
        o, ctx, f = self.objs, self.ctx, self.f
        for obj in self.ig_objs:
            obj._reset()
        now = self.now_ns()
        md = o["ig_intr_md"]
        md.resubmit_flag = 0 if resubmit is None else 1
        md.ingress_port = port
        md.ingress_mac_tstamp = now
        prefix = md._pk() + (
            resubmit
            if resubmit is not None
            else self.port_metadata.get(port, bytes(PORT_METADATA_BYTES))
        )
        o["ig_prsr"].global_tstamp = now
        tm = o["ig_tm"]
        tm.ucast_egress_port = UCAST_UNSET
        ctx.plen = len(data)
        ctx.resubmit = ctx.clone = None
        ctx.digests = []
        buf = prefix + data
        off = self._parse("ingress_parser", buf, "ingress")
        if off is None:
            return None
        payload = buf[off:]
        ctx.payload = payload
        args = self.args["ingress"]
        parts: list[bytes] = []
        try:
            try:  # noqa: SIM105 - cheaper than contextlib.suppress per packet
                f["ingress"](*args)
            except Exit:
                pass
            f["ingress_deparser"](parts, *self.args["ingress_deparser"])
        except AssertFailed:
            return None
        if ctx.digests:
            self.sw._deliver_digests(ctx.digests)
            ctx.digests = []
        drop_ctl = o["ig_dprsr"].drop_ctl
        mirror, resub = ctx.clone, ctx.resubmit
        if mirror is not None:
            # ingress mirroring copies the packet as it arrived, behind the mirror header
            self._mirror(mirror, data, out, 0)
        if drop_ctl & 1:
            return None
        if resub is not None and resubmit is None:
            return bytes(resub[:PORT_METADATA_BYTES]).ljust(PORT_METADATA_BYTES, b"\x00")
        pkt = b"".join(parts) + payload
        copies: list[tuple[int, int, int]] = []
        if tm.ucast_egress_port < UCAST_UNSET:
            copies.append((tm.ucast_egress_port, 0, 0))
        for grp in (tm.mcast_grp_a, tm.mcast_grp_b):
            if grp:
                for i, (eport, rid) in enumerate(self.sw.mc_groups.get(grp, [])):
                    copies.append((eport, rid, 1 if i == 0 else 0))
        if tm.bypass_egress:
            out.extend((eport, pkt) for eport, _rid, _first in copies)
            return None
        for eport, rid, first in copies:
            self._egress(eport, rid, first, pkt, out, 0)
        return None

    # ------------------------------------------------------------------ egress
    def _mirror(
        self, mirror: tuple[int, bytes], pkt: bytes, out: list[tuple[int, bytes]], depth: int
    ) -> None:
        session, hdr = mirror
        if depth >= MAX_MIRROR_DEPTH:
            return
        for eport, rid in self.sw._session_ports(session):
            self._egress(eport, rid, 0, hdr + pkt, out, depth + 1)

    def _egress(
        self, eport: int, rid: int, first: int, pkt: bytes, out: list[tuple[int, bytes]], depth: int
    ) -> None:
        o, ctx, f = self.objs, self.ctx, self.f
        for obj in self.eg_objs:
            obj._reset()
        md = o["eg_intr_md"]
        md.egress_port = eport
        md.egress_rid = rid
        md.egress_rid_first = first
        md.pkt_length = len(pkt) & 0xFFFF
        o["eg_prsr"].global_tstamp = self.now_ns()
        ctx.plen = len(pkt)
        ctx.clone = None
        buf = md._pk() + pkt
        off = self._parse("egress_parser", buf, "egress")
        if off is None:
            return
        payload = buf[off:]
        ctx.payload = payload
        parts: list[bytes] = []
        try:
            try:  # noqa: SIM105 - cheaper than contextlib.suppress per packet
                f["egress"](*self.args["egress"])
            except Exit:
                pass
            f["egress_deparser"](parts, *self.args["egress_deparser"])
        except AssertFailed:
            return
        data = b"".join(parts) + payload
        drop_ctl = o["eg_dprsr"].drop_ctl
        mirror = ctx.clone
        if mirror is not None and not drop_ctl & 4:
            # egress mirroring copies the packet the egress deparser built
            self._mirror(mirror, data, out, depth)
        if not drop_ctl & 1:
            out.append((eport, data))


__all__ = ["TnaPipeline"]
