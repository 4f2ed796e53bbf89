"""The shared test vectors (tests/vectors/*.json) that the Python and C libraries both check.

The vectors are produced by :func:`build_consistent_hash` and :func:`build_messages` from
``kvswitch.protocol``; these tests check that the committed files are exactly what the code produces
today, and check the code itself against values computed independently of it (known FNV-1a values,
a byte-by-byte header layout, a linear-scan ring). Regenerate after a deliberate change with
``python tests/kvswitch/test_vectors.py``.
"""

from __future__ import annotations

import json
import random
import struct
import sys
from pathlib import Path
from typing import Any

import pytest

from kvswitch import protocol as p

VECTORS = Path(__file__).resolve().parent.parent / "vectors"
CH_FILE = VECTORS / "consistent_hash.json"
MSG_FILE = VECTORS / "messages.json"

SERVER_COUNTS = (1, 2, 3, 4, 5, 8, 16, 32)
HASH_INPUTS = (b"", b"a", b"foobar", b"0#0", b"31#63", b"key-000000000000", bytes(16))


def _keys() -> list[bytes]:
    rng = random.Random(8900)
    keys = [b"", b"a", b"hello", b"user:42", b"key-000000000000", b"\xff" * 16, bytes(16)]
    keys += [b"key%d" % i for i in range(40)]
    keys += [bytes(rng.randrange(256) for _ in range(rng.randrange(1, 17))) for _ in range(40)]
    return keys


def build_consistent_hash() -> dict[str, Any]:
    hashes = [
        {
            "input_hex": data.hex(),
            "fnv1a64": f"0x{p.fnv1a64(data):016x}",
            "hash": f"0x{p.ring_hash(data):016x}",
        }
        for data in HASH_INPUTS
    ]
    cases = []
    for servers in SERVER_COUNTS:
        ring = p.HashRing(servers, p.DEFAULT_VNODES)
        for key in _keys():
            cases.append(
                {
                    "servers": servers,
                    "vnodes": p.DEFAULT_VNODES,
                    "key_hex": key.hex(),
                    "key16_hex": p.pad_key(key).hex(),
                    "position": f"0x{p.ring_hash(p.pad_key(key)):016x}",
                    "origin": ring.origin(key),
                }
            )
    small = p.HashRing(3, 4)
    for key in _keys()[:10]:
        cases.append(
            {
                "servers": 3,
                "vnodes": 4,
                "key_hex": key.hex(),
                "key16_hex": p.pad_key(key).hex(),
                "position": f"0x{p.ring_hash(p.pad_key(key)):016x}",
                "origin": small.origin(key),
            }
        )
    return {
        "about": "docs/protocol.md 'Origin of a key': H(b) = mix64(fnv1a64(b)); ring points "
        "H(b'%d#%d' % (server, vnode)); origin = server of the first point >= H(key16), wrapping. "
        "64-bit values are hex strings. 'member_rings' (docs/protocol.md 'Membership'): rings of "
        "the member ids listed only (gaps and additions); 'origins' maps key_hex -> origin id.",
        "hashes": hashes,
        "cases": cases,
        "member_rings": build_member_rings(),
    }


#: Member sets of the "member_rings" vectors: a removed server (gap), an added ninth, sparse ones.
MEMBER_SETS = ((0, 1, 2, 4, 5, 6, 7), tuple(range(9)), (1, 3), (0, 1, 2, 3, 4, 5, 6, 7), (5,))


def build_member_rings() -> list[dict[str, Any]]:
    rings = []
    for members in MEMBER_SETS:
        ring = p.HashRing.of(members, p.DEFAULT_VNODES)
        rings.append(
            {
                "members": list(members),
                "vnodes": p.DEFAULT_VNODES,
                "origins": {key.hex(): ring.origin(key) for key in _keys()},
            }
        )
    return rings


#: RING_REPLY's example: version 7, members 0, 1, 3 (server 2 removed), one on another port.
_RING = p.Ring(
    7,
    (p.Member(0, "10.0.0.1"), p.Member(1, "10.0.0.2"), p.Member(3, "192.168.1.200", 9000)),
)


