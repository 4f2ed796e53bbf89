"""features/trust.p4 (docs/protocol.md "Trust"): what a client port may send.

Every check runs twice: on the normal build, where the forged packet is dropped or cleared and no
register moves, and on a test-only build with that one rule compiled out (``-DKVS_TEST_NO_TRUST_*``),
where the same packet gets through, so each test is shown to fail without the rule it tests.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kvswitch.paths import p4src_dir

from .base import (
    CLIENT,
    DEFINES,
    EPOCH,
    SERVERS,
    SWITCH_IP,
    Dataplane,
    Host,
    SwitchTarget,
    kvs,
    proto,
    routed,
    tcp_packet,
    udp_packet,
    with_kvs,
)

KEY, COLD = "trusted-key", "cold-key"
SLOT = 5
ORIGIN, R1 = SERVERS[0], SERVERS[1]
FORGED_EPOCH, FORGED_VER = 0xFFFF, 0xFFFFFFF0
# A client host whose address the switch has no entry for (rules O and V still hold).
STRANGER = Host("x0", "10.9.9.9", "02:00:00:00:09:09", CLIENT.port)


def _build(define: str | None) -> SwitchTarget:
    from softswitch import Switch

    source = p4src_dir() / "kvswitch.p4"
    defines = dict(DEFINES) | ({define: "1"} if define else {})
    return Switch.from_file(str(source), defines=defines, include_dirs=[str(source.parent)])


_BUILDS: dict[str | None, SwitchTarget] = {}


def _plane(define: str | None) -> Iterator[Dataplane]:
    if define not in _BUILDS:
        _BUILDS[define] = _build(define)
    plane = Dataplane(_BUILDS[define])
    plane.reset()
    plane.setup_rack()
    plane.make_hot(KEY, SLOT, [ORIGIN, R1])
    plane.make_valid(SLOT, [ORIGIN, R1], ver=4)
    yield plane
    plane.reset()


@pytest.fixture(params=[True, False], ids=["rule on", "rule off"])
def on(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


def _forged_request(op_name: str, key: str, sender: Host = CLIENT, flags: int = 0) -> bytes:
    value = b"forged" if op_name == "SET" else b""
    msg = kvs(proto().op[op_name], key, value, epoch=FORGED_EPOCH, ver=FORGED_VER, flags=flags)
    return udp_packet(sender, ORIGIN.ip, msg)


# -- rule V: versions come from the switch alone


@pytest.mark.parametrize("op_name", ["GET", "SET", "DEL"])
@pytest.mark.parametrize("sender", [CLIENT, STRANGER], ids=["client", "unknown source"])
def test_cold_request_versions_and_flags_cleared(on: bool, op_name: str, sender: Host) -> None:
    for dp in _plane(None if on else "KVS_TEST_NO_TRUST_ZERO_VERSIONS"):
        # F_TCP | F_DUP | F_REDIRECT: only the switch/a server sets them
        flags = proto().f_tcp | 0x0002 | 0x0004
        pkt = _forged_request(op_name, COLD, sender, flags)
        before = dp.snapshot()
        out = dp.send(sender.port, pkt)
        assert len(out) == 1 and out[0][0] == ORIGIN.port
        value = b"forged" if op_name == "SET" else b""
        cleared = kvs(proto().op[op_name], COLD, value)
        want = with_kvs(routed(pkt, ORIGIN), cleared)
        assert (out[0][1] == bytes(want)) == on
        if on:
            snap = dp.snapshot()
            # only HashPipe (cold-key popularity) may move for a cold request
            moved = {r for r in snap if snap[r] != before[r]}
            assert all(".hashpipe." in r for r in moved), moved


def test_hot_set_stamped_over_forged_version() -> None:
    """A hot SET carrying its own version leaves with the switch's: rule 1 runs after rule V."""
    for dp in _plane(None):
        out = dp.send(CLIENT.port, _forged_request("SET", KEY))
        assert sorted(port for port, _ in out) == [ORIGIN.port, R1.port]
        assert dp.reg("slot_ver", SLOT) == 5 and dp.reg("global_ver") == 5


# -- rule O: ops only servers send


SERVER_OPS = [
    "GET_REPLY",
    "SET_REPLY",
    "DEL_REPLY",
    "PUSH",
    "REMOVE",
    "REMOVE_REPLY",
    "CONFIRM",
    "SYNC",
    "SYNC_DONE",
    "RING_REPLY",
]


