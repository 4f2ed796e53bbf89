"""The rack file (JSON) that the Mininet rack writes (:meth:`RackFile.write`) and
``kvswitch controller --rack`` reads (:meth:`RackFile.load`).

    {"kvs_port": 8900,
     "switch": {"ip": "10.0.0.254", "mac": "02:00:00:00:00:fe"},
     "servers": [{"name": "s1", "ip": "10.0.0.1", "mac": "02:00:00:00:00:01", "port": 1,
                  "control": "unix:/tmp/kvswitch-run/s1.ctl"}],
     "clients": [{"name": "c1", "ip": "10.0.1.1", "mac": "02:00:00:00:01:01", "port": 9}]}

Server order in the file = server numbers 0..M-1 of the consistent hashing (docs/protocol.md).
``control`` is the agent's control endpoint, ``unix:PATH`` or ``HOST:PORT`` (optional: without it
the controller cannot push replicas to that server and says so). ``"member": false`` keeps a
server out of the rack's first ring (a spare that ``kvswitch membership add`` brings in later;
docs/protocol.md "Membership"); default true.

In a fabric (docs/fabric.md) the clients hash over every server of the fabric, so a rack's agents
and its controller must too: ``"fabric": {"servers": ["10.1.0.1", ...], "first": F}`` lists every
server's address in the fabric's order, this rack's servers at F, F+1, ...; the ring the agents
serve is then the fabric's (ids 0..N-1) and a key whose origin is in another rack is not the
rack's to plan.
"""

from __future__ import annotations

import ipaddress
import json
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Self

from kvswitch import protocol as p
from kvswitch.controller.rack import Rack, ServerAddress


class RackFileError(ValueError):
    """The rack file is missing, not JSON, or does not describe a rack."""


@dataclass(frozen=True)
class Host:
    name: str
    ip: int
    mac: int
    port: int
    control: str | None = None
    member: bool = True  # servers: in the rack's first ring (docs/protocol.md "Membership")

    @classmethod
    def of(
        cls,
        name: str,
        ip: str,
        mac: str,
        port: int,
        control: str | None = None,
        member: bool = True,
    ) -> Host:
        """A host from its addresses as text (``10.0.0.1``, ``02:00:00:00:00:01``)."""
        return cls(name, _ip(ip, f"{name}.ip"), _mac(mac, f"{name}.mac"), port, control, member)

    @property
    def ip_text(self) -> str:
        return str(ipaddress.IPv4Address(self.ip))

    @property
    def mac_text(self) -> str:
        return _mac_text(self.mac)

    def document(self) -> dict[str, Any]:
        """This host's object in the rack file (``control`` and ``"member": false`` only where
        they say something)."""
        out: dict[str, Any] = {
            "name": self.name,
            "ip": self.ip_text,
            "mac": self.mac_text,
            "port": self.port,
        }
        if self.control is not None:
            out["control"] = self.control
        if not self.member:
            out["member"] = False
        return out


