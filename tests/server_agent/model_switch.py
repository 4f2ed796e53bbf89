"""A model of the KVSwitch data plane in Python, on loopback sockets, for host-side tests.

It applies the six switch rules of docs/protocol.md ("Consistency") so that the agents' and the
client's side of the contract can be tested end to end without P4: versions stamped on hot-key
writes, UPDATE copies to replicas, origin reports, CONFIRMs, SYNC reflection, round-robin Get
redirection only to replicas in the read set, and replica read replies dropped unless the origin
reported their version. The rules themselves are :mod:`kvswitch.consistency.rules`, the functions
the simulator and the explorer run (one slot per hot key, ``valid_ver`` cell = server number);
this model only decides, as p4src/features/replicas.p4 does, which packet a rule applies to.

Loopback has no switch in the path, so the model stands in front of the servers: server ``i`` is
reached through the model's port ``front[i]`` (the address clients are given), and forwarded
requests leave from the front port of the server they go to. A reply thus comes back from the
front port of the server that answered, which for a redirected Get is not the one the client
addressed. The agents' ``--switch-addr`` is the model's ``control`` port (CONFIRM, SYNC,
SYNC_DONE); UPDATE copies leave from it too.
"""

from __future__ import annotations

import selectors
import socket
import threading
from collections import Counter
from dataclasses import dataclass, field

from kvswitch import protocol as p
from kvswitch.consistency import rules

Addr = tuple[str, int]


@dataclass
class HotSlot:
    """One hot key's registers (slot 0 of one-cell arrays, as the rules take them)."""

    servers: list[int]  # ordinal 0 is the origin
    floor: int = 0  # global_ver when the holders were set (KeyindexTable's floor)
    rr: int = 0
    slot_vers: list[int] = field(default_factory=lambda: [0])
    origin_vers: list[int] = field(default_factory=lambda: [0])
    valid_ver: dict[int, int] = field(default_factory=dict)  # server -> its cell

    @property
    def slot_ver(self) -> int:
        return self.slot_vers[0]

    @property
    def origin_ver(self) -> int:
        return self.origin_vers[0]


