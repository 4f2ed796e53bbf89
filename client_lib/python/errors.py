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


class ClientClosed(KvsError):
    """The client was closed."""


__all__ = [
    "BadRequest",
    "ClientClosed",
    "KeyTooLong",
    "KvsError",
    "ProtocolError",
    "ServerError",
    "StaleWrite",
    "Timeout",
    "ValueTooLarge",
]
