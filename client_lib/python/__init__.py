"""KVSwitch Python client library: :class:`Client` (thread-safe, pipelined) and its errors."""

from kvswitch.client.client import Client, Outcome, Request
from kvswitch.client.errors import (
    BadRequest,
    ClientClosed,
    KeyTooLong,
    KvsError,
    ServerError,
    Timeout,
    ValueTooLarge,
)

__all__ = [
    "BadRequest",
    "Client",
    "ClientClosed",
    "KeyTooLong",
    "KvsError",
    "Outcome",
    "Request",
    "ServerError",
    "Timeout",
    "ValueTooLarge",
]
