"""``kvswitch client get|set|del ...``: one request against a rack, for humans and scripts.

Exit status: 0 done, 1 get/del of a missing key, 2 usage, 3 timeout or server error.
"""

from __future__ import annotations

import sys

from kvswitch import argtypes as t
from kvswitch import protocol as p
from kvswitch.client.client import Client
from kvswitch.client.errors import KvsError


def build_parser() -> t.Parser:
    ap = t.Parser(prog="kvswitch client", description=__doc__)
    ap.add_argument(
        "--servers",
        type=t.host_port_list(p.KVS_PORT),
        default=[("127.0.0.1", p.KVS_PORT)],
        help=f"comma-separated ip[:port] of servers 0..M-1 in rack order (default port {p.KVS_PORT})",
    )
    ap.add_argument(
        "--timeout", type=t.positive_float, default=0.5, help="seconds per attempt (default 0.5)"
    )
    ap.add_argument(
        "--retries", type=t.nonneg_int, default=3, help="resends after the first attempt (3)"
    )
    ap.add_argument("--tcp", action="store_true", help="send set/del over TCP")
    sub = ap.add_subparsers(dest="op", required=True)
    sub.add_parser("get", help="print the value").add_argument("key", help="the key")
    setp = sub.add_parser("set", help="store a value")
    setp.add_argument("key", help="the key")
    setp.add_argument("value", help="the value (UTF-8 text)")
    sub.add_parser("del", help="delete a key").add_argument("key", help="the key")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    with Client(args.servers, timeout=args.timeout, retries=args.retries, tcp_writes=args.tcp) as c:
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
