"""The v1model packet path of the software switch (BMv2's simple_switch): parser → verify checksum
→ ingress → PRE (clone, resubmit, multicast, drop, unicast) → per copy: egress → compute checksum →
deparser, with resubmit, recirculate and clones running the pipeline again."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from softswitch.engine.codegen import Exit
from softswitch.engine.objects import AssertFailed
from softswitch.engine.program import DROP_PORT, Device
from softswitch.errors import SwitchError
from softswitch.frontend.types import StructLikeT

log = logging.getLogger(__name__)

INSTANCE_NORMAL = 0
INSTANCE_INGRESS_CLONE = 1
INSTANCE_EGRESS_CLONE = 2
INSTANCE_RECIRC = 4
INSTANCE_REPLICATION = 5
INSTANCE_RESUBMIT = 6
CLONE_I2E, CLONE_E2E = 0, 1  # CloneType members in this target's v1model.p4
MAX_PASSES = 16  # resubmit/recirculate loops end here (the packet is dropped)


@dataclass
class V1Blocks:
    """The translated V1Switch: one function per block, the classes of its three arguments."""

    parser: Any
    verify: Any
    ingress: Any
    egress: Any
    compute: Any
    deparser: Any
    hdr_cls: Any
    meta_cls: Any
    sm_cls: Any
    meta_type: StructLikeT  # the user metadata (its @field_list annotations)


class V1ModelPipeline:
    """Runs packets through a v1model program over a device's state (its PRE, mirroring sessions,
    digest queue)."""

    def __init__(self, device: Device, blocks: V1Blocks) -> None:
        self.device = device
        self.program = device.program
        self.blocks = blocks
        # the objects of the previous packet are reused: resetting is cheaper than allocating
        self.objs = (blocks.hdr_cls(), blocks.meta_cls(), blocks.sm_cls())
        self.field_lists: dict[int, list[str]] = {}
        self.clone_depth = 0
        self.ingress_truncate: int | None = None
        self.start = time.monotonic()

    def set_port_metadata(self, port: int, data: bytes) -> None:
        raise SwitchError("port metadata is a TNA feature; this program is v1model")

    def process(self, port: int, data: bytes) -> list[tuple[int, bytes]]:
        out: list[tuple[int, bytes]] = []
        again = self._pipeline(port, data, INSTANCE_NORMAL, None, out)
        passes = 1
        while again:
            if passes >= MAX_PASSES:
                log.warning(
                    "softswitch: packet dropped after %d resubmit/recirculate passes", passes
                )
                break
            passes += 1
            nxt = []
            for data2, itype, keep in again:
                nxt += self._pipeline(port, data2, itype, keep, out) or []
            again = nxt
        return out

    def _preserved(self, meta: Any, index: int) -> list[tuple[str, Any]]:
        """The user-metadata fields annotated @field_list(index) and their values."""
        names = self.field_lists.get(index)
        if names is None:
            t = self.blocks.meta_type
            names = [
                n
                for n, anns in (t.field_annotations.items() if t is not None else [])
                if index in anns.get("field_list", [])
            ]
            self.field_lists[index] = names
        return [(n, getattr(meta, n)) for n in names]

    def _pipeline(
        self,
        port: int,
        data: bytes,
        itype: int,
        keep: list[tuple[str, Any]] | None,
        out: list[tuple[int, bytes]],
    ) -> list[tuple[bytes, int, list[tuple[str, Any]]]] | None:
        """One pass: parser to deparser. Appends outputs to ``out``; returns the packets to run again
        (resubmitted or recirculated) with their instance type and preserved metadata."""
        p, b = self.program, self.blocks
        ctx = p.ctx
        # the objects of the previous packet are reused: resetting is cheaper than allocating
        hdr, meta, sm = self.objs
        hdr._reset()
        meta._reset()
        sm._reset()
        if keep:
            for n, v in keep:
                setattr(meta, n, v)
        ctx.sm = sm
        ctx.plen = len(data)
        ctx.resubmit = ctx.recirculate = ctx.clone = ctx.truncate = None
        if ctx.digests:
            ctx.digests = []  # digest() is an ingress extern: calls from egress send nothing
        now = int((time.monotonic() - self.start) * 1e6)
        sm.ingress_port = port
        sm.instance_type = itype
        sm.packet_length = len(data)
        sm.ingress_global_timestamp = now
        off = b.parser(data, hdr, meta, sm)
        payload = data[off:]
        ctx.payload = payload
        try:
            try:  # noqa: SIM105 - cheaper than contextlib.suppress per packet
                b.verify(hdr, meta)
            except Exit:
                pass
            try:  # noqa: SIM105 - cheaper than contextlib.suppress per packet
                b.ingress(hdr, meta, sm)
            except Exit:
                pass
        except AssertFailed:
            return None
        again: list[tuple[bytes, int, list[tuple[str, Any]]]] = []
        self.ingress_truncate = ctx.truncate
        clone = ctx.clone
        if clone is not None and clone[0] == CLONE_I2E:
            self._ingress_clone(port, data, now, clone, meta, out, again)
        if ctx.digests:
            self.device.deliver_digests(ctx.digests)
            ctx.digests = []
        if ctx.resubmit is not None:
            # BMv2: the original packet goes through the parser and ingress again, nothing leaves
            again.append((data, INSTANCE_RESUBMIT, self._preserved(meta, ctx.resubmit)))
            return again
        grp = sm.mcast_grp
        if grp:
            members = self.device.mc_groups.get(grp, [])
            last = len(members) - 1
            for i, (eport, rid) in enumerate(members):
                if i == last:
                    h, m, s = hdr, meta, sm
                else:
                    h, m, s = hdr._copy(), meta._copy(), sm._copy()
                s.egress_rid = rid
                s.instance_type = INSTANCE_REPLICATION
                self._egress(h, m, s, eport, payload, now, out, again)
        elif sm.egress_spec != DROP_PORT:
            sm.instance_type = INSTANCE_NORMAL
            self._egress(hdr, meta, sm, sm.egress_spec, payload, now, out, again)
        return again or None

    def _egress(
        self,
        h: Any,
        m: Any,
        s: Any,
        eport: int,
        payload: bytes,
        now: int,
        out: list[tuple[int, bytes]],
        again: list[tuple[bytes, int, list[tuple[str, Any]]]],
    ) -> None:
        """Egress, egress cloning, drop check, checksum update, deparser, recirculation."""
        p, b = self.program, self.blocks
        ctx = p.ctx
        s.egress_port = eport
        s.egress_spec = 0
        s.egress_global_timestamp = now
        ctx.sm = s
        ctx.payload = payload
        ctx.recirculate = ctx.clone = None
        ctx.truncate = self.ingress_truncate
        try:
            try:  # noqa: SIM105 - cheaper than contextlib.suppress per packet
                b.egress(h, m, s)
            except Exit:
                pass
            clone = ctx.clone
            if clone is not None and clone[0] == CLONE_E2E:
                self._egress_clone(h, m, s, payload, now, clone, out, again)
                ctx.sm, ctx.payload = s, payload
            if s.egress_spec == DROP_PORT:
                return
            try:  # noqa: SIM105 - cheaper than contextlib.suppress per packet
                b.compute(h, m)
            except Exit:
                pass
        except AssertFailed:
            return
        parts: list[bytes] = []
        b.deparser(parts, h)
        parts.append(payload)
        if ctx.recirculate is not None:
            # BMv2: the deparsed packet enters the parser again instead of leaving
            again.append((b"".join(parts), INSTANCE_RECIRC, self._preserved(m, ctx.recirculate)))
            return
        data = b"".join(parts)
        if ctx.truncate is not None:
            data = data[: ctx.truncate]
        out.append((eport, data))

    def _ingress_clone(
        self,
        port: int,
        data: bytes,
        now: int,
        clone: tuple[int, int, int],
        meta: Any,
        out: list[tuple[int, bytes]],
        again: list[tuple[bytes, int, list[tuple[str, Any]]]],
    ) -> None:
        """I2E: the original packet, parsed again (ingress port kept), goes to the session's egress."""
        p, b = self.program, self.blocks
        keep = self._preserved(meta, clone[2]) if clone[2] else []
        for eport, rid in self.device.session_ports(clone[1]):
            h, m, s = b.hdr_cls(), b.meta_cls(), b.sm_cls()
            s.ingress_port = port
            s.packet_length = len(data)
            saved = p.ctx.sm
            p.ctx.sm = s
            off = b.parser(data, h, m, s)
            p.ctx.sm = saved
            for n, v in keep:
                setattr(m, n, v)
            s.instance_type = INSTANCE_INGRESS_CLONE
            s.egress_rid = rid
            self._egress(h, m, s, eport, data[off:], now, out, again)

    def _egress_clone(
        self,
        h: Any,
        m: Any,
        s: Any,
        payload: bytes,
        now: int,
        clone: tuple[int, int, int],
        out: list[tuple[int, bytes]],
        again: list[tuple[bytes, int, list[tuple[str, Any]]]],
    ) -> None:
        """E2E: the packet as egress left it, metadata reset but the field list, runs egress again
        on the session's port."""
        keep = self._preserved(m, clone[2]) if clone[2] else []
        if self.clone_depth >= MAX_PASSES:
            log.warning("softswitch: egress clone of a clone %d deep dropped", self.clone_depth)
            return
        self.clone_depth += 1
        try:
            for eport, rid in self.device.session_ports(clone[1]):
                self._egress_clone_one(h, s, keep, eport, rid, payload, now, out, again)
        finally:
            self.clone_depth -= 1

    def _egress_clone_one(
        self,
        h: Any,
        s: Any,
        keep: list[tuple[str, Any]],
        eport: int,
        rid: int,
        payload: bytes,
        now: int,
        out: list[tuple[int, bytes]],
        again: list[tuple[bytes, int, list[tuple[str, Any]]]],
    ) -> None:
        b = self.blocks
        h2, m2, s2 = h._copy(), b.meta_cls(), b.sm_cls()
        for n, v in keep:
            setattr(m2, n, v)
        s2.packet_length = s.packet_length
        s2.ingress_port = s.ingress_port
        s2.instance_type = INSTANCE_EGRESS_CLONE
        s2.egress_rid = rid
        self._egress(h2, m2, s2, eport, payload, now, out, again)


__all__ = ["V1Blocks", "V1ModelPipeline"]
