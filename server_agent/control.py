"""A typed client of the agent's JSON-lines control API (for the controller and tools).

    with AgentControl.at("unix:/run/s1.ctl") as origin, AgentControl.at("unix:/run/s2.ctl") as r:
        item = origin.sync(b"hot-key")     # SYNC through the switch -> SyncedItem(value, epoch, ver)
        r.push(b"hot-key", item)           # the replica stores it and CONFIRMs -> (epoch, ver) held
        r.versions()                       # -> {key16: KeyVersion}

Every method sends one request line and reads one answer line on one TCP connection (opened on
first use, reopened after an error). A ``{"ok": false}`` answer raises :class:`ControlError`.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from dataclasses import dataclass
from typing import Any

from kvswitch import protocol as p


class ControlError(RuntimeError):
    """The agent refused a control request, or the connection failed."""


class NotHeld(ControlError):
    """The agent holds no live copy of the key (``sync`` of a key its origin does not have: never
    written, deleted, or lost with a restarted memory backend). Not worth retrying: the key's next
    write reaches its replicas through the switch's UPDATE copies."""


NOT_HELD = "key not held here"  # the agent's error text for NotHeld


@dataclass(frozen=True, slots=True)
class SyncedItem:
    """An origin's value with the version the switch stamped for it (the ``sync`` answer)."""

    value: bytes
    epoch: int
    ver: int


#: Request ids per ``key_import`` line (an exported row is about 100 bytes as JSON; the agent
#: refuses a control line over 1 MiB).
IMPORT_CHUNK = 4096


@dataclass(frozen=True, slots=True)
class KeyExport:
    """A frozen key's state at one holder (``key_export``): its remembered request ids (rows
    with ip, cid, seq, status, epoch, ver) and its item (a row with value_hex, epoch, ver, live;
    None: nothing held)."""

    ids: list[dict[str, Any]]
    item: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class KeyVersion:
    epoch: int
    ver: int
    live: bool


