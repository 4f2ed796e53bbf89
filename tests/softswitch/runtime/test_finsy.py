"""The switch driven by finsy, a P4Runtime client from PyPI: pipeline, entries, counters,
registers, multicast groups, packet-in/out; the main scenarios on the v1model and the TNA build of
the runtime test program (same names, same calls)."""

from __future__ import annotations

import asyncio

import finsy as fy
import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from tests.softswitch.runtime.conftest import CPU_PORT, Program, Server


def frame(dst: str = "10.1.2.3", ttl: int = 9) -> bytes:
    return bytes(
        Ether(dst="00:00:00:00:00:01", src="00:00:00:00:00:02")
        / IP(dst=dst, ttl=ttl)
        / UDP(dport=7)
    )


def options(program: Program, **kw: object) -> fy.SwitchOptions:
    return fy.SwitchOptions(p4info=program.p4info_path, p4blob=program.blob_path, device_id=0, **kw)


def test_pipeline_entries_counters_registers(rt_server: Server, arch_program: Program) -> None:
    program = arch_program

    async def scenario() -> None:
        async with fy.Switch("sw", rt_server.address, options(program)) as sw:
            assert rt_server.device.pipeline is not None  # finsy installed the pipeline
            await sw.write(
                [
                    +fy.P4TableEntry(
                        "ipv4_lpm",
                        match=fy.P4TableMatch(dst="10.0.0.0/8"),
                        action=fy.P4TableAction("ipv4_forward", dstAddr=0xAABBCCDDEEFF, port=2),
                    ),
                    +fy.P4TableEntry(
                        "acl",
                        match=fy.P4TableMatch(ether_type=(0x0806, 0xFFFF)),
                        action=fy.P4TableAction("punt"),
                        priority=10,
                    ),
                    fy.P4RegisterEntry("last_ttl", index=3, data=77),
                ]
            )
            entries = [e async for e in sw.read(fy.P4TableEntry())]  # wildcard: every table
            assert {e.table_id for e in entries} == {"ipv4_lpm", "acl"}
            lpm = next(e for e in entries if e.table_id == "ipv4_lpm")
            assert lpm.match["dst"] == (0x0A000000, 8)
            assert lpm.action.args == {"port": 2, "dstAddr": 0xAABBCCDDEEFF}

            out = rt_server.device.process(1, frame(ttl=9))
            assert [p for p, _ in out] == [2]
            sent = Ether(out[0][1])
            assert sent.dst == "aa:bb:cc:dd:ee:ff" and sent[IP].ttl == 8

            [ctr] = [c async for c in sw.read(fy.P4CounterEntry("port_counter", index=1))]
            assert ctr.packet_count == 1 and ctr.byte_count == len(frame())
            [reg] = [r async for r in sw.read(fy.P4RegisterEntry("last_ttl", index=1))]
            assert reg.data == 9
            [reg3] = [r async for r in sw.read(fy.P4RegisterEntry("last_ttl", index=3))]
            assert reg3.data == 77
            [dc] = [
                d
                async for d in sw.read(
                    fy.P4DirectCounterEntry(
                        table_entry=fy.P4TableEntry(
                            "ipv4_lpm", match=fy.P4TableMatch(dst="10.0.0.0/8")
                        )
                    )
                )
            ]
            assert dc.packet_count == 1

            # modify then delete; reads follow
            await sw.write(
                [
                    ~fy.P4TableEntry(
                        "ipv4_lpm",
                        match=fy.P4TableMatch(dst="10.0.0.0/8"),
                        action=fy.P4TableAction("drop"),
                    )
                ]
            )
            assert rt_server.device.process(1, frame()) == []
            await sw.write([-fy.P4TableEntry("ipv4_lpm", match=fy.P4TableMatch(dst="10.0.0.0/8"))])
            assert [e async for e in sw.read(fy.P4TableEntry("ipv4_lpm"))] == []

    asyncio.run(scenario())


def test_multicast_default_action_and_packet_io(rt_server: Server, arch_program: Program) -> None:
    program = arch_program

    async def scenario() -> None:
        async with fy.Switch("sw", rt_server.address, options(program)) as sw:
            await sw.write(
                [
                    +fy.P4MulticastGroupEntry(7, replicas=[(3, 1), (4, 2)]),
                    +fy.P4TableEntry(
                        "l2",
                        match=fy.P4TableMatch(in_port=1),
                        action=fy.P4TableAction("set_mcast", grp=7),
                    ),
                    ~fy.P4TableEntry(
                        "ipv4_lpm", is_default_action=True, action=fy.P4TableAction("drop")
                    ),
                ]
            )
            [grp] = [g async for g in sw.read(fy.P4MulticastGroupEntry())]
            assert grp.multicast_group_id == 7 and len(grp.replicas) == 2
            [default] = [
                d async for d in sw.read(fy.P4TableEntry("ipv4_lpm", is_default_action=True))
            ]
            assert default.action.name.endswith("drop")
            # non-IPv4 frames skip ipv4_lpm (whose default now drops) and are multicast
            arp = bytes(Ether(dst="ff:ff:ff:ff:ff:ff", type=0x0806) / (b"\x00" * 28))
            assert sorted(p for p, _ in rt_server.device.process(1, arp)) == [3, 4]

            # packet-out: the program sends it to packet_out.egress_port
            sent: list[tuple[int, bytes]] = []
            rt_server.device.transmit = lambda port, data: sent.append((port, data))
            await sw.write([fy.P4PacketOut(arp, egress_port=5, _pad=0)])
            for _ in range(100):
                if sent:
                    break
                await asyncio.sleep(0.01)
            assert sent == [(5, arp)]

            # packet-in: an ACL punt sends ARP to the CPU port with packet_in metadata
            await sw.write(
                [
                    +fy.P4TableEntry(
                        "acl",
                        match=fy.P4TableMatch(ether_type=(0x0806, 0xFFFF)),
                        action=fy.P4TableAction("punt"),
                        priority=1,
                    )
                ]
            )

            async def first_packet() -> fy.P4PacketIn:
                async for pkt in sw.read_packets():
                    return pkt
                raise AssertionError("stream closed")

            waiter = asyncio.ensure_future(first_packet())
            await asyncio.sleep(0.05)
            out = await asyncio.to_thread(rt_server.device.process, 6, arp)
            assert [p for p, _ in out] == [CPU_PORT]
            pkt = await asyncio.wait_for(waiter, 5)
            assert pkt["ingress_port"] == 6 and pkt.payload == arp

    asyncio.run(scenario())


def test_finsy_errors(rt_server: Server, program: Program) -> None:
    async def scenario() -> None:
        async with fy.Switch("sw", rt_server.address, options(program)) as sw:

            def entry() -> fy.P4TableEntry:
                return fy.P4TableEntry(
                    "l2",
                    match=fy.P4TableMatch(in_port=1),
                    action=fy.P4TableAction("forward", port=2),
                )

            await sw.write([+entry()])
            with pytest.raises(fy.P4ClientError) as exc:
                await sw.write([+entry()])
            assert exc.value.code == fy.GRPCStatusCode.UNKNOWN
            assert exc.value.details[0].canonical_code == fy.GRPCStatusCode.ALREADY_EXISTS
            with pytest.raises(fy.P4ClientError) as exc:
                await sw.write([-fy.P4TableEntry("l2", match=fy.P4TableMatch(in_port=9))])
            assert exc.value.details[0].canonical_code == fy.GRPCStatusCode.NOT_FOUND

    asyncio.run(scenario())