def _example_messages() -> list[tuple[str, p.Message]]:
    k = p.pad_key(b"user:42")
    v = b"hello, kvswitch"
    cid, seq = 0x1234ABCD, 7
    return [
        ("get", p.Message(p.Op.GET, k, cid=cid, seq=seq)),
        ("get_reply_found", p.Message(p.Op.GET_REPLY, k, v, cid=cid, seq=seq, epoch=1, ver=9)),
        (
            "get_reply_missing",
            p.Message(p.Op.GET_REPLY, k, status=p.Status.NOT_FOUND, cid=cid, seq=seq),
        ),
        ("set", p.Message(p.Op.SET, k, v, cid=cid, seq=seq + 1)),
        ("ring_get", p.Message(p.Op.RING_GET, bytes(16), cid=cid, seq=seq + 3)),
        ("ring_reply", p.Message(p.Op.RING_REPLY, bytes(16), _RING.encode(), cid=cid, seq=seq + 3)),
        (
            "get_reply_moved",
            p.Message(p.Op.GET_REPLY, k, (7).to_bytes(4, "big"), p.Status.MOVED, cid, seq),
        ),
        ("set_reply_retry", p.Message(p.Op.SET_REPLY, k, status=p.Status.RETRY, cid=cid, seq=9)),
        ("set_versioned", p.Message(p.Op.SET, k, v, cid=cid, seq=seq + 1, epoch=2, ver=0xDEADBEEF)),
        ("set_reply", p.Message(p.Op.SET_REPLY, k, cid=cid, seq=seq + 1, epoch=2, ver=0xDEADBEEF)),
        (
            "set_reply_stale",
            p.Message(p.Op.SET_REPLY, k, status=p.Status.STALE, cid=cid, seq=8, epoch=2, ver=3),
        ),
        (
            "del_reply_repeated_not_found",
            p.Message(p.Op.DEL_REPLY, k, status=p.Status.NOT_FOUND, cid=cid, seq=8, flags=p.F_DUP),
        ),
        (
            "set_reply_too_large",
            p.Message(p.Op.SET_REPLY, k, status=p.Status.TOO_LARGE, cid=cid, seq=8),
        ),
        ("del", p.Message(p.Op.DEL, k, cid=cid, seq=seq + 2)),
        ("del_reply", p.Message(p.Op.DEL_REPLY, k, cid=cid, seq=seq + 2, epoch=1, ver=10)),
        (
            "del_reply_not_found",
            p.Message(p.Op.DEL_REPLY, k, status=p.Status.NOT_FOUND, cid=cid, seq=9),
        ),
        ("update", p.Message(p.Op.UPDATE, k, v, cid=cid, seq=seq + 1, epoch=1, ver=11)),
        (
            "update_from_tcp",
            p.Message(p.Op.UPDATE, k, v, cid=cid, seq=3, epoch=1, flags=p.F_TCP, ver=12),
        ),
        (
            "set_settled",
            p.Message(p.Op.SET, k, v, cid=cid, seq=4, epoch=1, flags=p.F_SETTLED, ver=16),
        ),
        ("update_del", p.Message(p.Op.UPDATE_DEL, k, cid=cid, seq=seq + 2, epoch=1, ver=13)),
        ("confirm", p.Message(p.Op.CONFIRM, k, epoch=1, ver=13)),
        ("push", p.Message(p.Op.PUSH, k, v, epoch=1, ver=14)),
        ("sync", p.Message(p.Op.SYNC, k)),
        ("sync_stamped", p.Message(p.Op.SYNC, k, epoch=1, ver=15)),
        ("sync_done", p.Message(p.Op.SYNC_DONE, k, epoch=1, ver=15)),
        ("remove", p.Message(p.Op.REMOVE, k, seq=1)),
        ("remove_reply", p.Message(p.Op.REMOVE_REPLY, k, seq=1)),
        (
            "server_error",
            p.Message(
                p.Op.GET_REPLY, p.pad_key(b"k"), status=p.Status.SERVER_ERROR, cid=1, seq=0xFFFFFFFF
            ),
        ),
        (
            "max_value",
            p.Message(
                p.Op.SET,
                p.pad_key(bytes(range(1, 17))),
                bytes(range(256)) * 32,
                cid=0xFFFFFFFF,
                seq=1,
            ),
        ),
    ]


def _malformed() -> list[tuple[str, bytes]]:
    good = p.Message(p.Op.SET, p.pad_key(b"x"), b"abc", cid=5, seq=6).encode()
    return [
        ("empty", b""),
        ("short_header", good[:35]),
        ("vlen_beyond_datagram", good[:-1]),
        ("unknown_op_0", bytes([0]) + good[1:]),
        ("unknown_op_17", bytes([17]) + good[1:]),
        ("unknown_status", good[:1] + bytes([10]) + good[2:]),
    ]


