"""HashPipe registers after a random trace equal the pure-Python reference model's."""

from __future__ import annotations

import random

from .base import CLIENT, HP_SLOTS, HP_STAGES, SERVERS, Dataplane, key16, kvs, proto, udp_packet
from .hashpipe_model import HashPipeModel, stage_index

TRACE = 10_000


def _registers(dp: Dataplane) -> tuple[list[list[bytes]], list[list[int]]]:
    keys = [
        [
            int(v).to_bytes(16, "big")
            for v in dp.sw.register_read(dp.register(f"hp_stage{s}.hp_key"))
        ]
        for s in range(HP_STAGES)
    ]
    counts = [
        [int(v) for v in dp.sw.register_read(dp.register(f"hp_stage{s}.hp_cnt"))]
        for s in range(HP_STAGES)
    ]
    return keys, counts


def test_model_evicts_into_later_stages() -> None:
    seeds = proto().hp_seeds[:2]
    keys = [key16(f"k{i}") for i in range(200)]
    first = keys[0]
    clash = next(
        k for k in keys[1:] if stage_index(seeds[0], k, 8) == stage_index(seeds[0], first, 8)
    )
    model = HashPipeModel(seeds, 8)
    for key in (first, first, clash):
        model.insert(key)
    # Stage 0 always inserts the new key; the evicted (first, 2) lands in stage 1.
    idx0 = stage_index(seeds[0], first, 8)
    idx1 = stage_index(seeds[1], first, 8)
    assert (model.keys[0][idx0], model.counts[0][idx0]) == (clash, 1)
    assert (model.keys[1][idx1], model.counts[1][idx1]) == (first, 2)
    assert sum(map(sum, model.counts)) == 3


def test_registers_equal_reference_after_random_trace(dp: Dataplane) -> None:
    op = proto().op
    rng = random.Random(20190908)
    hot = key16("hot-untracked")
    dp.make_hot(hot, 0, [SERVERS[0]])
    # Zipf-like popularity over 300 keys: heavy hitters, collisions and evictions in 4 x 16 slots.
    population = [key16(f"key-{i}") for i in range(300)]
    weights = [1 / (rank + 1) for rank in range(len(population))]
    trace = rng.choices(population, weights, k=TRACE)
    model = HashPipeModel(proto().hp_seeds[:HP_STAGES], HP_SLOTS)
    ops = [op.GET, op.SET, op.DEL]
    for i, key in enumerate(trace):
        server = SERVERS[i % len(SERVERS)]
        message = kvs(ops[i % 3], key, seq=i)
        out = dp.send(CLIENT.port, udp_packet(CLIENT, server.ip, message))
        assert len(out) == 1
        model.insert(key)
        if i % 997 == 0:
            # Hot keys, replies and confirms never enter HashPipe.
            dp.send(CLIENT.port, udp_packet(CLIENT, SERVERS[0].ip, kvs(op.GET, hot)))
            reply = kvs(op.GET_REPLY, key, seq=i)
            dp.send(server.port, udp_packet(server, CLIENT.ip, reply, sport=proto().kvs_port))
    keys, counts = _registers(dp)
    assert counts == model.counts
    for stage in range(HP_STAGES):
        for idx in range(HP_SLOTS):
            if model.counts[stage][idx]:
                assert keys[stage][idx] == model.keys[stage][idx]
    # The model is not trivial: every stage is in use and the heaviest key is tracked.
    assert all(any(c > 0 for c in stage) for stage in counts)
    top = population[0]
    assert any(top in stage for stage in keys)
    assert sum(map(sum, counts)) <= TRACE
