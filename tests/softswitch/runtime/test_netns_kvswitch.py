"""The KVSwitch program of p4src/ on the switch process, real packets between namespaces: a Get
for a hot key with two valid holders goes round-robin, the second one redirected to the replica."""

from __future__ import annotations

import json
import time

import pytest
from finsy.proto import p4r

from kvswitch.bench.runtime_bench import (
    Topology,
    can_build_namespaces,
    switch_process,
    thrift_commands,
)
from kvswitch.paths import p4src_dir
from kvswitch.protocol import KVS_PORT, Message, Op, pad_key
from softswitch.runtime.p4info_index import P4InfoIndex
from softswitch.runtime.p4runtime_server import encode_uint
from tests.softswitch.runtime.conftest import Client

pytestmark = [pytest.mark.netns]

SWITCH_MAC = "02:00:00:00:00:fe"
SERVERS = [("10.0.0.1", "02:00:00:00:00:01", 1), ("10.0.0.2", "02:00:00:00:00:02", 2)]
CLIENT = ("10.0.1.1", "02:00:00:00:01:01", 8)
MAX_SERVERS, SLOT, VER = 8, 3, 5

RECEIVER = """
import json, socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", int(sys.argv[1])))
print("ready", flush=True)
s.settimeout(float(sys.argv[2]))
got = []
try:
    while True:
        data, addr = s.recvfrom(4096)
        got.append(data.hex())
except socket.timeout:
    pass
print(json.dumps(got))
"""

SENDER = """
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for payload in sys.argv[3:]:
    s.sendto(bytes.fromhex(payload), (sys.argv[1], int(sys.argv[2])))
    time.sleep(0.05)
"""


def rack_commands() -> list[str]:
    """What the controller would install for a rack of two servers and one hot key, except the
    two 128-bit key tables: simple_switch_CLI reads 128-bit values as IPv6 addresses through the
    py2-era ``ipaddr`` module, which is not installed, so those go over P4Runtime."""
    cmds = []
    for ip, mac, port in [*SERVERS, CLIENT]:
        cmds.append(f"table_add ipv4_lpm set_next_hop {ip}/32 => {port} {mac} {SWITCH_MAC}")
        server = int((ip, mac, port) in SERVERS)
        cmds.append(f"table_add HostportTable set_source {ip}/32 => {port} {server}")
    for offset, (ip, mac, port) in enumerate(SERVERS):
        cmds.append(f"table_add ServeroffsetTable set_server_offset {ip} => {offset} {port}")
        cmds.append(f"table_add PorttoserverTable set_replica {port} => {ip} {mac}")
        cmds.append(f"table_add LoadcountTable count_load {ip} =>")
    base = SLOT * MAX_SERVERS
    for ordinal, (ip, mac, port) in enumerate(SERVERS):
        cmds.append(
            f"table_add ServermapTable set_server {SLOT} {ordinal} => {base + ordinal} {ip} {mac} {port}"
        )
    cmds += ["register_write epoch 0 7", f"register_write global_ver 0 {VER}"]
    cmds += [f"register_write slot_ver {SLOT} {VER}", f"register_write origin_ver {SLOT} {VER}"]
    cmds += [f"register_write valid_ver {base + i} {VER}" for i in range(len(SERVERS))]
    return cmds


def install_hot_key(address: str, key: bytes) -> None:
    """HotkeyTable and KeyindexTable entries for ``key`` over P4Runtime (primary, device 0)."""
    client = Client(address)
    try:
        assert client.arbitrate(1).status.code == 0
        config = client.stub.GetForwardingPipelineConfig(
            p4r.GetForwardingPipelineConfigRequest(device_id=0)
        ).config
        index = P4InfoIndex(config.p4info)
        updates = []
        for table_name, action_name, params in (
            ("HotkeyTable", "set_hot", [SLOT, len(SERVERS)]),
            ("KeyindexTable", "set_key_index", [SLOT, SLOT * MAX_SERVERS, 0]),
        ):
            table, action = index.table(table_name), index.action(action_name)
            assert table is not None and action is not None
            te = p4r.TableEntry(table_id=table.id)
            te.match.add(field_id=table.keys[0].id).exact.value = key.lstrip(b"\0") or b"\0"
            te.action.action.action_id = action.id
            for p, v in zip(action.params, params, strict=True):
                te.action.action.params.add(param_id=p.id, value=encode_uint(v))
            updates.append(p4r.Update(type=p4r.Update.INSERT, entity=p4r.Entity(table_entry=te)))
        client.write(*updates)
    finally:
        client.close()


def test_hot_get_redirected(tmp_path: object) -> None:
    why = can_build_namespaces()
    if why:
        pytest.skip(f"network namespace test {why}")
    program = p4src_dir() / "kvswitch.p4"
    topo = Topology.build(specs=[*SERVERS, CLIENT])
    try:
        s0, s1, client = topo.hosts
        key = pad_key(b"hot-key-1")
        defines = ["-D", f"MAX_SERVERS={MAX_SERVERS}", "-D", "HOT_KEYS=64"]
        with switch_process(topo.interfaces(), program, extra=defines) as (proc, thrift, grpc_port):
            out = thrift_commands(thrift, rack_commands())
            assert "Error" not in out and "Invalid" not in out, out
            install_hot_key(f"127.0.0.1:{grpc_port}", key)
            receivers = [topo.python(h, RECEIVER, str(KVS_PORT), "2") for h in (s0, s1)]
            for r in receivers:
                assert r.stdout is not None and r.stdout.readline().strip() == "ready"
            gets = [Message(Op.GET, key, seq=seq, cid=9).encode().hex() for seq in (1, 2, 3, 4)]
            sender = topo.python(client, SENDER, s0.ip, str(KVS_PORT), *gets)
            sender.communicate(timeout=30)
            time.sleep(0.2)
            got = [
                json.loads(r.communicate(timeout=30)[0].strip().splitlines()[-1]) for r in receivers
            ]
            assert proc.poll() is None
        seqs = [[Message.decode(bytes.fromhex(h)).seq for h in hexes] for hexes in got]
        # round-robin over the two holders: the origin gets 1 and 3, the replica 2 and 4
        assert seqs == [[1, 3], [2, 4]]
    finally:
        topo.close()
