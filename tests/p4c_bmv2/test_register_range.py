"""``bm_register_write_range`` on BMv2's simple_switch and on the software switch: the same calls,
the same cells, the same error codes. BMv2's range ends before its end index (the software switch
wrote the end cell too, and the controller counted on it: on BMv2 a one-cell write wrote nothing)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from bm_runtime.standard import Standard
from bm_runtime.standard.ttypes import InvalidRegisterOperation
from thrift.protocol import TBinaryProtocol, TMultiplexedProtocol
from thrift.transport import TSocket, TTransport

from kvswitch.agent.backend_procs import free_port
from kvswitch.paths import p4src_dir

from .tools import need, p4c_compile, stop, wait_port

DEFINES = {"HOT_KEYS": "16", "MAX_SERVERS": "4", "HP_STAGES": "2"}
REGISTER = "KvsIngress.replicas.valid_ver"  # 16 slots x 4 servers = 64 cells
CALLS = [(3, 6, 9), (10, 11, 4), (20, 20, 5), (0, 64, 1), (63, 64, 2)]
BAD = [(5, 4), (0, 65), (64, 65)]


def _session(argv: list[str], json_path: Path) -> tuple[list[list[int]], list[int]]:
    """Each call of CALLS on a fresh register (the cells after it), and the error code of each
    range of BAD."""
    port = free_port()
    proc = subprocess.Popen(
        [*argv, "--thrift-port", str(port), str(json_path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    transport = None
    try:
        wait_port(port, proc)
        transport = TTransport.TBufferedTransport(TSocket.TSocket("127.0.0.1", port))
        protocol = TBinaryProtocol.TBinaryProtocol(transport)
        client = Standard.Client(TMultiplexedProtocol.TMultiplexedProtocol(protocol, "standard"))
        transport.open()
        cells = []
        for start, end, value in CALLS:
            client.bm_register_reset(0, REGISTER)
            client.bm_register_write_range(0, REGISTER, start, end, value)
            cells.append(client.bm_register_read_all(0, REGISTER))
        codes = []
        for start, end in BAD:
            with pytest.raises(InvalidRegisterOperation) as exc:
                client.bm_register_write_range(0, REGISTER, start, end, 7)
            codes.append(int(exc.value.code))
        return cells, codes
    finally:
        if transport is not None:
            transport.close()
        stop(proc)


def test_register_write_range_as_bmv2(tmp_path: Path) -> None:
    simple_switch = need("simple_switch")
    source = p4src_dir() / "kvswitch.p4"
    json_path, _info = p4c_compile(source, tmp_path, DEFINES, [source.parent])
    bmv2 = _session([simple_switch], json_path)
    ours = _session([str(Path(sys.executable).with_name("kvswitch")), "switch"], json_path)
    assert ours == bmv2
    cells, _codes = bmv2
    assert cells[0][2:7] == [0, 9, 9, 9, 0]  # cells 3, 4, 5: the end index is not written
    assert cells[2] == [0] * 64  # an empty range
