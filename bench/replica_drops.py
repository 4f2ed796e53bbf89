"""Replica read replies the switch dropped (rule 6), counted from a capture of a rack run.

    tcpdump -i any -s 128 -B 32768 -w run.pcap 'port 8900'      # in the root namespace, beside
    python -m kvsrack --out OUT ...                              # a rack run (the switch's side of
    python -m kvswitch.bench.replica_drops run.pcap OUT          # every veth is in the root one)

Every KVSwitch packet is seen twice, entering the switch from a host and leaving it towards one
(``-i any`` records the direction). A Get reply from a server that is not the key's origin
(docs/protocol.md rule 6; ``MOVED``/``RETRY`` answers left out) passed if it left the switch,
else the switch dropped it. ``origin_ver`` is followed from the origins' reports entering the
switch (rule 2: write replies ``OK``/``STALE``, ``SYNC_DONE``, every Get reply of the origin), so
each dropped reply is put in one class:

- ``overtaken``: it carries the version that was ``origin_ver`` when its Get was redirected, and
  the origin reported a newer write before the reply came back (the cost of rule 6 passing only
  ``ver == origin_ver``, docs/protocol.md);
- ``ahead``: newer than ``origin_ver`` (the replica applied a write the origin had not reported);
- ``older``: older than ``origin_ver`` but not the version of the Get's redirection (a repeat's
  copy, or a Get redirected at another version);
- ``not current``: version 0 or another epoch.

And whether the client sent the same request (cid, seq) again after the drop. Slots reset when a
key leaves and comes back to the hot set are not followed (``origin_ver`` here only grows), and
packets the capture lost (tcpdump's ``dropped by kernel``) are missing: a reply seen leaving but not
entering is counted apart.
"""

from __future__ import annotations

import argparse
import json
import socket
import struct
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from scapy.utils import RawPcapReader

from kvswitch import protocol as p

_SLL, _SLL2 = 113, 276
_OUTGOING = 4
_REPORT_WRITES = (p.Op.SET_REPLY, p.Op.DEL_REPLY)
_NO_RESULT = (p.Status.MOVED, p.Status.RETRY)


@dataclass(frozen=True)
class Packet:
    time: float
    out: bool  # leaving the switch (towards a host); else entering it
    src: str
    dst: str
    msg: p.Message


def packets(path: Path, kvs_port: int) -> list[Packet]:
    """The KVSwitch headers of a capture (UDP datagrams and TCP segments that start with one),
    in capture order."""
    out: list[Packet] = []
    reader = RawPcapReader(str(path))
    link = reader.linktype
    if link not in (_SLL, _SLL2):
        raise SystemExit(f"{path}: link type {link}; capture with tcpdump -i any")
    for data, meta in reader:
        if link == _SLL2:  # protocol, reserved, ifindex, hatype, packet type, ...
            proto, pkttype, off = struct.unpack_from("!H", data, 0)[0], data[10], 20
        else:  # packet type, hatype, halen, address, protocol
            pkttype, proto = (
                struct.unpack_from("!H", data, 0)[0],
                struct.unpack_from("!H", data, 14)[0],
            )
            off = 16
        if proto != 0x0800 or len(data) < off + 20:
            continue
        ihl = (data[off] & 0x0F) * 4
        l4, ipproto = off + ihl, data[off + 9]
        src, dst = (
            socket.inet_ntoa(data[off + 12 : off + 16]),
            socket.inet_ntoa(data[off + 16 : off + 20]),
        )
        if ipproto == 17:
            sport, dport = struct.unpack_from("!HH", data, l4)
            payload = l4 + 8
        elif ipproto == 6 and len(data) >= l4 + 20:
            sport, dport = struct.unpack_from("!HH", data, l4)
            payload = l4 + (data[l4 + 12] >> 4) * 4
        else:
            continue
        if kvs_port not in (sport, dport) or len(data) < payload + p.HEADER_LEN:
            continue
        # the header only: the capture keeps the first bytes of each frame, not the value
        header = bytearray(data[payload : payload + p.HEADER_LEN])
        header[2:4] = b"\0\0"  # vlen
        msg = p.Message.decode(header, strict=False)
        when = meta.sec + meta.usec / 1e6 if hasattr(meta, "sec") else meta[0] + meta[1] / 1e6
        out.append(Packet(when, pkttype == _OUTGOING, src, dst, msg))
    return out


