"""The KVSwitch wire protocol in Python: constants, messages, consistent hashing.

This module is the Python copy of ``docs/protocol.md`` (the contract) and the only place in Python
where protocol constants are written down. It is the bottom of the KVSwitch side: the client, the
agent, the controller and the tests import it; it imports nothing of KVSwitch.

A message is a fixed 36-byte header followed by ``vlen`` value bytes::

    op:8 status:8 vlen:16 | cid:32 | seq:32 | epoch:16 flags:16 | ver:32 | key:128 | value

all in network byte order.
"""

from __future__ import annotations

import bisect
import enum
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Self

#: Reserved L4 port, UDP and TCP: requests have it as destination port, replies as source port.
KVS_PORT = 8900
#: Header length in bytes (op .. key).
HEADER_LEN = 36
#: Key length in bytes; shorter keys are right-padded with zero bytes.
KEY_LEN = 16
#: Largest value carried over UDP.
MAX_VALUE = 8192
#: ``flags`` bit 0: the switch rewrote this multicast copy from TCP to UDP.
F_TCP = 0x0001
#: flags bit 1 (replies): this request id was applied before; the reply repeats the first result.
F_DUP = 0x0002
#: flags bit 2 (requests): the switch redirected this Get to a replica in the key's read set (rule
#: 4); an agent serves a key it does not own only then (docs/protocol.md "Membership").
F_REDIRECT = 0x0004
#: flags bit 3 (stamped writes and their copies): the switch stamped this write while no earlier
#: write of the key was on its way to the origin (rule 1); only such a repeat of a request id may
#: move the first application's value to its version (docs/protocol.md "Agent rules").
F_SETTLED = 0x0008
#: Every flag bit defined by the protocol; the others must be 0.
FLAGS_KNOWN = F_TCP | F_DUP | F_REDIRECT | F_SETTLED
#: Default number of virtual nodes per server on the consistent-hash ring.
DEFAULT_VNODES = 64

_HEADER = struct.Struct("!BBHIIHHI16s")  # HEADER_LEN bytes; tests check the size


class Op(enum.IntEnum):
    """Operation codes (``op``, 8 bits)."""

    GET = 1
    GET_REPLY = 2
    SET = 3
    SET_REPLY = 4
    DEL = 5
    DEL_REPLY = 6
    UPDATE = 7
    UPDATE_DEL = 8
    CONFIRM = 9
    PUSH = 10
    SYNC = 11
    SYNC_DONE = 12
    REMOVE = 13
    REMOVE_REPLY = 14
    #: client -> any server: "which ring do you serve?" (key all zero, no value)
    RING_GET = 15
    #: server -> client: the ring (:func:`encode_ring`), status OK
    RING_REPLY = 16


class Status(enum.IntEnum):
    """Status codes (``status``, 8 bits): 0 in requests, the result in replies."""

    OK = 0
    NOT_FOUND = 1
    BAD_REQUEST = 2
    TOO_LARGE = 3
    STALE = 4
    DUPLICATE = 5
    SERVER_ERROR = 6
    #: answered by the switch: the request's server is down (docs/protocol.md "Faults")
    UNAVAILABLE = 7
    #: answered by an agent: the key is not this server's under its ring; value = its ring version
    MOVED = 8
    #: answered by an agent: the key is being handed to another server; send it again shortly
    RETRY = 9


#: Requests a client sends, and the reply op the server answers each with.
REPLY_OF: dict[Op, Op] = {
    Op.GET: Op.GET_REPLY,
    Op.SET: Op.SET_REPLY,
    Op.DEL: Op.DEL_REPLY,
    Op.REMOVE: Op.REMOVE_REPLY,
    Op.RING_GET: Op.RING_REPLY,
}
#: Ops whose message carries a value (``vlen`` may be non-zero).
VALUE_OPS: frozenset[Op] = frozenset({Op.GET_REPLY, Op.SET, Op.UPDATE, Op.PUSH, Op.RING_REPLY})

_OPS = frozenset(int(op) for op in Op)
_STATUSES = frozenset(int(s) for s in Status)


class ProtocolError(ValueError):
    """Base class of every protocol-level error."""


class MalformedMessage(ProtocolError):
    """Bytes that are not a valid KVSwitch message (truncated, bad op, bad length ...)."""


