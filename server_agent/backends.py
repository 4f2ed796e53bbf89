"""Backend stores of the agent: an in-process dict, memcached (pymemcache) or Redis (redis-py).

Every backend stores, per 16-byte wire key, an :class:`Item`: the value, its version
``(epoch, ver)`` and whether it is a tombstone (a deleted key whose version must be remembered so
that an older write cannot bring it back). In memcached and Redis an item is one blob::

    live:8 (1 = value, 0 = tombstone) | epoch:16 | ver:32 | value

under the text key ``<prefix><32 hex digits of the wire key>``. Backends raise
:class:`BackendError` when the store fails; the agent answers ``SERVER_ERROR`` then.
"""

from __future__ import annotations

import socket
import struct
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

_META = struct.Struct("!BHI")


class BackendError(RuntimeError):
    """The backend store failed (connection refused, timeout, server error)."""


@dataclass(frozen=True, slots=True)
class Item:
    value: bytes
    epoch: int = 0
    ver: int = 0
    live: bool = True

    @property
    def version(self) -> tuple[int, int]:
        return (self.epoch, self.ver)

    def pack(self) -> bytes:
        return _META.pack(1 if self.live else 0, self.epoch, self.ver) + self.value

    @classmethod
    def unpack(cls, blob: bytes) -> Item:
        if len(blob) < _META.size:
            raise BackendError(f"corrupt item of {len(blob)} bytes in the backend")
        live, epoch, ver = _META.unpack_from(blob)
        return cls(bytes(blob[_META.size :]), epoch, ver, bool(live))


class Backend(Protocol):
    """What the agent needs from a store. Only the agent writes its keys."""

    name: str

    def get(self, key: bytes) -> Item | None: ...

    def put(self, key: bytes, item: Item) -> None: ...

    def drop(self, key: bytes) -> bool:
        """Forget the key entirely (no tombstone); True if something was there."""
        ...

    def items(self) -> Iterator[tuple[bytes, Item]]: ...

    def close(self) -> None: ...


class MemoryBackend:
    """The default: a dict in the agent's process."""

    name = "memory"

    def __init__(self) -> None:
        self._data: dict[bytes, Item] = {}

    def get(self, key: bytes) -> Item | None:
        return self._data.get(key)

    def put(self, key: bytes, item: Item) -> None:
        self._data[key] = item

    def drop(self, key: bytes) -> bool:
        return self._data.pop(key, None) is not None

    def items(self) -> Iterator[tuple[bytes, Item]]:
        yield from list(self._data.items())

    def close(self) -> None:
        self._data.clear()


def _text_key(prefix: str, key: bytes) -> str:
    return prefix + key.hex()


class MemcachedBackend:
    """memcached through pymemcache. Keys are listed with ``lru_crawler metadump all`` (memcached
    1.4.31+) merged with the keys this agent wrote; if the dump fails, only the latter."""

    name = "memcached"

    def __init__(self, host: str, port: int, prefix: str = "kvs:", timeout: float = 2.0) -> None:
        from pymemcache.client.base import Client as MemcacheClient

        self._addr = (host, port)
        self._timeout = timeout
        self._prefix = prefix
        self._client = MemcacheClient(
            (host, port), connect_timeout=timeout, timeout=timeout, no_delay=True
        )
        self._keys: set[bytes] = set()

    def get(self, key: bytes) -> Item | None:
        try:
            blob = self._client.get(_text_key(self._prefix, key))
        except Exception as exc:
            raise BackendError(f"memcached get: {exc}") from exc
        return None if blob is None else Item.unpack(blob)

    def put(self, key: bytes, item: Item) -> None:
        try:
            ok = self._client.set(_text_key(self._prefix, key), item.pack(), noreply=False)
        except Exception as exc:
            raise BackendError(f"memcached set: {exc}") from exc
        if not ok:
            raise BackendError("memcached refused the item (too large for its slab size?)")
        self._keys.add(key)

    def drop(self, key: bytes) -> bool:
        try:
            found = bool(self._client.delete(_text_key(self._prefix, key), noreply=False))
        except Exception as exc:
            raise BackendError(f"memcached delete: {exc}") from exc
        self._keys.discard(key)
        return found

    def _dumped_keys(self) -> set[bytes]:
        """The wire keys under this prefix that memcached holds, from its LRU crawler."""
        data = bytearray()
        try:
            with socket.create_connection(self._addr, timeout=self._timeout) as conn:
                conn.sendall(b"lru_crawler metadump all\r\n")
                while not (data.endswith(b"END\r\n") or data.startswith(b"ERROR")):
                    chunk = conn.recv(1 << 16)
                    if not chunk:
                        break
                    data += chunk
        except OSError:
            return set()
        keys: set[bytes] = set()
        for line in data.decode("ascii", "replace").splitlines():
            if not line.startswith("key="):
                continue
            name = urllib.parse.unquote(line.split(" ", 1)[0][4:])
            if name.startswith(self._prefix):
                try:
                    raw = bytes.fromhex(name[len(self._prefix) :])
                except ValueError:
                    continue
                if len(raw) == 16:
                    keys.add(raw)
        return keys

    def items(self) -> Iterator[tuple[bytes, Item]]:
        for key in sorted(self._keys | self._dumped_keys()):
            item = self.get(key)
            if item is not None:
                yield key, item

    def close(self) -> None:
        self._client.close()


