"""The fabric file (JSON) that ``kvswitch fabric-controller --config`` reads: the spines, the
leaves and their servers, the ports between them (docs/fabric.md "Runtime").

    {"k": 1024, "max_holders": 64, "leaf_keys": 4096,
     "spines": [{"name": "sp1", "mac": "02:00:00:00:f0:01",
                 "p4runtime": "127.0.0.1:9559", "thrift": "127.0.0.1:9090", "device_id": 0,
                 "ports": [1, 2]}],
     "racks": [{"name": "r1", "leaf_mac": "02:00:00:00:01:fe", "subnet": "10.1.0.0/16",
                "p4runtime": "127.0.0.1:9561", "thrift": "127.0.0.1:9092", "device_id": 0,
                "uplinks": [5], "servers": ["10.1.0.1", {"ip": "10.1.0.2", "control": "unix:/run/s12.ctl"}],
                "inputs": "/run/kvswitch/r1.inputs.json", "share": "/run/kvswitch/r1.share.json"},
               ...]}

A spine's ``ports[r]`` is its port to rack r's leaf; a leaf's ``uplinks[s]`` its port to spine s.
``k`` is each spine's hot-key slots the controller uses, ``max_holders`` the spines' MAX_HOLDERS
and ``leaf_keys`` the leaves' FabricHotTable size (FABRIC_KEYS): every fabric-hot key is steered
by every leaf, so k x spines must fit it. ``holder_cells`` (optional, k .. 2^24): the spines'
HOLDER_CELLS, a pool of ``valid_ver`` cells from which each hot key gets a row of its own, a power
of two >= its holders (docs/fabric.md "Holders per key"); without it every slot keeps a row of
``max_holders`` cells at slot x ``max_holders``, as the default spine build has. A server is its address, or ``{"ip", "control"}`` with its agent's control endpoint (pushes
and removals of fabric replicas, as in a rack file). ``inputs`` (optional) is the file the
rack's controller writes each period for the fabric controller (``kvswitch controller
--fabric-out``), ``share`` (optional) the file the fabric controller writes each period for the
rack's controller (``kvswitch controller --fabric-in``; both formats in
:mod:`kvswitch.controller.handoff`). Servers are numbered rack by rack in file
order (``FabricShape``: server j of rack r is
``r * servers + j``); every rack has the same number of servers.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any, ClassVar

from kvswitch.controller.fabric import FabricShape
from kvswitch.controller.rack import Rack, ServerAddress
from kvswitch.controller.rackfile import (
    Host,
    JsonFile,
    RackFile,
    _int,
    _ip,
    _list,
    _mac,
    _object,
)

#: A spine's holders of one key at most (p4src/shared/sizes.p4 MAX_HOLDERS, its default).
MAX_HOLDERS = 64
#: Fabric-hot keys a leaf steers at most (steering.p4 FABRIC_KEYS = 4 x HOT_KEYS, its default).
LEAF_KEYS = 4096


class FabricFileError(ValueError):
    """The fabric file is missing, not JSON, or does not describe a fabric."""


@dataclass(frozen=True)
class Endpoint:
    """Where a switch's P4Runtime and Thrift servers listen."""

    name: str
    grpc_addr: str
    thrift_host: str
    thrift_port: int
    device_id: int = 0


@dataclass(frozen=True)
class SpineSide:
    switch: Endpoint
    mac: int
    ports: tuple[int, ...]  # port to rack r's leaf


@dataclass(frozen=True)
class RackSide:
    switch: Endpoint  # its leaf
    leaf_mac: int
    subnet: tuple[int, int]  # (address, prefix length)
    uplinks: tuple[int, ...]  # port to spine s
    servers: tuple[int, ...]  # IPv4 addresses
    controls: tuple[str | None, ...] = ()  # each server's agent control endpoint
    inputs: str | None = None  # the rack controller's hand-off file
    share: str | None = None  # the fabric controller's file for the rack controller


