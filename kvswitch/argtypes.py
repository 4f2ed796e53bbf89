"""Command-line checks shared by every ``kvswitch`` subcommand.

:class:`Parser` is ``argparse.ArgumentParser`` with a one-line error: ``kvswitch agent: error:
argument --port: 70000 is not a port (0-65535)``, exit status 2, never a traceback. The type
functions below turn a bad value into that line. (The software switch, which imports nothing of
KVSwitch, has its own copy of the few it needs in ``softswitch/main.py``.)
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import NoReturn

Addr = tuple[str, int]


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line (plus where to find the usage)."""

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: error: {message} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(2)


def _int(text: str) -> int:
    for base in (10, 0):  # decimal (leading zeros allowed) or 0x/0o/0b
        try:
            return int(text, base)
        except ValueError:
            continue
    raise argparse.ArgumentTypeError(f"{text!r} is not an integer")


def _float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def int_range(low: int, high: int | None = None, what: str = "") -> Callable[[str], int]:
    """An integer in [low, high] (no upper bound when ``high`` is None)."""
    bound = f"{low}-{high}" if high is not None else f">= {low}"

    def check(text: str) -> int:
        value = _int(text)
        if value < low or (high is not None and value > high):
            said = f"is not a {what}" if what else "is out of range"
            raise argparse.ArgumentTypeError(f"{text} {said} ({bound})")
        return value

    check.__name__ = what or "integer"
    return check


def float_range(
    low: float, high: float | None = None, above: bool = False
) -> Callable[[str], float]:
    """A finite number >= low (> low when ``above``), and <= high when given."""
    bound = (
        f"between {low:g} and {high:g}" if high is not None else f"{'>' if above else '>='} {low:g}"
    )

    def check(text: str) -> float:
        value = _float(text)
        if value < low or (above and value == low) or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"{text} is out of range ({bound})")
        return value

    check.__name__ = "number"
    return check


port = int_range(0, 65535, "port")  # TCP/UDP
positive_int = int_range(1)
nonneg_int = int_range(0)
positive_float = float_range(0, above=True)
nonneg_float = float_range(0)
fraction = float_range(0, 1)


def host_port(default_port: int) -> Callable[[str], Addr]:
    """``host``, ``host:port`` or ``[v6]:port`` with a valid port."""

    def check(text: str) -> Addr:
        text = text.strip()
        if text.startswith("["):
            host, _, rest = text[1:].partition("]")
            given = rest[1:] if rest.startswith(":") else None
        else:
            host, sep, given_port = text.rpartition(":")
            if not sep or ":" in host:  # no port, or a bare IPv6 address
                host, given = text, None
            else:
                given = given_port
        if not host:
            raise argparse.ArgumentTypeError(f"{text!r}: no host")
        return host, default_port if given is None else port(given)

    check.__name__ = "address"
    return check


def endpoint(text: str) -> str:
    """``host:port`` (gRPC style, ``[v6]:port`` too) with a valid port, kept as text."""
    _host, given = host_port(-1)(text)
    if given < 0:
        raise argparse.ArgumentTypeError(f"{text!r} has no port (host:port)")
    return text.strip()


def host_port_list(default_port: int) -> Callable[[str], list[Addr]]:
    """Comma-separated ``host[:port]`` addresses."""
    one = host_port(default_port)

    def check(text: str) -> list[Addr]:
        return [one(part) for part in text.split(",")]

    check.__name__ = "address list"
    return check
