"""Malformed input never crashes the agent and never changes what it stores.

A seeded generator makes valid messages of every op and then breaks each one in a way the contract
says must be refused (truncation, a vlen past the end, an unknown op or status, unknown flag bits, a
value on an op that carries none, a client request without cid, an oversized value, an op a server
never receives, an unexpected SYNC reflection), plus random garbage. 100 000 go through the handler
in process and a few thousand through a real agent's UDP and TCP sockets.
"""

from __future__ import annotations

import random
import socket
import time
from collections.abc import Callable

from kvswitch import protocol as p
from kvswitch.agent.backends import Backend, MemoryBackend
from kvswitch.agent.core import AgentCore
from kvswitch.agent.server import AgentServer
from kvswitch.client import Client

SRC = ("127.0.0.1", 40000)
SWITCH = ("127.0.0.1", 8999)
KEYS = [p.pad_key(b"k%d" % i) for i in range(8)]
NOT_FOR_SERVERS = [
    p.Op.GET_REPLY,
    p.Op.SET_REPLY,
    p.Op.DEL_REPLY,
    p.Op.CONFIRM,
    p.Op.SYNC_DONE,
    p.Op.REMOVE_REPLY,
]


def _valid(rng: random.Random) -> p.Message:
    op = rng.choice(list(p.Op))
    value = rng.randbytes(rng.randrange(1, 64)) if op in p.VALUE_OPS else b""
    return p.Message(
        op,
        rng.choice(KEYS),
        value,
        cid=rng.randrange(1, 1 << 32),
        seq=rng.randrange(1 << 32),
        epoch=rng.randrange(3),
        ver=rng.randrange(1 << 32),
    )


def _set_byte(raw: bytes, index: int, value: int) -> bytes:
    return raw[:index] + bytes([value]) + raw[index + 1 :]


def malformed(rng: random.Random) -> bytes:
    """One datagram that the contract says an agent must refuse."""
    base = _valid(rng)
    raw = base.encode()
    kind = rng.randrange(11)
    if kind == 0:  # shorter than a header
        return raw[: rng.randrange(p.HEADER_LEN)]
    if kind == 1:  # vlen beyond the datagram
        vlen = rng.randrange(len(base.value) + 1, 0x10000)
        return raw[:2] + vlen.to_bytes(2, "big") + raw[4:]
    if kind == 2:  # unknown op
        return _set_byte(raw, 0, rng.choice([0, *range(max(p.Op) + 1, 256)]))
    if kind == 3:  # non-zero status in a request (known or unknown code)
        return _set_byte(raw, 1, rng.randrange(1, 256))
    if kind == 4:  # unknown flag bits
        flags = rng.randrange(1, 0x10000) & ~p.FLAGS_KNOWN or 0x8000
        return raw[:14] + flags.to_bytes(2, "big") + raw[16:]
    if kind == 5:  # a value on an op that carries none
        op = rng.choice([o for o in p.Op if o not in p.VALUE_OPS])
        return p.Message(op, base.key, b"x" * rng.randrange(1, 40), cid=base.cid).encode()
    if kind == 6:  # a client request without cid
        op = rng.choice([p.Op.GET, p.Op.SET, p.Op.DEL])
        return p.Message(op, base.key, b"v" if op == p.Op.SET else b"", cid=0).encode()
    if kind == 7:  # a value over the limit
        op = rng.choice(sorted(p.VALUE_OPS - {p.Op.GET_REPLY}))
        big = b"B" * rng.randrange(p.MAX_VALUE + 1, p.MAX_VALUE + 2000)
        return p.Message(op, base.key, big, cid=base.cid, seq=base.seq, ver=base.ver).encode()
    if kind == 8:  # an op a server never receives
        return p.Message(rng.choice(NOT_FOR_SERVERS), base.key, cid=base.cid).encode()
    if kind == 9:  # a SYNC reflection nobody asked for
        return p.Message(p.Op.SYNC, base.key, epoch=1, ver=rng.randrange(1, 1 << 32)).encode()
    # random garbage whose status byte is never 0 (so it can never be a valid request)
    junk = bytearray(rng.randbytes(rng.randrange(0, 200)))
    if len(junk) > 1:
        junk[1] = rng.randrange(1, 256)
    return bytes(junk)


