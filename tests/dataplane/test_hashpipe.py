"""HashPipe registers after a 10 000-request trace equal the pure-Python reference model's, as
pinned in tests/vectors/hashpipe.json (which the simulator can check against too)."""

from __future__ import annotations

import json
from pathlib import Path

from kvswitch.controller import names

from .base import (
    CLIENT,
    HP_SLOTS,
    HP_STAGES,
    SERVERS,
    Dataplane,
    Host,
    key16,
    kvs,
    proto,
    udp_packet,
)
from .hashpipe_model import HashPipeModel, key_tag, make_vectors, stage_index, tag_twin

TRACE = 10_000


def _registers(dp: Dataplane) -> tuple[list[list[bytes]], list[list[int]]]:
    keys = [
        [
            names.hp_key_from_words(ws)
            for ws in zip(
                *(
                    dp.sw.register_read(dp.register(names.reg_hp_key(s, w)))
                    for w in range(names.HP_KEY_WORDS)
                ),
                strict=True,
            )
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
        k for k in keys[1:] if stage_index(0, seeds[0], k, 8) == stage_index(0, seeds[0], first, 8)
    )
    model = HashPipeModel(seeds, 8)
    for key in (first, first, clash):
        model.insert(key)
    # Stage 0 always inserts the new key; the evicted (first, 2) lands in stage 1.
    idx0 = stage_index(0, seeds[0], first, 8)
    idx1 = stage_index(1, seeds[1], first, 8)
    assert (model.keys[0][idx0], model.counts[0][idx0]) == (clash, 1)
    assert (model.keys[1][idx1], model.counts[1][idx1]) == (first, 2)
    assert sum(map(sum, model.counts)) == 3


def _send_requests(dp: Dataplane, keys: list[bytes]) -> None:
    op = proto().op
    for i, key in enumerate(keys):
        out = dp.send(CLIENT.port, udp_packet(CLIENT, SERVERS[0].ip, kvs(op.GET, key, seq=i)))
        assert [port for port, _ in out] == [SERVERS[0].port]


def test_a_later_stage_merges_on_the_tag_collisions_included(dp: Dataplane) -> None:
    """A key evicted from stage 0 into stage 1 meets its own copy there and merges; so does a key
    that only shares the occupant's tag (and so its slots): the count adds, the occupant's key
    stays, on both builds (TNA decides in hp_tag's stateful ALU, v1model hashes the stored key)."""
    seeds = proto().hp_seeds[:HP_STAGES]
    a = key16("merge-a")
    clash = next(  # a's slot in stage 0, another in stage 1
        k
        for k in (key16(f"clash-{i}") for i in range(10_000))
        if stage_index(0, seeds[0], k, HP_SLOTS) == stage_index(0, seeds[0], a, HP_SLOTS)
        and stage_index(1, seeds[1], k, HP_SLOTS) != stage_index(1, seeds[1], a, HP_SLOTS)
    )
    twin = tag_twin(a)  # another key with a's tag and a's slot in every stage
    assert twin != a and key_tag(twin) == key_tag(a)
    # a; clash evicts (a, 1) into stage 1; a evicts clash into stage 1 (another slot); the twin
    # evicts (a, 1) from stage 0: it meets its copy in stage 1, merged (a, 2); a evicts the twin,
    # whose tag is a's: merged too, (a, 3), and the twin's key is nowhere
    trace = [a, clash, a, twin, a]
    model = HashPipeModel(seeds, HP_SLOTS)
    for key in trace:
        model.insert(key)
    _send_requests(dp, trace)
    keys, counts = _registers(dp)
    assert counts == model.counts
    for stage in range(HP_STAGES):
        for idx in range(HP_SLOTS):
            if counts[stage][idx]:
                assert keys[stage][idx] == model.keys[stage][idx]
    idx1 = stage_index(1, seeds[1], a, HP_SLOTS)
    assert model.merges[1] >= 2  # a into its copy, the twin into a's slot
    assert (keys[1][idx1], counts[1][idx1]) == (a, 3)
    assert twin not in {k for stage in keys for k in stage}


def _vectors() -> dict:
    return json.loads((Path(__file__).parent.parent / "vectors" / "hashpipe.json").read_text())


def test_model_reproduces_vectors() -> None:
    vectors = _vectors()
    assert tuple(vectors["seeds"]) == proto().hp_seeds[: vectors["stages"]]
    assert vectors["tag_seed"] == proto().hp_tag_seed
    assert (vectors["stages"], vectors["slots"]) == (HP_STAGES, HP_SLOTS)
    assert len(vectors["trace"]) == TRACE
    fresh = make_vectors(HP_STAGES, HP_SLOTS, vectors["population"], TRACE, seed=20190908)
    assert fresh == vectors


def _request_bytes(server: Host, message: bytes) -> bytes:
    """A request as udp_packet builds it, with the UDP checksum left at 0 ("none"): the same
    IPv4 header for every message of one length, so the trace is built by concatenation."""
    data = bytearray(bytes(udp_packet(CLIENT, server.ip, message)))
    data[40:42] = b"\0\0"
    return bytes(data)


def test_registers_equal_reference_after_trace(dp: Dataplane) -> None:
    """The trace goes to one server: HashPipe counts in the egress, which BMv2 runs as four
    threads (egress port mod 4), so requests to different ports would reach it in the order the
    threads take them, not in the trace's (docs/tofino.md "HashPipe in the egress")."""
    op = proto().op
    vectors = _vectors()
    hot = key16("hot-untracked")
    dp.make_hot(hot, 0, [SERVERS[0]])
    population = [key16(f"key-{j}") for j in range(vectors["population"])]
    ops = [op.GET, op.SET, op.DEL]
    head = _request_bytes(SERVERS[0], kvs(op.GET, hot))[:42]
    trace = vectors["trace"]
    for start in range(0, TRACE, 997):
        # one burst of requests; each comes out once, in order, on the server's port (told apart
        # by their sequence numbers, the message's bytes 8-11)
        seqs = range(start, min(start + 997, TRACE))
        frames = [head + kvs(ops[i % 3], population[trace[i]], seq=i) for i in seqs]
        out = dp.send_stream(CLIENT.port, frames)
        assert [port for port, _ in out] == [SERVERS[0].port] * len(frames)
        assert [int.from_bytes(data[50:54], "big") for _, data in out] == list(seqs)
        # Requests of hot keys and replies never enter HashPipe.
        dp.send(CLIENT.port, udp_packet(CLIENT, SERVERS[0].ip, kvs(op.GET, hot)))
        reply = kvs(op.GET_REPLY, population[trace[start]], seq=start)
        dp.send(SERVERS[0].port, udp_packet(SERVERS[0], CLIENT.ip, reply, sport=proto().kvs_port))
    keys, counts = _registers(dp)
    want_keys, want_counts = vectors["registers"]["keys"], vectors["registers"]["counts"]
    assert counts == want_counts
    for stage in range(HP_STAGES):
        for idx in range(HP_SLOTS):
            if counts[stage][idx]:
                assert keys[stage][idx].hex() == want_keys[stage][idx]
    # Not a trivial trace: every stage is in use, later stages merge carried keys into their
    # copies (the case a TNA stage decides in hp_tag) and the heaviest key is tracked.
    model = HashPipeModel(tuple(vectors["seeds"]), vectors["slots"])
    for index in vectors["trace"]:
        model.insert(population[index])
    assert model.counts == want_counts and all(m > 0 for m in model.merges[1:])
    assert all(any(c > 0 for c in stage) for stage in counts)
    assert any(population[0] in stage for stage in keys)
    assert sum(map(sum, counts)) <= TRACE


def test_counted_in_the_egress_once_per_packet(dp: Dataplane) -> None:
    """HashPipe counts in the egress (both builds): a cold request the ingress drops (TTL
    expired, or no route to its address) is not counted, and a hot write that the multicast
    group copies to three holders counts nowhere; a cold request that leaves counts once."""
    op = proto().op
    key = key16("egress-counted")
    hot = key16("egress-hot")
    dp.make_hot(hot, 3, [SERVERS[0], SERVERS[1], SERVERS[2]])
    dropped = [
        udp_packet(CLIENT, SERVERS[0].ip, kvs(op.GET, key, seq=1), ttl=1),
        udp_packet(CLIENT, "10.9.9.9", kvs(op.SET, key, b"v", seq=2)),
    ]
    for pkt in dropped:
        assert dp.send(CLIENT.port, pkt) == []
    out = dp.send(CLIENT.port, udp_packet(CLIENT, SERVERS[0].ip, kvs(op.SET, hot, b"v", seq=3)))
    assert sorted(port for port, _ in out) == sorted(s.port for s in SERVERS[:3])
    keys, counts = _registers(dp)
    assert counts == [[0] * HP_SLOTS for _ in range(HP_STAGES)]
    _send_requests(dp, [key])
    keys, counts = _registers(dp)
    idx0 = stage_index(0, proto().hp_seeds[0], key, HP_SLOTS)
    assert (keys[0][idx0], counts[0][idx0]) == (key, 1)
    assert sum(map(sum, counts)) == 1
