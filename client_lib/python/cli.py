"""``kvswitch client get|set|del ...``: one request against a rack, for humans and scripts.

Exit status: 0 done, 1 get/del of a missing key, 2 usage, 3 timeout or server error.
"""

from __future__ import annotations

import argparse
import sys

from kvswitch import protocol as p
from kvswitch.client.client import Addr, Client
from kvswitch.client.errors import KvsError


def _servers(text: str) -> list[Addr]:
    out: list[Addr] = []
    for part in text.split(","):
        host, sep, port = part.strip().rpartition(":")
        out.append((host, int(port)) if sep else (part.strip(), p.KVS_PORT))
    return out


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="kvswitch client", description=__doc__)
    ap.add_argument(
        "--servers",
        default=f"127.0.0.1:{p.KVS_PORT}",
        help="comma-separated ip[:port] of servers 0..M-1 in rack order",
    )
    ap.add_argument("--timeout", type=float, default=0.5, help="seconds per attempt")
    ap.add_argument("--retries", type=int, default=3, help="resends after the first attempt")
    ap.add_argument("--tcp", action="store_true", help="send set/del over TCP")
    sub = ap.add_subparsers(dest="op", required=True)
    sub.add_parser("get", help="print the value").add_argument("key")
    setp = sub.add_parser("set", help="store a value")
    setp.add_argument("key")
    setp.add_argument("value")
    sub.add_parser("del", help="delete a key").add_argument("key")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        servers = _servers(args.servers)
    except ValueError:
        print(f"kvswitch client: bad --servers {args.servers!r}", file=sys.stderr)
        return 2
    with Client(servers, timeout=args.timeout, retries=args.retries, tcp_writes=args.tcp) as c:
        try:
            if args.op == "get":
                value = c.get(args.key)
                if value is None:
                    print("(not found)", file=sys.stderr)
                    return 1
                sys.stdout.buffer.write(value + b"\n")
                return 0
            if args.op == "set":
                c.set(args.key, args.value.encode())
                return 0
            return 0 if c.delete(args.key) else 1
        except (p.KeyTooLong, p.ValueTooLarge) as exc:
            print(f"kvswitch client: {exc}", file=sys.stderr)
            return 2
        except KvsError as exc:
            print(f"kvswitch client: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 3
