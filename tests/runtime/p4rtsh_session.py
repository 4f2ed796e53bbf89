"""A p4runtime-shell session, run by the p4runtime-shell venv (.venv-p4rtsh: p4runtime-shell pins
an old protobuf that cannot share the project's environment). Prints what it reads back, one
line per fact (after "@@ "; the shell echoes what it builds), for tests/runtime/test_p4runtime_shell.py to check.

    python p4rtsh_session.py GRPC_ADDR P4INFO DEVICE_CONFIG
"""

import sys

import p4runtime_sh.shell as sh


def main() -> None:
    addr, p4info, config = sys.argv[1:4]
    sh.setup(
        device_id=0, grpc_addr=addr, election_id=(0, 1), config=sh.FwdPipeConfig(p4info, config)
    )
    try:
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
        for g in sh.MulticastGroupEntry(5).read():
            print(
                "@@ replicas",
                sorted((r.egress_port, r.instance) for r in g.msg().multicast_group_entry.replicas),
            )
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
    finally:
        sh.teardown()


if __name__ == "__main__":
    main()
