"""kvswitch.protocol: messages, keys, the ring; kvswitch.scapy_kvs: captures decode."""

from __future__ import annotations

import os
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvswitch import protocol as p

messages = st.builds(
    p.Message,
    op=st.sampled_from(list(p.Op)),
    key=st.binary(min_size=16, max_size=16),
    value=st.binary(max_size=300),
    status=st.sampled_from(list(p.Status)),
    cid=st.integers(0, 2**32 - 1),
    seq=st.integers(0, 2**32 - 1),
    epoch=st.integers(0, 2**16 - 1),
    flags=st.integers(0, 2**16 - 1),
    ver=st.integers(0, 2**32 - 1),
)


@given(messages)
def test_roundtrip(msg: p.Message) -> None:
    raw = msg.encode()
    assert len(raw) == p.HEADER_LEN + len(msg.value)
    assert p.Message.decode(raw) == msg
    assert p.Message.decode(raw + b"trailing") == msg
    assert p.message_length(raw) == len(raw)


@given(messages, st.data())
def test_every_truncation_is_refused(msg: p.Message, data: st.DataObject) -> None:
    raw = msg.encode()
    cut = data.draw(st.integers(0, len(raw) - 1))
    with pytest.raises(p.MalformedMessage):
        p.Message.decode(raw[:cut])


@settings(max_examples=500)
@given(st.binary(max_size=120))
def test_decode_garbage_raises_only_malformed(raw: bytes) -> None:
    try:
        msg = p.Message.decode(raw)
    except p.MalformedMessage:
        return
    assert msg.op in list(p.Op) and msg.status in list(p.Status)
    assert p.HEADER_LEN + len(msg.value) <= len(raw)


def test_non_strict_decode_keeps_unknown_codes() -> None:
    raw = bytes([200, 99]) + p.Message(1, bytes(16)).encode()[2:]
    assert p.Message.decode(raw, strict=False).op == 200
    with pytest.raises(p.MalformedMessage):
        p.Message.decode(raw)


def test_encode_refuses_out_of_range_fields() -> None:
    with pytest.raises(p.KeyTooLong):
        p.Message(p.Op.GET, b"short").encode()
    with pytest.raises(p.ProtocolError):
        p.Message(p.Op.GET, bytes(16), cid=2**32).encode()
    with pytest.raises(p.ValueTooLarge):
        p.Message(p.Op.SET, bytes(16), b"x" * 65536).encode()


def test_keys() -> None:
    assert p.pad_key("abc") == b"abc" + bytes(13)
    assert p.pad_key(b"x" * 16) == b"x" * 16
    assert p.unpad_key(p.pad_key(b"abc")) == b"abc"
    with pytest.raises(TypeError):
        p.pad_key(5)  # type: ignore[arg-type]
    with pytest.raises(p.KeyTooLong):
        p.pad_key(b"x" * 17)
    with pytest.raises(p.KeyTooLong):
        p.pad_key("é" * 9)  # 18 UTF-8 bytes
    assert p.check_value(b"v" * p.MAX_VALUE) == b"v" * p.MAX_VALUE
    with pytest.raises(p.ValueTooLarge):
        p.check_value(b"v" * (p.MAX_VALUE + 1))
    # Padded and unpadded forms of a key have the same origin.
    assert p.origin_of(b"abc", 7) == p.origin_of(p.pad_key(b"abc"), 7)


def test_ring_balance_and_stability() -> None:
    keys = [b"key%d" % i for i in range(4000)]
    before = p.origins(keys, 8)
    counts = [before.count(s) for s in range(8)]
    assert min(counts) > 4000 / 8 * 0.6 and max(counts) < 4000 / 8 * 1.4
    after = p.origins(keys, 9)
    moved = [(a, b) for a, b in zip(before, after, strict=True) if a != b]
    # Adding a server moves only keys to the new server, about 1/9 of them.
    assert all(b == 8 for _, b in moved)
    assert 0.05 < len(moved) / len(keys) < 0.2
    with pytest.raises(ValueError):
        p.HashRing(0)


def test_reply_echoes_request_id() -> None:
    req = p.Message(p.Op.SET, bytes(16), b"v", cid=3, seq=4, epoch=5, flags=p.F_TCP, ver=6)
    rep = req.reply(p.Op.SET_REPLY, p.Status.STALE, ver=9)
    assert (rep.cid, rep.seq, rep.key, rep.epoch, rep.ver, rep.flags, rep.value) == (
        3, 4, bytes(16), 5, 9, 0, b""
    )  # fmt: skip


