"""``kvswitch bench freeze``: the write freeze of one rotated key's map change (docs/fabric.md
"Write rotation"), as the fabric controller makes it (``controller/rotation.py``
``WriteFreeze``): freeze every holder, export each one's request ids of the key and its item,
import the merge into each, release; over the agents' control channels (``AgentPool``).

H agent processes (``kvswitch agent``, memory backend) on loopback, each holding N ids of the
key (writes it took as the key's writer; distinct clients per holder), so the merge has H x N
ids. Printed per (H, N): the merged ids, the median time of the whole freeze over R fresh keys
with the holders' exports and imports one after the other (``WriteFreeze.workers`` 1) and at
once (the default), the speed-up, and the time at once against the same freeze with no ids
(the control round trips alone), all measured in the same run. A merge over the 1 MiB a control
line holds (about 10 000 ids) is sent in several lines (``key_import``).
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Iterator

from kvswitch import argtypes as t
from kvswitch import protocol as p
from kvswitch.agent.backend_procs import BackendProcess, start_agent
from kvswitch.agent.control import KeyExport
from kvswitch.controller.agents import AgentPool
from kvswitch.controller.rackfile import RackFile
from kvswitch.controller.rotation import MapChange, WriteFreeze

EPOCH = 0x8001
PER_CID = 1000  # ids of one client (below RecentIds' 1 024 per client)


@contextlib.contextmanager
def agents(count: int) -> Iterator[list[BackendProcess]]:
    """``count`` agent processes (``kvswitch agent``, memory backend), each remembering up to
    65 536 clients' ids."""
    started: list[BackendProcess] = []
    try:
        for _ in range(count):
            started.append(start_agent(["--ids-clients", "65536"], control=True))
        yield started
    finally:
        for agent in started:
            agent.stop()


def pool_of(servers: list[BackendProcess]) -> AgentPool:
    rows = [
        dict(name=f"s{i}", ip=f"10.0.0.{i + 1}", mac=f"02:00:00:00:00:{i + 1:02x}", port=i + 1)
        | {"control": f"127.0.0.1:{a.control_port}"}
        for i, a in enumerate(servers)
    ]
    switch = {"ip": "10.0.0.254", "mac": "02:00:00:00:00:fe"}
    return AgentPool(RackFile.parse({"switch": switch, "servers": rows}), timeout=60.0)


def written(pool: AgentPool, holders: int, key: bytes, ids: int, first_cid: int) -> int:
    """Each holder took ``ids`` writes of ``key`` (its own clients, numbered from
    ``first_cid``: an id is remembered once, whichever key it wrote), the last one its item:
    imported into it (frozen, imported, released) before the measured freeze. Returns the next
    free client number."""
    for h in range(holders):
        rows = [
            {"ip": f"10.1.{h}.1", "cid": first_cid + n // PER_CID, "seq": n % PER_CID}
            | {"status": 0}
            | {"epoch": EPOCH, "ver": 1 + n * holders + h}
            for n in range(ids)
        ]
        ver = ids * holders + h
        item = {"value_hex": (b"v%d" % h).hex(), "epoch": EPOCH, "ver": ver, "live": True}
        pool.key_freeze(key, h)
        pool.key_import(key, h, KeyExport(rows, item))
        pool.key_release(key, h)
    return first_cid + -(-ids // PER_CID)


def freeze_once(pool: AgentPool, holders: int, key: bytes, workers: int) -> float:
    change = MapChange(key, tuple(range(holders)), tuple(range(holders)), True, True)
    freeze = WriteFreeze(pool, workers=workers)
    began = time.perf_counter()
    freeze.freeze({key: change})
    errors = freeze.release()
    took = time.perf_counter() - began
    if freeze.failed or errors:
        raise RuntimeError(f"the freeze failed: {freeze.failed or errors}")
    return took


def main(argv: list[str] | None = None) -> int:
    parser = t.Parser(prog="kvswitch bench freeze", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--holders", type=t.int_range(2, 255), nargs="+", default=[3, 8],
        help="holders per key (3 8)",
    )  # fmt: skip
    parser.add_argument(
        "--ids", type=t.positive_int, nargs="+", default=[200, 2000, 20000],
        help="request ids of the key at each holder (200 2000 20000)",
    )  # fmt: skip
    parser.add_argument("--repeat", type=t.positive_int, default=5, help="keys per figure (5)")
    ns = parser.parse_args(argv)
    print(
        f"{'holders':>7} {'ids/holder':>10} {'merged':>8} {'one by one ms':>14} "
        f"{'at once ms':>11} {'speed-up':>9} {'x no ids':>9}",
        flush=True,
    )
    n, cid = 0, 1
    for holders in ns.holders:
        with agents(holders) as servers:
            pool = pool_of(servers)
            try:
                base = 0.0
                for ids in [0, *ns.ids]:
                    times: dict[int, list[float]] = {1: [], holders: []}
                    for _ in range(ns.repeat):
                        for workers in times:  # interleaved: the machine's load hits both
                            n += 1
                            key = p.pad_key(b"frozen-%d" % n)
                            cid = written(pool, holders, key, ids, cid)
                            times[workers].append(freeze_once(pool, holders, key, workers))
                    one, once = (1000.0 * statistics.median(times[w]) for w in times)
                    base = base or once
                    print(
                        f"{holders:>7} {ids:>10} {holders * ids:>8} {one:>14.1f} {once:>11.1f} "
                        f"{one / once:>9.2f} {once / base:>9.1f}",
                        flush=True,
                    )
            finally:
                pool.close()
    return 0
