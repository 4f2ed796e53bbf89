"""A command shell that runs inside one Mininet host (``mnexec -a PID python -m
tests.security.hostshell``): one JSON command per stdin line, one JSON answer per stdout line.

It lets the adversarial suite act as a legitimate client (recording a history for
``kvswitch.consistency.lincheck``) or as an attacker (raw UDP/TCP from the host's own address, or
Scapy frames with any source) from inside the rack, with one process per host for the whole session.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from typing import Any

from kvswitch.client import Client, KvsError

Record = dict[str, Any]


class Load:
    """Background Gets of ``keys`` at ``rate`` per second (what makes them hot)."""

    def __init__(self, servers: list[tuple[str, int]], keys: list[bytes], rate: float) -> None:
        self.stop = threading.Event()
        self.done = self.errors = 0
        self.thread = threading.Thread(target=self._run, args=(servers, keys, rate), daemon=True)
        self.thread.start()

    def _run(self, servers: list[tuple[str, int]], keys: list[bytes], rate: float) -> None:
        with Client(servers, timeout=0.3, retries=1) as c:
            gap, i, next_at = 1.0 / rate, 0, time.monotonic()
            while not self.stop.is_set():
                try:
                    c.get(keys[i % len(keys)])
                    self.done += 1
                except KvsError:
                    self.errors += 1
                i += 1
                next_at += gap
                time.sleep(max(0.0, next_at - time.monotonic()))


def client_ops(req: dict[str, Any]) -> list[Record]:
    """Run ``ops`` (["get", key_hex] / ["set", key_hex, value_hex] / ["delete", key_hex]) in order
    with one client; each becomes a history record (``ret`` None: the outcome is unknown)."""
    servers = [(h, int(p)) for h, p in req["servers"]]
    out: list[Record] = []
    with Client(servers, cid=req.get("cid"), timeout=0.5, retries=3) as c:
        for op in req["ops"]:
            kind, key = op[0], bytes.fromhex(op[1])
            value = bytes.fromhex(op[2]) if kind == "set" else None
            rec: Record = {"kind": kind, "key": key.hex(), "call": time.monotonic()}
            rec.update(value=None if value is None else value.hex(), output=None, error=None)
            try:
                if kind == "get":
                    got = c.get(key)
                    rec["output"] = None if got is None else got.hex()
                elif kind == "set":
                    c.set(key, value or b"")
                else:
                    rec["output"] = c.delete(key)
                rec["ret"] = time.monotonic()
            except (KvsError, TimeoutError) as exc:
                rec["ret"], rec["error"] = None, type(exc).__name__
            out.append(rec)
    return out


def udp(req: dict[str, Any]) -> Record:
    """Send one datagram from this host's own address (from port ``sport``, ``delay`` seconds after
    binding it): every datagram that came to that port until ``wait`` passed without one, in
    arrival order, when it was sent (``call``) and when the first came (``ret``, None without)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("0.0.0.0", int(req.get("sport", 0))))
        s.settimeout(float(req.get("wait", 0.3)))
        time.sleep(float(req.get("delay", 0)))  # bound already: what arrives meanwhile is kept
        call = time.monotonic()
        s.sendto(bytes.fromhex(req["payload_hex"]), (req["dst"][0], int(req["dst"][1])))
        answers: list[str] = []
        ret = None
        try:
            while True:
                answers.append(s.recv(65535).hex())
                ret = ret or time.monotonic()
        except TimeoutError:
            return {"answers": answers, "call": call, "ret": ret}


def tcp(req: dict[str, Any]) -> Record:
    """Send ``payload_hex`` in one write on a new connection: what comes back within ``wait``,
    ``call`` and ``ret`` as for :func:`udp`."""
    with socket.create_connection((req["dst"][0], int(req["dst"][1])), timeout=2) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        call = time.monotonic()
        s.sendall(bytes.fromhex(req["payload_hex"]))
        s.settimeout(float(req.get("wait", 0.5)))
        got, ret = b"", None
        try:
            while chunk := s.recv(65535):
                got += chunk
                ret = ret or time.monotonic()
        except TimeoutError:
            pass
        return {"data": got.hex(), "call": call, "ret": ret}


def spoof(req: dict[str, Any]) -> None:
    """One UDP frame with any source address, out of this host's interface (Scapy, layer 2: the
    rack's switch drops ARP, so the destination MAC is given)."""
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether
    from scapy.packet import Raw
    from scapy.sendrecv import sendp

    frame = (
        Ether(src=req["src_mac"], dst=req["dst_mac"])
        / IP(src=req["src"], dst=req["dst"])
        / UDP(sport=int(req["sport"]), dport=int(req["dport"]))
        / Raw(bytes.fromhex(req["payload_hex"]))
    )
    sendp(frame, iface=req["iface"], verbose=False)


def main() -> int:
    load: Load | None = None
    for line in sys.stdin:
        req = json.loads(line)
        cmd = req["cmd"]
        answer: Any = None
        try:
            if cmd == "ops":
                answer = client_ops(req)
            elif cmd == "udp":
                answer = udp(req)
            elif cmd == "tcp":
                answer = tcp(req)
            elif cmd == "spoof":
                spoof(req)
            elif cmd == "load":
                servers = [(h, int(p)) for h, p in req["servers"]]
                load = Load(servers, [bytes.fromhex(k) for k in req["keys"]], req["rate"])
            elif cmd == "load_stop" and load is not None:
                load.stop.set()
                load.thread.join()
                answer, load = {"done": load.done, "errors": load.errors}, None
            elif cmd == "quit":
                return 0
            result = {"ok": True, "answer": answer}
        except Exception as exc:  # reported to the test, which fails with it
            result = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        sys.stdout.write(json.dumps(result) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
