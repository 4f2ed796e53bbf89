"""A p4runtime-shell session, run by the p4runtime-shell venv (.venv-p4rtsh: p4runtime-shell pins
an old protobuf that cannot share the project's environment). Prints what it reads back, one
fact per line after "@@ " (the shell itself echoes what it builds), for
tests/softswitch/runtime/test_p4runtime_shell.py to check.

    python p4rtsh_session.py GRPC_ADDR P4INFO DEVICE_CONFIG tutorial|kvswitch
"""

import sys

import grpc
import p4runtime_sh.shell as sh
from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2
from p4runtime_sh.p4runtime import P4RuntimeWriteException


def replicas(group_id: int) -> list[tuple[int, int]]:
    [g] = list(sh.MulticastGroupEntry(group_id).read())
    return sorted((r.egress_port, r.instance) for r in g.msg().multicast_group_entry.replicas)


def tutorial() -> None:
    """tests/p4c_bmv2/p4/tutorial_basic.p4: a route, the default action, a group, a counter."""
    te = sh.TableEntry("MyIngress.ipv4_lpm")(action="MyIngress.ipv4_forward")
    te.match["hdr.ipv4.dstAddr"] = "10.0.1.1/32"
    te.action["dstAddr"] = "08:00:00:00:01:11"
    te.action["port"] = "1"
    te.insert()
    for e in sh.TableEntry("MyIngress.ipv4_lpm").read():
        msg = e.msg()
        print("@@ entry", msg.match[0].lpm.prefix_len, msg.action.action.params[1].value.hex())
    default = sh.TableEntry("MyIngress.ipv4_lpm")(is_default=True, action="NoAction")
    default.modify()
    for e in sh.TableEntry("MyIngress.ipv4_lpm")(is_default=True).read():
        print("@@ default", sh.context.get_name_from_id(e.msg().action.action.action_id))
    group = sh.MulticastGroupEntry(5).add(3, 0).add(4, 1)
    group.insert()
    print("@@ replicas", replicas(5))
    ctr = sh.CounterEntry("MyIngress.port_counter")
    ctr.index = 3
    ctr.packet_count = 7
    ctr.byte_count = 70
    ctr.modify()
    for c in sh.CounterEntry("MyIngress.port_counter").read():
        if c.index == 3:
            print("@@ counter", c.packet_count, c.byte_count)
    te.delete()
    print("@@ entries after delete", len(list(sh.TableEntry("MyIngress.ipv4_lpm").read())))
    group.delete()
    print("@@ groups after delete", len(list(sh.MulticastGroupEntry().read())))


def kvswitch() -> None:
    """p4src/kvswitch.p4: a hot key (16-byte exact key), its direct counter, a replica group."""
    table = "KvsIngress.hot_keys.HotkeyTable"
    te = sh.TableEntry(table)(action="KvsIngress.hot_keys.set_hot")
    te.match["key"] = str(int.from_bytes(b"hot-key".ljust(16, b"\0"), "big"))
    te.action["slot"] = "3"
    te.action["n"] = "2"
    te.insert()
    for e in sh.TableEntry(table).read():
        msg = e.msg()
        key = msg.match[0].exact.value.rstrip(b"\0").decode()
        print("@@ hot", key, msg.action.action.params[0].value.hex())
    for c in sh.DirectCounterEntry("KvsIngress.hot_keys.hotkey_counter").read():
        print("@@ hot counter", c.packet_count, c.byte_count)
    sh.MulticastGroupEntry(4).add(1, 0).add(2, 1).insert()
    print("@@ replicas", replicas(4))
    te.delete()
    print("@@ hot keys after delete", len(list(sh.TableEntry(table).read())))
    register_epoch()


def register_epoch() -> None:
    """A RegisterEntry write, then a read, of register epoch (bit<16>) cell 0: the shell has no
    RegisterEntry class (nor registers in its P4Type), so the messages go through its client. Prints what the target answers:
    "ok" and the value read, or the error codes."""
    name = "KvsIngress.replicas.epoch"
    reg_id = next(r.preamble.id for r in sh.context.p4info.registers if r.preamble.name == name)
    update = p4runtime_pb2.Update(type=p4runtime_pb2.Update.MODIFY)
    update.entity.register_entry.register_id = reg_id
    update.entity.register_entry.index.index = 0
    update.entity.register_entry.data.bitstring = (7).to_bytes(2, "big")
    try:
        sh.client.write_update(update)
        print("@@ register write ok")
    except P4RuntimeWriteException as exc:
        codes = [code_pb2.Code.Name(e.canonical_code) for _i, e in exc.errors]
        print("@@ register write refused", *codes)
    except grpc.RpcError as exc:
        print("@@ register write refused", exc.code().name)
    entity = p4runtime_pb2.Entity()
    entity.register_entry.register_id = reg_id
    entity.register_entry.index.index = 0
    try:
        values = [
            int.from_bytes(e.register_entry.data.bitstring, "big")
            for reply in sh.client.read_one(entity)
            for e in reply.entities
        ]
        print("@@ register read", values)
    except grpc.RpcError as exc:
        print("@@ register read refused", exc.code().name, exc.details())


def main() -> None:
    addr, p4info, config, program = sys.argv[1:5]
    pipeline = sh.FwdPipeConfig(p4info, config)
    sh.setup(device_id=0, grpc_addr=addr, election_id=(0, 1), config=pipeline)
    try:
        {"tutorial": tutorial, "kvswitch": kvswitch}[program]()
    finally:
        sh.teardown()


if __name__ == "__main__":
    main()
