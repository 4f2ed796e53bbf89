"""features/trust.p4 (docs/protocol.md "Trust"): what a client port may send.

Every check runs on the normal build, where the forged packet is dropped or cleared and no register
moves, on the software switch and on BMv2 (``simple_switch_grpc``, conftest.py's ``bmv2``), and on a
test-only build with that one rule compiled out (``-DKVS_TEST_NO_TRUST_*``, on the software switch),
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
from .conftest import fresh_plane, on_target

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


def _plane(define: str | None, bmv2: SwitchTarget | None = None) -> Iterator[Dataplane]:
    """The test rack with KEY hot on ORIGIN and R1: on BMv2 (the normal build) when ``bmv2`` is
    given, else on the software switch built with ``define``."""
    if bmv2 is None:
        if define not in _BUILDS:
            _BUILDS[define] = _build(define)
        sw = _BUILDS[define]
    else:
        assert define is None, "BMv2 runs the normal build only"
        sw = bmv2
    for plane in fresh_plane(sw):
        plane.make_hot(KEY, SLOT, [ORIGIN, R1])
        plane.make_valid(SLOT, [ORIGIN, R1], ver=4)
        yield plane


@pytest.fixture(
    params=[
        *on_target("softswitch", "rule on"),
        *on_target("softswitch", "rule off"),
        *on_target("bmv2", "rule on, bmv2"),
    ]
)
def build(request: pytest.FixtureRequest) -> tuple[bool, SwitchTarget | None]:
    """(the rule under test is compiled in, BMv2 or None for the software switch)."""
    bmv2 = request.getfixturevalue("bmv2") if "bmv2" in request.param else None
    return request.param != "rule off", bmv2


@pytest.fixture(params=[*on_target("softswitch", "softswitch"), *on_target("bmv2", "bmv2")])
def normal(request: pytest.FixtureRequest) -> SwitchTarget | None:
    """BMv2, or None for the software switch (the normal build on each target)."""
    return request.getfixturevalue("bmv2") if request.param == "bmv2" else None


def _forged_request(op_name: str, key: str, sender: Host = CLIENT, flags: int = 0) -> bytes:
    value = b"forged" if op_name == "SET" else b""
    msg = kvs(proto().op[op_name], key, value, epoch=FORGED_EPOCH, ver=FORGED_VER, flags=flags)
    return udp_packet(sender, ORIGIN.ip, msg)


# -- rule V: versions come from the switch alone


@pytest.mark.parametrize("op_name", ["GET", "SET", "DEL"])
@pytest.mark.parametrize("sender", [CLIENT, STRANGER], ids=["client", "unknown source"])
def test_cold_request_versions_and_flags_cleared(
    build: tuple[bool, SwitchTarget | None], op_name: str, sender: Host
) -> None:
    on, bmv2 = build
    for dp in _plane(None if on else "KVS_TEST_NO_TRUST_ZERO_VERSIONS", bmv2):
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


def test_hot_set_stamped_over_forged_version(normal: SwitchTarget | None) -> None:
    """A hot SET carrying its own version leaves with the switch's: rule 1 runs after rule V."""
    for dp in _plane(None, normal):
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
def test_server_op_from_client_dropped(
    build: tuple[bool, SwitchTarget | None], op_name: str
) -> None:
    on, bmv2 = build
    for dp in _plane(None if on else "KVS_TEST_NO_TRUST_SERVER_OPS", bmv2):
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
def test_unknown_op_from_client_dropped(build: tuple[bool, SwitchTarget | None], op: int) -> None:
    on, bmv2 = build
    for dp in _plane(None if on else "KVS_TEST_NO_TRUST_SERVER_OPS", bmv2):
        out = dp.send(CLIENT.port, udp_packet(CLIENT, ORIGIN.ip, kvs(op, KEY, b"??")))
        assert (out == []) == on


@pytest.mark.parametrize("key", [bytes(16), KEY], ids=["zero key", "hot key"])
@pytest.mark.parametrize("sender", [CLIENT, STRANGER], ids=["client", "unknown source"])
def test_ring_get_from_client_forwarded_untouched(
    key: bytes | str, sender: Host, normal: SwitchTarget | None
) -> None:
    """RING_GET (docs/protocol.md "Membership") is the one non-request op a client may send: it
    reaches the addressed server byte for byte (no version clearing, no hot-key redirect, no
    HashPipe) and moves no register."""
    for dp in _plane(None, normal):
        msg = kvs(proto().op["RING_GET"], key, b"", epoch=3, ver=4)
        pkt = udp_packet(sender, R1.ip, msg)
        before = dp.snapshot()
        dp.send_expect(sender.port, pkt, [(R1.port, routed(pkt, R1))])
        assert dp.snapshot() == before


