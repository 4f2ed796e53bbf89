"""The agent's sockets: UDP and TCP on the KVS port, and the JSON-lines control API.

Threads: one UDP receive loop, one thread per TCP connection, one per control connection. Every
message goes through :meth:`AgentCore.handle` under one lock, so the backend sees one request at a
time. With a bounded capacity (``AgentConfig.capacity``) the requests that cost a server work
(``GET``, ``SET``, ``DEL``, ``UPDATE``, ``UPDATE_DEL``) go through one FIFO
:class:`~kvswitch.agent.capacity.ServiceQueue` first and are handled and answered when their
service ends; the rest (``SYNC``, ``RING_GET``, malformed input) and the control API do not wait. Messages the core addresses to the sender of a TCP request go back on that connection; all
others (UDP replies, CONFIRM, SYNC, SYNC_DONE) leave from the UDP socket, whose source port is
the KVS port, as docs/protocol.md requires of replies.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import ipaddress
import json
import os
import secrets
import socket
import socketserver
import stat
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kvswitch import protocol as p
from kvswitch.agent.backends import BackendError, Item
from kvswitch.agent.capacity import ServiceQueue
from kvswitch.agent.control import NOT_HELD
from kvswitch.agent.core import Addr, AgentCore, Output, make_result

_TCP_READ_LIMIT = p.HEADER_LEN + 0xFFFF
#: Seconds before a SYNC reflected unstamped (a write of the key on its way to this origin,
#: docs/protocol.md rule 5) is sent again: the write lands within a switch's delays.
SYNC_BUSY_DELAY = 0.005
#: Ops that cost a bounded server one service time (the first byte of a message is its op).
_SERVED_OPS = frozenset(
    int(op) for op in (p.Op.GET, p.Op.SET, p.Op.DEL, p.Op.UPDATE, p.Op.UPDATE_DEL)
)


@dataclass
class AgentConfig:
    listen: str = "127.0.0.1"
    port: int = p.KVS_PORT
    control_port: int | None = None
    # The TCP control endpoint writes the store (push, remove): loopback or a management network
    # only, never the address clients reach (docs/protocol.md "Trust").
    control_listen: str = "127.0.0.1"
    control_unix: str | None = None  # path of a Unix-socket control endpoint (same commands)
    tcp: bool = True
    sync_timeout: float = 0.5
    sync_attempts: int = 3
    # Bounded capacity (docs/agent.md "Bounded capacity"): None = unbounded (every request handled
    # as it arrives); else at most this many requests/s, the rest waiting FIFO, at most
    # ``queue_limit`` of them (more are dropped and counted); service times "fixed" or "exp".
    capacity: float | None = None
    service: str = "fixed"
    seed: int = 0
    queue_limit: int = 1000


class AgentServer:
    """One agent process's network side around an :class:`AgentCore`."""

    def __init__(self, core: AgentCore, config: AgentConfig) -> None:
        self.core = core
        self.config = config
        self.lock = threading.Lock()
        self._stop = threading.Event()
        # A random number picked at start: the controller's ping sees a restart, however fast, as
        # a new incarnation (docs/controller_runtime.md "Failure detection"). Never 0.
        self.incarnation = secrets.randbits(63) or 1
        self._threads: list[threading.Thread] = []
        self.queue: ServiceQueue | None = None
        if config.capacity is not None:
            self.queue = ServiceQueue(
                config.capacity, config.service, config.seed, config.queue_limit
            )
        self.udp, self._tcp = self._bind_kvs_port(config)
        self.port = self.udp.getsockname()[1]
        self._control: socketserver.ThreadingTCPServer | None = None
        self._control_unix: _UnixServer | None = None
        if config.control_port is not None:
            control_addr = (config.control_listen, config.control_port)
            self._control = _Server(control_addr, _ControlHandler, self)
        if config.control_unix is not None:
            self._control_unix = _UnixServer(config.control_unix, self)

    def _bind_kvs_port(
        self, config: AgentConfig
    ) -> tuple[socket.socket, socketserver.ThreadingTCPServer | None]:
        """The UDP socket and (with ``config.tcp``) the TCP server on the same port number. Port 0
        picks a number free for both: UDP's free number may be taken for TCP, so try again."""
        for attempt in range(20):
            udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            udp.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
            try:
                udp.bind((config.listen, config.port))
                udp.settimeout(0.2)
                if not config.tcp:
                    return udp, None
                return udp, _Server((config.listen, udp.getsockname()[1]), _KvsTcpHandler, self)
            except OSError as exc:
                udp.close()
                if config.port != 0 or exc.errno != errno.EADDRINUSE or attempt == 19:
                    raise
        raise AssertionError("unreachable")

    @property
    def control_port(self) -> int | None:
        return None if self._control is None else self._control.server_address[1]

    def start(self) -> None:
        if self.queue is not None:
            self.queue.start()
        self._spawn(self._udp_loop, "agent-udp")
        for server in self._stream_servers():
            self._spawn(server.serve_forever, "agent-tcp", 0.1)

    def _stream_servers(self) -> list[socketserver.BaseServer]:
        servers = (self._tcp, self._control, self._control_unix)
        return [server for server in servers if server is not None]

    def _spawn(self, target: Any, name: str, *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def request_stop(self) -> None:
        """Ask :meth:`serve_forever` to return (safe from a signal handler)."""
        self._stop.set()

    def stop(self) -> None:
        self._stop.set()
        wake = "127.0.0.1" if self.config.listen in ("", "0.0.0.0") else self.config.listen
        with contextlib.suppress(OSError):  # wake the UDP loop now rather than at its timeout
            self.udp.sendto(b"", (wake, self.port))
        if self.queue is not None:
            self.queue.stop()
        for server in self._stream_servers():
            server.shutdown()
            server.server_close()
        if self._control_unix is not None:
            with contextlib.suppress(OSError):
                os.unlink(self._control_unix.server_address)
        for thread in self._threads:
            thread.join(timeout=2)
        self.udp.close()

    def serve_forever(self) -> None:
        self.start()
        try:
            self._stop.wait()
        finally:
            self.stop()

    # -- KVS traffic --------------------------------------------------------------------------------

    def process(self, data: bytes, src: Addr, tcp: bool = False) -> list[Output]:
        with self.lock:
            try:
                return self.core.handle(data, src, tcp)
            except Exception:  # a bug must not kill the serving thread: count, report, go on
                self.core.stats["internal_error"] += 1
                traceback.print_exc(file=sys.stderr)
                return []

    def serve(
        self, data: bytes, src: Addr, answer: Callable[[list[Output]], None], tcp: bool = False
    ) -> bool:
        """Handle ``data`` and pass its outputs to ``answer``: now, or (bounded capacity, a
        request that costs service) when its service ends. False if the queue was full (dropped,
        counted in ``queue_dropped``; ``answer`` is never called)."""

        def handle() -> None:  # over UDP process() is called as before this queue: (data, src)
            answer(self.process(data, src, tcp=True) if tcp else self.process(data, src))

        if self.queue is None or not data or data[0] not in _SERVED_OPS:
            handle()
            return True
        return self.queue.submit(handle)

    def serve_now(self, data: bytes, src: Addr) -> list[Output] | None:
        """A TCP request's outputs once served (waiting for its service with a bounded
        capacity); None if the queue dropped it or the agent stops meanwhile."""
        served: list[list[Output]] = []
        done = threading.Event()

        def answer(outputs: list[Output]) -> None:
            served.append(outputs)
            done.set()

        if not self.serve(data, src, answer, tcp=True):
            return None
        while not done.wait(0.2):
            if self._stop.is_set():
                return None
        return served[0]

    def send(self, outputs: list[Output]) -> None:
        for raw, dst in outputs:
            try:
                self.udp.sendto(raw, dst)
            except OSError:
                self.core.stats["tx_error"] += 1

    def _udp_loop(self) -> None:
        recv, stop = self.udp.recvfrom, self._stop
        while not stop.is_set():
            try:
                data, src = recv(65535)
            except TimeoutError:
                continue
            except OSError:
                if stop.is_set():
                    return
                continue
            if stop.is_set():
                return
            self.serve(data, src, self.send)

    # -- control ------------------------------------------------------------------------------------

    def control(self, request: dict[str, Any]) -> dict[str, Any]:
        """One control command (see docs/agent.md); errors come back as ``{"ok": false}``."""
        cmd = request.get("cmd")
        try:
            if cmd == "ping":
                return {"ok": True, "port": self.port, "incarnation": self.incarnation}
            if cmd == "stats":
                with self.lock:
                    stats = dict(self.core.stats)
                    stats["recent_ids"] = len(self.core.ids)
                if self.queue is not None:
                    stats.update(self.queue.stats())
                return {"ok": True, "backend": self.core.backend.name, "stats": stats}
            if cmd == "writer_writes":
                with self.lock:
                    counts = {k.hex(): n for k, n in self.core.writer_writes.items()}
                return {"ok": True, "keys": counts}
            if cmd in ("keys", "versions"):
                with self.lock:
                    items = self.core.snapshot()
                rows = [
                    {"key_hex": k.hex(), "epoch": it.epoch, "ver": it.ver, "live": it.live}
                    for k, it in items
                    if it.live or cmd == "versions"
                ]
                return {"ok": True, "keys": rows}
            if cmd == "item":
                with self.lock:
                    item = self.core.backend.get(_key_of(request))
                if item is None or not item.live:
                    return {"ok": True, "found": False}
                return {
                    "ok": True,
                    "found": True,
                    "value_hex": item.value.hex(),
                    "epoch": item.epoch,
                    "ver": item.ver,
                }
            if cmd == "remove":
                key = _key_of(request)
                with self.lock:
                    found = self.core.remove_local(key)
                return {"ok": True, "found": found}
            if cmd == "rebase":
                key = _key_of(request)
                with self.lock:
                    found = self.core.rebase_local(key)
                return {"ok": True, "found": found}
            if cmd == "sync":
                return self._sync(_key_of(request))
            if cmd == "push":
                return self._push_item(_key_of(request), request)
            if isinstance(cmd, str) and cmd.startswith("ring"):
                return self._ring_command(cmd, request)
            if cmd == "key_frozen":
                with self.lock:
                    frozen = self.core.frozen_list()
                return {"ok": True, "keys_hex": [key.hex() for key in frozen]}
            if cmd in ("key_freeze", "key_release", "key_export", "key_import"):
                return self._key_command(cmd, _key_of(request), request)
        except (KeyError, ValueError, TypeError, p.ProtocolError) as exc:
            return {"ok": False, "error": f"bad request: {exc}"}
        except BackendError as exc:
            return {"ok": False, "error": f"backend: {exc}"}
        return {"ok": False, "error": f"unknown cmd {cmd!r}"}

    def _sync(self, key: bytes) -> dict[str, Any]:
        """The origin's half of a push: SYNC through the switch for a fresh version of the value
        held now, SYNC_DONE, and the item back to the controller (which pushes it into the
        replicas over their control channels)."""
        with self.lock:
            if not self.core.holds(key):
                return {"ok": False, "error": NOT_HELD}
        busy = 0
        for _ in range(max(1, self.config.sync_attempts)):
            with self.lock:
                pending, out = self.core.start_sync(key)
            self.send(out)
            if not pending.done.wait(self.config.sync_timeout):
                continue
            if pending.busy:  # reflected unstamped: the write on its way lands within a moment
                busy += 1
                time.sleep(SYNC_BUSY_DELAY)
                continue
            if not pending.found:
                return {"ok": False, "error": NOT_HELD}
            epoch, ver = pending.version or (0, 0)
            return {"ok": True, "epoch": epoch, "ver": ver, "value_hex": pending.value.hex()}
        with self.lock:
            self.core.pending_syncs.pop(key, None)
        if busy:
            why = f"SYNC reflected unstamped {busy} times: a write of the key was on its way"
            return {"ok": False, "error": why}
        return {"ok": False, "error": "no SYNC reflection from the switch"}

    def _push_item(self, key: bytes, request: dict[str, Any]) -> dict[str, Any]:
        """A replica's half: store the item the controller hands in, CONFIRM it to the switch."""
        value = bytes.fromhex(str(request["value_hex"]))
        epoch, ver = request["epoch"], request["ver"]
        if not isinstance(epoch, int) or not isinstance(ver, int):
            raise TypeError("epoch and ver must be integers")
        with self.lock:
            applied, (held_epoch, held_ver), out = self.core.push_item(key, value, epoch, ver)
        self.send(out)
        return {"ok": True, "applied": applied, "epoch": held_epoch, "ver": held_ver}

    def _ring_command(self, cmd: str, request: dict[str, Any]) -> dict[str, Any]:
        """The membership commands (docs/agent.md, docs/protocol.md "Membership"): ``ring`` (what
        it serves), ``ring_set``/``ring_prepare`` (``ring_hex``: the RING_REPLY encoding, ``me``:
        this server's id), ``ring_freeze``, ``ring_export`` (``to``), ``ring_import`` (``source``,
        ``items``, ``complete``), ``ring_release``, ``ring_activate``, ``ring_drop``."""
        core = self.core
        with self.lock:
            if cmd == "ring":
                ring, nxt = core.ring, core.next_ring
                return {
                    "ok": True,
                    "version": ring.version if ring is not None else None,
                    "me": core.me,
                    "next": nxt.version if nxt is not None else None,
                    "frozen": core.frozen,
                    "released": core.released,
                }
            if cmd in ("ring_set", "ring_prepare"):
                ring = p.Ring.decode(bytes.fromhex(str(request["ring_hex"])))
                me = request["me"]
                if not isinstance(me, int) or isinstance(me, bool):
                    raise TypeError("me must be an integer")
                if cmd == "ring_set":
                    core.set_ring(ring, me)
                else:
                    core.prepare_ring(ring, me)
                return {"ok": True, "version": ring.version}
            if cmd == "ring_freeze":
                core.freeze()
                return {"ok": True}
            if cmd == "ring_export":
                rows = [_item_row(k, it) for k, it in core.export(_int_of(request, "to"))]
                return {"ok": True, "items": rows}
            if cmd == "ring_import":
                items = [_row_item(r) for r in request["items"]]
                stored, dropped = core.import_items(
                    items, _int_of(request, "source"), bool(request.get("complete"))
                )
                return {"ok": True, "stored": stored, "dropped": dropped}
            if cmd == "ring_release":
                core.release()
                return {"ok": True}
            if cmd == "ring_activate":
                core.activate_ring()
                return {"ok": True}
            if cmd == "ring_drop":
                return {"ok": True, "dropped": core.drop_moved()}
        return {"ok": False, "error": f"unknown cmd {cmd!r}"}

    def _key_command(self, cmd: str, key: bytes, request: dict[str, Any]) -> dict[str, Any]:
        """The write freeze of one key (docs/agent.md, docs/protocol.md F7): ``key_freeze``,
        ``key_export`` (its request ids and item; ``window``: only the ids of the last so many
        seconds), ``key_import`` (``ids``, ``item``: another
        holder's export; checked whole before anything is stored), ``key_release``."""
        core = self.core
        window = _window(request.get("window")) if cmd == "key_export" else None
        if cmd == "key_import":  # parsed before the lock: a bad row changes nothing
            rows = request["ids"]
            if not isinstance(rows, list):
                raise TypeError("ids must be a list")
            ids = [_row_id(r) for r in rows]
            raw = request.get("item")
            item = None if raw is None else _row_item({**_dict(raw), "key_hex": key.hex()})[1]
        with self.lock:
            if cmd == "key_freeze":
                return {"ok": True, "was_frozen": not core.freeze_key(key)}
            if cmd == "key_release":
                return {"ok": True, "was_frozen": core.release_key(key)}
            if cmd == "key_export":
                held, it = core.export_key(key, window)
                rows = [
                    {"ip": ip, "cid": cid, "seq": seq, "status": r.status}
                    | {"epoch": r.epoch, "ver": r.ver}
                    for ((ip, cid), seq), r in held
                ]
                return {"ok": True, "ids": rows, "item": None if it is None else _item_row(key, it)}
            stored, added = core.import_key(key, ids, item)
        return {"ok": True, "stored": stored, "added": added}


def _dict(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TypeError("an item is an object")
    return value


def _row_id(row: Any) -> Any:
    """One exported request id: ((source address, cid), seq) and its result."""
    row = _dict(row)
    ip = row["ip"]
    if not isinstance(ip, str) or (ip and not _is_ip(ip)):
        raise ValueError(f"ip {ip!r} is not an address")
    cid, seq = _int_of(row, "cid"), _int_of(row, "seq")
    if not (0 < cid <= 0xFFFFFFFF and 0 <= seq <= 0xFFFFFFFF):
        raise ValueError("cid/seq out of range")
    result = make_result(_int_of(row, "status"), _int_of(row, "epoch"), _int_of(row, "ver"))
    return ((ip, cid), seq), result


@functools.lru_cache(maxsize=4096)
def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _window(value: Any) -> float | None:
    """``key_export``'s ``window``: absent (every id), or seconds > 0."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1e9:
        raise ValueError("window must be a number of seconds > 0")
    return float(value)


def _int_of(request: dict[str, Any], name: str) -> int:
    value = request[name]
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an integer")
    return value


def _item_row(key: bytes, item: Item) -> dict[str, Any]:
    return {
        "key_hex": key.hex(),
        "value_hex": item.value.hex(),
        "epoch": item.epoch,
        "ver": item.ver,
        "live": item.live,
    }


def _row_item(row: Any) -> tuple[bytes, Item]:
    if not isinstance(row, dict):
        raise TypeError("an item is an object")
    key = bytes.fromhex(str(row["key_hex"]))
    if len(key) != p.KEY_LEN:
        raise ValueError("key_hex must be 16 bytes")
    epoch, ver = _int_of(row, "epoch"), _int_of(row, "ver")
    if not (0 <= epoch <= 0xFFFF and 0 <= ver <= 0xFFFFFFFF):
        raise ValueError("epoch/ver out of range")
    return key, Item(bytes.fromhex(str(row["value_hex"])), epoch, ver, live=bool(row["live"]))


def _key_of(request: dict[str, Any]) -> bytes:
    if "key_hex" in request:
        raw = bytes.fromhex(str(request["key_hex"]))
        if len(raw) != p.KEY_LEN:
            raise ValueError("key_hex must be 16 bytes")
        return raw
    return p.pad_key(str(request["key"]))


#: Connections a listening socket queues before it accepts them (socketserver's default is 5).
#: The controller opens control connections in bursts, one per key it pushes at once
#: (docs/controller_runtime.md "A period"): with 5, a Unix socket refused the sixth (EAGAIN).
_BACKLOG = 128


class _Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True
    request_queue_size = _BACKLOG

    def __init__(self, addr: Addr, handler: type, agent: AgentServer) -> None:
        self.agent = agent
        super().__init__(addr, handler)


class _UnixServer(socketserver.ThreadingUnixStreamServer):
    """The control API on a Unix socket (reachable from other network namespaces). The socket is
    created with mode 0600: it writes the store, so only the agent's user may connect."""

    daemon_threads = True
    request_queue_size = _BACKLOG

    def __init__(self, path: str, agent: AgentServer) -> None:
        self.agent = agent
        with contextlib.suppress(FileNotFoundError):  # a stale socket of an earlier run
            if _is_socket(path):
                os.unlink(path)
        old = os.umask(0o177)  # at start-up, before any other thread: no window with a wider mode
        try:
            super().__init__(path, _ControlHandler)
        finally:
            os.umask(old)


def _is_socket(path: str) -> bool:
    return stat.S_ISSOCK(os.stat(path).st_mode)


class _KvsTcpHandler(socketserver.BaseRequestHandler):
    """A TCP stream of requests, framed by each header's ``vlen``; replies on the same stream."""

    def handle(self) -> None:
        agent: AgentServer = self.server.agent  # type: ignore[attr-defined]
        conn: socket.socket = self.request
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buf = bytearray()
        while True:
            try:
                chunk = conn.recv(65536)
            except OSError:
                return
            if not chunk:
                return
            buf += chunk
            while len(buf) >= p.HEADER_LEN:
                end = p.message_length(buf)
                if len(buf) < end:
                    break
                data = bytes(buf[:end])
                del buf[:end]
                outputs = agent.serve_now(data, self.client_address)
                if outputs is None:
                    continue  # dropped by a full queue (no answer, as over UDP), or stopping
                back = [raw for raw, dst in outputs if dst == self.client_address]
                agent.send([(raw, dst) for raw, dst in outputs if dst != self.client_address])
                with contextlib.suppress(OSError):
                    conn.sendall(b"".join(back))
            if len(buf) > _TCP_READ_LIMIT:
                return


class _ControlHandler(socketserver.StreamRequestHandler):
    """JSON lines: one command object per line, one answer object per line."""

    def handle(self) -> None:
        agent: AgentServer = self.server.agent  # type: ignore[attr-defined]
        for line in self.rfile:
            if len(line) > 1 << 20:
                answer: dict[str, Any] = {"ok": False, "error": "line too long"}
            else:
                try:
                    request = json.loads(line)
                    if not isinstance(request, dict):
                        raise ValueError("not an object")
                    answer = agent.control(request)
                except ValueError as exc:
                    answer = {"ok": False, "error": f"bad json: {exc}"}
            try:
                self.wfile.write(json.dumps(answer).encode() + b"\n")
                self.wfile.flush()
            except OSError:
                return
