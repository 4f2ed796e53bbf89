"""The v1model build (kvswitch.p4) and the TNA build (kvswitch_tna.p4) side by side: the same
control-plane names and ids in their P4Info, and on one random trace of every kind of KVSwitch
message the same packets out of every step and the same registers and counters at the end; the
same for the spine's two builds (kvswitch_spine.p4, kvswitch_spine_tna.p4) and a fabric leaf's
(kvswitch_leaf.p4, kvswitch_leaf_tna.p4), which forwards a rack's traffic as kvswitch.p4 does. And
BMv2 itself beside the software switch, both on p4c-bm2-ss's JSON: the same packets out of every
step of the same traces, the same registers and counters."""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from kvswitch.controller import names

from .base import (
    CLIENT,
    EPOCH,
    SERVERS,
    SWITCH_IP,
    Dataplane,
    Host,
    SwitchTarget,
    key16,
    kvs,
    proto,
    tcp_packet,
    udp_packet,
)
from .conftest import _build_target, fresh_plane, on_target
from .hashpipe_model import key_tag
from .leaf import SPINE0, SPINE1, LeafPlane
from .spine import FABRIC_SERVERS, FAR_CLIENT, A, B, C, D, E, SpinePlane

ORIGINS = {"hot-0": SERVERS[0], "hot-1": SERVERS[0], "hot-2": SERVERS[1], "hot-3": SERVERS[1]}
KINDS = ("tables", "actions", "registers", "counters", "direct_counters", "meters", "digests")


def _twins(
    factory: pytest.TempPathFactory, v1model: str, tna: str, kind: type[Dataplane] = Dataplane
) -> dict[str, Dataplane]:
    """The software switch on a program's v1model and TNA builds, its static entries installed."""
    out = {}
    for arch, build in (("v1model", v1model), ("tna", tna)):
        plane = kind(_build_target(build, factory))
        plane.reset()
        plane.setup_rack()
        out[arch] = plane
    return out


@pytest.fixture(scope="module")
def planes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Dataplane]:
    return _twins(tmp_path_factory, "source", "tna")


def _tna_only(kind: str, name: str) -> bool:
    """What the TNA build has more: a later HashPipe stage's register hp_tag, the pair {tag,
    count} its stateful ALU decides on before the key words are written (hashpipe_tna.p4;
    v1model reads the stored key words and needs no such register); the action of
    KvsResidual that takes the pseudo-header length out of the L4 residual (checksums_tna.p4;
    v1model's deparser sums the payload itself and has no residual); and a spine's constant
    WriterTable and its action, the rotation's writer without a modulo (writer_table_tna.p4;
    v1model's hash(..., max = n) computes it)."""
    if kind == "registers":
        return re.fullmatch(r".*\.hp_stage[1-7]\.hp_tag", name) is not None
    if kind == "tables":
        return name == "KvsIngress.replicas.writer_ordinal.WriterTable"
    return kind == "actions" and name in (
        "KvsEgress.kvs_residual.saturated",
        "KvsIngress.replicas.writer_ordinal.set_writer",
    )


def _same_entities(twins: dict[str, Dataplane]) -> tuple[Any, Any]:
    """The two builds' P4Info (v1model, TNA), checked to name the same entities alike."""
    v1, tna = (twins[a].sw.p4info for a in ("v1model", "tna"))
    assert (v1.pkg_info.arch, tna.pkg_info.arch) == ("v1model", "tna")
    for kind in KINDS:
        assert {e.preamble.name: str(e) for e in getattr(v1, kind)} == {
            e.preamble.name: str(e)
            for e in getattr(tna, kind)
            if not _tna_only(kind, e.preamble.name)
        }, kind
    return v1, tna


def test_p4info_entities_are_the_same(planes: dict[str, Dataplane]) -> None:
    v1, tna = _same_entities(planes)
    extra = sorted(
        r.preamble.name for r in tna.registers if _tna_only("registers", r.preamble.name)
    )
    stages = len([r for r in v1.registers if r.preamble.name.endswith(".hp_cnt")])
    assert len(extra) == stages - 1 > 0  # every later stage has one, the first has none