@dataclass
class Reply:
    time: float
    ver: int
    epoch: int
    ov: int  # origin_ver when the reply entered the switch
    routed_at: int | None  # origin_ver when its Get was redirected (None: not seen)
    passed: bool = False
    resent: bool = False


def _reports(m: p.Message) -> bool:
    """An origin's message that raises ``origin_ver`` (rule 2), source and epoch aside."""
    if m.op in _REPORT_WRITES:
        return m.status in (p.Status.OK, p.Status.STALE)
    return (m.op == p.Op.SYNC_DONE and m.status == p.Status.OK) or m.op == p.Op.GET_REPLY


def classify(pkts: list[Packet], origin_ip: dict[bytes, str], servers: set[str]) -> dict:
    """The counts described in the module docstring."""
    ov: dict[bytes, int] = {}
    epoch = 0
    # by (key, cid, seq, replica), oldest first: origin_ver at each redirection, replies entering
    routed: dict[tuple[bytes, int, int, str], list[int]] = {}
    entering: dict[tuple[bytes, int, int, str], list[Reply]] = {}
    replies: list[Reply] = []
    open_drops: dict[tuple[int, int], list[Reply]] = {}  # (cid, seq) -> replies not seen leaving
    left_unseen = 0
    for pk in pkts:
        m = pk.msg
        key, origin = m.key, origin_ip.get(m.key)
        if m.epoch > epoch:
            epoch = m.epoch
        if not pk.out and pk.src == origin and m.epoch == epoch and _reports(m):
            ov[key] = max(ov.get(key, 0), m.ver)
        if m.op == p.Op.GET and pk.out and m.flags & p.F_REDIRECT and pk.dst in servers:
            routed.setdefault((key, m.cid, m.seq, pk.dst), []).append(ov.get(key, 0))
        elif m.op == p.Op.GET and not pk.out:
            for r in open_drops.pop((m.cid, m.seq), ()):
                r.resent = True
        if m.op != p.Op.GET_REPLY or pk.src == origin or pk.src not in servers:
            continue
        if m.status in _NO_RESULT:
            continue
        ident = (key, m.cid, m.seq, pk.src)
        if not pk.out:
            at = routed.get(ident)
            reply = Reply(pk.time, m.ver, m.epoch, ov.get(key, 0), at.pop(0) if at else None)
            replies.append(reply)
            entering.setdefault(ident, []).append(reply)
            open_drops.setdefault((m.cid, m.seq), []).append(reply)
            continue
        waiting = [r for r in entering.get(ident, ()) if not r.passed]
        if not waiting:
            left_unseen += 1
            continue
        waiting[0].passed = True
        pending = open_drops.get((m.cid, m.seq), [])
        if waiting[0] in pending:
            pending.remove(waiting[0])
    kinds: Counter[str] = Counter()
    resent: Counter[str] = Counter()
    for r in replies:
        if r.passed:
            kind = "passed"
        elif r.ver == 0 or r.epoch != epoch:
            kind = "not current"
        elif r.ver > r.ov:
            kind = "ahead"
        elif r.routed_at == r.ver:
            kind = "overtaken"
        else:
            kind = "older"
        kinds[kind] += 1
        resent[kind] += r.resent
    return {
        "replica_replies": len(replies),
        "by_kind": dict(kinds),
        "resent_after": dict(resent),
        "left_but_not_seen_entering": left_unseen,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kvswitch.bench.replica_drops")
    ap.add_argument("pcap", type=Path, help="tcpdump -i any capture of the rack run")
    ap.add_argument("out", type=Path, help="the rack run's --out folder (rack.json)")
    args = ap.parse_args(argv)
    try:
        rack = json.loads((args.out / "rack.json").read_text())
    except (OSError, ValueError) as exc:
        print(f"replica_drops: {args.out / 'rack.json'}: {exc}", file=sys.stderr)
        return 1
    names = [s["name"] for s in rack["servers"]]
    ips = [s["ip"] for s in rack["servers"]]
    pkts = packets(args.pcap, int(rack.get("kvs_port", p.KVS_PORT)))
    ring = p.HashRing(len(names))
    keys = {pk.msg.key for pk in pkts}
    origin_ip = {k: ips[ring.origin(k)] for k in keys}
    result = classify(pkts, origin_ip, set(ips))
    result["packets"] = len(pkts)
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