class KeyTooLong(ProtocolError):
    """An application key longer than 16 bytes."""


class ValueTooLarge(ProtocolError):
    """A value longer than :data:`MAX_VALUE` bytes."""


def pad_key(key: bytes | str) -> bytes:
    """The 16-byte wire form of an application key (UTF-8 for str, right-padded with zeros).

    Raises :class:`KeyTooLong` for keys over 16 bytes.
    """
    if isinstance(key, str):
        raw = key.encode()
    elif isinstance(key, bytes | bytearray | memoryview):
        raw = bytes(key)
    else:
        raise TypeError(f"a key is bytes or str, not {type(key).__name__}")
    if len(raw) > KEY_LEN:
        raise KeyTooLong(f"key is {len(raw)} bytes, the protocol allows at most {KEY_LEN}")
    return raw.ljust(KEY_LEN, b"\0")


def unpad_key(key16: bytes) -> bytes:
    """The application key of a 16-byte wire key (trailing zero bytes removed)."""
    return key16.rstrip(b"\0")


def check_value(value: bytes, limit: int = MAX_VALUE) -> bytes:
    """``value`` as bytes if it fits ``limit``; :class:`ValueTooLarge` otherwise."""
    if len(value) > limit:
        raise ValueTooLarge(f"value is {len(value)} bytes, the limit is {limit}")
    return bytes(value)


@dataclass(slots=True)
class Message:
    """One KVSwitch message: the header fields and the value.

    ``key`` is always the 16-byte wire key (use :func:`pad_key`). After :meth:`decode`, ``op`` and
    ``status`` are plain ints (they compare equal to :class:`Op`/:class:`Status` members); unknown
    codes are refused unless ``strict=False``.
    """

    op: int
    key: bytes
    value: bytes = b""
    status: int = Status.OK
    cid: int = 0
    seq: int = 0
    epoch: int = 0
    flags: int = 0
    ver: int = 0

    def encode(self) -> bytes:
        """The wire bytes of this message.

        Raises :class:`ProtocolError` subclasses for a key that is not 16 bytes, a value over
        65535 bytes, or a field out of its range.
        """
        if len(self.key) != KEY_LEN:
            raise KeyTooLong(f"wire key must be exactly {KEY_LEN} bytes, got {len(self.key)}")
        if len(self.value) > 0xFFFF:
            raise ValueTooLarge(f"value is {len(self.value)} bytes, vlen holds at most 65535")
        try:
            header = _HEADER.pack(
                self.op,
                self.status,
                len(self.value),
                self.cid,
                self.seq,
                self.epoch,
                self.flags,
                self.ver,
                self.key,
            )
        except struct.error as exc:
            raise ProtocolError(f"field out of range: {exc}") from None
        return header + self.value if self.value else header

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview, strict: bool = True) -> Self:
        """Parse one message from the start of ``data``; bytes after ``36 + vlen`` are ignored.

        Raises :class:`MalformedMessage` if ``data`` is shorter than a header or than
        ``36 + vlen``, and (``strict``) if ``op`` or ``status`` is not a known code.
        """
        if len(data) < HEADER_LEN:
            raise MalformedMessage(f"{len(data)} bytes, shorter than the {HEADER_LEN}-byte header")
        op, status, vlen, cid, seq, epoch, flags, ver, key = _HEADER.unpack_from(data)
        end = HEADER_LEN + vlen
        if len(data) < end:
            raise MalformedMessage(f"vlen {vlen} but only {len(data) - HEADER_LEN} value bytes")
        if strict:
            if op not in _OPS:
                raise MalformedMessage(f"unknown op {op}")
            if status not in _STATUSES:
                raise MalformedMessage(f"unknown status {status}")
        return cls(op, key, bytes(data[HEADER_LEN:end]), status, cid, seq, epoch, flags, ver)

    @property
    def version(self) -> tuple[int, int]:
        """(epoch, ver): versions compare in this order."""
        return (self.epoch, self.ver)

    @property
    def request_id(self) -> tuple[int, int]:
        """(cid, seq): the request id replies echo."""
        return (self.cid, self.seq)

    def reply(self, op: int, status: int = Status.OK, value: bytes = b"", **fields: int) -> Message:
        """A reply to this request: echoes cid, seq, key and (unless given) epoch and ver."""
        msg = Message(op, self.key, value, status, self.cid, self.seq, self.epoch, 0, self.ver)
        for name, val in fields.items():
            setattr(msg, name, val)
        return msg