class RedisBackend:
    """Redis through redis-py; keys are listed with SCAN over the agent's prefix."""

    name = "redis"

    def __init__(self, host: str, port: int, prefix: str = "kvs:", timeout: float = 2.0) -> None:
        import redis

        self._prefix = prefix
        self._redis = redis.Redis(
            host=host, port=port, socket_timeout=timeout, socket_connect_timeout=timeout
        )

    def get(self, key: bytes) -> Item | None:
        try:
            blob = self._redis.get(_text_key(self._prefix, key))
        except Exception as exc:
            raise BackendError(f"redis get: {exc}") from exc
        return None if blob is None else Item.unpack(blob)  # type: ignore[arg-type]

    def put(self, key: bytes, item: Item) -> None:
        try:
            self._redis.set(_text_key(self._prefix, key), item.pack())
        except Exception as exc:
            raise BackendError(f"redis set: {exc}") from exc

    def drop(self, key: bytes) -> bool:
        try:
            return bool(self._redis.delete(_text_key(self._prefix, key)))
        except Exception as exc:
            raise BackendError(f"redis delete: {exc}") from exc

    def items(self) -> Iterator[tuple[bytes, Item]]:
        try:
            names = sorted(self._redis.scan_iter(match=self._prefix + "*", count=1000))
        except Exception as exc:
            raise BackendError(f"redis scan: {exc}") from exc
        for name in names:
            text = name.decode() if isinstance(name, bytes) else str(name)
            key = bytes.fromhex(text[len(self._prefix) :])
            item = self.get(key)
            if item is not None:
                yield key, item

    def close(self) -> None:
        self._redis.close()


def parse_hostport(text: str, default_port: int) -> tuple[str, int]:
    """``host``, ``host:port`` or ``[v6]:port`` → (host, port)."""
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        return host, int(rest[1:]) if rest.startswith(":") else default_port
    host, sep, port = text.rpartition(":")
    if sep and host and ":" not in host:
        return host, int(port)
    return text, default_port


def make_backend(kind: str, addr: str | None = None, prefix: str = "kvs:") -> Backend:
    """A backend by name: ``memory``, ``memcached`` (default 127.0.0.1:11211) or ``redis``
    (default 127.0.0.1:6379)."""
    if kind == "memory":
        return MemoryBackend()
    if kind == "memcached":
        host, port = parse_hostport(addr or "127.0.0.1", 11211)
        return MemcachedBackend(host, port, prefix)
    if kind == "redis":
        host, port = parse_hostport(addr or "127.0.0.1", 6379)
        return RedisBackend(host, port, prefix)
    raise ValueError(f"unknown backend {kind!r} (memory, memcached, redis)")
