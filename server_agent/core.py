"""The agent's protocol logic, without sockets: bytes in, (bytes, destination) out.

:meth:`AgentCore.handle` takes one message as received (a UDP datagram or one framed TCP message)
and its sender's address, applies docs/protocol.md ("Consistency", "Agent rules") to the backend and
returns the messages to send. The caller serialises calls (one lock): the check-then-write of a
versioned write is atomic because nothing else touches the backend meanwhile.

Rules implemented here:
- ``GET`` → ``GET_REPLY`` with the value and its stored (epoch, ver), or ``NOT_FOUND``.
- ``SET``/``DEL`` (client → origin) and ``UPDATE``/``UPDATE_DEL`` (switch → replica): a request id
  ``(cid, seq)`` is applied at most once (a repeat is answered with the first result, flag
  ``F_DUP``, or with the repeat's newer version when nothing was written since and the switch
  flagged the repeat ``F_SETTLED``); a versioned write (``ver != 0``) applies only if (epoch, ver) is newer than the stored
  version (``STALE`` otherwise); an unversioned write always applies and keeps the stored version. A
  delete leaves a tombstone while the key has a version, so an older write cannot resurrect it.
- ``UPDATE``/``UPDATE_DEL`` get no reply; the replica sends ``CONFIRM`` with the version it
  holds to the switch.
- ``SYNC`` reflected by the switch (stamped, for a key this agent asked about): the version is
  recorded for the current value if newer and ``SYNC_DONE`` goes to the switch; the controller
  takes the item over the control channel (:meth:`AgentCore.start_sync`).
- Trust (docs/protocol.md "Trust"): ``PUSH`` and ``REMOVE`` write the store bypassing a client
  request, so they come over the controller's control channel only (:meth:`AgentCore.push_item`,
  :meth:`AgentCore.remove_local`); from the network they are dropped and counted
  (``untrusted_op``). A request over TCP carries no version the switch can be relied on to have
  stamped (it parses only a segment's first header), so its ``epoch``/``ver`` are ignored
  (``tcp_version_ignored``), nor is its ``F_REDIRECT`` flag, and only client requests are taken
  over TCP: ``UPDATE``,
  ``UPDATE_DEL`` and ``SYNC`` come from the switch over UDP, so over TCP they are forged
  (``untrusted_op``). Request ids are remembered per source address, so one host cannot
  answer another's request id in advance.
- Malformed input is dropped (truncated, unknown op, op not valid at a server) or answered
  ``BAD_REQUEST``/``TOO_LARGE`` when a reply is due; it is counted and changes nothing.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import Counter, OrderedDict
from dataclasses import dataclass, field

from kvswitch import protocol as p
from kvswitch.agent.backends import Backend, BackendError, Item

Addr = tuple[str, int]
Output = tuple[bytes, Addr]

#: Ops a server never receives: dropped silently (answering a reply could loop).
_NOT_FOR_SERVERS = frozenset(
    {
        p.Op.GET_REPLY,
        p.Op.SET_REPLY,
        p.Op.DEL_REPLY,
        p.Op.CONFIRM,
        p.Op.SYNC_DONE,
        p.Op.REMOVE_REPLY,
        p.Op.RING_REPLY,
    }
)
_WRITES = frozenset({p.Op.SET, p.Op.DEL, p.Op.UPDATE, p.Op.UPDATE_DEL})
# Int-keyed tables for the per-message path (enum lookups cost microseconds per message).
_OP_STAT = {int(op): f"op_{op.name.lower()}" for op in p.Op}
_REPLY_OP = {int(req): int(rep) for req, rep in p.REPLY_OF.items()}
_VALUE_OPS = frozenset(int(op) for op in p.VALUE_OPS)
_CLIENT_REQUESTS = frozenset({int(p.Op.GET), int(p.Op.SET), int(p.Op.DEL)})
_GET, _GET_REPLY = int(p.Op.GET), int(p.Op.GET_REPLY)
_RING_GET = int(p.Op.RING_GET)
_NOT_FOUND = int(p.Status.NOT_FOUND)
_DELETES = frozenset({p.Op.DEL, p.Op.UPDATE_DEL})
#: Ops that write the store bypassing a client request: the control channel's, never the network's.
_CONTROL_ONLY = frozenset({int(p.Op.PUSH), int(p.Op.REMOVE)})
_STATUSES = frozenset(int(s) for s in p.Status)


@dataclass(frozen=True, slots=True)
class _Result:
    status: int
    epoch: int
    ver: int
    dup: bool = False  # a repeat of an applied request id: flag F_DUP on the reply


#: A client as the agent tells clients apart: its source address and its ``cid``.
ClientId = tuple[str, int]


#: One remembered request id: (client, seq).
RequestId = tuple[ClientId, int]


class RecentIds:
    """Bounded memory of applied request ids: per client the last ``per_client`` seqs, and at most
    ``clients`` clients (least recently seen forgotten first); with the key each one wrote, so
    that a key's ids can be handed to another holder (:meth:`of_key`, docs/protocol.md F7)."""

    def __init__(self, per_client: int = 1024, clients: int = 1024) -> None:
        self.per_client = per_client
        self.clients = clients
        self._by_cid: OrderedDict[ClientId, OrderedDict[int, _Result]] = OrderedDict()
        self._key_of: dict[RequestId, bytes] = {}
        # per key, its ids in the order they were added, with the time (monotonic) of that
        self._by_key: dict[bytes, dict[RequestId, float]] = {}

    def get(self, cid: ClientId, seq: int) -> _Result | None:
        seqs = self._by_cid.get(cid)
        return None if seqs is None else seqs.get(seq)

    def add(self, cid: ClientId, seq: int, result: _Result, key: bytes = b"") -> None:
        """Remember ``(cid, seq)``'s result (and the key it wrote, with the time now)."""
        seqs = self._by_cid.get(cid)
        if seqs is None:
            seqs = self._by_cid[cid] = OrderedDict()
            while len(self._by_cid) > self.clients:
                gone, old = self._by_cid.popitem(last=False)
                for s in old:
                    self._unindex((gone, s))
        else:
            self._by_cid.move_to_end(cid)
        seqs[seq] = result
        if key:
            rid = (cid, seq)
            self._unindex(rid)
            self._key_of[rid] = key
            self._by_key.setdefault(key, {})[rid] = time.monotonic()
        while len(seqs) > self.per_client:
            s, _ = seqs.popitem(last=False)
            self._unindex((cid, s))

    def _unindex(self, rid: RequestId) -> None:
        key = self._key_of.pop(rid, None)
        if key is not None:
            ids = self._by_key[key]
            del ids[rid]
            if not ids:
                del self._by_key[key]

    def of_key(self, key: bytes, since: float | None = None) -> list[tuple[RequestId, _Result]]:
        """The remembered ids that wrote ``key``, with their results, oldest first; with
        ``since`` (a ``time.monotonic()`` value) only those added since then."""
        out = []
        for (cid, seq), at in reversed(self._by_key.get(key, {}).items()):
            if since is not None and at < since:
                break  # added in time order: the rest are older
            result = self.get(cid, seq)
            if result is not None:
                out.append(((cid, seq), result))
        out.reverse()
        return out

    def indexed(self) -> int:
        """Ids remembered with their key (each also counted by ``len``)."""
        return len(self._key_of)

    def __len__(self) -> int:
        return sum(len(s) for s in self._by_cid.values())


