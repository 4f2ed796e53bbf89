"""The compiled kernel against the plain-Python reference of the same rules, HashPipe hashing
against docs/protocol.md, and the safety of plan changes applied to the model."""

from __future__ import annotations

import itertools
import zlib
from collections import Counter

import numpy as np
import pytest

from kvswitch.bench import kernel
from kvswitch.bench.model import MAX_KEY_ID, Model, ReferencePipeline, hp_index_ref
from kvswitch.controller.hashring import key16, origins_of_ids
from kvswitch.controller.plan import Plan, build_plan, diff, rack_setup
from kvswitch.controller.rack import Rack
from tests.dataplane.hashpipe_model import key_tag

M, K, D, KEYS = 8, 64, 4, 3000
RACK = Rack.synthetic(M)
ORIGIN = origins_of_ids(np.arange(KEYS), M)


def fresh(lag: int = 0) -> Model:
    model = Model(RACK, K, D, ORIGIN, lag=lag)
    model.apply(rack_setup(RACK, epoch=1))
    return model


def random_plan(rng: np.random.Generator, previous: Plan | None, hot: int) -> Plan:
    keys = rng.choice(200, size=hot, replace=False)
    holders = []
    for kid in keys:
        origin = int(ORIGIN[kid])
        others = [s for s in range(M) if s != origin]
        r = int(rng.integers(0, M))
        holders.append(
            (key16(int(kid)), (origin, *rng.choice(others, size=r, replace=False).tolist()))
        )
    return build_plan(holders, previous, M, K)


def state(m: Model) -> dict[str, np.ndarray]:
    return {
        name: getattr(m, name).copy()
        for name in (
            "rr",
            "slot_ver",
            "origin_ver",
            "valid_ver",
            "gver",
            "hot_cnt",
            "hp_key",
            "hp_cnt",
            "load",
        )
    }


def test_key_ids_never_share_a_hashpipe_tag() -> None:
    """The data plane's later HashPipe stages merge keys of one 32-bit tag; the kernel and the
    reference compare key ids. For the model's keys that is one rule: an id below 2**31 fills the
    last four bytes of key16, and the tag (CRC-32, affine in those bits, | 1 dropping bit 0) is
    one-to-one on them iff the images of the 31 id bits are linearly independent."""
    zero = key_tag(key16(0))
    rows: list[int] = []
    for bit in range(MAX_KEY_ID.bit_length()):
        v = (key_tag(key16(1 << bit)) ^ zero) >> 1
        for r in rows:
            v = min(v, v ^ r)
        assert v, f"id bit {bit} depends on the others: two ids share a tag"
        rows = sorted([*rows, v], reverse=True)  # distinct leading bits, highest first
    assert MAX_KEY_ID == 2**31 - 1


def test_hashpipe_index_is_the_protocol_formula() -> None:
    table, prefixes = kernel.crc_table(), kernel.stage_prefixes(8)
    for kid in [0, 1, 255, 256, 70000, 2**31 - 1]:
        for s in range(8):
            seed = (0x9E3779B9 * (s + 1)) % 2**32
            data = seed.to_bytes(4, "big") + kid.to_bytes(16, "big") + bytes(4 * s)
            want = zlib.crc32(data) % 1024
            assert (
                kernel.hp_index(prefixes[s], table, kid, 1024, s)
                == want
                == hp_index_ref(s, key16(kid), 1024)
            )


@pytest.mark.parametrize("lag", [0, 7])
def test_kernel_equals_reference_on_random_traces(lag: int) -> None:
    rng = np.random.default_rng(lag)
    fast, slow = fresh(lag), fresh(lag)
    ref = ReferencePipeline(slow)
    current = Plan(M, K)
    for _round in range(4):
        nxt = random_plan(rng, current, hot=40)
        ops = diff(current, nxt, RACK)
        current = nxt
        fast.apply(ops)
        slow.apply(ops)
        kids = rng.integers(0, KEYS, size=4000)
        kids[:2000] = rng.integers(0, 200, size=2000)  # many hot-key queries
        writes = rng.random(kids.size) < 0.2
        fast.run_trace(kids, writes)
        ref.run(kids.tolist(), writes.tolist())
        fast.flush()
        ref.flush()
        a, b = state(fast), state(slow)
        for name in a:
            assert np.array_equal(a[name], b[name]), name
        assert fast.read_hashpipe() == slow.read_hashpipe()
        assert a["load"].sum() >= kids.size


