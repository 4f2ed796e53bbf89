"""The switch as a process: simple_switch_CLI (unchanged, from PyPI) over Thrift, pcap files in
and out (--use-files, --pcap), bad flags, and a clean exit on SIGTERM."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import time
from pathlib import Path

import finsy as fy
import grpc
import pytest
from finsy.proto import p4r, p4r_grpc
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from softswitch.pcap import PcapWriter, read_pcap
from tests.softswitch.runtime.conftest import PROGRAM, PROGRAM_TNA, Program, switch_process

CLI = shutil.which("simple_switch_CLI") or str(Path(sys.executable).parent / "simple_switch_CLI")


def run_cli(thrift_port: int, commands: str) -> str:
    done = subprocess.run(
        [CLI, "--thrift-port", str(thrift_port)],
        input=commands,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("source", [PROGRAM, PROGRAM_TNA], ids=["v1model", "tna"])
def test_simple_switch_cli(tmp_path: Path, source: Path) -> None:
    # the TNA twin has the same names: one CLI session serves both builds
    with switch_process([str(source)]) as sw:
        out = run_cli(
            sw.thrift_port,
            "\n".join(
                [
                    "table_add ipv4_lpm ipv4_forward 10.0.0.0/8 => 00:11:22:33:44:55 2",
                    "table_add l2 forward 1 => 3",
                    "table_add acl punt 0x0806&&&0xffff => 5",
                    "table_num_entries ipv4_lpm",
                    "table_dump l2",
                    "table_modify l2 forward 0 => 4",
                    "table_set_default ipv4_lpm drop",
                    "table_add no_such_table drop 1 =>",
                    "table_add l2 forward 1 => 3",
                    "table_add l2 forward 1 2 => 3",
                    "register_write last_ttl 3 99",
                    "register_read last_ttl 3",
                    "register_read last_ttl 99",
                    "counter_read port_counter 1",
                    "counter_read lpm_counter 0",  # handles start at 0, as on BMv2
                    "mc_mgrp_create 7",
                    "mc_node_create 0 3 4",
                    "mc_node_associate 7 0",
                    "mc_dump",
                    "table_delete ipv4_lpm 0",
                    "table_num_entries ipv4_lpm",
                    "mc_node_create 1 6",
                    "mc_node_associate 7 1",
                    "mc_node_update 0 5",
                    "register_reset last_ttl",
                    "register_read last_ttl 3",
                    "counter_reset port_counter",
                    "table_clear acl",
                    "table_num_entries acl",
                ]
            )
            + "\n",
        )
        assert "Entry has been added with handle" in out
        assert "ipv4_lpm: 1" in out or "1\n" in out
        assert "Invalid table operation (DUPLICATE_ENTRY)" in out
        assert "Error: Table no_such_table" in out or "Invalid table" in out
        assert "last_ttl[3]= 99" in out
        assert "Invalid register operation (INVALID_INDEX)" in out
        assert "port_counter[1]= (0 bytes, 0 packets)" in out
        assert "lpm_counter[0]= (0 bytes, 0 packets)" in out
        assert (
            "Creating multicast group 7" in out and "Associating node 0 to multicast group 7" in out
        )
        assert "mgrp(7)" in out and "ports=[3, 4]" in out
        assert "last_ttl[3]= 0" in out
        # the group built over Thrift is the one P4Runtime sees (one PRE)
        with grpc.insecure_channel(f"127.0.0.1:{sw.grpc_port}") as channel:
            read = p4r_grpc.P4RuntimeStub(channel).Read(
                p4r.ReadRequest(
                    device_id=0,
                    entities=[
                        p4r.Entity(
                            packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(
                                multicast_group_entry=p4r.MulticastGroupEntry()
                            )
                        )
                    ],
                )
            )
            [group] = [
                e.packet_replication_engine_entry.multicast_group_entry
                for r in read
                for e in r.entities
            ]
        assert group.multicast_group_id == 7
        assert sorted((int.from_bytes(r.port, "big"), r.instance) for r in group.replicas) == [
            (5, 0),
            (6, 1),
        ]
        out = run_cli(
            sw.thrift_port,
            "table_dump_entry_from_key l2 1\nswitch_info\nshow_ports\nreset_state\n"
            "table_num_entries l2\nmc_dump\n",
        )
        assert "Dumping entry 0x0" in out and "RtIngress.forward - 04" in out  # after the modify
        assert "thrift_port" in out and str(sw.thrift_port) in out
        assert "RuntimeCmd: 0\n" in out and "mgrp(" not in out  # reset_state emptied l2 and the PRE
        assert sw.proc.poll() is None  # bad commands did not hurt the switch
    assert sw.proc.returncode == 0  # SIGTERM: clean exit


def test_pcap_files_and_capture(tmp_path: Path) -> None:
    frames = [bytes(Ether() / IP(dst=f"10.0.0.{i}") / UDP(dport=9)) for i in range(3)]
    writer = PcapWriter(tmp_path / "p1_in.pcap")
    for i, f in enumerate(frames):
        writer.write(f, ts_ns=(1000 + i) * 10**9)
    writer.close()
    PcapWriter(tmp_path / "p0_in.pcap").close()  # every port needs its input, as on BMv2
    caps = tmp_path / "caps"
    args = ["--use-files", "0", "-i", "0@p0", "-i", "1@p1", "--pcap", str(caps)]
    args += ["--log-console", "-L", "debug", str(PROGRAM)]
    with switch_process(args, cwd=tmp_path) as sw:
        out = tmp_path / "p0_out.pcap"
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len(list(read_pcap(out, partial=True))) < 3:
            time.sleep(0.05)
        # l2 has no entry: NoAction leaves egress_spec 0, so every frame leaves on port 0
        assert [r.data for r in read_pcap(out)] == frames
        assert list(read_pcap(tmp_path / "p1_out.pcap")) == []
    assert sw.proc.stderr is not None
    log = sw.proc.stderr.read().decode()
    assert log.count("port 1: ") == 3 and "-> [(0, " in log  # one debug line per packet


@pytest.mark.parametrize(
    "args",
    [
        ["--no-p4", str(PROGRAM)],
        ["-i", "bogus"],
        ["-i", "1@no-such-if0", str(PROGRAM)],
        ["--use-files", "0", "-i", "1@no-such-file", str(PROGRAM)],
        [str(PROGRAM.parent / "missing.p4")],
    ],
)
def test_bad_command_lines(args: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "kvswitch", "switch", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0
    assert "kvswitch switch" in done.stderr or "usage" in done.stderr


def test_finsy_against_a_no_p4_process(program: Program) -> None:
    """``--no-p4``: the switch starts empty and finsy installs the pipeline over gRPC."""

    async def scenario(address: str) -> list[fy.P4TableEntry]:
        opts = fy.SwitchOptions(p4info=program.p4info_path, p4blob=program.blob_path, device_id=3)
        async with fy.Switch("sw", address, opts) as sw:
            await sw.write(
                [
                    +fy.P4TableEntry(
                        "l2", match=fy.P4TableMatch(in_port=4), action=fy.P4TableAction("drop")
                    )
                ]
            )
            return [e async for e in sw.read(fy.P4TableEntry("l2"))]

    with switch_process(["--no-p4", "--device-id", "3"]) as sw:
        entries = asyncio.run(scenario(f"127.0.0.1:{sw.grpc_port}"))
        assert [e.match["in_port"] for e in entries] == [4]  # type: ignore[index]
        assert sw.proc.poll() is None
