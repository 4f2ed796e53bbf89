"""The controller's side of the agents' control API: pushes, removals, and what agents hold."""

from __future__ import annotations

import logging

from kvswitch.agent.control import AgentControl, ControlError, KeyVersion
from kvswitch.controller.rackfile import RackFile

LOG = logging.getLogger("kvswitch.controller")


class AgentPool:
    """One :class:`AgentControl` per server whose rack-file entry names a ``control`` endpoint."""

    def __init__(self, rack: RackFile, timeout: float = 5.0) -> None:
        self.rack = rack
        self.controls: dict[int, AgentControl] = {
            s: AgentControl.at(h.control, timeout)
            for s, h in enumerate(rack.servers)
            if h.control is not None
        }

    def _control(self, server: int) -> AgentControl:
        control = self.controls.get(server)
        if control is None:
            raise ControlError(f"server {self.rack.servers[server].name} has no control endpoint")
        return control

    def push(self, key: bytes, origin: int, replicas: tuple[int, ...]) -> None:
        """The origin SYNCs ``key`` through the switch (a switch-stamped version for its value)
        and hands the item back; the controller pushes it into each replica over that replica's
        own control channel, and the replica CONFIRMs to the switch. Agents take PUSH from no
        one else (docs/protocol.md "Trust")."""
        item = self._control(origin).sync(key)
        for server in replicas:
            self._control(server).push(key, item)

    def remove(self, key: bytes, server: int) -> None:
        self._control(server).remove(key)

    def holdings(self) -> dict[int, dict[bytes, KeyVersion]]:
        """Live keys of every reachable agent (an unreachable one is logged and left out)."""
        out: dict[int, dict[bytes, KeyVersion]] = {}
        for server, control in self.controls.items():
            try:
                out[server] = control.keys()
            except ControlError as exc:
                LOG.warning("agent %s: %s", self.rack.servers[server].name, exc)
        return out

    def close(self) -> None:
        for control in self.controls.values():
            control.close()