def test_gets_never_reach_a_server_without_the_key() -> None:
    rng = np.random.default_rng(11)
    model = fresh()
    current = Plan(M, K)
    for _ in range(12):
        nxt = random_plan(rng, current, hot=30)
        ops = diff(current, nxt, RACK)
        current = nxt
        # after every single operation of the batch, redirect targets must hold the key
        for op in ops:
            model.apply([op])
            for kid, server in model.serving():
                assert server in model.stored.get(kid, set()), (op, kid, server)
        model.run_trace(rng.integers(0, 200, size=500), rng.random(500) < 0.3)


def test_reads_keep_spreading_while_a_write_is_in_flight() -> None:
    model = fresh(lag=5)
    kid = 17
    origin = int(ORIGIN[kid])
    other = (origin + 1) % M
    model.apply(diff(Plan(M, K), build_plan([(key16(kid), (origin, other))], None, M, K), RACK))
    assert (kid, other) in model.serving()
    slot = model.tables.hot[kid][0]
    model.run_trace(np.array([kid]), np.array([True]))  # a Set: new version, in flight
    assert model.slot_ver[slot] > model.origin_ver[slot]
    assert (kid, other) in model.serving()  # a write in flight is no doubt
    model.run_trace(np.full(4, kid), np.zeros(4, bool))  # Gets before the replies: spread
    assert model.load[other] == 1 + 2  # the UPDATE copy and every second Get
    assert model.hot_wr[slot] == 1 and model.read_hot_writes()[slot] == 1
    model.run_trace(np.full(10, kid), np.zeros(10, bool))  # reply and confirm land after 5
    assert model.slot_ver[slot] == model.origin_ver[slot]
    assert (kid, other) in model.serving()
    # the origin reported the write, the replica's confirm is lost: it leaves the read set
    model.run_trace(np.array([kid]), np.array([True]))
    slot_ver = int(model.slot_ver[slot])
    kernel.deliver(
        slot, -1, slot_ver, model.slot_ver, model.origin_ver, model.valid_ver,
        *model.compiled()[5:8], model.done_by,
    )  # fmt: skip
    assert model.serving() == []


def test_model_rejects_bad_operations() -> None:
    model = fresh()
    p = build_plan([(key16(3), (int(ORIGIN[3]),))], None, M, K)
    ops = diff(Plan(M, K), p, RACK)
    model.apply(ops)
    with pytest.raises(ValueError):
        model.apply(ops)  # entries exist already
    with pytest.raises(ValueError):
        model.run_trace(np.array([KEYS + 1]), np.array([False]))


