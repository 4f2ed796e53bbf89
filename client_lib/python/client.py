"""The synchronous, thread-safe KVSwitch client.

One UDP socket (unconnected, so a Get redirected by the switch to a replica is accepted from the
replica's address) and one receive thread that hands each reply to the waiting request matched by
(key, seq) and checked for this client's ``cid`` and the expected reply op. Any number of threads may
call :meth:`Client.get`, :meth:`Client.set` and :meth:`Client.delete` at once; :meth:`Client.pipeline`
keeps a window of requests in flight from one thread (load generation).

Retries resend the very same bytes (same ``seq``): the agent applies a request id at most once and
answers a repeat with the first result (flag ``F_DUP``), so a retried Delete still tells whether
the key existed. A Set/Delete answered
``STALE`` (the server holds a newer version, so this write was not applied) raises
:class:`~kvswitch.client.errors.StaleWrite`: it is never reported as a successful write.
"""

from __future__ import annotations

import contextlib
import enum
import heapq
import itertools
import queue
import random
import socket
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from kvswitch import protocol as p
from kvswitch.client.errors import (
    BadRequest,
    ClientClosed,
    Moved,
    ServerError,
    StaleWrite,
    Timeout,
    Unavailable,
)

Addr = tuple[str, int]


@dataclass(slots=True)
class _Pending:
    """A request waiting for its reply: the receive thread fills ``reply`` and then sets
    ``event`` (single calls) or puts itself on ``done`` (pipelines)."""

    expect: int
    ident: tuple[bytes, int]
    done: queue.SimpleQueue[_Pending] | None = None
    event: threading.Event = field(default_factory=threading.Event)
    reply: p.Message | None = None
    arrived: float = 0.0


#: Ring refreshes per request after MOVED (docs/protocol.md "Membership").
MAX_REFRESHES = 3
#: RETRY backoff: first wait and cap, seconds.
RETRY_FIRST, RETRY_CAP = 0.002, 0.05


class Step(enum.Enum):
    """What :meth:`Follow.step` tells a request loop to do next."""

    DONE = "done"  # return the reply
    RESEND = "resend"  # send again (to the key's origin under the client's ring)
    REFRESH = "refresh"  # RING_GET to the server that answered MOVED, then resend
    ELSEWHERE = (
        "elsewhere"  # RING_GET to another member (timeout, UNAVAILABLE); then after_elsewhere
    )
    WAIT = "wait"  # sleep ``Follow.waited`` seconds (RETRY), then resend


@dataclass(slots=True)
class Follow:
    """The membership rules of one request (docs/protocol.md "Membership"), without I/O, shared by
    :class:`Client` and :class:`~kvswitch.client.AsyncClient`: what to do after each attempt.
    Raises :class:`Moved` after :data:`MAX_REFRESHES` refreshes and :class:`Timeout` when the
    retries or the overall time (``deadline``) are spent."""

    deadline: float
    retries: int
    attempts: int = 0
    timeouts: int = 0
    refreshes: int = 0
    backoff: float = RETRY_FIRST
    waited: float = 0.0

    def step(self, reply: p.Message | None, addr: Addr, version: int, now: float) -> Step:
        if reply is None or reply.status == p.Status.UNAVAILABLE:
            return Step.ELSEWHERE
        if reply.status == p.Status.RETRY:
            if now + self.backoff > self.deadline:
                raise Timeout(f"{addr} kept answering RETRY (key being moved)")
            self.waited, self.backoff = self.backoff, min(RETRY_CAP, self.backoff * 2)
            return Step.WAIT
        if reply.status == p.Status.MOVED:
            if self.refreshes >= MAX_REFRESHES:
                raise Moved(
                    f"{addr} answered MOVED after {self.refreshes} ring refreshes", p.Status.MOVED
                )
            self.refreshes += 1
            announced = int.from_bytes(reply.value[:4], "big") if reply.value else 0
            return Step.REFRESH if announced > version else Step.RESEND
        return Step.DONE

    def after_elsewhere(self, reply: p.Message | None, addr: Addr) -> Step:
        """No newer ring names another origin: an UNAVAILABLE answer stands; a timeout is
        retried until the retries are spent."""
        if reply is not None:
            return Step.DONE
        self.timeouts += 1
        if self.timeouts > self.retries:
            raise Timeout(f"no reply from {addr} after {self.attempts} attempts")
        return Step.RESEND