class JsonFile(ABC):
    """A JSON file that its class both writes and parses (the rack file; the fabric file,
    fabricfile.py): :meth:`write` checks the document with :meth:`parse` before writing it,
    :meth:`load` reads one, a read or JSON error as the class's :attr:`ERROR`."""

    #: what the file is called in errors ("rack file")
    KIND: ClassVar[str]
    ERROR: ClassVar[type[ValueError]]

    @abstractmethod
    def document(self) -> dict[str, Any]:
        """The JSON document of this file."""

    @classmethod
    @abstractmethod
    def parse(cls, raw: Any, where: str) -> Self:
        """The file of document ``raw``; :attr:`ERROR` naming ``where`` if it is not one."""

    def write(self, path: str | Path) -> None:
        """The file at ``path``, checked first: what :meth:`parse` refuses is not written."""
        document = self.document()
        self.parse(document, str(path))
        Path(path).write_text(json.dumps(document, indent=2) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> Self:
        try:
            raw = json.loads(Path(path).read_text())
        except (OSError, ValueError) as exc:
            raise cls.ERROR(f"{cls.KIND} {path}: {exc}") from exc
        return cls.parse(raw, str(path))


@dataclass(frozen=True)
class RackFile(JsonFile):
    KIND: ClassVar[str] = "rack file"
    ERROR: ClassVar[type[ValueError]] = RackFileError

    kvs_port: int
    switch_ip: int
    switch_mac: int
    servers: tuple[Host, ...]
    clients: tuple[Host, ...]
    fabric_ring: tuple[int, ...] = ()  # every server's address in the fabric's order, or ()
    fabric_first: int = 0  # this rack's first server's id in fabric_ring

    @classmethod
    def of(
        cls,
        switch_ip: str,
        switch_mac: str,
        servers: tuple[Host, ...],
        clients: tuple[Host, ...] = (),
        kvs_port: int = p.KVS_PORT,
    ) -> RackFile:
        """A rack file with the switch's addresses as text."""
        ip, mac = _ip(switch_ip, "switch.ip"), _mac(switch_mac, "switch.mac")
        return cls(kvs_port, ip, mac, servers, clients)

    def rack(self) -> Rack:
        return Rack(tuple(ServerAddress(s.ip, s.mac, s.port) for s in self.servers))

    def document(self) -> dict[str, Any]:
        """The JSON object :meth:`parse` reads: ``RackFile.parse(rf.document()) == rf``."""
        return {
            "kvs_port": self.kvs_port,
            "switch": {
                "ip": str(ipaddress.IPv4Address(self.switch_ip)),
                "mac": _mac_text(self.switch_mac),
            },
            "servers": [s.document() for s in self.servers],
            "clients": [c.document() for c in self.clients],
            **(
                {
                    "fabric": {
                        "servers": [str(ipaddress.IPv4Address(x)) for x in self.fabric_ring],
                        "first": self.fabric_first,
                    }
                }
                if self.fabric_ring
                else {}
            ),
        }

    @classmethod
    def parse(cls, raw: Any, where: str = "rack file") -> RackFile:
        if not isinstance(raw, dict):
            raise RackFileError(f"{where}: expected a JSON object")
        try:
            switch = _object(raw.get("switch"), "switch")
            servers = tuple(
                _host(h, f"servers[{i}]", server=True)
                for i, h in enumerate(_list(raw.get("servers"), "servers"))
            )
            clients = tuple(
                _host(h, f"clients[{i}]", server=False)
                for i, h in enumerate(_list(raw.get("clients", []), "clients"))
            )
            kvs_port = _int(raw.get("kvs_port", p.KVS_PORT), "kvs_port", 1, 65535)
            ring: tuple[int, ...] = ()
            first = 0
            if "fabric" in raw:
                fabric = _object(raw["fabric"], "fabric")
                ring = tuple(
                    _ip(x, f"fabric.servers[{i}]")
                    for i, x in enumerate(_list(fabric.get("servers"), "fabric.servers"))
                )
                first = _int(fabric.get("first"), "fabric.first", 0, max(0, len(ring) - 1))
                if ring[first : first + len(servers)] != tuple(h.ip for h in servers):
                    raise ValueError(
                        "fabric.servers from fabric.first must be the rack's servers, in order"
                    )
                if len(set(ring)) != len(ring):
                    raise ValueError("fabric.servers names an address twice")
            rack = cls(
                kvs_port,
                _ip(switch.get("ip"), "switch.ip"),
                _mac(switch.get("mac"), "switch.mac"),
                servers,
                clients,
                ring,
                first,
            )
        except (TypeError, ValueError) as exc:
            raise RackFileError(f"{where}: {exc}") from exc
        if not servers:
            raise RackFileError(f"{where}: no servers")
        hosts = servers + clients
        for what in ("name", "ip", "mac"):
            values = [getattr(h, what) for h in hosts]
            if len(set(values)) != len(values):
                raise RackFileError(f"{where}: two hosts share a {what}")
        if not any(h.member for h in servers):
            raise RackFileError(f"{where}: no server is a member of the first ring")
        ports = [h.port for h in servers]
        if len(set(ports)) != len(ports):
            raise RackFileError(f"{where}: two servers share a switch port")
        return rack


def _object(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError(f"{what} must be an object")
    return value


def _list(value: Any, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise ValueError(f"{what} must be a list")
    return value


def _int(value: Any, what: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{what} must be an integer in {low}..{high}, not {value!r}")
    return value


def _ip(value: Any, what: str) -> int:
    if not isinstance(value, str):
        raise ValueError(f"{what} must be an IPv4 address string")
    try:
        return int(ipaddress.IPv4Address(value))
    except ValueError as exc:
        raise ValueError(f"{what}: {exc}") from exc


def _mac(value: Any, what: str) -> int:
    parts = value.split(":") if isinstance(value, str) else []
    if len(parts) != 6 or not all(len(x) == 2 for x in parts):
        raise ValueError(f"{what} must be a MAC address aa:bb:cc:dd:ee:ff, not {value!r}")
    try:
        return int("".join(parts), 16)
    except ValueError as exc:
        raise ValueError(f"{what}: {value!r} is not a MAC address") from exc


def _mac_text(mac: int) -> str:
    return ":".join(f"{b:02x}" for b in mac.to_bytes(6, "big"))


def _host(value: Any, what: str, server: bool) -> Host:
    h = _object(value, what)
    name = h.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError(f"{what}.name must be a non-empty string")
    control = h.get("control")
    if control is not None and not isinstance(control, str):
        raise ValueError(f"{what}.control must be a string (unix:PATH or HOST:PORT)")
    member = h.get("member", True)
    if not isinstance(member, bool):
        raise ValueError(f"{what}.member must be true or false")
    return Host(
        name,
        _ip(h.get("ip"), f"{what}.ip"),
        _mac(h.get("mac"), f"{what}.mac"),
        _int(h.get("port"), f"{what}.port", 0, 510),
        control if server else None,
        member if server else True,
    )