def _trace(
    rng: random.Random,
    length: int,
    servers: Sequence[Host] = SERVERS,
    client: Host = CLIENT,
    origins: Mapping[str, Host] = ORIGINS,
) -> list[tuple[int, bytes]]:
    """(ingress port, frame): requests of hot and cold keys over UDP and TCP, the origin's replies
    and SYNCs, the replicas' confirms and read replies (versions around the ones handed out),
    forged updates and truncated messages. By default in the test rack; the spine's trace passes
    the fabric's hosts (spine.py)."""
    op = proto().op
    kport = proto().kvs_port
    hot = [f"hot-{i}" for i in range(4)]
    cold = [f"cold-{i}" for i in range(40)]
    out: list[tuple[int, bytes]] = []
    for seq in range(length):
        r = rng.random()
        key = rng.choice(hot) if rng.random() < 0.6 else rng.choice(cold)
        # the origin the client addresses: of hot keys as make_hot says below, of cold ones any
        origin = origins.get(key) or servers[int(key.split("-")[1]) % len(servers)]
        ver = rng.randrange(0, 40)
        sender: Host = rng.choice(servers)
        if r < 0.35:
            msg = kvs(op.GET, key, seq=seq)
            out.append((client.port, bytes(udp_packet(client, origin.ip, msg))))
        elif r < 0.5:
            msg = kvs(rng.choice([op.SET, op.DEL]), key, b"v" * rng.randrange(0, 30), seq=seq)
            pkt = udp_packet if rng.random() < 0.7 else tcp_packet
            out.append((client.port, bytes(pkt(client, origin.ip, msg))))
        elif r < 0.65:
            msg = kvs(op.CONFIRM, key, epoch=EPOCH, ver=ver, cid=0)
            out.append((sender.port, bytes(udp_packet(sender, SWITCH_IP, msg, sport=kport))))
        elif r < 0.75:
            rop = rng.choice([op.SET_REPLY, op.DEL_REPLY, op.SYNC_DONE, op.GET_REPLY])
            msg = kvs(rop, key, epoch=rng.choice([EPOCH, EPOCH, 3]), ver=ver, seq=seq)
            out.append((sender.port, bytes(udp_packet(sender, client.ip, msg, sport=kport))))
        elif r < 0.82:
            msg = kvs(op.SYNC, key, epoch=EPOCH, seq=seq)
            out.append((sender.port, bytes(udp_packet(sender, SWITCH_IP, msg, sport=kport))))
        elif r < 0.87:
            msg = kvs(rng.choice([op.UPDATE, op.UPDATE_DEL]), key, b"x", seq=seq)
            out.append((client.port, bytes(udp_packet(client, origin.ip, msg))))
        else:
            msg = kvs(op.SET, key, b"0123456789", seq=seq)
            whole = bytes(udp_packet(client, origin.ip, msg))
            out.append((client.port, whole[: rng.randrange(40, len(whole) - 10)]))
    return out


def _hot_keys(plane: Dataplane) -> None:
    """The four hot keys of the traces (ORIGINS), two of them with completed writes."""
    plane.make_hot("hot-0", 1, [SERVERS[0], SERVERS[1], SERVERS[2]])
    plane.make_hot("hot-1", 2, [SERVERS[0], SERVERS[3]])
    plane.make_hot("hot-2", 3, [SERVERS[1], SERVERS[2], SERVERS[3], SERVERS[0]])
    plane.make_hot("hot-3", 4, [SERVERS[1]])
    plane.make_valid(1, [SERVERS[0], SERVERS[1]], ver=5)
    plane.make_valid(3, [SERVERS[1], SERVERS[3]], ver=9)


def test_same_packets_registers_and_counters_on_one_trace(planes: dict[str, Dataplane]) -> None:
    for plane in planes.values():
        plane.reset()
        plane.setup_rack()
        _hot_keys(plane)
    v1, tna = planes["v1model"], planes["tna"]
    trace = _trace(random.Random(14), 3000)
    kinds: set[int] = set()
    for i, (port, frame) in enumerate(trace):
        out_v1 = v1.send(port, frame)
        assert tna.send(port, frame) == out_v1, f"step {i}: {frame.hex()}"
        kinds.add(len(out_v1))
    assert kinds >= {0, 1, 2, 3}  # drops, unicast, multicast fan-outs all happened
    assert tna.sw.internal_errors == v1.sw.internal_errors == 0  # type: ignore[attr-defined]
    # every register the two builds share, HashPipe's later stages included
    regs_v1, regs_tna = v1.snapshot(), tna.snapshot()
    assert regs_v1.keys() == {r for r in regs_tna if not _tna_only("registers", r)}
    assert regs_v1 == {r: regs_tna[r] for r in regs_v1}
    assert any(regs_v1[r] != [0] * len(regs_v1[r]) for r in regs_v1 if "valid_ver" in r)
    # ... the trace reaches the later stages (counts above one: carried or merged), and TNA's
    # hp_tag holds each occupant's tag and count: {0, 0} exactly where a slot is empty
    for tag_reg in (r for r in regs_tna if _tna_only("registers", r)):
        stage = tag_reg.removesuffix(".hp_tag")
        cnt = regs_v1[f"{stage}.hp_cnt"]
        words = zip(*(regs_v1[f"{stage}.hp_key{w}"] for w in range(4)), strict=True)
        want = [
            (key_tag(names.hp_key_from_words(ws)) << 32 | c) if c else 0
            for ws, c in zip(words, cnt, strict=True)
        ]
        assert regs_tna[tag_reg] == want, tag_reg
        assert any(c > 1 for c in cnt), stage
    for name in v1.names("counters"):
        size = next(c.size for c in v1.sw.p4info.counters if c.preamble.name == name)
        assert [v1.sw.counter_read(name, i) for i in range(size)] == [
            tna.sw.counter_read(name, i) for i in range(size)
        ]
    for (table, key), handle in v1.handles.items():
        assert v1.sw.direct_counter_read(table, handle) == tna.sw.direct_counter_read(
            table, tna.handles[(table, key)]
        ), (table, key)
    for plane in planes.values():
        plane.reset()


