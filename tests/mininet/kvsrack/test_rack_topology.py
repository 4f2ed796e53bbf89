"""The rack's topology and the rack file it writes (pure: no Mininet, no root)."""

from __future__ import annotations

from pathlib import Path

from kvsrack import topology
from kvswitch.controller.rackfile import RackFile


def test_rack_addresses_ports_and_links() -> None:
    topo = topology.rack(servers=3, clients=2, spares=1)
    assert topo.switches == ("tor",)
    assert [(s.name, s.ip, s.mac, s.port) for s in topo.servers] == [
        ("s1", "10.0.0.1", "02:00:00:00:00:01", 1),
        ("s2", "10.0.0.2", "02:00:00:00:00:02", 2),
        ("s3", "10.0.0.3", "02:00:00:00:00:03", 3),
        ("s4", "10.0.0.4", "02:00:00:00:00:04", 4),
    ]
    assert [(c.name, c.ip, c.mac, c.port) for c in topo.clients] == [
        ("c1", "10.0.1.1", "02:00:00:00:01:01", 5),
        ("c2", "10.0.1.2", "02:00:00:00:01:02", 6),
    ]
    assert topo.spares == {"s4"} and [s.name for s in topo.members] == ["s1", "s2", "s3"]
    assert [(link.node, link.switch, link.port) for link in topo.links] == [
        (n.name, "tor", n.port) for n in topo.hosts
    ]


def test_rack_file_is_the_contract_and_parses_back(tmp_path: Path) -> None:
    """The rack file as docs/rack.md gives it (the form the runner wrote by hand before)."""
    topo = topology.rack(servers=2, clients=1, spares=1)
    run_dir = Path("/tmp/kvswitch-abc123")
    rack_file = topology.rack_file(topo, run_dir)
    assert rack_file.document() == {
        "kvs_port": 8900,
        "switch": {"ip": "10.0.0.254", "mac": "02:00:00:00:00:fe"},
        "servers": [
            {"name": "s1", "ip": "10.0.0.1", "mac": "02:00:00:00:00:01", "port": 1,
             "control": "unix:/tmp/kvswitch-abc123/s1.ctl"},
            {"name": "s2", "ip": "10.0.0.2", "mac": "02:00:00:00:00:02", "port": 2,
             "control": "unix:/tmp/kvswitch-abc123/s2.ctl"},
            {"name": "s3", "ip": "10.0.0.3", "mac": "02:00:00:00:00:03", "port": 3,
             "control": "unix:/tmp/kvswitch-abc123/s3.ctl", "member": False},
        ],
        "clients": [{"name": "c1", "ip": "10.0.1.1", "mac": "02:00:00:00:01:01", "port": 4}],
    }  # fmt: skip
    path = tmp_path / "rack.json"
    rack_file.write(path)
    loaded = RackFile.load(path)
    assert loaded == rack_file
    assert [s.member for s in loaded.servers] == [True, True, False]
    assert len(loaded.rack()) == 3