@pytest.mark.parametrize("op_name", SERVER_OPS)
def test_server_op_from_client_dropped(on: bool, op_name: str) -> None:
    for dp in _plane(None if on else "KVS_TEST_NO_TRUST_SERVER_OPS"):
        op = proto().op[op_name]
        value = b"forged" if op_name in ("GET_REPLY", "PUSH") else b""
        msg = kvs(op, KEY, value, epoch=FORGED_EPOCH, ver=FORGED_VER)
        dst = SWITCH_IP if op_name in ("CONFIRM", "SYNC", "SYNC_DONE") else R1.ip
        before = dp.snapshot()
        out = dp.send(CLIENT.port, udp_packet(CLIENT, dst, msg))
        assert dp.snapshot() == before  # the switch's own checks hold either way
        consumed = op_name in ("CONFIRM", "SYNC", "SYNC_DONE")
        # on: nothing leaves; off: the ops the switch does not consume reach the server
        assert (out == []) == (on or consumed), out


@pytest.mark.parametrize("op", [0, 17, 200])
def test_unknown_op_from_client_dropped(on: bool, op: int) -> None:
    for dp in _plane(None if on else "KVS_TEST_NO_TRUST_SERVER_OPS"):
        out = dp.send(CLIENT.port, udp_packet(CLIENT, ORIGIN.ip, kvs(op, KEY, b"??")))
        assert (out == []) == on


@pytest.mark.parametrize("key", [bytes(16), KEY], ids=["zero key", "hot key"])
@pytest.mark.parametrize("sender", [CLIENT, STRANGER], ids=["client", "unknown source"])
def test_ring_get_from_client_forwarded_untouched(key: bytes | str, sender: Host) -> None:
    """RING_GET (docs/protocol.md "Membership") is the one non-request op a client may send: it
    reaches the addressed server byte for byte (no version clearing, no hot-key redirect, no
    HashPipe) and moves no register."""
    for dp in _plane(None):
        msg = kvs(proto().op["RING_GET"], key, b"", epoch=3, ver=4)
        pkt = udp_packet(sender, R1.ip, msg)
        before = dp.snapshot()
        dp.send_expect(sender.port, pkt, [(R1.port, routed(pkt, R1))])
        assert dp.snapshot() == before


@pytest.mark.parametrize("op_name", ["PUSH", "REMOVE", "REMOVE_REPLY", "GET_REPLY", "RING_REPLY"])
def test_server_op_from_server_forwarded(op_name: str) -> None:
    for dp in _plane(None):
        pkt = udp_packet(ORIGIN, R1.ip, kvs(proto().op[op_name], KEY, ver=4, epoch=EPOCH))
        dp.send_expect(ORIGIN.port, pkt, [(R1.port, routed(pkt, R1))])


# -- rule S: a server's address only on its own port


@pytest.mark.parametrize("op_name", ["GET", "SET"])
def test_server_address_from_client_port_dropped(on: bool, op_name: str) -> None:
    # (A server-only op with a server's address from a client port is not from a server either:
    # rule O drops it even without rule S; test_server_op_from_client_dropped covers those.)
    for dp in _plane(None if on else "KVS_TEST_NO_TRUST_SOURCE"):
        spoof = Host("spoof", ORIGIN.ip, CLIENT.mac, CLIENT.port)
        msg = kvs(proto().op[op_name], KEY, b"")
        before = dp.snapshot()
        out = dp.send(CLIENT.port, udp_packet(spoof, R1.ip, msg))
        assert (out == []) == on
        if on:
            assert dp.snapshot() == before


def test_spoofed_plain_ip_dropped(on: bool) -> None:
    for dp in _plane(None if on else "KVS_TEST_NO_TRUST_SOURCE"):
        spoof = Host("spoof", ORIGIN.ip, CLIENT.mac, CLIENT.port)
        pkt = udp_packet(spoof, R1.ip, b"not kvs", dport=53)
        assert (dp.send(CLIENT.port, pkt) == []) == on


# -- TCP: a segment may start in the middle of a message


def test_tcp_segment_that_looks_like_a_server_op_or_versioned_request_passes_untouched() -> None:
    """The second segment of a long TCP value starts with value bytes; whatever op, status,
    vlen and version they spell, rules O and V must not drop or rewrite them (the agent ignores
    versions over TCP and takes no PUSH/REMOVE at all)."""
    for dp in _plane(None):
        for op in (proto().op.PUSH, 0x77, proto().op.SET):
            chunk = kvs(op, COLD, b"x" * 40, epoch=FORGED_EPOCH, ver=FORGED_VER)
            pkt = tcp_packet(CLIENT, ORIGIN.ip, chunk)
            dp.send_expect(CLIENT.port, pkt, [(ORIGIN.port, routed(pkt, ORIGIN))])