@dataclass(slots=True)
class _Flight:
    out: Outcome
    pend: _Pending
    raw: bytes
    addr: Addr
    started: float
    attempts: int = 1
    deadline: float = 0.0  # the one entry of the deadline heap that counts for this request
    refreshes: int = 0  # MOVED answers followed
    backoff: float = 0.0  # RETRY: the next wait (0: none pending)
    resend_at: float = 0.0  # RETRY: when the wait ends


@dataclass(frozen=True, slots=True)
class Request:
    """One request of a pipeline: ``op`` is ``"get"``, ``"set"`` or ``"delete"``."""

    op: str
    key: bytes | str
    value: bytes = b""


@dataclass(slots=True)
class Outcome:
    """The result of one pipelined request.

    ``value``: the value read (get; None if missing), ``found`` (get/delete), ``error`` (an
    exception instance, or None on success), ``latency`` in seconds from first send to reply.
    """

    request: Request
    value: bytes | None = None
    found: bool = False
    error: Exception | None = None
    latency: float = 0.0
    reply: p.Message | None = None


_OPS = {"get": p.Op.GET, "set": p.Op.SET, "delete": p.Op.DEL}
_REPLY_OP = {int(req): int(rep) for req, rep in p.REPLY_OF.items()}


class Client:
    """A KVSwitch client for the servers of one rack.

    ``servers`` are the (ip, port) addresses of servers 0 … M-1 in rack order: the origin of a key
    is chosen by consistent hashing over them (docs/protocol.md). ``timeout`` is per attempt, and
    ``retries`` the number of resends after the first attempt. ``tcp_writes`` sends Sets and Deletes
    over TCP (one request per segment, waiting for the reply) instead of UDP.
    """

    def __init__(
        self,
        servers: Sequence[Addr],
        cid: int | None = None,
        timeout: float = 0.5,
        retries: int = 3,
        vnodes: int = p.DEFAULT_VNODES,
        tcp_writes: bool = False,
        bind: Addr = ("0.0.0.0", 0),
    ) -> None:
        self.servers, self.cid = client_identity(servers, cid)
        self.timeout = timeout
        self.retries = retries
        self.tcp_writes = tcp_writes
        # the ring the client routes by (docs/protocol.md "Membership"): version 0 is the
        # configured server list; a MOVED reply, a switch's UNAVAILABLE or a timeout makes the
        # client ask a server for a newer one (RING_GET)
        self.ring = p.Ring.of_servers(self.servers, vnodes)
        self.ring_refreshes = 0
        self._elsewhere_at = float("-inf")  # pipeline: the last ring asked after a timeout
        self._seq = itertools.count(random.randrange(1, 1 << 31))
        self._pending: dict[tuple[bytes, int], _Pending] = {}
        self._tcp: dict[Addr, tuple[threading.Lock, list[socket.socket | None]]] = {}
        self._tcp_lock = threading.Lock()
        self.stray_replies = 0
        self._closed = threading.Event()
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        self._sock.bind(bind)
        self._sock.settimeout(0.2)
        self._rx = threading.Thread(target=self._receive_loop, name="kvs-client-rx", daemon=True)
        self._rx.start()

    # -- public API -------------------------------------------------------------------------------

    def get(self, key: bytes | str) -> bytes | None:
        """The value of ``key``, or None if the server does not have it."""
        reply = self._call(p.Op.GET, p.pad_key(key))
        return get_result(reply)

    def set(self, key: bytes | str, value: bytes) -> None:
        """Store ``value`` under ``key`` (UDP, or TCP with ``tcp_writes``)."""
        key16 = p.pad_key(key)
        value = p.check_value(value)
        tries: list[int] = []
        reply = self._call(p.Op.SET, key16, value, tcp=self.tcp_writes, tries=tries)
        write_result(reply, tries == [1])

    def delete(self, key: bytes | str) -> bool:
        """Delete ``key``; False if the server said it was missing (for a retried delete: when
        the server applied it first, as its repeated first result says)."""
        tries: list[int] = []
        reply = self._call(p.Op.DEL, p.pad_key(key), tcp=self.tcp_writes, tries=tries)
        return write_result(reply, tries == [1])

    def origin(self, key: bytes | str) -> Addr:
        """The address of the key's origin server under the client's ring."""
        return self.ring.address(key)

    def pipeline(self, requests: Iterable[Request], window: int = 64) -> list[Outcome]:
        """Run ``requests`` over UDP with up to ``window`` in flight; outcomes in request order.

        Replies are taken in the order they arrive (a completion queue fed by the receive thread);
        a request unanswered for ``timeout`` is resent with the same seq, up to ``retries`` times.
        ``MOVED`` and ``RETRY`` are followed as by the single calls (docs/protocol.md
        "Membership": ring refresh and resend, at most 3 times; resend after 2 ms, doubling to
        50 ms). Errors are reported per request in :attr:`Outcome.error`, never raised.
        """
        outcomes: list[Outcome] = []
        done: queue.SimpleQueue[_Pending] = queue.SimpleQueue()
        flight: dict[tuple[bytes, int], _Flight] = {}
        deadlines: list[tuple[float, tuple[bytes, int]]] = []  # a heap
        source = iter(requests)
        exhausted = False
        while True:
            while not exhausted and len(flight) < window:
                req = next(source, None)
                if req is None:
                    exhausted = True
                    break
                out = Outcome(req)
                outcomes.append(out)
                op = _OPS.get(req.op)
                if op is None:
                    out.error = ValueError(f"unknown request op {req.op!r}")
                    continue
                try:
                    key16 = p.pad_key(req.key)
                    value = p.check_value(req.value)
                except p.ProtocolError as exc:
                    out.error = exc
                    continue
                raw, ident, pend = self._prepare(op, key16, value, done)
                addr = self.ring.address(key16)
                started = time.perf_counter()
                self._send(raw, addr)
                entry = flight[ident] = _Flight(out, pend, raw, addr, started)
                entry.deadline = started + self.timeout
                heapq.heappush(deadlines, (entry.deadline, ident))
            if not flight:
                return outcomes
            wait = max(0.0, deadlines[0][0] - time.perf_counter()) if deadlines else self.timeout
            try:
                pend = done.get(timeout=wait)
            except queue.Empty:
                self._expire(flight, deadlines)
                continue
            entry = flight.pop(pend.ident, None)
            if entry is None:
                continue  # already given up on
            if self._follow(entry, deadlines):
                flight[pend.ident] = entry
                continue
            self._pending.pop(pend.ident, None)
            entry.out.latency = pend.arrived - entry.started
            entry.out.reply = pend.reply
            _fill(entry.out, pend.reply, entry.attempts == 1)

    def _follow(self, entry: _Flight, deadlines: list[tuple[float, tuple[bytes, int]]]) -> bool:
        """A pipelined request answered ``MOVED`` or ``RETRY``: True if it goes on (resent now
        to the key's origin under a refreshed ring, or scheduled for a resend after the RETRY
        wait); False to report the answer (``Moved`` after 3 refreshes)."""
        reply, now = entry.pend.reply, time.perf_counter()
        assert reply is not None
        if reply.status == p.Status.MOVED and entry.refreshes < MAX_REFRESHES:
            entry.refreshes += 1
            announced = int.from_bytes(reply.value[:4], "big") if reply.value else 0
            if announced > self.ring.version:
                self.refresh_ring(entry.addr)
            entry.addr = self.ring.address(entry.pend.ident[0])
            entry.pend.reply = None
            self._send(entry.raw, entry.addr)
            entry.deadline = now + self.timeout
        elif (
            reply.status == p.Status.UNAVAILABLE
            and entry.refreshes < MAX_REFRESHES
            and self._elsewhere(entry, now)
        ):
            entry.refreshes += 1  # a newer ring names another origin: resend there at once
            entry.pend.reply = None
            self._send(entry.raw, entry.addr)
            entry.deadline = now + self.timeout
        elif reply.status == p.Status.RETRY:
            entry.backoff = min(RETRY_CAP, entry.backoff * 2) if entry.backoff else RETRY_FIRST
            if now + entry.backoff > entry.started + self.timeout * (self.retries + 1):
                return False  # reported as the RETRY status (ServerError)
            entry.pend.reply = None
            entry.resend_at = entry.deadline = now + entry.backoff
        else:
            return False
        heapq.heappush(deadlines, (entry.deadline, entry.pend.ident))
        return True

    def _elsewhere(self, entry: _Flight, now: float) -> bool:
        """A pipelined request timed out or was answered UNAVAILABLE: ask another member for the
        ring (at most once per ``timeout`` for the whole pipeline: a dead server must not double
        every request) and aim the request at its origin under it. True if that changed."""
        if now - self._elsewhere_at < self.timeout:
            return False
        self._elsewhere_at = now
        key16 = entry.pend.ident[0]
        if not self._refresh(entry.addr, key16, elsewhere=True):
            return False
        entry.addr = self.ring.address(key16)
        return True

    def _expire(
        self,
        flight: dict[tuple[bytes, int], _Flight],
        deadlines: list[tuple[float, tuple[bytes, int]]],
    ) -> None:
        """Resend or give up on the requests whose attempt timed out (and resend those whose
        RETRY wait is over)."""
        now = time.perf_counter()
        while deadlines and deadlines[0][0] <= now:
            at, ident = heapq.heappop(deadlines)
            entry = flight.get(ident)
            if entry is None or at != entry.deadline:
                continue  # answered, or an earlier attempt's deadline
            if entry.resend_at and at == entry.resend_at:
                entry.resend_at = 0.0
                self._send(entry.raw, entry.addr)
                entry.deadline = now + self.timeout
                heapq.heappush(deadlines, (entry.deadline, ident))
            elif entry.attempts <= self.retries:
                entry.attempts += 1
                self._elsewhere(entry, now)
                entry.addr = self.ring.address(ident[0])  # another request may have refreshed it
                self._send(entry.raw, entry.addr)
                entry.deadline = now + self.timeout
                heapq.heappush(deadlines, (entry.deadline, ident))
            else:
                del flight[ident]
                self._pending.pop(ident, None)
                entry.out.error = Timeout(
                    f"no reply from {entry.addr} after {entry.attempts} attempts"
                )

    def close(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        self._rx.join(timeout=1)
        self._sock.close()
        for lock, holder in self._tcp.values():
            with lock:
                if holder[0] is not None:
                    holder[0].close()
                    holder[0] = None

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals ----------------------------------------------------------------------------------

    def _prepare(
        self,
        op: p.Op,
        key16: bytes,
        value: bytes = b"",
        done: queue.SimpleQueue[_Pending] | None = None,
    ) -> tuple[bytes, tuple[bytes, int], _Pending]:
        seq = next(self._seq) & 0xFFFFFFFF
        raw = p.pack(op, key16, value, 0, self.cid, seq)
        ident = (key16, seq)
        pend = _Pending(_REPLY_OP[op], ident, done)
        self._pending[ident] = pend
        return raw, ident, pend

    def _send(self, raw: bytes, addr: Addr) -> None:
        if self._closed.is_set():
            raise ClientClosed("client is closed")
        # A failed send is a lost attempt: the retry or the timeout handles it.
        with contextlib.suppress(OSError):
            self._sock.sendto(raw, addr)

    def _call(
        self,
        op: p.Op,
        key16: bytes,
        value: bytes = b"",
        tcp: bool = False,
        tries: list[int] | None = None,
    ) -> p.Message:
        """Send and resend until a reply; ``tries``, if given, gets the number of attempts.

        docs/protocol.md "Membership": a ``MOVED`` reply makes the client fetch the ring from the
        server that answered (when it names a newer one) and resend to the key's origin under
        it, at most :data:`MAX_REFRESHES` times (then :class:`Moved`); ``RETRY`` is resent after
        a growing wait (2 ms doubling to 50 ms) within the request's overall time
        (``timeout * (retries + 1)``); a timeout or ``UNAVAILABLE`` asks another member for its
        ring, and resends at once if a newer ring names another origin."""
        raw, ident, pend = self._prepare(op, key16, value)
        follow = Follow(time.monotonic() + self.timeout * (self.retries + 1), self.retries)
        sent = False  # an attempt left this client (it may have been applied)
        try:
            while True:
                addr = self.ring.address(key16)
                follow.attempts += 1
                if tries is not None:
                    tries[:] = [follow.attempts]
                pend.reply = None
                pend.event.clear()
                if tcp:
                    try:
                        reply = self._tcp_call(addr, raw, ident)
                    except ConnectionRefusedError:
                        # nothing sent: the server's host is up, its agent is not
                        if self._refresh(addr, key16, elsewhere=True):
                            continue  # a newer ring names another origin
                        raise Unavailable(
                            f"{addr} refused the TCP connection: the key's server is down",
                            p.Status.UNAVAILABLE,
                            maybe_applied=sent,
                        ) from None
                    sent = True
                else:
                    sent = True
                    self._send(raw, addr)
                    reply = pend.reply if pend.event.wait(self.timeout) else None
                step = follow.step(reply, addr, self.ring.version, time.monotonic())
                if step is Step.ELSEWHERE:
                    if self._refresh(addr, key16, elsewhere=True):
                        continue  # a newer ring names another origin: try it now
                    step = follow.after_elsewhere(reply, addr)
                if step is Step.REFRESH:
                    self._refresh(addr, key16)
                elif step is Step.WAIT:
                    time.sleep(follow.waited)
                elif step is Step.DONE:
                    assert reply is not None
                    return reply
        finally:
            self._pending.pop(ident, None)

    def refresh_ring(self, server: Addr) -> bool:
        """Ask ``server`` for its ring (RING_GET); adopt it if newer. True if adopted."""
        seq = next(self._seq) & 0xFFFFFFFF
        ident = (bytes(p.KEY_LEN), seq)
        pend = _Pending(int(p.Op.RING_REPLY), ident)
        self._pending[ident] = pend
        try:
            self._send(p.pack(p.Op.RING_GET, ident[0], b"", 0, self.cid, seq), server)
            if not pend.event.wait(self.timeout) or pend.reply is None:
                return False
            if pend.reply.status != p.Status.OK:
                return False
            try:
                ring = p.Ring.decode(pend.reply.value)
            except p.MalformedMessage:
                return False
        finally:
            self._pending.pop(ident, None)
        with self._tcp_lock:
            if ring.version <= self.ring.version:
                return False
            self.ring = ring
            self.ring_refreshes += 1
        return True

    def _refresh(self, addr: Addr, key16: bytes, elsewhere: bool = False) -> bool:
        """After MOVED: the ring of ``addr``. After a timeout or UNAVAILABLE (``elsewhere``): the
        ring of another member, and True only if it is newer and names another origin."""
        if not elsewhere:
            return self.refresh_ring(addr)
        others = [(m.ip, m.port) for m in self.ring.members if (m.ip, m.port) != addr]
        if not others:
            return False
        return self.refresh_ring(random.choice(others)) and self.ring.address(key16) != addr

    def _tcp_call(self, addr: Addr, raw: bytes, ident: tuple[bytes, int]) -> p.Message | None:
        with self._tcp_lock:
            lock, holder = self._tcp.setdefault(addr, (threading.Lock(), [None]))
        with lock:
            if holder[0] is None:
                try:
                    conn = socket.create_connection(addr, timeout=self.timeout)
                except ConnectionRefusedError:
                    raise  # nothing was sent: the caller answers Unavailable
                except OSError:
                    return None  # no answer (as a timeout)
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                holder[0] = conn
            try:
                conn = holder[0]
                conn.sendall(raw)
                while True:
                    reply = p.Message.decode(_read_message(conn))
                    if (reply.key, reply.seq) == ident and reply.cid == self.cid:
                        return reply
            except (OSError, p.MalformedMessage):
                if holder[0] is not None:
                    holder[0].close()
                holder[0] = None
                return None

    def _receive_loop(self) -> None:
        recv, closed, pending = self._sock.recvfrom, self._closed, self._pending
        while not closed.is_set():
            try:
                data, _src = recv(65535)
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                msg = p.Message.decode(data)
            except p.MalformedMessage:
                self.stray_replies += 1
                continue
            pend = pending.get((msg.key, msg.seq))
            if pend is None or msg.cid != self.cid or msg.op != pend.expect or pend.reply:
                self.stray_replies += 1
                continue
            pend.arrived = time.perf_counter()
            pend.reply = msg
            if pend.done is not None:
                pend.done.put(pend)
            else:
                pend.event.set()


def client_identity(servers: Sequence[Addr], cid: int | None) -> tuple[list[Addr], int]:
    """The checked server list and client id of a new client (a random id when ``cid`` is None)."""
    if not servers:
        raise ValueError("a client needs at least one server")
    chosen = cid if cid is not None else random.SystemRandom().randrange(1, 1 << 32)
    if not 0 < chosen < 1 << 32:
        raise ValueError("cid must be in 1 .. 2^32-1")
    return [(str(h), int(port)) for h, port in servers], chosen


def _read_exactly(conn: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = conn.recv(n - len(buf))
        if not chunk:
            raise ConnectionResetError("server closed the connection")
        buf += chunk
    return bytes(buf)


def _read_message(conn: socket.socket) -> bytes:
    header = _read_exactly(conn, p.HEADER_LEN)
    return header + _read_exactly(conn, p.message_length(header) - p.HEADER_LEN)


def _raise_status(reply: p.Message, first_attempt: bool = False) -> None:
    status = reply.status
    if status == p.Status.TOO_LARGE:
        raise p.ValueTooLarge("the server refused the value as too large")
    if status == p.Status.BAD_REQUEST:
        raise BadRequest("the server answered BAD_REQUEST", status)
    if status == p.Status.STALE:
        raise StaleWrite(
            f"not applied: the server holds the newer version ({reply.epoch}, {reply.ver})",
            status,
            reply.epoch,
            reply.ver,
        )
    if status == p.Status.MOVED:
        raise Moved("the server answered MOVED: the key is another server's", status)
    if status == p.Status.UNAVAILABLE:
        raise Unavailable(
            "the switch answered UNAVAILABLE: the key's server is down", status, not first_attempt
        )
    raise ServerError(f"the server answered status {status}", status)


def get_result(reply: p.Message) -> bytes | None:
    """The value of a GET_REPLY (None: not found); raises the typed error of a failure status."""
    if reply.status == p.Status.OK:
        return reply.value
    if reply.status == p.Status.NOT_FOUND:
        return None
    _raise_status(reply)
    return None  # unreachable


def write_result(reply: p.Message, first_attempt: bool = False) -> bool:
    """True if a write reply means done, False for NOT_FOUND; raises for a failure status
    (``STALE``: :class:`StaleWrite`; ``UNAVAILABLE``: :class:`Unavailable`, ``maybe_applied``
    unless ``first_attempt`` says the request was sent once)."""
    if reply.status == p.Status.OK:
        return True
    if reply.status == p.Status.NOT_FOUND:
        return False
    _raise_status(reply, first_attempt)
    return False  # unreachable


def _fill(out: Outcome, reply: p.Message | None, first_attempt: bool = False) -> None:
    assert reply is not None
    try:
        if out.request.op == "get":
            out.value = get_result(reply)
            out.found = out.value is not None
        else:
            out.found = write_result(reply, first_attempt)
    except Exception as exc:
        out.error = exc