@dataclass
class PendingSync:
    """A SYNC this agent sent and waits to see reflected; once done, the item it synced."""

    done: threading.Event = field(default_factory=threading.Event)
    version: tuple[int, int] | None = None
    found: bool = False
    value: bytes = b""
    busy: bool = False  # reflected with ver 0: a write of the key was on its way (rule 5)


#: Test-only switches of the agent's trust rules (``kvswitch agent --test-no-trust RULE``): the
#: adversarial suite (tests/security) shows each attack succeeds without its rule.
TEST_NO_TRUST = ("network-push", "tcp-versions", "ids-without-source")


class AgentCore:
    """The protocol state machine of one server agent."""

    def __init__(
        self,
        backend: Backend,
        switch_addr: Addr | None = None,
        max_value: int = p.MAX_VALUE,
        recent_ids: RecentIds | None = None,
        no_trust: frozenset[str] = frozenset(),
    ) -> None:
        unknown = no_trust - set(TEST_NO_TRUST)
        if unknown:
            raise ValueError(f"unknown trust rules {sorted(unknown)}; known: {TEST_NO_TRUST}")
        self.backend = backend
        self.switch_addr = switch_addr
        self.max_value = max_value
        self.no_trust = no_trust
        self.ids = recent_ids if recent_ids is not None else RecentIds()
        self.stats: Counter[str] = Counter()
        # per key, the writes applied here as a rotated key's writer (a SET/DEL the switch
        # flagged F_REDIRECT, docs/protocol.md F7): where its writes went, the origin included
        self.writer_writes: Counter[bytes] = Counter()
        self.pending_syncs: dict[bytes, PendingSync] = {}
        # Membership (docs/protocol.md "Membership"): the ring this agent serves (None: no ring
        # was set, every key is served, as before membership existed), its own id in it, and a
        # handoff in progress (the next ring; freeze: writes of outgoing keys answer RETRY;
        # released: outgoing keys answer MOVED and RING_GET names the next ring).
        self.ring: p.Ring | None = None
        self.me: int | None = None
        self.next_ring: p.Ring | None = None
        self.frozen = False
        self.released = False
        self.prev_ring: p.Ring | None = None  # the ring before the last activation
        # keys whose writes are frozen (docs/protocol.md F7, a rotated key's writer map changes):
        # their SET/DEL answer RETRY, their UPDATE copies are dropped; Gets are served
        self.frozen_keys: set[bytes] = set()

    # -- entry point ----------------------------------------------------------------------------

    def handle(self, data: bytes, src: Addr, tcp: bool = False) -> list[Output]:
        """Process one received message (``tcp``: it came over a TCP connection); never raises on
        bad input."""
        self.stats["rx"] += 1
        try:
            msg = p.Message.decode(data)
        except p.MalformedMessage:
            self.stats["malformed"] += 1
            return []
        op = msg.op
        if op in _NOT_FOR_SERVERS:
            self.stats["wrong_op"] += 1
            return []
        if op in _CONTROL_ONLY and "network-push" not in self.no_trust:
            self.stats["untrusted_op"] += 1
            return []
        if tcp and "tcp-versions" not in self.no_trust:
            # UPDATE, UPDATE_DEL, SYNC come from the switch, by UDP; a client may ask the ring
            if op not in _CLIENT_REQUESTS and op != _RING_GET:
                self.stats["untrusted_op"] += 1
                return []
            if msg.ver | msg.epoch:
                self.stats["tcp_version_ignored"] += 1
                msg = dataclasses.replace(msg, epoch=0, ver=0)
            if msg.flags & (p.F_REDIRECT | p.F_SETTLED):  # the switch sets them over UDP only
                msg = dataclasses.replace(msg, flags=msg.flags & ~(p.F_REDIRECT | p.F_SETTLED))
        reply_op = _REPLY_OP.get(op)
        problem = self._check(msg)
        if problem is not None:
            self.stats["bad_request" if problem == p.Status.BAD_REQUEST else "too_large"] += 1
            if reply_op is None:
                return []
            return [(msg.reply(reply_op, problem).encode(), src)]
        self.stats[_OP_STAT[op]] += 1
        if op == _RING_GET:
            return [(self._ring_reply(msg), src)]
        if op in _CLIENT_REQUESTS and self.ring is not None:
            route = self._route(msg)
            if route is not None:
                assert reply_op is not None
                return [(route.encode(), src)]
        if self.frozen_keys and op in _WRITES and msg.key in self.frozen_keys:
            self.stats["key_frozen"] += 1
            if reply_op is None:  # an UPDATE copy: dropped, nothing applied, no CONFIRM
                return []
            return [(msg.reply(reply_op, p.Status.RETRY, epoch=0, ver=0).encode(), src)]
        try:
            if op == _GET:
                return [(self._get(msg), src)]
            return self._dispatch(msg, src, reply_op)
        except BackendError:
            self.stats["backend_error"] += 1
            if reply_op is None:
                return []
            return [(msg.reply(reply_op, p.Status.SERVER_ERROR).encode(), src)]

    def _check(self, msg: p.Message) -> int | None:
        """A status for a message that is well framed but not acceptable, else None."""
        if msg.status or msg.flags & ~p.FLAGS_KNOWN:
            return p.Status.BAD_REQUEST
        if msg.value and msg.op not in _VALUE_OPS:
            return p.Status.BAD_REQUEST
        if msg.cid == 0 and msg.op in _CLIENT_REQUESTS:
            return p.Status.BAD_REQUEST
        if len(msg.value) > self.max_value:
            return p.Status.TOO_LARGE
        return None

    def _get(self, msg: p.Message) -> bytes:
        item = self.backend.get(msg.key)
        if item is None or not item.live:
            return p.pack(_GET_REPLY, msg.key, b"", _NOT_FOUND, msg.cid, msg.seq)
        return p.pack(_GET_REPLY, msg.key, item.value, 0, msg.cid, msg.seq, item.epoch, 0, item.ver)

    def _dispatch(self, msg: p.Message, src: Addr, reply_op: int | None) -> list[Output]:
        op = msg.op
        if op in _WRITES:
            result = self._write(msg, src)
            if op in (p.Op.SET, p.Op.DEL):
                assert reply_op is not None
                flags = p.F_DUP if result.dup else 0
                reply = msg.reply(
                    reply_op, result.status, epoch=result.epoch, ver=result.ver, flags=flags
                )
                return [(reply.encode(), src)]
            return self._confirm(msg.key)
        if op == p.Op.PUSH:  # only with --test-no-trust network-push
            self._apply_write(msg)
            return self._confirm(msg.key)
        if op == p.Op.SYNC:
            return self._sync_reflected(msg)
        if op == p.Op.REMOVE:  # only with --test-no-trust network-push
            found = self.backend.drop(msg.key)
            status = p.Status.OK if found else p.Status.NOT_FOUND
            return [(msg.reply(p.Op.REMOVE_REPLY, status).encode(), src)]
        self.stats["wrong_op"] += 1  # unreachable with the current op table
        return []

    # -- writes -----------------------------------------------------------------------------------

    def _write(self, msg: p.Message, src: Addr) -> _Result:
        client = ("" if "ids-without-source" in self.no_trust else src[0], msg.cid)
        seen = self.ids.get(client, msg.seq) if msg.cid else None
        if seen is not None:
            self.stats["duplicate"] += 1
            return self._duplicate(msg, seen, client)
        result = self._apply_write(msg)
        if msg.cid:
            self.ids.add(client, msg.seq, result, msg.key)
        rotated = msg.flags & p.F_REDIRECT and msg.op in (p.Op.SET, p.Op.DEL)
        if rotated and result.status != p.Status.STALE:
            self.writer_writes[msg.key] += 1
            self.stats["writer_write"] += 1
        return result

    def _duplicate(self, msg: p.Message, seen: _Result, client: ClientId) -> _Result:
        """A repeated request id: not applied again; the reply repeats the first result (its
        status too, so a retried Delete still tells whether the key existed), flagged ``F_DUP``.

        A duplicate that crossed the switch again carries a newer version, and the switch now waits
        for that version (docs/protocol.md, rule 2). When :meth:`adopts` says so, the stored value
        is exactly the duplicate's and no other write's version lies between the two, so the
        server moves it to the newer version: the origin's reply then acknowledges it and the
        replicas' confirms of it count. Otherwise nothing changes and the key's replicas wait for
        its next write.
        """
        if msg.ver != 0 and seen.status in (p.Status.OK, p.Status.NOT_FOUND):
            stored = self.backend.get(msg.key)
            if stored is not None and self.adopts(msg, seen, stored):
                self.backend.put(msg.key, Item(stored.value, *msg.version, live=stored.live))
                seen = _Result(seen.status, msg.epoch, msg.ver)
                self.ids.add(client, msg.seq, seen, msg.key)
                self.stats["duplicate_version_adopted"] += 1
        return _Result(seen.status, seen.epoch, seen.ver, dup=True)

    @staticmethod
    def adopts(msg: p.Message, seen: _Result, stored: Item) -> bool:
        """Whether a versioned repeat ``msg`` of a request id first applied with result ``seen``
        moves the ``stored`` item to its version (docs/protocol.md "Agent rules", found by the
        explorer, preset ``resend-overtaken``). Only at the key's origin (a ``SET``/``DEL``, not
        an ``UPDATE`` copy), only when the switch flagged the repeat ``F_SETTLED`` (every earlier
        write of the key had been reported by the origin when it was stamped), and only when the
        first application is still the key's last write here (the stored version is the one it
        produced, and the stored item is the write's: an unversioned write over TCP keeps the
        version). Then the origin held the first application's version when the repeat was
        stamped, so no other write's version lies between the two. A replica knows no such thing
        (its first copy may be older than what the origin reported), nor does an unflagged
        repeat: a second writer's write stamped in between may be visible at a replica, and moving
        the first value past it would reorder the two after both were seen."""
        return (
            msg.op in (p.Op.SET, p.Op.DEL)
            and bool(msg.flags & p.F_SETTLED)
            and stored.version == (seen.epoch, seen.ver)
            and msg.version > stored.version
            and stored.live == (msg.op == p.Op.SET)
            and (not stored.live or stored.value == msg.value)
        )

    def _apply_write(self, msg: p.Message) -> _Result:
        key = msg.key
        stored = self.backend.get(key)
        delete = msg.op in _DELETES
        if msg.ver != 0:
            if stored is not None and msg.version <= stored.version:
                self.stats["stale"] += 1
                return _Result(p.Status.STALE, stored.epoch, stored.ver)
            version = msg.version
        else:
            version = stored.version if stored is not None else (0, 0)
        existed = stored is not None and stored.live
        if delete:
            if version != (0, 0):
                self.backend.put(key, Item(b"", *version, live=False))
            elif stored is not None:
                self.backend.drop(key)
            status = p.Status.OK if existed else p.Status.NOT_FOUND
        else:
            self.backend.put(key, Item(msg.value, *version))
            status = p.Status.OK
        return _Result(status, msg.epoch, msg.ver)

    def _confirm(self, key: bytes) -> list[Output]:
        if self.switch_addr is None:
            self.stats["confirm_unsent_no_switch"] += 1
            return []
        stored = self.backend.get(key)
        if stored is None or stored.version == (0, 0):
            return []
        self.stats["confirm_sent"] += 1
        confirm = p.Message(p.Op.CONFIRM, key, epoch=stored.epoch, ver=stored.ver)
        return [(confirm.encode(), self.switch_addr)]

    # -- SYNC: make replicas of a key that became hot without a write -----------------------------

    def start_sync(self, key: bytes) -> tuple[PendingSync, list[Output]]:
        """Begin the SYNC flow for ``key``: the SYNC to send and the record to wait on; once
        ``done``, the record holds the item (value and the version the switch stamped), which the
        controller pushes into the replicas over their control channels (:meth:`push_item`).

        Without a switch address there is no one to stamp a version: the current version is used
        as is and the record is done at once (standalone mode, for tests and single hosts).
        """
        pending = PendingSync()
        if self.switch_addr is None:
            return pending, self._finish_sync(key, pending, None)
        self.pending_syncs[key] = pending
        self.stats["sync_sent"] += 1
        return pending, [(p.Message(p.Op.SYNC, key).encode(), self.switch_addr)]

    def _sync_reflected(self, msg: p.Message) -> list[Output]:
        pending = self.pending_syncs.get(msg.key)
        if pending is None:
            self.stats["sync_unexpected"] += 1
            return []
        del self.pending_syncs[msg.key]
        if msg.ver == 0:  # not stamped: a write is on its way to this origin; ask again soon
            self.stats["sync_busy"] += 1
            pending.busy = True
            pending.done.set()
            return []
        return self._finish_sync(msg.key, pending, msg.version)

    def _finish_sync(
        self, key: bytes, pending: PendingSync, version: tuple[int, int] | None
    ) -> list[Output]:
        stored = self.backend.get(key)
        out: list[Output] = []
        if stored is not None and version is not None and version > stored.version:
            stored = Item(stored.value, *version, live=stored.live)
            self.backend.put(key, stored)
        if stored is not None and stored.live:
            pending.found = True
            pending.version = stored.version
            pending.value = stored.value
            if self.switch_addr is not None:
                done = p.Message(p.Op.SYNC_DONE, key, epoch=stored.epoch, ver=stored.ver)
                out.append((done.encode(), self.switch_addr))
        pending.done.set()
        return out

    def push_item(
        self, key: bytes, value: bytes, epoch: int, ver: int
    ) -> tuple[bool, tuple[int, int], list[Output]]:
        """A replica copy handed in by the controller (the control channel's ``push``): applied by
        the version rule, then ``CONFIRM``ed to the switch. Returns whether it was applied, the
        version now held, and the CONFIRM to send."""
        if len(key) != p.KEY_LEN or len(value) > self.max_value:
            raise p.ProtocolError("push: key must be 16 bytes and the value within --max-value")
        if not (0 < epoch <= 0xFFFF and 0 < ver <= 0xFFFFFFFF):
            raise p.ProtocolError("push: a replica copy needs a switch version (epoch, ver) > 0")
        msg = p.Message(p.Op.PUSH, key, value, epoch=epoch, ver=ver)
        result = self._apply_write(msg)
        self.stats["push_applied" if result.status == p.Status.OK else "push_stale"] += 1
        stored = self.backend.get(key)
        held = stored.version if stored is not None else (0, 0)
        return result.status == p.Status.OK, held, self._confirm(key)

    def holds(self, key: bytes) -> bool:
        """True if this server has a live value for ``key``."""
        item = self.backend.get(key)
        return item is not None and item.live

    def remove_local(self, key: bytes) -> bool:
        return self.backend.drop(key)

    def rebase_local(self, key: bytes) -> bool:
        """Forget ``key``'s (epoch, version), keep its value: the key changes serializer (a leaf
        and a spine, docs/fabric.md "Moving a key between levels") and the new one's versions
        cannot be compared with the old one's, so any of them must apply over it. A tombstone
        goes (no version is left for it to guard). Only from the controller's channel. True if
        a live copy was rebased."""
        stored = self.backend.get(key)
        if stored is None or stored.version == (0, 0):
            return stored is not None and stored.live
        if not stored.live:
            self.backend.drop(key)
            return False
        self.backend.put(key, Item(stored.value))
        return True

    def snapshot(self) -> list[tuple[bytes, Item]]:
        return list(self.backend.items())

    # -- the write freeze of one key (docs/protocol.md F7, "Changing the writer map") -----------

    def freeze_key(self, key: bytes) -> bool:
        """The key's writes answer RETRY (its UPDATE copies are dropped) until
        :meth:`release_key`; its Gets are served. False if it was frozen already."""
        _check_key(key)
        if key in self.frozen_keys:
            return False
        self.frozen_keys.add(key)
        return True

    def release_key(self, key: bytes) -> bool:
        """The key's writes are served again; False if it was not frozen."""
        _check_key(key)
        if key not in self.frozen_keys:
            return False
        self.frozen_keys.discard(key)
        return True

    def frozen_list(self) -> list[bytes]:
        """The keys frozen here, in order (a restarted fabric controller finishes their freezes:
        controller/rotation.py ``recover``)."""
        return sorted(self.frozen_keys)

    def export_key(
        self, key: bytes, window: float | None = None
    ) -> tuple[list[tuple[RequestId, _Result]], Item | None]:
        """A frozen key's remembered request ids with their results (with ``window``: only those
        applied or imported in the last ``window`` seconds, the ids a client may still repeat),
        and the item held (a tombstone too; None: nothing held)."""
        self._need_frozen(key, "export")
        since = None if window is None else time.monotonic() - window
        return self.ids.of_key(key, since), self.backend.get(key)

    def import_key(
        self, key: bytes, ids: list[tuple[RequestId, _Result]], item: Item | None
    ) -> tuple[bool, int]:
        """Another holder's export into this frozen key: ``item`` stored only if its version is
        newer than the one held (an unversioned item only where nothing is held), the ids this
        agent does not remember added with their results. Returns (item stored, ids added)."""
        self._need_frozen(key, "import")
        if item is not None and len(item.value) > self.max_value:
            raise p.ProtocolError("import: the value exceeds --max-value")
        stored = False
        if item is not None:
            held = self.backend.get(key)
            if held is None or item.version > held.version:
                self.backend.put(key, item)
                stored = True
        added = 0
        for (client, seq), result in ids:
            if self.ids.get(client, seq) is None:
                self.ids.add(client, seq, result, key)
                added += 1
        return stored, added

    def _need_frozen(self, key: bytes, what: str) -> None:
        _check_key(key)
        if key not in self.frozen_keys:
            raise p.ProtocolError(f"{what}: key {key.hex()} is not frozen here")

    # -- membership: ownership, RING_GET, the handoff (docs/protocol.md "Membership") -------------

    @property
    def announced(self) -> p.Ring | None:
        """The ring RING_GET answers and MOVED names: the next one once released."""
        return self.next_ring if self.released and self.next_ring is not None else self.ring

    def _ring_reply(self, msg: p.Message) -> bytes:
        ring = self.announced
        if ring is None:  # not under a controller: no ring to tell
            return msg.reply(p.Op.RING_REPLY, p.Status.NOT_FOUND, epoch=0, ver=0).encode()
        return msg.reply(p.Op.RING_REPLY, p.Status.OK, ring.encode(), epoch=0, ver=0).encode()

    def _route(self, msg: p.Message) -> p.Message | None:
        """None when this server serves the client request here, else its MOVED/RETRY reply."""
        assert self.ring is not None
        key, op = msg.key, msg.op
        now = self.ring.origin(key) == self.me
        later = self.next_ring.origin(key) == self.me if self.next_ring is not None else now
        status: int | None = None
        if now and later:
            return None
        if now and not self.released:  # outgoing, still this server's
            if not self.frozen or op == _GET:
                return None
            status = p.Status.RETRY
        elif later and not now:  # incoming, not active yet
            status = p.Status.RETRY
        elif msg.flags & p.F_REDIRECT:
            # the switch redirected it to this server: a Get to a replica in the key's read set
            # (rule 4), or a rotated key's write to its writer (docs/protocol.md F7)
            return None
        reply_op = _REPLY_OP[op]
        if status == p.Status.RETRY:
            self.stats["retry"] += 1
            return msg.reply(reply_op, p.Status.RETRY, epoch=0, ver=0)
        self.stats["moved"] += 1
        ring = self.announced
        version = (ring.version if ring is not None else 0).to_bytes(4, "big")
        return msg.reply(reply_op, p.Status.MOVED, version, epoch=0, ver=0)

    def set_ring(self, ring: p.Ring, me: int) -> None:
        """Serve ``ring`` now as server ``me`` (start-up, or a controller that restarted); any
        handoff in progress is forgotten."""
        self.ring, self.me, self.prev_ring = ring, me, None
        self.next_ring, self.frozen, self.released = None, False, False

    def prepare_ring(self, ring: p.Ring, me: int) -> None:
        """Handoff step 1: ``ring`` is next. Keys this server gets under it answer RETRY until
        :meth:`activate_ring`; the rest is served as before."""
        if self.ring is None:
            raise p.ProtocolError("prepare: this agent serves no ring yet (set one first)")
        if ring.version <= self.ring.version:
            raise p.ProtocolError(
                f"prepare: ring {ring.version} is not newer than {self.ring.version}"
            )
        if me != self.me:
            raise p.ProtocolError(f"prepare: this agent is server {self.me}, not {me}")
        self.next_ring, self.frozen, self.released = ring, False, False

    def _need_next(self, what: str) -> p.Ring:
        if self.ring is None or self.next_ring is None:
            raise p.ProtocolError(f"{what}: no ring change prepared")
        return self.next_ring

    def _change(self, what: str) -> tuple[p.Ring, p.Ring]:
        """(old, new) rings of the change prepared, or else of the last one activated (a copy
        may follow the activation: the controller's test-only unsafe order)."""
        if self.ring is not None and self.next_ring is not None:
            return self.ring, self.next_ring
        if self.ring is not None and self.prev_ring is not None:
            return self.prev_ring, self.ring
        raise p.ProtocolError(f"{what}: no ring change prepared")

    def outgoing(self, to: int | None = None) -> list[bytes]:
        """Keys held here that are this server's under the current ring and another's (``to``'s,
        if given) under the next one."""
        old, nxt = self._change("outgoing")
        out = []
        for key, _item in self.backend.items():
            if old.origin(key) == self.me:
                dest = nxt.origin(key)
                if dest != self.me and (to is None or dest == to):
                    out.append(key)
        return out

    def freeze(self) -> None:
        """Handoff step 2: writes of outgoing keys answer RETRY (Gets still served: the values
        are final)."""
        self._need_next("freeze")
        self.frozen = True

    def export(self, to: int) -> list[tuple[bytes, Item]]:
        """The items (tombstones too) of keys moving from here to server ``to``."""
        return [(k, it) for k in self.outgoing(to) if (it := self.backend.get(k)) is not None]

    def import_items(
        self, items: list[tuple[bytes, Item]], source: int, complete: bool
    ) -> tuple[int, int]:
        """Items of keys coming here from server ``source``: each stored unless this server holds
        a newer version (an incoming key takes no write here before activation, so normally
        everything applies). ``complete``: this is ``source``'s whole set, taken while it was
        frozen: incoming keys from it that are not in it were deleted there, and go here too.
        Returns (stored, dropped)."""
        old, nxt = self._change("import")
        stored = dropped = 0
        names = set()
        for key, item in items:
            if nxt.origin(key) != self.me or old.origin(key) != source:
                raise p.ProtocolError(f"import: key {key.hex()} does not move from {source} here")
            names.add(key)
            held = self.backend.get(key)
            if held is None or item.version >= held.version:
                self.backend.put(key, item)
                stored += 1
        if complete:
            for key, _item in list(self.backend.items()):
                if key not in names and nxt.origin(key) == self.me and old.origin(key) == source:
                    self.backend.drop(key)
                    dropped += 1
        return stored, dropped

    def release(self) -> None:
        """Handoff step 3 (every old owner, before any new owner activates): outgoing keys are
        not this server's any more (MOVED; their copies are dropped later); RING_GET names the
        next ring. Incoming keys still answer RETRY."""
        self._need_next("release")
        self.released = True
        self.frozen = False

    def activate_ring(self) -> None:
        """Handoff step 4: the next ring is this server's ring."""
        self.prev_ring, self.ring = self.ring, self._need_next("activate")
        self.next_ring, self.frozen, self.released = None, False, False

    def drop_moved(self) -> int:
        """After the handoff: drop the copies of the keys that moved away from this server in the
        last change (they left the hot set before it, so none is a replica copy here)."""
        if self.ring is None or self.prev_ring is None:
            return 0
        old, new, me = self.prev_ring, self.ring, self.me
        self.prev_ring = None
        gone = [k for k, _ in self.backend.items() if old.origin(k) == me and new.origin(k) != me]
        for key in gone:
            self.backend.drop(key)
        return len(gone)


def _check_key(key: bytes) -> None:
    if len(key) != p.KEY_LEN:
        raise p.ProtocolError(f"a key is {p.KEY_LEN} bytes")


def make_result(status: int, epoch: int, ver: int) -> _Result:
    """A request id's result as an import carries it (checked: a known status, versions in
    range)."""
    if status not in _STATUSES:
        raise p.ProtocolError(f"unknown status {status}")
    if not (0 <= epoch <= 0xFFFF and 0 <= ver <= 0xFFFFFFFF):
        raise p.ProtocolError("epoch/ver out of range")
    return _Result(status, epoch, ver)