def _populated_core(backend: Backend) -> AgentCore:
    core = AgentCore(backend, SWITCH)
    for i, key in enumerate(KEYS[:4]):
        core.handle(
            p.Message(p.Op.SET, key, b"v%d" % i, cid=1, seq=i, epoch=1, ver=10).encode(), SRC
        )
    return core


def _refused_count(core: AgentCore) -> int:
    s = core.stats
    return sum(
        s[k]
        for k in (
            "malformed",
            "wrong_op",
            "untrusted_op",
            "bad_request",
            "too_large",
            "sync_unexpected",
        )
    )


def test_100k_malformed_datagrams_in_process() -> None:
    rng = random.Random(20261122)
    core = _populated_core(MemoryBackend())
    before = core.snapshot()
    refused_before = _refused_count(core)
    n = 100_000
    replies = 0
    for _ in range(n):
        for raw, dst in core.handle(malformed(rng), SRC):
            reply = p.Message.decode(raw)
            assert dst == SRC
            assert reply.status in (p.Status.BAD_REQUEST, p.Status.TOO_LARGE)
            assert reply.op in p.REPLY_OF.values()
            replies += 1
    assert core.snapshot() == before
    assert _refused_count(core) - refused_before == n
    assert replies > 0 and core.stats["malformed"] > 0 and core.stats["too_large"] > 0


def test_generator_makes_only_refused_messages_detects_a_valid_one() -> None:
    """The accounting above would notice a datagram that the agent accepted."""
    core = _populated_core(MemoryBackend())
    before = _refused_count(core)
    core.handle(p.Message(p.Op.SET, KEYS[5], b"ok", cid=3, seq=1).encode(), SRC)
    assert _refused_count(core) == before
    assert len(core.snapshot()) == 5


def test_malformed_over_real_sockets(agent_factory: Callable[..., AgentServer]) -> None:
    rng = random.Random(8900)
    agent = agent_factory(MemoryBackend(), SWITCH)
    with Client([("127.0.0.1", agent.port)], timeout=1.0) as client:
        client.set(b"keep", b"me")
        before = agent.core.snapshot()
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        for i in range(3000):
            sock.sendto(malformed(rng), ("127.0.0.1", agent.port))
            if i % 200 == 0:
                time.sleep(0.005)  # let the agent keep up: we test refusal, not buffer overflow
        sock.close()
        # A TCP stream of broken frames, then a valid Get on the same connection still works.
        with socket.create_connection(("127.0.0.1", agent.port), timeout=2) as conn:
            tcp_frames = 0
            for _ in range(300):
                raw = malformed(rng)
                if len(raw) >= p.HEADER_LEN and p.message_length(raw) <= len(raw):
                    conn.sendall(raw[: p.message_length(raw)])
                    tcp_frames += 1
            conn.sendall(p.Message(p.Op.GET, p.pad_key(b"keep"), cid=5, seq=1).encode())
            deadline = time.monotonic() + 5
            got = b""
            while time.monotonic() < deadline:
                got += conn.recv(65536)
                msgs = []
                while len(got) >= p.HEADER_LEN and len(got) >= p.message_length(got):
                    n = p.message_length(got)
                    msgs.append(p.Message.decode(got[:n]))
                    got = got[n:]
                if any(m.op == p.Op.GET_REPLY and m.cid == 5 for m in msgs):
                    break
            else:
                raise AssertionError("no reply to the valid Get after the broken frames")
        assert client.get(b"keep") == b"me"
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and agent.core.stats["rx"] < 3003 + tcp_frames:
            time.sleep(0.05)
        assert agent.core.snapshot() == before
        assert agent.core.stats["rx"] == 3003 + tcp_frames
        assert _refused_count(agent.core) == 3000 + tcp_frames
