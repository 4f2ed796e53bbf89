"""``kvswitch agent``: one KVSwitch server agent in front of a backend store."""

from __future__ import annotations

import contextlib
import signal
import sys

from kvswitch import argtypes as t
from kvswitch import protocol as p
from kvswitch.agent.backends import BackendError, make_backend
from kvswitch.agent.capacity import SERVICES
from kvswitch.agent.core import TEST_NO_TRUST, AgentCore, RecentIds
from kvswitch.agent.server import AgentConfig, AgentServer


def build_parser() -> t.Parser:
    ap = t.Parser(prog="kvswitch agent", description=__doc__)
    ap.add_argument("--listen", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    ap.add_argument(
        "--port", type=t.port, default=p.KVS_PORT, help=f"UDP and TCP port (default {p.KVS_PORT})"
    )
    ap.add_argument(
        "--backend",
        choices=("memory", "memcached", "redis"),
        default="memory",
        help="where values live (default memory)",
    )
    ap.add_argument(
        "--backend-addr",
        type=t.host_port(0),
        help="host:port of memcached/redis (default: their usual port on 127.0.0.1)",
    )
    ap.add_argument("--backend-prefix", default="kvs:", help="prefix of the backend's key names")
    ap.add_argument(
        "--switch-addr",
        type=t.host_port(p.KVS_PORT),
        help="switch address (ip[:port]) for CONFIRM, SYNC and SYNC_DONE",
    )
    ap.add_argument("--control-port", type=t.port, help="TCP port of the JSON-lines control API")
    ap.add_argument(
        "--control-listen",
        default="127.0.0.1",
        help="address of the TCP control API (default 127.0.0.1; never one clients can reach)",
    )
    ap.add_argument("--control-unix", help="Unix socket path of the same control API")
    ap.add_argument("--no-tcp", action="store_true", help="serve UDP only")
    ap.add_argument(
        "--max-value",
        type=t.int_range(0, p.MAX_VALUE),
        default=p.MAX_VALUE,
        help=f"largest value accepted, bytes (0-{p.MAX_VALUE}, the protocol's limit)",
    )
    ap.add_argument(
        "--ids-per-client", type=t.positive_int, default=1024, help="request ids kept per client"
    )
    ap.add_argument(
        "--ids-clients", type=t.positive_int, default=1024, help="clients whose ids are kept"
    )
    ap.add_argument(
        "--capacity",
        type=t.positive_float,
        help="serve at most this many requests/s, the rest waiting FIFO (default: unbounded)",
    )
    ap.add_argument(
        "--service",
        choices=SERVICES,
        default="fixed",
        help="with --capacity: service time 1/capacity (fixed) or exponential of that mean (exp)",
    )
    ap.add_argument("--seed", type=int, default=0, help="seed of the exponential service times")
    ap.add_argument(
        "--queue-limit",
        type=t.positive_int,
        default=1000,
        help="with --capacity: requests that may wait; more are dropped and counted (1000)",
    )
    ap.add_argument(
        "--test-no-trust",
        action="append",
        default=[],
        choices=TEST_NO_TRUST,
        help="TESTS ONLY: switch one trust rule off (the adversarial suite shows it matters)",
    )
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        backend_addr = None
        if args.backend_addr is not None:
            host, port = args.backend_addr
            host = f"[{host}]" if ":" in host else host
            backend_addr = f"{host}:{port}" if port else host
        backend = make_backend(args.backend, backend_addr, args.backend_prefix)
        backend.get(bytes(p.KEY_LEN))  # fail now, clearly, if the backend is unreachable
        switch = args.switch_addr
        core = AgentCore(
            backend,
            switch,
            args.max_value,
            RecentIds(args.ids_per_client, args.ids_clients),
            no_trust=frozenset(args.test_no_trust),
        )
        server = AgentServer(
            core,
            AgentConfig(
                args.listen,
                args.port,
                args.control_port,
                control_listen=args.control_listen,
                control_unix=args.control_unix,
                tcp=not args.no_tcp,
                capacity=args.capacity,
                service=args.service,
                seed=args.seed,
                queue_limit=args.queue_limit,
            ),
        )
    except (OSError, ValueError, BackendError) as exc:
        print(f"kvswitch agent: {exc}", file=sys.stderr)
        return 1
    signal.signal(signal.SIGTERM, lambda *_: server.request_stop())
    control = f", control on {server.control_port}" if server.control_port else ""
    if args.test_no_trust:
        control += f", TEST BUILD: trust rules off: {','.join(sorted(set(args.test_no_trust)))}"
    if args.control_unix:
        control += f", control on unix:{args.control_unix}"
    if args.capacity is not None:
        control += f", capacity {args.capacity:g}/s ({args.service}, queue {args.queue_limit})"
    print(
        f"kvswitch agent: {args.backend} backend, serving {args.listen}:{server.port}{control}",
        flush=True,
    )
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    backend.close()
    return 0
