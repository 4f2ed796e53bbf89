"""Typed errors of the KVSwitch client.

``KeyTooLong`` and ``ValueTooLarge`` are the protocol module's (raised before anything is sent, or
for ``ValueTooLarge`` also when the server answers ``TOO_LARGE``). A missing key is not an error:
``get`` returns ``None`` and ``delete`` returns ``False``.
"""

from __future__ import annotations

from kvswitch.protocol import KeyTooLong, ProtocolError, ValueTooLarge


class KvsError(Exception):
    """Base of the client's own errors."""


class Timeout(KvsError, TimeoutError):
    """No reply after every retry."""


class ServerError(KvsError):
    """The server answered ``SERVER_ERROR`` (its backend failed) or an unexpected status."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class BadRequest(ServerError):
    """The server answered ``BAD_REQUEST``."""


class StaleWrite(ServerError):
    """The server answered a Set/Delete ``STALE``: it holds a newer version (``epoch``, ``ver``)
    than the one the switch stamped on this write, so the newer write stands and this one's outcome
    is **unknown**, as after a timeout (overtaken by a concurrent write, its copy may have been read
    by a concurrent Get; lost across a switch restart, it was never visible). Never a success: the
    application decides whether to read and write again."""

    def __init__(self, message: str, status: int, epoch: int = 0, ver: int = 0) -> None:
        super().__init__(message, status)
        self.epoch = epoch
        self.ver = ver


class Unavailable(ServerError):
    """The switch answered ``UNAVAILABLE`` for the key's server: that server is down (the
    controller declared it dead, docs/protocol.md "Faults"). The attempt that got this answer was
    **not applied** anywhere; it is answered at once instead of timing out. ``maybe_applied``: an
    earlier attempt of the same write went unanswered (it may have crossed the switch before the
    server was declared down, and reached the key's replicas), so the write's outcome is unknown,
    as after a timeout; False only when the first attempt got the answer. Retrying later may
    succeed (the server restarts, or a Get of a hot key is routed to a replica)."""

    def __init__(self, message: str, status: int, maybe_applied: bool = True) -> None:
        super().__init__(message, status)
        self.maybe_applied = maybe_applied


class Moved(ServerError):
    """The key's server answered ``MOVED`` (the key is another server's under its ring) and three
    ring refreshes (RING_GET) did not lead to a server that takes it (docs/protocol.md
    "Membership"). Nothing was applied by the servers that answered ``MOVED``; an earlier attempt
    that went unanswered may have been, so a write's outcome is unknown, as after a timeout."""


class ClientClosed(KvsError):
    """The client was closed."""


__all__ = [
    "BadRequest",
    "ClientClosed",
    "KeyTooLong",
    "KvsError",
    "Moved",
    "ProtocolError",
    "ServerError",
    "StaleWrite",
    "Timeout",
    "Unavailable",
    "ValueTooLarge",
]