def pack(
    op: int,
    key: bytes,
    value: bytes = b"",
    status: int = 0,
    cid: int = 0,
    seq: int = 0,
    epoch: int = 0,
    flags: int = 0,
    ver: int = 0,
) -> bytes:
    """The wire bytes of a message without building a :class:`Message` (hot paths).

    The caller guarantees a 16-byte key, a value of at most 65535 bytes and fields in range;
    ``struct.error`` otherwise.
    """
    return _HEADER.pack(op, status, len(value), cid, seq, epoch, flags, ver, key) + value


def message_length(header: bytes | bytearray | memoryview) -> int:
    """Total length (header + value) announced by a header; used to frame TCP streams."""
    if len(header) < HEADER_LEN:
        raise MalformedMessage(f"{len(header)} bytes, shorter than the {HEADER_LEN}-byte header")
    return HEADER_LEN + int.from_bytes(header[2:4], "big")


# -- consistent hashing -------------------------------------------------------------------------

_M64 = (1 << 64) - 1
_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3


def fnv1a64(data: bytes) -> int:
    """FNV-1a, 64 bits."""
    h = _FNV_OFFSET
    for byte in data:
        h = ((h ^ byte) * _FNV_PRIME) & _M64
    return h


def mix64(z: int) -> int:
    """The splitmix64 finaliser."""
    z ^= z >> 30
    z = (z * 0xBF58476D1CE4E5B9) & _M64
    z ^= z >> 27
    z = (z * 0x94D049BB133111EB) & _M64
    z ^= z >> 31
    return z


def ring_hash(data: bytes) -> int:
    """``H(b) = mix64(fnv1a64(b))``: the hash of ring points and key positions."""
    return mix64(fnv1a64(data))