def test_round_robin_agrees_as_holders_and_liveness_change(
    planes: dict[str, Dataplane],
) -> None:
    """Rule 4's turn on both builds (TNA: rr_next, rr_skip and rr_zero, the ordinal straight from
    the stateful ALU): Gets of one slot under keys of n = 4, 2, 1 and 0 holders (a turn beyond the
    new n' restarts) addressed to an origin that is up or down (then the turns go over ordinals
    1 .. n-1). Every holder in the read set, so each Get's redirect shows its ordinal; the same
    packets and the same turn after every Get."""
    holders = [SERVERS[0], SERVERS[1], SERVERS[2], SERVERS[3]]
    for plane in planes.values():
        plane.reset()
        plane.setup_rack()
        plane.make_hot("rr-4", 5, holders)
        for key, n in (("rr-2", 2), ("rr-1", 1), ("rr-0", 0)):
            k = int.from_bytes(key16(key), "big")
            plane.sw.table_add("HotkeyTable", {"key": k}, "set_hot", {"slot": 5, "n": n})
        plane.make_valid(5, holders, ver=7)
        plane.set_down(SERVERS[3])
    v1, tna = planes["v1model"], planes["tna"]
    holders_of = {"rr-4": 4, "rr-2": 2, "rr-1": 1, "rr-0": 0}
    rng = random.Random(4)
    cases, stale = set(), 0
    for seq in range(240):
        key = rng.choice(["rr-4", "rr-4", "rr-2", "rr-1", "rr-0"])
        down = rng.random() < 0.5
        n = holders_of[key]
        turns = n - 1 if down and n > 1 else n  # n'
        stale += v1.reg("rr", 5) > max(turns - 1, 0)
        cases.add((key, down))
        dst = SERVERS[3] if down else SERVERS[0]
        frame = bytes(udp_packet(CLIENT, dst.ip, kvs(proto().op.GET, key, seq=seq)))
        out_v1 = v1.send(CLIENT.port, frame)
        assert tna.send(CLIENT.port, frame) == out_v1, f"step {seq}: {key} to {dst.ip}"
        assert tna.reg("rr", 5) == v1.reg("rr", 5), f"step {seq}: {key} to {dst.ip}"
    assert len(cases) == 8 and stale >= 20  # every (n, liveness), and turns beyond n' - 1
    for plane in planes.values():
        plane.reset()


def _l4_checksum_zeroed(out: list[tuple[int, bytes]]) -> list[tuple[int, bytes]]:
    """Outputs with the UDP/TCP checksum of option-less IPv4 packets zeroed."""
    masked = []
    for port, data in out:
        d = bytearray(data)
        if len(d) >= 34 and d[12:14] == b"\x08\x00" and d[14] & 15 == 5:
            at = {17: 40, 6: 50}.get(d[23])
            if at is not None and len(d) >= at + 2:
                d[at : at + 2] = b"\0\0"
        masked.append((port, bytes(d)))
    return masked


def _corrupted(
    rng: random.Random, base: list[tuple[int, bytes]], count: int
) -> list[tuple[int, bytes]]:
    """Random bytes, frames of ``base`` cut anywhere, and with one to three bytes changed."""
    out = []
    for _ in range(count):
        port, frame = rng.choice(base)
        kind = rng.random()
        if kind < 0.2:
            frame = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 100)))
        elif kind < 0.4:
            frame = frame[: rng.randrange(0, len(frame))]
        else:
            data = bytearray(frame)
            for _ in range(rng.randrange(1, 4)):
                data[rng.randrange(len(data))] = rng.randrange(256)
            frame = bytes(data)
        out.append((port, frame))
    return out