class AgentControl:
    def __init__(
        self, host: str = "", port: int = 0, timeout: float = 5.0, unix: str | None = None
    ) -> None:
        self.addr: tuple[str, int] | str = unix if unix is not None else (host, port)
        self.timeout = timeout
        self._lock = threading.Lock()
        self._conn: socket.socket | None = None
        self._file: Any = None

    @classmethod
    def at(cls, endpoint: str, timeout: float = 5.0) -> AgentControl:
        """An endpoint written ``unix:PATH`` or ``HOST:PORT`` (the rack file's ``control``)."""
        if endpoint.startswith("unix:"):
            if not endpoint[5:]:
                raise ValueError("unix: endpoint without a path")
            return cls(timeout=timeout, unix=endpoint[5:])
        host, sep, port = endpoint.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"control endpoint {endpoint!r}: expected unix:PATH or HOST:PORT")
        return cls(host, int(port), timeout)

    def _connect(self) -> socket.socket:
        if isinstance(self.addr, str):
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            conn.settimeout(self.timeout)
            try:
                conn.connect(self.addr)
            except OSError:
                conn.close()
                raise
            return conn
        return socket.create_connection(self.addr, timeout=self.timeout)

    def request(self, **fields: Any) -> dict[str, Any]:
        """Send one command object and return the answer (raises :class:`ControlError`)."""
        line = json.dumps(fields).encode() + b"\n"
        with self._lock:
            try:
                if self._file is None:
                    self._conn = self._connect()
                    self._file = self._conn.makefile("rwb")
                self._file.write(line)
                self._file.flush()
                raw = self._file.readline()
                if not raw:
                    raise ConnectionResetError("the agent closed the control connection")
                answer = json.loads(raw)
            except (OSError, ValueError) as exc:
                self._reset()
                raise ControlError(f"control connection to {self.addr}: {exc}") from exc
        if not isinstance(answer, dict) or not answer.get("ok"):
            error = answer.get("error") if isinstance(answer, dict) else answer
            if error == NOT_HELD:
                raise NotHeld(f"agent {self.addr}: {NOT_HELD}")
            raise ControlError(f"agent {self.addr} refused {fields.get('cmd')}: {error}")
        return answer

    def ping(self) -> int:
        return int(self.request(cmd="ping")["port"])

    def incarnation(self) -> int:
        """The random number the agent picked at start: a new one means it restarted."""
        value = self.request(cmd="ping").get("incarnation")
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ControlError(f"agent {self.addr}: ping without an incarnation")
        return value

    def item(self, key: bytes | str) -> SyncedItem | None:
        """The agent's own live copy of ``key`` with its version (read locally, no SYNC); None
        if it holds none. Used to restore an origin that restarted empty from a valid replica."""
        answer = self.request(cmd="item", key_hex=p.pad_key(key).hex())
        if not answer.get("found"):
            return None
        return SyncedItem(
            bytes.fromhex(answer["value_hex"]), int(answer["epoch"]), int(answer["ver"])
        )

    def sync(self, key: bytes | str) -> SyncedItem:
        """The origin SYNCs ``key`` through the switch and hands back its value and new version."""
        answer = self.request(cmd="sync", key_hex=p.pad_key(key).hex())
        return SyncedItem(
            bytes.fromhex(answer["value_hex"]), int(answer["epoch"]), int(answer["ver"])
        )

    def push(self, key: bytes | str, item: SyncedItem) -> tuple[int, int]:
        """Store ``item`` as this agent's replica copy of ``key`` (applied if newer than what it
        holds; then CONFIRMed to the switch); the version the agent holds afterwards."""
        answer = self.request(
            cmd="push",
            key_hex=p.pad_key(key).hex(),
            value_hex=item.value.hex(),
            epoch=item.epoch,
            ver=item.ver,
        )
        return int(answer["epoch"]), int(answer["ver"])

    def remove(self, key: bytes | str) -> bool:
        """Drop the agent's copy of ``key``; True if it had one."""
        return bool(self.request(cmd="remove", key_hex=p.pad_key(key).hex())["found"])

    def rebase(self, key: bytes | str) -> bool:
        """Forget the (epoch, version) of the agent's copy of ``key``, keep its value (the key
        changes serializer); True if it had a live copy."""
        return bool(self.request(cmd="rebase", key_hex=p.pad_key(key).hex())["found"])

    # -- the write freeze of one key (docs/protocol.md F7, "Changing the writer map") -----------

    def key_freeze(self, key: bytes | str) -> bool:
        """The key's writes answer RETRY here until :meth:`key_release`; True if it was frozen
        already."""
        return bool(self.request(cmd="key_freeze", key_hex=p.pad_key(key).hex())["was_frozen"])

    def key_release(self, key: bytes | str) -> bool:
        """The key's writes are served again; True if it was frozen."""
        return bool(self.request(cmd="key_release", key_hex=p.pad_key(key).hex())["was_frozen"])

    def key_frozen(self) -> list[bytes]:
        """The keys frozen at this agent (whose writes answer RETRY until released)."""
        rows = self.request(cmd="key_frozen").get("keys_hex")
        try:
            if not isinstance(rows, list):
                raise TypeError
            keys = [bytes.fromhex(row) for row in rows]
        except (TypeError, ValueError):
            raise ControlError(f"agent {self.addr}: a malformed key_frozen answer") from None
        if any(len(key) != p.KEY_LEN for key in keys):
            raise ControlError(f"agent {self.addr}: a malformed key_frozen answer")
        return keys

    def key_export(self, key: bytes | str, window: float | None = None) -> KeyExport:
        """A frozen key's request ids and item; with ``window``, only the ids the agent applied
        or imported in the last ``window`` seconds (the ids a client may still repeat)."""
        extra = {} if window is None else {"window": window}
        answer = self.request(cmd="key_export", key_hex=p.pad_key(key).hex(), **extra)
        ids, item = answer.get("ids"), answer.get("item")
        if not isinstance(ids, list) or not (item is None or isinstance(item, dict)):
            raise ControlError(f"agent {self.addr}: a malformed key_export answer")
        return KeyExport(ids, item)

    def key_import(self, key: bytes | str, export: KeyExport) -> tuple[bool, int]:
        """Another holder's export into this frozen key: (its item stored, ids added). Sent in
        lines of at most :data:`IMPORT_CHUNK` ids (the agent takes a line of at most 1 MiB, about
        10 000 ids: a key written often has more), the item with the last one. A refused line
        leaves the ids of the lines before it added and no item stored (an id more at a holder of
        the key changes no writer's answer; the caller puts the change off)."""
        ids = export.ids
        chunks = (
            [ids[i : i + IMPORT_CHUNK] for i in range(0, len(ids), IMPORT_CHUNK)] or [ids]
            if isinstance(ids, list)
            else [ids]  # refused by the agent, whole
        )
        added = 0
        for n, chunk in enumerate(chunks):
            last = n == len(chunks) - 1
            answer = self.request(
                cmd="key_import",
                key_hex=p.pad_key(key).hex(),
                ids=chunk,
                item=export.item if last else None,
            )
            added += int(answer["added"])
        return bool(answer["stored"]), added

    # -- membership (docs/protocol.md "Membership": the handoff's steps, in this order) ---------

    def ring_set(self, ring: p.Ring, me: int) -> None:
        """Serve ``ring`` now as server ``me`` (start-up)."""
        self.request(cmd="ring_set", ring_hex=ring.encode().hex(), me=me)

    def ring_prepare(self, ring: p.Ring, me: int) -> None:
        self.request(cmd="ring_prepare", ring_hex=ring.encode().hex(), me=me)

    def ring_step(self, step: str) -> dict[str, Any]:
        """``freeze``, ``release``, ``activate`` or ``drop`` (the answer: ``dropped`` for drop)."""
        return self.request(cmd=f"ring_{step}")

    def ring_export(self, to: int) -> list[dict[str, Any]]:
        """The items (rows with key_hex, value_hex, epoch, ver, live) moving from here to ``to``."""
        items = self.request(cmd="ring_export", to=to)["items"]
        return items if isinstance(items, list) else []

    def ring_import(self, source: int, items: list[dict[str, Any]], complete: bool) -> int:
        """Store ``source``'s items here; the number stored."""
        answer = self.request(cmd="ring_import", source=source, items=items, complete=complete)
        return int(answer["stored"])

    def ring_state(self) -> dict[str, Any]:
        return self.request(cmd="ring")

    def stats(self) -> dict[str, int]:
        return {k: int(v) for k, v in self.request(cmd="stats")["stats"].items()}

    def writer_writes(self) -> dict[bytes, int]:
        """Per key, the writes this agent applied as a rotated key's writer (docs/protocol.md
        F7: a SET/DEL the switch flagged F_REDIRECT)."""
        rows = self.request(cmd="writer_writes")["keys"]
        if not isinstance(rows, dict):
            raise ControlError(f"agent {self.addr}: a malformed writer_writes answer")
        return {bytes.fromhex(k): int(n) for k, n in rows.items()}

    def keys(self) -> dict[bytes, KeyVersion]:
        """Live keys with their versions."""
        return self._rows("keys")

    def versions(self) -> dict[bytes, KeyVersion]:
        """Every key the agent holds a version for, tombstones (``live`` False) included."""
        return self._rows("versions")

    def _rows(self, cmd: str) -> dict[bytes, KeyVersion]:
        rows = self.request(cmd=cmd)["keys"]
        return {
            bytes.fromhex(r["key_hex"]): KeyVersion(int(r["epoch"]), int(r["ver"]), bool(r["live"]))
            for r in rows
        }

    def _reset(self) -> None:
        for closable in (self._file, self._conn):
            if closable is not None:
                with contextlib.suppress(OSError):
                    closable.close()
        self._file = self._conn = None

    def close(self) -> None:
        with self._lock:
            self._reset()

    def __enter__(self) -> AgentControl:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