def test_scapy_layer_dissects_udp_and_tcp() -> None:
    from scapy.layers.inet import IP, TCP, UDP
    from scapy.packet import Raw

    from kvswitch.scapy_kvs import KVS, bind

    bind()
    msg = p.Message(p.Op.SET, p.pad_key(b"abc"), b"hello", cid=5, seq=6, epoch=1, ver=2)
    for l4 in (UDP(sport=1234, dport=p.KVS_PORT), TCP(sport=p.KVS_PORT, dport=4321)):
        pkt = IP(bytes(IP(dst="10.0.0.1") / l4 / msg.encode()))
        kvs = pkt[KVS]
        assert (kvs.op, kvs.vlen, kvs.cid, kvs.seq, kvs.epoch, kvs.ver) == (3, 5, 5, 6, 1, 2)
        assert kvs.key == p.pad_key(b"abc")
        assert kvs[Raw].load == b"hello"
    built = bytes(KVS(op=p.Op.GET_REPLY, key=p.pad_key(b"k"), cid=1, seq=2) / Raw(b"value"))
    assert p.Message.decode(built) == p.Message(
        p.Op.GET_REPLY, p.pad_key(b"k"), b"value", cid=1, seq=2
    )
    # Bytes after 36 + vlen are padding, not value.
    parsed = KVS(msg.encode() + b"PAD")
    assert parsed[Raw].load == b"hello"
    assert "SET" in parsed.summary()


def test_scapy_layer_reads_every_vector_message() -> None:
    import json
    from pathlib import Path

    from scapy.packet import Raw

    from kvswitch.scapy_kvs import KVS

    vectors = Path(__file__).resolve().parent.parent / "vectors" / "messages.json"
    for vec in json.loads(vectors.read_text())["messages"]:
        pkt = KVS(bytes.fromhex(vec["bytes_hex"]))
        fields = ("op", "status", "vlen", "cid", "seq", "epoch", "ver")
        assert {f: int(pkt.getfieldval(f)) for f in fields} == {f: vec[f] for f in fields}
        assert int(pkt.flags) == vec["flags"]
        assert pkt.key == bytes.fromhex(vec["key_hex"])
        value = pkt[Raw].load if Raw in pkt else b""
        assert value == bytes.fromhex(vec["value_hex"])
        assert bytes(pkt) == bytes.fromhex(vec["bytes_hex"])


def test_scapy_layer_names_every_flag() -> None:
    from kvswitch.scapy_kvs import KVS

    for name in ("F_TCP", "F_DUP", "F_REDIRECT", "F_SETTLED"):
        pkt = KVS(bytes(KVS(flags=getattr(p, name))))
        assert pkt.sprintf("%flags%") == name
    assert p.FLAGS_KNOWN == p.F_TCP | p.F_DUP | p.F_REDIRECT | p.F_SETTLED


@pytest.mark.skipif(os.geteuid() != 0, reason="sniffing on lo needs root (CAP_NET_RAW)")
def test_capture_on_loopback_decodes() -> None:
    """Real agent traffic captured on lo dissects as KVS: request and reply of each op."""
    from scapy.layers.inet import UDP
    from scapy.sendrecv import AsyncSniffer

    from kvswitch.agent.backends import MemoryBackend
    from kvswitch.agent.core import AgentCore
    from kvswitch.agent.server import AgentConfig, AgentServer
    from kvswitch.client import Client
    from kvswitch.scapy_kvs import KVS, bind

    agent = AgentServer(AgentCore(MemoryBackend()), AgentConfig(port=0, tcp=False))
    agent.start()
    bind(agent.port)  # 8900 may be taken by another agent on this host
    ready = threading.Event()
    sniffer = AsyncSniffer(
        iface="lo", filter=f"udp port {agent.port}", store=True, started_callback=ready.set
    )
    sniffer.start()
    assert ready.wait(5), "the sniffer did not start"
    try:
        with Client([("127.0.0.1", agent.port)], timeout=1.0) as c:
            c.set(b"cap", b"tured")
            assert c.get(b"cap") == b"tured"
            c.delete(b"cap")
        time.sleep(0.3)
    finally:
        packets = sniffer.stop()
        agent.stop()
    seen = [(int(pkt[KVS].op), bytes(pkt[KVS].payload)) for pkt in packets if KVS in pkt]
    # On lo each datagram may be captured twice (sent and received): keep one of each.
    ops = [op for i, op in enumerate(seen) if i == 0 or op != seen[i - 1]]
    assert ops == [
        (p.Op.SET, b"tured"),
        (p.Op.SET_REPLY, b""),
        (p.Op.GET, b""),
        (p.Op.GET_REPLY, b"tured"),
        (p.Op.DEL, b""),
        (p.Op.DEL_REPLY, b""),
    ]
    replies = [pkt for pkt in packets if KVS in pkt and pkt[KVS].op % 2 == 0]
    assert replies and all(pkt[UDP].sport == agent.port for pkt in replies)