@pytest.mark.parametrize("op_name", ["PUSH", "REMOVE", "REMOVE_REPLY", "GET_REPLY", "RING_REPLY"])
def test_server_op_from_server_forwarded(op_name: str, normal: SwitchTarget | None) -> None:
    for dp in _plane(None, normal):
        pkt = udp_packet(ORIGIN, R1.ip, kvs(proto().op[op_name], KEY, ver=4, epoch=EPOCH))
        dp.send_expect(ORIGIN.port, pkt, [(R1.port, routed(pkt, R1))])


# -- rule S: a server's address only on its own port


@pytest.mark.parametrize("op_name", ["GET", "SET"])
def test_server_address_from_client_port_dropped(
    build: tuple[bool, SwitchTarget | None], op_name: str
) -> None:
    # (A server-only op with a server's address from a client port is not from a server either:
    # rule O drops it even without rule S; test_server_op_from_client_dropped covers those.)
    on, bmv2 = build
    for dp in _plane(None if on else "KVS_TEST_NO_TRUST_SOURCE", bmv2):
        spoof = Host("spoof", ORIGIN.ip, CLIENT.mac, CLIENT.port)
        msg = kvs(proto().op[op_name], KEY, b"")
        before = dp.snapshot()
        out = dp.send(CLIENT.port, udp_packet(spoof, R1.ip, msg))
        assert (out == []) == on
        if on:
            assert dp.snapshot() == before


def test_spoofed_plain_ip_dropped(build: tuple[bool, SwitchTarget | None]) -> None:
    on, bmv2 = build
    for dp in _plane(None if on else "KVS_TEST_NO_TRUST_SOURCE", bmv2):
        spoof = Host("spoof", ORIGIN.ip, CLIENT.mac, CLIENT.port)
        pkt = udp_packet(spoof, R1.ip, b"not kvs", dport=53)
        assert (dp.send(CLIENT.port, pkt) == []) == on


# -- TCP: a segment may start in the middle of a message


def test_tcp_segment_that_looks_like_a_server_op_or_versioned_request_passes_untouched(
    normal: SwitchTarget | None,
) -> None:
    """The second segment of a long TCP value starts with value bytes; whatever op, status,
    vlen and version they spell, rules O and V must not drop or rewrite them (the agent ignores
    versions over TCP and takes no PUSH/REMOVE at all)."""
    for dp in _plane(None, normal):
        for op in (proto().op.PUSH, 0x77, proto().op.SET):
            chunk = kvs(op, COLD, b"x" * 40, epoch=FORGED_EPOCH, ver=FORGED_VER)
            pkt = tcp_packet(CLIENT, ORIGIN.ip, chunk)
            dp.send_expect(CLIENT.port, pkt, [(ORIGIN.port, routed(pkt, ORIGIN))])


# -- every build: a refused message reaches no lookup


@pytest.mark.parametrize(
    ("sender", "op_name"),
    [
        ("spoofed", "GET"),
        ("spoofed", "SET"),
        ("spoofed", "GET_REPLY"),
        ("client", "CONFIRM"),
        ("unknown source", "GET_REPLY"),
    ],
)
def test_refused_message_of_hot_key_reaches_no_lookup(
    dp: Dataplane, sender: str, op_name: str
) -> None:
    """A whole message of a hot key that Trust refuses (S: a server's address on a client's port;
    O: a server's op from a client, known or not) is dropped and counted nowhere: no HotkeyTable or
    ReplycountTable count, no register, on every build. The TNA ingress gates its lookups on
    KvsCheck's verdict and Trust's `distrust`, not on the kvs_ok the refusal clears
    (kvswitch_tna.p4): this is what says the two agree."""
    dp.make_hot(KEY, SLOT, [ORIGIN, R1])
    dp.make_valid(SLOT, [ORIGIN, R1], ver=4)
    src = {
        "spoofed": Host("spoof", ORIGIN.ip, CLIENT.mac, CLIENT.port),
        "client": CLIENT,
        "unknown source": STRANGER,
    }[sender]
    value = b"v" if op_name in ("SET", "GET_REPLY") else b""
    msg = kvs(proto().op[op_name], KEY, value, epoch=EPOCH, ver=5)
    dst = SWITCH_IP if op_name == "CONFIRM" else R1.ip
    before = dp.snapshot()
    dp.send_expect(CLIENT.port, udp_packet(src, dst, msg), [])
    assert dp.snapshot() == before
    assert dp.hot_count(KEY) == (0, 0)
    assert dp.reply_count(ORIGIN) == (0, 0)