@dataclass(frozen=True)
class HashRing:
    """The consistent-hash ring of ``servers`` servers (numbered 0 .. M-1) with ``vnodes`` each,
    or, with ``members``, of those server ids only (docs/protocol.md "Membership": ids are rack
    order indices and stay the same when another server leaves)."""

    servers: int
    vnodes: int = DEFAULT_VNODES
    members: frozenset[int] | None = None
    _points: list[int] = field(init=False, repr=False, compare=False)
    _owners: list[int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.vnodes < 1:
            raise ValueError("a ring needs at least one virtual node per server")
        if self.members is None:
            if self.servers < 1:
                raise ValueError("a ring needs at least one server")
            ids: Iterable[int] = range(self.servers)
        else:
            if not self.members or min(self.members) < 0:
                raise ValueError("a ring needs at least one member, ids >= 0")
            object.__setattr__(self, "members", frozenset(self.members))
            ids = sorted(self.members)
        # Sorting (point, server) puts the lower server first on equal points, as the contract says.
        ring = sorted((ring_hash(b"%d#%d" % (s, v)), s) for s in ids for v in range(self.vnodes))
        object.__setattr__(self, "_points", [p for p, _ in ring])
        object.__setattr__(self, "_owners", [s for _, s in ring])

    @classmethod
    def of(cls, members: Iterable[int], vnodes: int = DEFAULT_VNODES) -> HashRing:
        """The ring of exactly these server ids."""
        ids = frozenset(members)
        return cls(max(ids, default=-1) + 1, vnodes, ids)

    @property
    def ids(self) -> frozenset[int]:
        """The member ids."""
        return frozenset(range(self.servers)) if self.members is None else self.members

    def origin(self, key: bytes | str) -> int:
        """The origin server number of an application or wire key."""
        return self.owner_at(ring_hash(pad_key(key)))

    def owner_at(self, position: int) -> int:
        """The server owning ring position ``position``: that of the first point at or after it,
        wrapping to the smallest."""
        i = bisect.bisect_left(self._points, position)
        return self._owners[i if i < len(self._points) else 0]

    @property
    def points(self) -> tuple[tuple[int, int], ...]:
        """The ring's (point, server) pairs, ascending."""
        return tuple(zip(self._points, self._owners, strict=True))


@dataclass(frozen=True, slots=True)
class Member:
    """One member of a versioned ring: its id (rack order index) and its KVS address."""

    id: int
    ip: str
    port: int = KVS_PORT


_RING_HEAD = struct.Struct("!IHH")
_RING_MEMBER = struct.Struct("!HH4s")


@dataclass(frozen=True)
class Ring:
    """A versioned ring (docs/protocol.md "Membership"): what RING_REPLY carries. Version 0 is a
    client's own ring made from its configured server list; the rack's rings start at 1."""

    version: int
    members: tuple[Member, ...]
    vnodes: int = DEFAULT_VNODES
    hashring: HashRing = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not 0 <= self.version <= 0xFFFFFFFF or not 0 < self.vnodes <= 0xFFFF:
            raise ValueError("ring version must fit 32 bits and vnodes 1 .. 65535")
        members = tuple(sorted(self.members, key=lambda m: m.id))
        ids = [m.id for m in members]
        if not ids or len(set(ids)) != len(ids) or not 0 <= ids[0] <= ids[-1] <= 0xFFFF:
            raise ValueError("a ring needs 1 .. 65536 members with distinct ids 0 .. 65535")
        object.__setattr__(self, "members", members)
        object.__setattr__(self, "hashring", HashRing.of(ids, self.vnodes))

    @classmethod
    def of_servers(cls, servers: Sequence[tuple[str, int]], vnodes: int = DEFAULT_VNODES) -> Ring:
        """Version 0: every configured server a member, ids = list indices."""
        return cls(0, tuple(Member(i, h, port) for i, (h, port) in enumerate(servers)), vnodes)

    @property
    def ids(self) -> frozenset[int]:
        return self.hashring.ids

    def member(self, server: int) -> Member:
        for m in self.members:
            if m.id == server:
                return m
        raise KeyError(f"server {server} is not a member of ring {self.version}")

    def origin(self, key: bytes | str) -> int:
        return self.hashring.origin(key)

    def address(self, key: bytes | str) -> tuple[str, int]:
        """The (ip, port) of the key's origin."""
        m = self.member(self.origin(key))
        return (m.ip, m.port)

    def encode(self) -> bytes:
        """RING_REPLY's value: version u32, vnodes u16, count u16, then per member (sorted by
        id) id u16, udp port u16, ipv4 u32; network byte order."""
        out = [_RING_HEAD.pack(self.version, self.vnodes, len(self.members))]
        try:
            for m in self.members:
                out.append(_RING_MEMBER.pack(m.id, m.port, _inet_aton(m.ip)))
        except (OSError, struct.error) as exc:
            raise ProtocolError(f"ring member out of range: {exc}") from None
        return b"".join(out)

    @classmethod
    def decode(cls, data: bytes) -> Ring:
        """The ring of a RING_REPLY value; :class:`MalformedMessage` if it is not one."""
        if len(data) < _RING_HEAD.size:
            raise MalformedMessage(f"ring of {len(data)} bytes, shorter than its 8-byte head")
        version, vnodes, count = _RING_HEAD.unpack_from(data)
        if len(data) != _RING_HEAD.size + _RING_MEMBER.size * count:
            raise MalformedMessage(f"ring of {len(data)} bytes does not hold {count} members")
        members = []
        for i in range(count):
            sid, port, ip = _RING_MEMBER.unpack_from(data, _RING_HEAD.size + i * _RING_MEMBER.size)
            members.append(Member(sid, ".".join(str(b) for b in ip), port))
        try:
            return cls(version, tuple(members), vnodes)
        except ValueError as exc:
            raise MalformedMessage(f"bad ring: {exc}") from None


def _inet_aton(ip: str) -> bytes:
    parts = ip.split(".")
    if len(parts) != 4 or not all(x.isdigit() and int(x) < 256 for x in parts):
        raise ProtocolError(f"not an IPv4 address: {ip!r}")
    return bytes(int(x) for x in parts)


def origin_of(key: bytes | str, servers: int, vnodes: int = DEFAULT_VNODES) -> int:
    """The origin server of ``key`` among ``servers`` servers (builds a ring; cache it for volume)."""
    return HashRing(servers, vnodes).origin(key)


def origins(keys: Sequence[bytes | str], servers: int, vnodes: int = DEFAULT_VNODES) -> list[int]:
    """The origins of many keys on one ring."""
    ring = HashRing(servers, vnodes)
    return [ring.origin(k) for k in keys]
