"""The controller's side of the agents' control API: pushes, removals, what agents hold, and the
per-period ping (liveness and incarnation, see controller/membership.py)."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

from kvswitch.agent.control import AgentControl, ControlError, KeyExport, KeyVersion
from kvswitch.controller.membership import NO_PROBE, Probe
from kvswitch.controller.rackfile import RackFile

LOG = logging.getLogger("kvswitch.controller")


class AgentPool:
    """One :class:`AgentControl` per server whose rack-file entry names a ``control`` endpoint,
    and a second one with a short timeout for the pings (a ping never waits behind a push).

    Pushes, removals, rebases and restores may be called from several threads at once (the
    driver runs different keys' pushes in parallel, docs/controller_runtime.md "A period"): each
    call takes a connection of its server that no other call uses meanwhile (:meth:`lease`),
    opening another one when all are busy. The agent serves each control connection in its own
    thread, so pushes of several keys with one origin wait for their SYNC reflections at once."""

    def __init__(self, rack: RackFile, timeout: float = 5.0, probe_timeout: float = 0.5) -> None:
        self.rack = rack
        self.controls: dict[int, AgentControl] = {
            s: AgentControl.at(h.control, timeout)
            for s, h in enumerate(rack.servers)
            if h.control is not None
        }
        self.probes: dict[int, AgentControl] = {
            s: AgentControl.at(h.control, probe_timeout)
            for s, h in enumerate(rack.servers)
            if h.control is not None
        }
        # servers declared dead: removals to them are skipped (a server that comes back drops its
        # stale copies when it rejoins, Runtime.rejoin), pushes never name them (the plan)
        self.down: frozenset[int] = frozenset()
        # (key, server) copies that must not be removed now: the key's origin is down (a leaving
        # replica's copy may be the last one; dropped later), or the server is now its origin (a
        # removal planned before a ring change must not drop what the handoff gave it); the
        # runtime sets this
        self.keep: Callable[[bytes, int], bool] = lambda key, server: False
        # a write freeze exports only the ids of the last so many seconds (None: every id the
        # agent remembers): those a client may still repeat (docs/fabric.md "Write rotation")
        self.repeat_window: float | None = None
        self._pool = ThreadPoolExecutor(max(1, len(self.probes)), thread_name_prefix="ping")
        # per server: every connection opened (``controls``' first) and those no call holds now
        self._lock = threading.Lock()
        self._opened: dict[int, list[AgentControl]] = {s: [c] for s, c in self.controls.items()}
        self._idle: dict[int, list[AgentControl]] = {s: [c] for s, c in self.controls.items()}

    def control(self, server: int) -> AgentControl:
        """The control channel of ``server`` (:class:`ControlError` if it has none)."""
        return self._control(server)

    def _control(self, server: int) -> AgentControl:
        control = self.controls.get(server)
        if control is None:
            raise ControlError(f"server {self.rack.servers[server].name} has no control endpoint")
        return control

    @contextlib.contextmanager
    def lease(self, server: int) -> Iterator[AgentControl]:
        """A control connection to ``server`` that no other caller uses until the block ends: an
        idle one, or a new one when every one is busy (:class:`ControlError` if the server has no
        control endpoint). At most as many per server as callers ever used it at once."""
        first = self._control(server)
        with self._lock:
            idle = self._idle[server]
            control = idle.pop() if idle else None
            if control is None:
                endpoint = self.rack.servers[server].control
                assert endpoint is not None  # the server has a first connection
                control = AgentControl.at(endpoint, first.timeout)
                self._opened[server].append(control)
        try:
            yield control
        finally:
            with self._lock:
                idle.append(control)

    def connections(self, server: int) -> list[AgentControl]:
        """Every control connection opened to ``server`` (pings' apart)."""
        with self._lock:
            return list(self._opened.get(server, ()))

    def push(self, key: bytes, origin: int, replicas: tuple[int, ...]) -> None:
        """The origin SYNCs ``key`` through the switch (a switch-stamped version for its value)
        and hands the item back; the controller pushes it into each replica over that replica's
        own control channel, and the replica CONFIRMs to the switch. Agents take PUSH from no
        one else (docs/protocol.md "Trust"). The steps of one key run one after the other."""
        with self.lease(origin) as control:
            item = control.sync(key)
        for server in replicas:
            with self.lease(server) as control:
                control.push(key, item)

    def remove(self, key: bytes, server: int) -> None:
        if server in self.down or self.keep(key, server):
            return
        with self.lease(server) as control:
            control.remove(key)

    def rebase(self, key: bytes, server: int) -> None:
        """``server`` forgets its copy's version (the key changes serializer)."""
        with self.lease(server) as control:
            control.rebase(key)

    def restore(
        self, key: bytes, origin: int, source: int, at_least: tuple[int, int] | None = None
    ) -> bool:
        """Copy ``source``'s live copy of ``key`` (a replica the switch counts as holding the
        latest completed version, or one whose copy is at least the version ``at_least``) into
        ``origin`` (restarted empty); applied by the version rule, so a newer write the origin
        took meanwhile wins. False if ``source`` holds no such copy."""
        with self.lease(source) as control:
            item = control.item(key)
        if item is None or (at_least is not None and (item.epoch, item.ver) < at_least):
            return False
        with self.lease(origin) as control:
            control.push(key, item)
        return True

    # -- the write freeze of one key (docs/protocol.md F7; controller/rotation.py) ------------

    def key_freeze(self, key: bytes, server: int) -> None:
        with self.lease(server) as control:
            control.key_freeze(key)

    def key_export(self, key: bytes, server: int) -> KeyExport:
        """``server``'s ids of frozen ``key`` (those of the last :attr:`repeat_window` seconds
        when it is set) and its item."""
        with self.lease(server) as control:
            return control.key_export(key, self.repeat_window)

    def key_import(self, key: bytes, server: int, export: KeyExport) -> None:
        with self.lease(server) as control:
            control.key_import(key, export)

    def key_release(self, key: bytes, server: int) -> None:
        with self.lease(server) as control:
            control.key_release(key)

    def key_frozen(self, server: int) -> list[bytes]:
        """The keys frozen at ``server`` (none for a server without a control endpoint: no
        freeze can have reached it)."""
        if server not in self.controls:
            return []
        with self.lease(server) as control:
            return control.key_frozen()

    def ping(self) -> list[Probe]:
        """Every server's incarnation (None: no answer within the probe timeout; NO_PROBE: no
        control endpoint), all pinged at once. A failed ping is tried once more on a new
        connection (the old one may be to the agent's previous incarnation)."""

        return list(self._pool.map(self.probe, range(len(self.rack.servers))))

    def probe(self, server: int) -> Probe:
        """One server's ping (see :meth:`ping`)."""
        control = self.probes.get(server)
        if control is None:
            return NO_PROBE
        for _ in range(2):
            try:
                return control.incarnation()
            except ControlError:
                continue
        return None

    def holdings(self, servers: set[int] | None = None) -> dict[int, dict[bytes, KeyVersion]]:
        """Live keys of every reachable agent (of ``servers`` only, if given; an unreachable one
        is logged and left out)."""
        out: dict[int, dict[bytes, KeyVersion]] = {}
        for server, control in self.controls.items():
            if servers is not None and server not in servers:
                continue
            try:
                out[server] = control.keys()
            except ControlError as exc:
                LOG.warning("agent %s: %s", self.rack.servers[server].name, exc)
        return out

    def close(self) -> None:
        with self._lock:
            opened = [c for cs in self._opened.values() for c in cs]
        for control in (*opened, *self.probes.values()):
            control.close()
        self._pool.shutdown(wait=False)