class ModelSwitch:
    def __init__(self, agents: list[Addr], epoch: int = 1) -> None:
        self.agents = agents
        self.epoch = epoch
        self.gver = [0]  # global_ver
        self.hot: dict[bytes, HotSlot] = {}
        self.stats: Counter[str] = Counter()
        self.lock = threading.Lock()
        self.front = [self._sock() for _ in agents]
        self.control = self._sock()
        self._clients: dict[tuple[int, int, bytes], Addr] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def _sock() -> socket.socket:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        s.bind(("127.0.0.1", 0))
        return s

    @property
    def front_addrs(self) -> list[Addr]:
        return [s.getsockname() for s in self.front]

    @property
    def control_addr(self) -> Addr:
        return self.control.getsockname()

    def make_hot(self, key: bytes, servers: list[int]) -> None:
        """What the controller installs: the key's holders, origin first; nobody valid yet."""
        with self.lock:
            cells = dict.fromkeys(range(len(self.agents)), 0)
            self.hot[p.pad_key(key)] = HotSlot(list(servers), self.gver[0], valid_ver=cells)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        for s in [*self.front, self.control]:
            s.close()

    def _run(self) -> None:
        sel = selectors.DefaultSelector()
        for i, s in enumerate(self.front):
            sel.register(s, selectors.EVENT_READ, i)
        sel.register(self.control, selectors.EVENT_READ, None)
        while not self._stop.is_set():
            for key, _ in sel.select(timeout=0.05):
                sock: socket.socket = key.fileobj  # type: ignore[assignment]
                data, src = sock.recvfrom(65535)
                try:
                    msg = p.Message.decode(data)
                except p.MalformedMessage:
                    self.stats["malformed"] += 1
                    continue
                with self.lock:
                    if key.data is None:
                        self._on_control(msg, src)
                    else:
                        self._on_front(key.data, msg, data, src)
        sel.close()

    def _server_of(self, addr: Addr) -> int | None:
        return self.agents.index(addr) if addr in self.agents else None

    def _on_front(self, index: int, msg: p.Message, data: bytes, src: Addr) -> None:
        sender = self._server_of(src)
        if sender is None:  # a request from a client
            self._clients[(msg.cid, msg.seq, msg.key)] = src
            self._request(index, msg, data)
            return
        # A reply from server `sender`: rule 2 (the origin's) or 6 (a replica's read reply), then
        # back to the client that asked.
        slot = self.hot.get(msg.key)
        current = msg.epoch == self.epoch
        if slot is not None and slot.servers[0] == sender:
            acked = msg.op in (p.Op.SET_REPLY, p.Op.DEL_REPLY) and msg.status in (
                p.Status.OK,
                p.Status.STALE,
            )
            if acked or msg.op == p.Op.GET_REPLY:
                rules.origin_report(0, current, msg.ver, slot.origin_vers)
        elif (
            slot is not None
            and msg.op == p.Op.GET_REPLY
            and msg.status not in (p.Status.MOVED, p.Status.RETRY)
            and not rules.replica_reply_passes(0, current, msg.ver, slot.origin_vers)
        ):
            self.stats["replica_reply_dropped"] += 1
            return
        client = self._clients.pop((msg.cid, msg.seq, msg.key), None)
        if client is not None:
            self.front[sender].sendto(data, client)

    def _request(self, index: int, msg: p.Message, data: bytes) -> None:
        slot = self.hot.get(msg.key)
        if slot is None or msg.op not in (p.Op.GET, p.Op.SET, p.Op.DEL):
            self.front[index].sendto(data, self.agents[index])
            return
        origin = slot.servers[0]
        if msg.op == p.Op.GET:  # rule 4
            ordinal = slot.rr
            slot.rr = (slot.rr + 1) % len(slot.servers)
            target = slot.servers[ordinal]
            if ordinal == 0 or not rules.in_read_set(0, target, slot.origin_vers, slot.valid_ver):
                target = origin
            else:  # the replica's agent serves a key it does not own only then
                msg.flags |= p.F_REDIRECT
                data = msg.encode()
            self.stats["get_to_replica" if target != origin else "get_to_origin"] += 1
            self.front[target].sendto(data, self.agents[target])
            return
        # rule 1: stamp, forward to the origin, UPDATE copies to the replicas
        ver, settled = rules.write(0, self.gver, slot.slot_vers, slot.origin_vers)
        msg.epoch, msg.ver = self.epoch, ver
        if settled:
            msg.flags |= p.F_SETTLED
        self.front[origin].sendto(msg.encode(), self.agents[origin])
        msg.op = p.Op.UPDATE if msg.op == p.Op.SET else p.Op.UPDATE_DEL
        for replica in slot.servers[1:]:
            self.control.sendto(msg.encode(), self.agents[replica])
        self.stats["stamped_writes"] += 1

    def _on_control(self, msg: p.Message, src: Addr) -> None:
        sender = self._server_of(src)
        slot = self.hot.get(msg.key)
        if sender is None or slot is None:
            self.stats["control_ignored"] += 1
            return
        current = msg.epoch == self.epoch
        if msg.op == p.Op.CONFIRM:  # rule 3, into the sender's own cell
            before = slot.valid_ver[sender]
            rules.confirm(0, sender, current, msg.ver, slot.floor, slot.slot_vers, slot.valid_ver)
            accepted = slot.valid_ver[sender] != before
            self.stats["confirm_accepted" if accepted else "confirm_ignored"] += 1
        elif msg.op == p.Op.SYNC and sender == slot.servers[0]:  # rule 5
            ver = rules.sync(0, self.gver, slot.slot_vers, slot.origin_vers)
            msg.epoch, msg.ver = (self.epoch, ver) if ver else (0, 0)
            if not ver:  # a write is on its way to the origin
                self.stats["sync_unstamped"] += 1
            self.control.sendto(msg.encode(), src)
        elif msg.op == p.Op.SYNC_DONE and sender == slot.servers[0]:  # rule 2
            if msg.status == p.Status.OK:
                rules.origin_report(0, current, msg.ver, slot.origin_vers)
        else:
            self.stats["control_ignored"] += 1
