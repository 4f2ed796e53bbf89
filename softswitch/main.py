"""``kvswitch switch``: the software switch as a process, with simple_switch_grpc's flags.

    kvswitch switch [options] [PROGRAM.p4] [-- --grpc-server-addr ADDR --cpu-port N]

This target takes the BMv2 JSON that p4c-bm2-ss writes, as simple_switch_grpc does, or P4 source
(``-D NAME=VAL`` and ``-I DIR`` as for a compiler); everything else is spelled the same.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import NoReturn

from softswitch import P4Error
from softswitch.io import PortIO, parse_port_spec
from softswitch.runtime.bundle import Bundle, embedded_bundle
from softswitch.runtime.device import Device
from softswitch.switch import DROP_PORT

LOG = logging.getLogger("softswitch")
LEVELS = {
    "trace": logging.DEBUG,
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warn": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "off": logging.CRITICAL + 10,
}


class Parser(argparse.ArgumentParser):
    """One-line errors, exit status 2 (as the other kvswitch subcommands)."""

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: error: {message} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(2)


def _bounded(what: str, low: int, high: int) -> Callable[[str], int]:
    def check(text: str) -> int:
        try:
            value = int(text, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text} is not a {what} ({low}-{high})")
        return value

    check.__name__ = what
    return check


tcp_port = _bounded("TCP port", 0, 65535)
switch_port = _bounded("switch port", 0, DROP_PORT - 1)  # 9-bit egress_spec; 511 drops
device_id = _bounded("device id", 0, (1 << 64) - 1)


def wait_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text} is not a number of seconds (>= 0)")
    return value


def port_spec(text: str) -> tuple[int, str]:
    try:
        num, name = parse_port_spec(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    switch_port(str(num))
    return num, name


def grpc_address(text: str) -> str:
    host, sep, port = text.rpartition(":")
    if not sep or not host:
        raise argparse.ArgumentTypeError(f"{text!r} is not HOST:PORT")
    tcp_port(port)
    return text


def define(text: str) -> tuple[str, str]:
    name, _, value = text.partition("=")
    if not name.isidentifier():
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME or NAME=VALUE")
    return name, value or "1"


def parser() -> Parser:
    p = Parser(prog="kvswitch switch", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "program",
        nargs="?",
        help="P4-16 program (v1model or TNA, from its main package) as source, or the BMv2 JSON "
        "p4c-bm2-ss wrote (*.json)",
    )
    p.add_argument(
        "-i",
        "--interface",
        type=port_spec,
        action="append",
        default=[],
        metavar="PORT@IFACE",
        help="attach interface IFACE as switch port PORT (0-510); repeatable",
    )
    p.add_argument("--device-id", type=device_id, default=0, help="P4Runtime device id (default 0)")
    p.add_argument(
        "--thrift-port", type=tcp_port, default=9090, help="BMv2 Thrift runtime port (9090)"
    )
    p.add_argument("--log-console", action="store_true", help="log to stderr")
    p.add_argument("--log-file", help="log to this file")
    p.add_argument(
        "-L", "--log-level", choices=sorted(LEVELS), default="info", help="log level (info)"
    )
    p.add_argument(
        "--pcap", nargs="?", const=".", metavar="DIR", help="write PORT_in/out.pcap files"
    )
    p.add_argument(
        "--use-files",
        type=wait_seconds,
        metavar="WAIT",
        help="ports are pcap files IFACE_in.pcap/IFACE_out.pcap; wait WAIT seconds first",
    )
    p.add_argument("--no-p4", action="store_true", help="start without a program")
    add_preprocessor_options(p)
    return p


def add_preprocessor_options(p: argparse.ArgumentParser) -> None:
    """``-D NAME[=VAL]`` and ``-I DIR``, as a compiler takes them (the switch and kvswitch p4c)."""
    p.add_argument(
        "-D",
        dest="defines",
        type=define,
        action="append",
        default=[],
        metavar="NAME=VAL",
        help="preprocessor define for P4 source; repeatable",
    )
    p.add_argument(
        "-I",
        dest="includes",
        action="append",
        default=[],
        metavar="DIR",
        help="include directory for P4 source; repeatable",
    )


def target_parser() -> Parser:
    p = Parser(prog="kvswitch switch ... --", add_help=True)
    p.add_argument(
        "--grpc-server-addr",
        type=grpc_address,
        default="0.0.0.0:9559",
        help="P4Runtime server address (default 0.0.0.0:9559)",
    )
    p.add_argument(
        "--cpu-port",
        type=switch_port,
        help="frames sent to this port become P4Runtime packet-ins (no default: none)",
    )
    return p


def setup_logging(args: argparse.Namespace) -> None:
    root = logging.getLogger("softswitch")
    root.setLevel(LEVELS[args.log_level])
    fmt = logging.Formatter(
        "%(asctime)s.%(msecs)03d %(levelname)s %(name)s: %(message)s", "%H:%M:%S"
    )
    handlers: list[logging.Handler] = []
    if args.log_console:
        handlers.append(logging.StreamHandler(sys.stderr))
    if args.log_file:
        handlers.append(logging.FileHandler(args.log_file))
    if not handlers:  # errors still reach the console
        quiet = logging.StreamHandler(sys.stderr)
        quiet.setLevel(logging.WARNING)
        handlers.append(quiet)
    for h in handlers:
        h.setFormatter(fmt)
        root.addHandler(h)


def parse_defines(items: list[str]) -> dict[str, str]:
    """``["NAME=VAL", "FLAG"]`` -> ``{"NAME": "VAL", "FLAG": "1"}`` (raises ValueError)."""
    out = {}
    for item in items:
        try:
            name, value = define(item)
        except argparse.ArgumentTypeError as exc:
            raise ValueError(str(exc)) from None
        out[name] = value
    return out


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    own, target = (
        (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    )
    args = parser().parse_args(own)
    targs = target_parser().parse_args(target)
    setup_logging(args)
    if args.program and args.no_p4:
        print("kvswitch switch: give a program or --no-p4, not both", file=sys.stderr)
        return 2
    if not args.program and not args.no_p4:
        print("kvswitch switch: a P4 program is required (or --no-p4)", file=sys.stderr)
        return 2

    device = Device(device_id=args.device_id, cpu_port=targs.cpu_port)
    if args.program:
        try:
            if args.program.endswith(".json"):
                data = Path(args.program).read_bytes()
                inner = embedded_bundle(data)  # written by kvswitch p4c -o
                pipe = device.load(inner) if inner else device.load_json(data, name=args.program)
                device.install(pipe)
            else:
                bundle = Bundle.from_file(args.program, dict(args.defines), args.includes)
                device.install(device.load(bundle))
        except P4Error as exc:  # names the file (and line) itself
            print(f"kvswitch switch: {exc}", file=sys.stderr)
            return 1
        except OSError as exc:
            print(f"kvswitch switch: cannot read {exc.filename}: {exc.strerror}", file=sys.stderr)
            return 1
        except ValueError as exc:
            print(f"kvswitch switch: cannot load {args.program}: {exc}", file=sys.stderr)
            return 1

    io = PortIO(device.process, Path(args.pcap) if args.pcap else None)
    device.transmit = io.transmit
    for num, name in args.interface:
        try:
            if args.use_files is not None:
                io.add_file_port(num, name)
            else:
                io.add_interface(num, name)
        except PermissionError:
            print("kvswitch switch: raw sockets need root (or CAP_NET_RAW)", file=sys.stderr)
            io.close()
            return 1
        except OSError as exc:
            print(
                f"kvswitch switch: interface {name} (port {num}): {exc.strerror}", file=sys.stderr
            )
            io.close()
            return 1
        except ValueError as exc:
            print(f"kvswitch switch: {exc}", file=sys.stderr)
            io.close()
            return 1

    # Imported here: the servers pull in grpc and thrift, which the I/O alone does not need.
    from softswitch.runtime.p4runtime_server import P4RuntimeServer
    from softswitch.runtime.thrift_server import ThriftServer

    try:
        thrift = ThriftServer(device, args.thrift_port, ports=io.names)
        grpc_server = P4RuntimeServer(device, targs.grpc_server_addr)
    except (OSError, RuntimeError) as exc:
        print(f"kvswitch switch: cannot listen: {exc}", file=sys.stderr)
        io.close()
        return 1

    def on_signal(signum: int, frame: FrameType | None) -> None:
        LOG.info("signal %d: shutting down", signum)
        io.stop()

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
    thrift.start()
    grpc_server.start()
    LOG.info(
        "switch ready: device %d, ports %s, thrift %d, grpc %s",
        args.device_id,
        io.names(),
        args.thrift_port,
        targs.grpc_server_addr,
    )
    try:
        if args.use_files is not None and not io.stopped.wait(args.use_files):
            io.run_files()
        io.run()
    finally:
        grpc_server.stop()
        thrift.stop()
        io.close()
        LOG.info("switch stopped")
    return 0