def _co_collisions(width: int, keys: list[bytes], index=hp_index_ref) -> float:
    """Share of key pairs colliding in stage 0 that collide in stage 1 too."""
    groups: dict[int, list[bytes]] = {}
    for key in keys:
        groups.setdefault(index(0, key, width), []).append(key)
    pairs = both = 0
    for group in groups.values():
        pairs += len(group) * (len(group) - 1) // 2
        seen = Counter(index(1, key, width) for key in group)
        both += sum(n * (n - 1) // 2 for n in seen.values())
    return both / pairs


def _seeds_only(stage: int, key: bytes, width: int) -> int:
    """The naive power-of-two index: crc32({seed_s, key}) mod w, the stages differing by seed."""
    return zlib.crc32(kernel.stage_seed(stage).to_bytes(4, "big") + key) % width


def _rank(vectors: list[int]) -> int:
    basis: list[int] = []
    for v in vectors:
        for b in basis:
            v = min(v, v ^ b)
        if v:
            basis = sorted([*basis, v], reverse=True)
    return len(basis)


def test_stage_indices_are_independent_with_the_zero_words() -> None:
    """CRC-32 is affine: crc32({seed_s, key}) = crc32({seed_s, 0}) ^ crc32({0, key}) ^ crc32(0^20),
    so with the seeds alone every stage hashes to one key hash XOR a constant, and mod a power of
    two keys colliding in one stage collide in all (HashPipe would be w buckets of d ways). Stage
    s's 4 s zero bytes after the key make its index a different linear map of the key: a stage-0
    collision collides in stage 1 about as often as for independent hashes."""
    rng = np.random.default_rng(8)
    keys = [rng.bytes(16) for _ in range(12_000)]
    zero = zlib.crc32(bytes(20))
    for s in range(4):
        seed = kernel.stage_seed(s).to_bytes(4, "big")
        shift = zlib.crc32(seed + bytes(16)) ^ zero
        for key in keys[:50]:
            assert zlib.crc32(seed + key) == shift ^ zlib.crc32(bytes(4) + key)
    width = kernel.hashpipe_width(1024, 4)
    assert width == 256
    assert _co_collisions(width, keys, _seeds_only) == 1.0  # the flaw of the seeds alone
    assert _co_collisions(width, keys) < 2.0 / width  # independent hashes: 1 / width


@pytest.mark.parametrize("bits", [8, 11, 12, 14])
def test_every_two_stages_index_independently(bits: int) -> None:
    """Exactly, for every pair of the 8 stages and w = 2^bits up to 2^14 (K / d up to 16 384): the
    two indices' linear parts have rank 2 * bits over the key's bits (so a pair of keys colliding
    in one stage collides in the other with probability 1 / w), over random 16-byte keys and over
    the simulator's key ids (the last 4 bytes). The seeds alone give rank bits: always both."""

    def linear(stage: int, index, nbits: int) -> list[int]:
        zero = index(stage, bytes(16), 1 << bits)
        return [index(stage, (1 << i).to_bytes(16, "big"), 1 << bits) ^ zero for i in range(nbits)]

    for nbits in (128, 32):
        maps = [linear(s, hp_index_ref, nbits) for s in range(8)]
        for a, b in itertools.combinations(range(8), 2):
            joint = [x << bits | y for x, y in zip(maps[a], maps[b], strict=True)]
            assert _rank(joint) == 2 * bits, (a, b)
        naive = [linear(s, _seeds_only, nbits) for s in (0, 1)]
        assert _rank([x << bits | y for x, y in zip(*naive, strict=True)]) == bits


def test_the_round_robin_turn_is_exact_and_a_stale_turn_costs_one() -> None:
    """kernel.rr_turn, p4src's rr (features/replicas.p4): every holder gets 1/n of the turns from
    any valid start; a turn beyond the last (n shrank) is turn 0 and restarts the rotation."""
    for n in range(1, 9):
        for start in range(n):
            t, seen = start, Counter()
            for _ in range(5 * n):
                ordinal, t = kernel.rr_turn(t, n)
                seen[ordinal] += 1
            assert seen == Counter({o: 5 for o in range(n)}), (n, start)
    turns = []
    t = 6  # left by n = 7, now n = 3
    for _ in range(5):
        ordinal, t = kernel.rr_turn(t, 3)
        turns.append(ordinal)
    assert turns == [0, 0, 1, 2, 0]
    assert kernel.rr_turn(0, 0) == (0, 0)  # no holders: ordinal 0, as the data plane


def test_a_rotated_write_reaches_one_holder_and_the_reads_follow_it() -> None:
    """The write rotation (docs/protocol.md F7) in the model: a write of a rotated key goes to
    one holder and makes no copy; its reply makes that holder the read set and ``done_by``, and
    the Gets go there; over many writes every holder is a writer."""
    model = fresh()
    kid = 23
    origin = int(ORIGIN[kid])
    holders = (origin, (origin + 1) % M, (origin + 2) % M)
    plan = build_plan([(key16(kid), holders)], None, M, K)
    model.set_rotated([plan.keys[key16(kid)].slot])
    model.apply(diff(Plan(M, K), plan, RACK))
    slot = model.tables.hot[kid][0]
    assert model.done_by[slot] == origin  # the origin's SYNC_DONE: a holder's report
    writers = set()
    for _ in range(60):
        before = model.load.copy()
        model.run_trace(np.array([kid]), np.array([True]))
        model.flush()  # the writer's reply
        added = model.load - before
        assert added.sum() == 1  # one holder, no copies
        writer = int(np.argmax(added))
        assert writer in holders and model.done_by[slot] == writer
        assert model.origin_ver[slot] == model.slot_ver[slot]
        cells = {s: int(model.valid_ver[slot * M + s]) for s in holders}
        assert [s for s in holders if cells[s] >= model.origin_ver[slot]] == [writer]
        before = model.load.copy()
        model.run_trace(np.full(6, kid), np.zeros(6, bool))
        assert (model.load - before)[writer] == 6  # the reads follow the last writer
        writers.add(writer)
    assert writers == set(holders)
    assert model.hot_wr[slot] == 60