def build_messages() -> dict[str, Any]:
    messages = []
    for name, msg in _example_messages():
        messages.append(
            {
                "name": name,
                "op": int(msg.op),
                "op_name": p.Op(msg.op).name,
                "status": int(msg.status),
                "status_name": p.Status(msg.status).name,
                "vlen": len(msg.value),
                "cid": msg.cid,
                "seq": msg.seq,
                "epoch": msg.epoch,
                "flags": msg.flags,
                "ver": msg.ver,
                "key_hex": msg.key.hex(),
                "value_hex": msg.value.hex(),
                "bytes_hex": msg.encode().hex(),
            }
        )
    return {
        "about": "docs/protocol.md 'Header': 36-byte header, network byte order, then vlen value "
        "bytes. 'malformed' must be refused by every decoder.",
        "header_len": p.HEADER_LEN,
        "kvs_port": p.KVS_PORT,
        "max_value": p.MAX_VALUE,
        "ops": {op.name: int(op) for op in p.Op},
        "statuses": {s.name: int(s) for s in p.Status},
        "flags": {
            "F_TCP": p.F_TCP,
            "F_DUP": p.F_DUP,
            "F_REDIRECT": p.F_REDIRECT,
            "F_SETTLED": p.F_SETTLED,
        },
        "messages": messages,
        "malformed": [{"name": n, "bytes_hex": b.hex()} for n, b in _malformed()],
    }


def _dump(obj: dict[str, Any]) -> str:
    return json.dumps(obj, indent=1) + "\n"


def write_vectors() -> None:
    VECTORS.mkdir(parents=True, exist_ok=True)
    CH_FILE.write_text(_dump(build_consistent_hash()))
    MSG_FILE.write_text(_dump(build_messages()))


# -- tests --------------------------------------------------------------------------------------


def test_committed_vectors_match_the_code() -> None:
    assert CH_FILE.read_text() == _dump(build_consistent_hash()), "regenerate consistent_hash.json"
    assert MSG_FILE.read_text() == _dump(build_messages()), "regenerate messages.json"


def test_member_rings_match_a_linear_scan() -> None:
    """Each "member_rings" vector against a ring built here by brute force from the contract."""
    rings = json.loads(CH_FILE.read_text())["member_rings"]
    assert {tuple(r["members"]) for r in rings} == set(MEMBER_SETS)
    for r in rings:
        points = sorted(
            (p.ring_hash(f"{s}#{v}".encode()), s) for s in r["members"] for v in range(r["vnodes"])
        )
        for key_hex, origin in r["origins"].items():
            pos = p.ring_hash(p.pad_key(bytes.fromhex(key_hex)))
            expect = next((s for pt, s in points if pt >= pos), points[0][1])
            assert origin == expect, (r["members"], key_hex)
            assert origin in r["members"]


def test_full_member_ring_is_the_plain_ring() -> None:
    """members {0..M-1} is exactly today's ring: the old vectors stay valid."""
    for m in (1, 3, 8):
        full, plain = p.HashRing.of(range(m)), p.HashRing(m)
        assert all(full.origin(k) == plain.origin(k) for k in _keys())


def test_fnv1a64_known_values() -> None:
    # Published FNV-1a 64 test values (Fowler/Noll/Vo reference test suite).
    assert p.fnv1a64(b"") == 0xCBF29CE484222325
    assert p.fnv1a64(b"a") == 0xAF63DC4C8601EC8C
    assert p.fnv1a64(b"foobar") == 0x85944171F73967E8


def test_mix64_known_value() -> None:
    # splitmix64 with seed 0: the first output is mix64(0x9E3779B97F4A7C15) = 0xE220A8397B1DCDAF.
    assert p.mix64(0x9E3779B97F4A7C15) == 0xE220A8397B1DCDAF


def test_header_layout_byte_by_byte() -> None:
    msg = p.Message(
        0x03, b"K" * 16, b"vv", 0x00, 0x01020304, 0x05060708, 0x090A, 0x0B0C, 0x0D0E0F10
    )
    raw = msg.encode()
    assert len(raw) == p.HEADER_LEN + 2
    assert raw[:4] == bytes([3, 0, 0, 2])
    assert raw[4:20] == bytes(range(1, 17))
    assert raw[20:36] == b"K" * 16 and raw[36:] == b"vv"
    assert struct.calcsize("!BBHIIHHI16s") == p.HEADER_LEN == 36


def test_ring_matches_linear_scan() -> None:
    for servers, vnodes in ((1, 1), (3, 4), (7, 64)):
        points = sorted(
            (p.ring_hash(f"{s}#{v}".encode()), s) for s in range(servers) for v in range(vnodes)
        )
        ring = p.HashRing(servers, vnodes)
        for key in _keys():
            pos = p.ring_hash(p.pad_key(key))
            expect = next((s for pt, s in points if pt >= pos), points[0][1])
            assert ring.origin(key) == expect


def test_messages_roundtrip_and_malformed_refused() -> None:
    for _, msg in _example_messages():
        assert p.Message.decode(msg.encode()) == msg
    for name, raw in _malformed():
        with pytest.raises(p.MalformedMessage):
            p.Message.decode(raw)
        assert name


if __name__ == "__main__":
    write_vectors()
    print(f"wrote {CH_FILE} and {MSG_FILE}", file=sys.stderr)