@dataclass(frozen=True)
class FabricFile(JsonFile):
    KIND: ClassVar[str] = "fabric file"
    ERROR: ClassVar[type[ValueError]] = FabricFileError

    spines: tuple[SpineSide, ...]
    racks: tuple[RackSide, ...]
    k: int = 1024
    max_holders: int = MAX_HOLDERS
    leaf_keys: int = LEAF_KEYS
    holder_cells: int | None = None  # None: a row of max_holders cells per slot

    @property
    def shape(self) -> FabricShape:
        return FabricShape(len(self.racks), len(self.racks[0].servers), len(self.spines))

    @property
    def spine_cells(self) -> int:
        """The ``valid_ver`` cells the controller uses on a spine."""
        return self.k * self.max_holders if self.holder_cells is None else self.holder_cells

    @property
    def total(self) -> int:
        return self.shape.total

    def server_ip(self, server: int) -> int:
        per = len(self.racks[0].servers)
        return self.racks[server // per].servers[server % per]

    def rack_of(self, server: int) -> int:
        return server // len(self.racks[0].servers)

    def server_of_ip(self) -> dict[int, int]:
        return {self.server_ip(s): s for s in range(self.total)}

    def spine_rack(self) -> Rack:
        """The fabric's servers as a spine's driver counts them (by address; the MACs and ports
        of :meth:`FabricShape.addresses` only keep the servers apart: a spine reaches a server
        through its leaf's port and MAC, docs/fabric.md)."""
        synthetic = self.shape.addresses().servers
        return Rack(
            tuple(
                ServerAddress(self.server_ip(s), synthetic[s].mac, synthetic[s].port)
                for s in range(self.total)
            )
        )

    def leaf_rack(self, rack: int) -> Rack:
        """Rack ``rack``'s servers as its leaf's driver counts them (by address)."""
        servers = self.spine_rack().servers
        per = len(self.racks[0].servers)
        return Rack(servers[rack * per : (rack + 1) * per])

    def agents_rack(self) -> RackFile:
        """The fabric's servers as :class:`~kvswitch.controller.agents.AgentPool` takes them
        (names, addresses, control endpoints; fabric server numbers)."""
        hosts = tuple(
            Host(f"{r.switch.name}-{j + 1}", ip, 0, 0, r.controls[j] if r.controls else None)
            for r in self.racks
            for j, ip in enumerate(r.servers)
        )
        return RackFile(0, 0, 0, hosts, ())

    def document(self) -> dict[str, Any]:
        """The file's JSON object (what :meth:`parse` reads back as this fabric)."""
        return {
            "k": self.k,
            "max_holders": self.max_holders,
            "leaf_keys": self.leaf_keys,
            **({} if self.holder_cells is None else {"holder_cells": self.holder_cells}),
            "spines": [
                {**_endpoint_doc(s.switch), "mac": _mac_text(s.mac), "ports": list(s.ports)}
                for s in self.spines
            ],
            "racks": [_rack_doc(r) for r in self.racks],
        }

    @classmethod
    def parse(cls, raw: Any, where: str = "fabric file") -> FabricFile:
        try:
            top = _object(raw, "the file")
            spines = tuple(
                _spine(x, f"spines[{i}]") for i, x in enumerate(_list(top.get("spines"), "spines"))
            )
            racks = tuple(
                _rack(x, f"racks[{i}]") for i, x in enumerate(_list(top.get("racks"), "racks"))
            )
            k = _int(top.get("k", 1024), "k", 1, 1 << 20)
            holders = _int(top.get("max_holders", MAX_HOLDERS), "max_holders", 2, 255)
            leaf_keys = _int(top.get("leaf_keys", LEAF_KEYS), "leaf_keys", 1, 1 << 24)
            cells = top.get("holder_cells")
            cells = None if cells is None else _int(cells, "holder_cells", k, 1 << 24)
        except (TypeError, ValueError) as exc:
            raise FabricFileError(f"{where}: {exc}") from exc
        if not spines or not racks:
            raise FabricFileError(f"{where}: at least one spine and one rack")
        if len({len(r.servers) for r in racks}) != 1 or not racks[0].servers:
            raise FabricFileError(f"{where}: every rack needs the same number (> 0) of servers")
        for i, s in enumerate(spines):
            if len(s.ports) != len(racks):
                raise FabricFileError(f"{where}: spines[{i}].ports needs one port per rack")
        for i, r in enumerate(racks):
            if len(r.uplinks) != len(spines):
                raise FabricFileError(f"{where}: racks[{i}].uplinks needs one port per spine")
        ips = [ip for r in racks for ip in r.servers]
        if len(set(ips)) != len(ips):
            raise FabricFileError(f"{where}: two servers share an address")
        names = [x.switch.name for x in spines] + [x.switch.name for x in racks]
        if len(set(names)) != len(names):
            raise FabricFileError(f"{where}: two switches share a name")
        if k * len(spines) > leaf_keys:
            raise FabricFileError(
                f"{where}: {len(spines)} spines x k = {k} fabric-hot keys do not fit the "
                f"leaves' {leaf_keys} steering entries (leaf_keys)"
            )
        return cls(spines, racks, k, holders, leaf_keys, cells)


def _endpoint(h: dict[str, Any], what: str) -> Endpoint:
    name = h.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError(f"{what}.name must be a non-empty string")
    grpc = h.get("p4runtime")
    thrift = h.get("thrift")
    if not isinstance(grpc, str) or ":" not in grpc:
        raise ValueError(f"{what}.p4runtime must be HOST:PORT")
    if not isinstance(thrift, str) or ":" not in thrift:
        raise ValueError(f"{what}.thrift must be HOST:PORT")
    host, port = thrift.rsplit(":", 1)
    if not port.isdigit():
        raise ValueError(f"{what}.thrift must be HOST:PORT")
    return Endpoint(
        name,
        grpc,
        host,
        _int(int(port), f"{what}.thrift port", 1, 65535),
        _int(h.get("device_id", 0), f"{what}.device_id", 0, 1 << 32),
    )


def _ports(value: Any, what: str) -> tuple[int, ...]:
    return tuple(_int(x, f"{what}[{i}]", 0, 510) for i, x in enumerate(_list(value, what)))


def _spine(value: Any, what: str) -> SpineSide:
    h = _object(value, what)
    return SpineSide(
        _endpoint(h, what),
        _mac(h.get("mac"), f"{what}.mac"),
        _ports(h.get("ports"), f"{what}.ports"),
    )


def _rack(value: Any, what: str) -> RackSide:
    h = _object(value, what)
    subnet = h.get("subnet")
    try:
        net = ipaddress.IPv4Network(subnet if isinstance(subnet, str) else "")
    except ValueError as exc:
        raise ValueError(f"{what}.subnet must be an IPv4 network a.b.c.d/n ({exc})") from exc
    servers: list[int] = []
    controls: list[str | None] = []
    for i, x in enumerate(_list(h.get("servers"), f"{what}.servers")):
        where = f"{what}.servers[{i}]"
        entry = x if isinstance(x, dict) else {"ip": x}
        control = entry.get("control")
        if control is not None and not isinstance(control, str):
            raise ValueError(f"{where}.control must be a string (unix:PATH or HOST:PORT)")
        servers.append(_ip(entry.get("ip"), f"{where}.ip" if isinstance(x, dict) else where))
        controls.append(control)
    inputs, share = h.get("inputs"), h.get("share")
    if inputs is not None and not isinstance(inputs, str):
        raise ValueError(f"{what}.inputs must be a path")
    if share is not None and not isinstance(share, str):
        raise ValueError(f"{what}.share must be a path")
    for i, ip in enumerate(servers):
        if ipaddress.IPv4Address(ip) not in net:
            raise ValueError(f"{what}.servers[{i}] is outside its rack's subnet")
    return RackSide(
        _endpoint(h, what),
        _mac(h.get("leaf_mac"), f"{what}.leaf_mac"),
        (int(net.network_address), net.prefixlen),
        _ports(h.get("uplinks"), f"{what}.uplinks"),
        tuple(servers),
        tuple(controls),
        inputs,
        share,
    )


def _mac_text(mac: int) -> str:
    return ":".join(f"{mac:012x}"[i : i + 2] for i in range(0, 12, 2))


def _endpoint_doc(end: Endpoint) -> dict[str, Any]:
    return {
        "name": end.name,
        "p4runtime": end.grpc_addr,
        "thrift": f"{end.thrift_host}:{end.thrift_port}",
        "device_id": end.device_id,
    }


def _rack_doc(r: RackSide) -> dict[str, Any]:
    servers: list[Any] = [
        str(ipaddress.IPv4Address(ip))
        if not r.controls or r.controls[j] is None
        else {"ip": str(ipaddress.IPv4Address(ip)), "control": r.controls[j]}
        for j, ip in enumerate(r.servers)
    ]
    doc: dict[str, Any] = {
        **_endpoint_doc(r.switch),
        "leaf_mac": _mac_text(r.leaf_mac),
        "subnet": f"{ipaddress.IPv4Address(r.subnet[0])}/{r.subnet[1]}",
        "uplinks": list(r.uplinks),
        "servers": servers,
    }
    if r.inputs is not None:
        doc["inputs"] = r.inputs
    if r.share is not None:
        doc["share"] = r.share
    return doc