def test_same_packets_on_corrupted_and_random_frames(planes: dict[str, Dataplane]) -> None:
    """Random bytes, frames cut anywhere, and valid messages with bytes flipped: the same output
    from both builds, but for the L4 checksum of a packet that arrived with a wrong one (TNA's
    residual carries the error on, as an incremental update does; v1model sums the payload anew:
    docs/tofino.md) and for frames shorter than their IPv4 length (Tofino's ingress cannot see
    that)."""
    rng = random.Random(9)
    base = _trace(random.Random(3), 60)
    checksum_only = 0
    for plane in planes.values():
        plane.reset()
        plane.setup_rack()
        plane.make_hot("hot-0", 1, [SERVERS[0], SERVERS[1], SERVERS[2]])
        plane.make_valid(1, [SERVERS[0], SERVERS[1]], ver=5)
    v1, tna = planes["v1model"], planes["tna"]
    for i, (port, frame) in enumerate(_corrupted(rng, base, 2000)):
        out_v1, out_tna = v1.send(port, frame), tna.send(port, frame)
        ipv4 = len(frame) >= 18 and frame[12:14] == b"\x08\x00"
        if ipv4 and 14 + int.from_bytes(frame[16:18], "big") > len(frame):
            continue  # shorter than its IPv4 length: the TNA gap test_malformed.py names
        if out_v1 != out_tna:
            assert _l4_checksum_zeroed(out_v1) == _l4_checksum_zeroed(out_tna), f"step {i}"
            checksum_only += 1
    assert 0 < checksum_only < 400  # the flipped bytes do reach the checksum case, and only some
    assert tna.sw.internal_errors == v1.sw.internal_errors == 0  # type: ignore[attr-defined]
    for plane in planes.values():
        plane.reset()


