"""Elastic membership: the handoff of moving keys between agents, and the controller's admin socket.

docs/protocol.md "Membership" is the contract; this module runs its move protocol over the agents'
control channels (the runtime does the switch's part first: hot keys whose origin changes leave
the hot set, a removed server leaves every replica set). For ring v -> v+1, with *sources* the
servers that lose keys and *destinations* those that gain some:

1. ``prepare`` v+1 on every agent: a destination answers RETRY for keys it gains (not yet its own);
   everything else is served as before.
2. bulk copy: each source exports the items moving to each destination, which imports them (the
   source keeps serving reads and writes).
3. ``freeze`` the sources: writes of moving keys answer RETRY, Gets are still served (the values
   are final from now on).
4. final copy: the same export/import, marked complete (a key the source deleted since the bulk
   copy is dropped at the destination too).
5. ``release`` every agent: sources answer MOVED for keys they lost and name v+1 in RING_GET.
   Only then 6. ``activate`` every agent: destinations serve the keys they gained.
7. sources drop the moved copies.

No client can write a moving key at its destination (6) while its source still serves its reads
(until 5), and every write the source acknowledged was applied before 3 and copied in 4.

The admin socket (``kvswitch controller --admin PATH``) takes JSON lines ``{"cmd": "ring"}``,
``{"cmd": "add", "server": NAME}`` and ``{"cmd": "remove", "server": NAME}``; ``kvswitch membership``
is its command-line client.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import socket
import socketserver
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kvswitch import protocol as p
from kvswitch.agent.control import AgentControl, ControlError

LOG = logging.getLogger("kvswitch.controller")


#: ``--test-unsafe-handoff``: seconds between the switch-over and the copy
UNSAFE_COPY_DELAY = 0.5

#: ``--test-crash-in-handoff``: the controller's exit status when it dies mid-switch-over
CRASH_STATUS = 70


class MembershipError(ValueError):
    """A membership change that cannot be made (the message says why, in one line)."""


@dataclass
class HandoffReport:
    version: int
    moved: int = 0  # items copied in the final (complete) copy
    bulk: int = 0  # items copied while the sources still took writes
    freeze_ms: float = 0.0  # first freeze -> last activation
    total_ms: float = 0.0
    dropped: int = 0
    pairs: list[tuple[int, int]] = field(default_factory=list)

    def record(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "moved": self.moved,
            "bulk": self.bulk,
            "freeze_ms": round(self.freeze_ms, 2),
            "total_ms": round(self.total_ms, 2),
            "dropped": self.dropped,
            "pairs": self.pairs,
        }


def moving_pairs(old: frozenset[int], new: frozenset[int]) -> list[tuple[int, int]]:
    """(source, destination) pairs keys can move between: into an added server from every old
    member, out of a removed one to every new member (consistent hashing moves nothing else)."""
    added, removed = new - old, old - new
    pairs = {(s, d) for d in added for s in old} | {(s, d) for s in removed for d in new}
    return sorted(pairs)


def handoff(
    control: Callable[[int], AgentControl],
    agents: Iterable[int],
    old: p.Ring,
    new: p.Ring,
    unsafe: bool = False,
    commit: Callable[[], object] = lambda: None,
    gone: frozenset[int] = frozenset(),
    crash: bool = False,
) -> HandoffReport:
    """Steps 1-7 of the module docstring over the agents' control channels. ``agents``: every
    server that runs an agent and is not down (all of them learn the new ring). Before step 5 a
    failure rolls every agent back to ``old`` (nothing changed for clients) and raises
    :class:`ControlError`; from step 5 on the steps are retried, since sources already refuse
    the keys they lost. ``commit`` is called just before step 5: from then on the change must be
    finished, not undone (the runtime records ``new`` in its state file, so a controller that
    crashes after it sets ``new`` on every agent when it starts again). ``gone``: servers removed
    while down, which export nothing (what they held is restored or lost by the runtime) and take
    no step. ``unsafe`` (TESTS ONLY, ``--test-unsafe-handoff``): release and activate
    before any copy, and copy :data:`UNSAFE_COPY_DELAY` later (as a large copy would take), so
    the new owners serve keys they do not hold yet; tests/e2e shows the history check catches it.
    ``crash`` (TESTS ONLY, ``--test-crash-in-handoff``): the process exits at once after every
    release and before any activation, the worst point to die (sources refuse the moved keys,
    destinations do not serve them yet); tests/e2e restarts it and checks nothing was lost."""
    began = time.perf_counter()
    pairs = [(s, d) for s, d in moving_pairs(old.ids, new.ids) if s not in gone]
    report = HandoffReport(new.version, pairs=pairs)
    everyone = sorted(set(agents) - gone)
    sources = sorted({s for s, _ in report.pairs})
    missing = (old.ids | new.ids) - set(everyone) - gone
    if missing:
        raise ControlError(f"servers {sorted(missing)} have no reachable agent")
    try:
        for server in everyone:
            control(server).ring_prepare(new, server)
        if unsafe:
            commit()
            _switch_over(control, sources, everyone)
            time.sleep(UNSAFE_COPY_DELAY)  # a copy that takes its time: the reads find nothing
        report.bulk = _copy(control, report.pairs, complete=False)
        frozen = time.perf_counter()
        for server in sources if not unsafe else []:
            control(server).ring_step("freeze")
        report.moved = _copy(control, report.pairs, complete=True)
    except ControlError:
        for server in everyone:
            with contextlib.suppress(ControlError):
                control(server).ring_set(old, server)
        raise
    if not unsafe:
        commit()
        _switch_over(control, sources, everyone, crash)
    report.freeze_ms = (time.perf_counter() - frozen) * 1000.0
    for server in sources:
        try:
            report.dropped += int(control(server).ring_step("drop").get("dropped", 0))
        except ControlError as exc:  # harmless: it answers MOVED for them; dropped next change
            LOG.warning("server %d: moved copies not dropped: %s", server, exc)
    report.total_ms = (time.perf_counter() - began) * 1000.0
    return report


def _switch_over(
    control: Callable[[int], AgentControl],
    sources: list[int],
    everyone: list[int],
    crash: bool = False,
) -> None:
    """Steps 5 and 6: every release (sources first) before any activation."""
    for step in ("release", "activate"):
        if step == "activate" and crash:
            LOG.critical("TEST: exiting between release and activation (--test-crash-in-handoff)")
            logging.shutdown()
            os._exit(CRASH_STATUS)
        for server in sources + [s for s in everyone if s not in sources]:
            _insist(lambda s=server, st=step: control(s).ring_step(st), f"{step} on {server}")


def _copy(
    control: Callable[[int], AgentControl], pairs: list[tuple[int, int]], complete: bool
) -> int:
    copied = 0
    for source, dest in pairs:
        items = control(source).ring_export(dest)
        if items or complete:
            copied += control(dest).ring_import(source, items, complete)
    return copied


def _insist(step: Callable[[], object], what: str, attempts: int = 5) -> None:
    for attempt in range(attempts):
        try:
            step()
            return
        except ControlError as exc:
            LOG.error("handoff: %s failed (attempt %d): %s", what, attempt + 1, exc)
            time.sleep(0.1)
    raise ControlError(f"handoff: {what} failed {attempts} times; the agent must be restarted")


# -- the admin socket -------------------------------------------------------------------------------

#: what the admin socket runs: (cmd, server name or None) -> answer object
Handler = Callable[[str, str | None], dict[str, Any]]


class AdminServer:
    """JSON lines on a Unix socket (mode 0600: it changes the rack), one thread per connection."""

    def __init__(self, path: str, handler: Handler) -> None:
        self.path = path
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        old = os.umask(0o177)
        try:
            self._server = _AdminUnixServer(path, _AdminHandler)
        finally:
            os.umask(old)
        self._server.handler = handler  # type: ignore[attr-defined]
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.2,), name="admin", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        with contextlib.suppress(OSError):
            os.unlink(self.path)


class _AdminUnixServer(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True


class _AdminHandler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        handler: Handler = self.server.handler  # type: ignore[attr-defined]
        for line in self.rfile:
            try:
                request = json.loads(line)
                if not isinstance(request, dict) or not isinstance(request.get("cmd"), str):
                    raise ValueError("expected an object with a cmd")
                server = request.get("server")
                if server is not None and not isinstance(server, str):
                    raise ValueError("server must be a name")
                answer = handler(request["cmd"], server)
            except (ValueError, MembershipError) as exc:
                answer = {"ok": False, "error": str(exc)}
            except Exception as exc:  # a bug or a switch error: answered, logged, not fatal
                LOG.exception("admin request failed")
                answer = {"ok": False, "error": f"internal error: {exc!r}"}
            try:
                self.wfile.write(json.dumps(answer).encode() + b"\n")
                self.wfile.flush()
            except OSError:
                return


def ask(path: str, cmd: str, server: str | None = None, timeout: float = 120.0) -> dict[str, Any]:
    """One request to a controller's admin socket."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(timeout)
        conn.connect(path)
        request: dict[str, Any] = {"cmd": cmd}
        if server is not None:
            request["server"] = server
        conn.sendall(json.dumps(request).encode() + b"\n")
        with conn.makefile("rb") as f:
            line = f.readline()
    if not line:
        raise OSError("the controller closed the admin connection")
    answer = json.loads(line)
    if not isinstance(answer, dict):
        raise ValueError("the controller's answer is not an object")
    return answer


def main(argv: list[str] | None = None) -> int:
    """``kvswitch membership``: show the ring, add or remove a server, online."""
    ap = argparse.ArgumentParser(prog="kvswitch membership", description=main.__doc__)
    ap.add_argument("--admin", required=True, help="the controller's admin socket (--admin)")
    ap.add_argument(
        "action", choices=("show", "add", "remove"), help="show the ring, add or remove a server"
    )
    ap.add_argument("server", nargs="?", help="server name of the rack file (add, remove)")
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    if (args.action == "show") != (args.server is None):
        print(
            f"kvswitch membership: {args.action} {'takes no' if args.action == 'show' else 'needs a'} server name",
            file=sys.stderr,
        )
        return 2
    try:
        answer = ask(args.admin, "ring" if args.action == "show" else args.action, args.server)
    except (OSError, ValueError) as exc:
        print(f"kvswitch membership: {args.admin}: {exc}", file=sys.stderr)
        return 1
    if not answer.get("ok"):
        print(f"kvswitch membership: {answer.get('error')}", file=sys.stderr)
        return 1
    print(json.dumps({k: v for k, v in answer.items() if k != "ok"}))
    return 0
