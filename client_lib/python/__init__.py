"""KVSwitch Python client library: :class:`Client` (thread-safe, pipelined), :class:`AsyncClient`
(asyncio) and their errors."""

from kvswitch.client.aio import AsyncClient
from kvswitch.client.client import Client, Outcome, Request
from kvswitch.client.errors import (
    BadRequest,
    ClientClosed,
    KeyTooLong,
    KvsError,
    Moved,
    ServerError,
    StaleWrite,
    Timeout,
    Unavailable,
    ValueTooLarge,
)

__all__ = [
    "AsyncClient",
    "BadRequest",
    "Client",
    "ClientClosed",
    "KeyTooLong",
    "KvsError",
    "Moved",
    "Outcome",
    "Request",
    "ServerError",
    "StaleWrite",
    "Timeout",
    "Unavailable",
    "ValueTooLarge",
]