@pytest.mark.parametrize("where", on_target("bmv2", "bmv2"))
def test_bmv2_sends_what_the_software_switch_sends(
    where: str, bmv2: SwitchTarget, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """BMv2 and the software switch on the same JSON, step by step: the trace of every kind of
    message, then corrupted and random frames (but those shorter than an Ethernet header, which
    a veth does not carry); then every register and counter."""
    soft = _build_target("p4c-json", tmp_path_factory)
    trace = _trace(random.Random(14), 1500)
    frames = trace + [
        (port, frame)
        for port, frame in _corrupted(random.Random(9), _trace(random.Random(3), 60), 1000)
        if len(frame) >= 14
    ]
    for sw_plane in fresh_plane(bmv2):
        plane = Dataplane(soft)
        plane.reset()
        plane.setup_rack()
        _hot_keys(plane)
        _hot_keys(sw_plane)
        kinds: set[int] = set()
        for i, (port, frame) in enumerate(frames):
            want = plane.send(port, frame)
            # no quiet time per step: a frame BMv2 sends late shows up in a later step's output
            got = bmv2.process(port, frame, expect=len(want), quiet=False)  # type: ignore[call-arg]
            assert sorted(got) == sorted(want), f"step {i}: port {port} {frame.hex()}"
            kinds.add(len(want))
        bmv2.assert_quiet()  # type: ignore[attr-defined]
        assert kinds >= {0, 1, 2, 3}
        assert soft.internal_errors == 0  # type: ignore[attr-defined]
        assert sw_plane.snapshot() == plane.snapshot()
        for name in plane.names("counters"):
            size = next(c.size for c in soft.p4info.counters if c.preamble.name == name)
            assert [bmv2.counter_read(name, i) for i in range(size)] == [
                soft.counter_read(name, i) for i in range(size)
            ], name
        for (table, key), handle in plane.handles.items():
            assert bmv2.direct_counter_read(
                table, sw_plane.handles[(table, key)]
            ) == soft.direct_counter_read(table, handle), (table, key)


SPINE_ORIGINS = {"hot-0": A, "hot-1": A, "hot-2": C, "hot-3": C}


@pytest.fixture(scope="module")
def spines(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Dataplane]:
    return _twins(tmp_path_factory, "spine-source", "spine-tna", SpinePlane)


@pytest.fixture(scope="module")
def leaves(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Dataplane]:
    return _twins(tmp_path_factory, "leaf-source", "leaf-tna", LeafPlane)


def test_spine_and_fabric_leaf_p4info_entities_are_the_same(
    spines: dict[str, Dataplane], leaves: dict[str, Dataplane]
) -> None:
    _same_entities(spines)
    _same_entities(leaves)


def test_spine_same_packets_registers_and_counters_on_one_trace(
    spines: dict[str, Dataplane],
) -> None:
    """The spine's two builds on a trace of the fabric (spine.py): the client behind leaf 3, the
    holders of four fabric-hot keys behind leaves 1-3, two of them rotated (docs/protocol.md F7);
    a dead origin's rack for the last third."""
    for plane in spines.values():
        plane.make_hot("hot-0", 1, [A, C, D])
        plane.make_hot("hot-1", 2, [A, E])
        plane.make_hot("hot-2", 3, [C, B, E, A], rotate=True)
        plane.make_hot("hot-3", 4, [C], rotate=True)
        plane.make_valid(1, [A, C], ver=5)
        plane.make_valid(3, [C, E], ver=9)
    v1, tna = spines["v1model"], spines["tna"]
    trace = _trace(random.Random(21), 800, FABRIC_SERVERS, FAR_CLIENT, SPINE_ORIGINS)
    kinds: set[int] = set()
    for i, (port, frame) in enumerate(trace):
        if i == 550:
            for plane in spines.values():
                plane.set_down(C)
        out_v1 = v1.send(port, frame)
        assert tna.send(port, frame) == out_v1, f"step {i}: {frame.hex()}"
        kinds.add(len(out_v1))
    assert kinds >= {0, 1, 2, 3}
    assert tna.sw.internal_errors == v1.sw.internal_errors == 0  # type: ignore[attr-defined]
    assert v1.snapshot() == tna.snapshot()
    assert any(x for r, cells in v1.snapshot().items() if "valid_ver" in r for x in cells)
    assert any(x for r, cells in v1.snapshot().items() if r.endswith("done_by") for x in cells)
    name = v1.counter("hotkey_writes")
    assert [v1.sw.counter_read(name, i) for i in range(8)] == [
        tna.sw.counter_read(name, i) for i in range(8)
    ]
    for (table, key), handle in v1.handles.items():
        assert v1.sw.direct_counter_read(table, handle) == tna.sw.direct_counter_read(
            table, tna.handles[(table, key)]
        ), (table, key)
    for plane in spines.values():
        plane.reset()


def test_fabric_leaf_without_fabric_keys_is_the_rack_switch(
    planes: dict[str, Dataplane], leaves: dict[str, Dataplane]
) -> None:
    """kvswitch_leaf.p4 with its steering table installed and empty, on the rack's trace: what
    kvswitch.p4 sends and holds, step by step (a fabric's leaf changes nothing for one rack)."""
    rack, leaf = planes["v1model"], leaves["v1model"]
    for plane in (rack, leaf):
        plane.reset()
        plane.setup_rack()
        _hot_keys(plane)
    for i, (port, frame) in enumerate(_trace(random.Random(14), 800)):
        assert leaf.send(port, frame) == rack.send(port, frame), f"step {i}: {frame.hex()}"
    assert leaf.snapshot() == rack.snapshot()
    for (table, key), handle in rack.handles.items():
        assert rack.sw.direct_counter_read(table, handle) == leaf.sw.direct_counter_read(
            table, leaf.handles[(table, key)]
        ), (table, key)
    for plane in (rack, leaf):
        plane.reset()


def test_fabric_leaf_builds_agree(leaves: dict[str, Dataplane]) -> None:
    """The fabric leaf's two builds on the rack's trace with a quarter of the frames arriving
    from the spines, and a third of the cold keys fabric-hot on one spine or the other."""
    rng = random.Random(5)
    trace = [
        (rng.choice((SPINE0.port, SPINE1.port)) if rng.random() < 0.25 else port, frame)
        for port, frame in _trace(random.Random(15), 800)
    ]
    for plane in leaves.values():
        plane.reset()
        plane.setup_rack()
        _hot_keys(plane)
        for i in range(0, 40, 3):
            plane.make_fabric_hot(f"cold-{i}", (SPINE0, SPINE1)[i % 2])  # type: ignore[attr-defined]
    v1, tna = leaves["v1model"], leaves["tna"]
    kinds: set[int] = set()
    for i, (port, frame) in enumerate(trace):
        out_v1 = v1.send(port, frame)
        assert tna.send(port, frame) == out_v1, f"step {i}: {frame.hex()}"
        kinds.update(p for p, _ in out_v1)
    assert {SPINE0.port, SPINE1.port} <= kinds  # steered up to both spines
    assert tna.sw.internal_errors == v1.sw.internal_errors == 0  # type: ignore[attr-defined]
    assert v1.snapshot() == {
        r: c for r, c in tna.snapshot().items() if not _tna_only("registers", r)
    }
    for plane in leaves.values():
        plane.reset()
