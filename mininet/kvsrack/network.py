"""A :class:`~kvsrack.topology.Topology` as a Mininet network: each host in its namespace with
static ARP entries for every other host and the switch address, checksum offload and IPv6 off;
each switch a P4 switch process (:mod:`kvsrack.switches`) in the root namespace. The switches'
names carry the run's tag (their interfaces are ``t<tag>-ethN``), so two runs never meet."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

from mininet.log import setLogLevel
from mininet.net import Mininet
from mininet.node import Host

from kvsrack.procs import Procs
from kvsrack.switches import P4Switch
from kvsrack.topology import Topology


@dataclass(frozen=True)
class SwitchNode:
    """How one switch of the topology runs: its node class (the target), its runtime ports, its
    log."""

    cls: type[P4Switch]
    grpc_port: int
    thrift_port: int
    log_path: Path


def switch_name(tag: str, index: int) -> str:
    """The Mininet name of the run's ``index``-th switch: ``t<tag>``, then ``t<tag>1``, ..."""
    return f"t{tag}" if index == 0 else f"t{tag}{index}"


class Network:
    """The topology's Mininet network, built and started by :meth:`start`, stopped by
    :meth:`close` (switch processes first, then Mininet's hosts and interfaces)."""

    def __init__(self, topo: Topology, tag: str) -> None:
        self.topo = topo
        self.tag = tag
        self.net: Mininet | None = None
        self.switches: dict[str, P4Switch] = {}  # by role

    def start(self, switches: dict[str, SwitchNode], procs: Procs) -> None:
        """``switches``: how each switch role of the topology runs."""
        setLogLevel("warning")
        net = Mininet(
            controller=None, build=False, autoSetMacs=False, autoStaticArp=False, cleanup=False
        )
        self.net = net
        nodes = {}
        for i, role in enumerate(self.topo.switches):
            how = switches[role]
            nodes[role] = net.addSwitch(
                switch_name(self.tag, i),
                cls=how.cls,
                grpc_port=how.grpc_port,
                thrift_port=how.thrift_port,
                log_path=how.log_path,
                procs=procs,
            )
            self.switches[role] = nodes[role]
        for n in self.topo.hosts:
            nodes[n.name] = net.addHost(n.name, ip=f"{n.ip}/{self.topo.prefix}", mac=n.mac)
        for link in self.topo.links:
            net.addLink(nodes[link.node], nodes[link.switch], port1=link.node_port, port2=link.port)
        net.build()
        self.setup_hosts()
        net.start()

    def host(self, name: str) -> Host:
        assert self.net is not None
        return self.net.get(name)

    def setup_hosts(self) -> None:
        everyone = self.topo.hosts
        for n in everyone:
            h = self.host(n.name)
            intf = h.defaultIntf().name
            h.cmd(f"ethtool --offload {intf} rx off tx off >/dev/null 2>&1")
            h.cmd(f"sysctl -qw net.ipv6.conf.{intf}.disable_ipv6=1")
            h.setARP(*self.topo.gateway(n.name))
            for other in everyone:
                if other is not n:
                    h.setARP(other.ip, other.mac)

    def close(self) -> None:
        if self.net is None:
            return
        net, self.net = self.net, None
        for sw in net.switches:  # before Mininet takes its interfaces away
            if isinstance(sw, P4Switch):
                sw.stop_process()
        with contextlib.suppress(Exception):
            net.stop()
