"""Rule 3: a CONFIRM raises valid_ver[base + offset(s)] to its version (max) only when it carries
the current epoch and a version the switch handed out after the key's holders last changed
(floor < ver <= slot_ver) and comes from server s itself (source address and ingress port agree
with ServeroffsetTable). Confirms are always consumed; anything else changes nothing."""

from __future__ import annotations

import pytest

from kvswitch.paths import p4src_dir

from .base import (
    CLIENT,
    DEFINES,
    EPOCH,
    MAX_SERVERS,
    SERVERS,
    SWITCH_IP,
    Dataplane,
    Host,
    kvs,
    proto,
    routed,
    udp_packet,
)
from .conftest import fresh_plane

KEY = "confirmed-key"
SLOT = 44  # valid_ver part 2 (base.py)
ORIGIN, R1, R2 = SERVERS[0], SERVERS[1], SERVERS[2]
VER = 6


def _setup(dp: Dataplane) -> None:
    dp.make_hot(KEY, SLOT, [ORIGIN, R1, R2])
    dp.make_valid(SLOT, [ORIGIN], ver=VER)


def _confirm(sender: Host, *, epoch: int = EPOCH, ver: int = VER, key: str = KEY) -> bytes:
    msg = kvs(proto().op.CONFIRM, key, epoch=epoch, ver=ver, cid=0)
    return bytes(udp_packet(sender, SWITCH_IP, msg, sport=proto().kvs_port))


def test_current_confirm_validates_replica(dp: Dataplane) -> None:
    _setup(dp)
    dp.send_expect(R1.port, _confirm(R1), [])
    assert dp.reg("valid_ver", SLOT * MAX_SERVERS + 1) == VER
    assert dp.reg("valid_ver", SLOT * MAX_SERVERS + 2) == 0
    # R1 now serves its turns; R2 (unconfirmed) does not.
    op = proto().op
    for seq, holder in enumerate([ORIGIN, R1, ORIGIN, ORIGIN, R1]):
        get = udp_packet(CLIENT, ORIGIN.ip, kvs(op.GET, KEY, seq=seq))
        dp.send_expect(
            CLIENT.port, get, [(holder.port, routed(get, holder, redirect=holder != ORIGIN))]
        )


@pytest.mark.parametrize(
    ("case", "port", "sender", "epoch", "ver"),
    [
        ("wrong ingress port", SERVERS[2].port, SERVERS[1], EPOCH, VER),
        ("source of another server", SERVERS[1].port, SERVERS[2], EPOCH, VER),
        ("not a server", CLIENT.port, CLIENT, EPOCH, VER),
        ("future version", SERVERS[1].port, SERVERS[1], EPOCH, VER + 1),
        ("old epoch", SERVERS[1].port, SERVERS[1], EPOCH - 1, VER),
    ],
)
def test_bad_confirm_ignored_and_consumed(
    dp: Dataplane, case: str, port: int, sender: Host, epoch: int, ver: int
) -> None:
    _setup(dp)
    before = dp.snapshot()
    dp.send_expect(port, _confirm(sender, epoch=epoch, ver=ver), [])
    assert dp.snapshot() == before, case


def test_confirm_of_cold_key_consumed(dp: Dataplane) -> None:
    _setup(dp)
    before = dp.snapshot()
    dp.send_expect(R1.port, _confirm(R1, key="not-hot"), [])
    assert dp.snapshot() == before


def test_confirm_at_or_below_floor_ignored(dp: Dataplane) -> None:
    # The key's holders changed after version VER was handed out: a confirm of VER (sent during
    # R1's earlier membership, arriving late) must not validate its new one.
    dp.make_hot(KEY, SLOT, [ORIGIN, R1, R2], floor=VER)
    dp.make_valid(SLOT, [ORIGIN], ver=VER)
    before = dp.snapshot()
    dp.send_expect(R1.port, _confirm(R1, ver=VER), [])
    assert dp.snapshot() == before


def test_older_confirm_counts_but_is_not_in_the_read_set(dp: Dataplane) -> None:
    # valid_ver keeps the newest confirmed version (max): an older confirm after a newer one
    # changes nothing, and a replica below origin_ver gets no Gets.
    _setup(dp)
    dp.send_expect(R1.port, _confirm(R1, ver=VER - 1), [])
    assert dp.reg("valid_ver", SLOT * MAX_SERVERS + 1) == VER - 1
    op = proto().op
    for seq in range(3):
        get = udp_packet(CLIENT, ORIGIN.ip, kvs(op.GET, KEY, seq=seq))
        dp.send_expect(CLIENT.port, get, [(ORIGIN.port, routed(get, ORIGIN))])
    dp.send_expect(R1.port, _confirm(R1), [])
    dp.send_expect(R1.port, _confirm(R1, ver=VER - 1), [])
    assert dp.reg("valid_ver", SLOT * MAX_SERVERS + 1) == VER


def test_late_confirm_during_a_write_keeps_the_replica_serving(dp: Dataplane) -> None:
    # A write took version VER + 1 and is in flight (the origin has not reported it). R1's late
    # confirm of VER, the latest completed version, puts it in the read set: Gets keep spreading.
    _setup(dp)
    op = proto().op
    dp.sw.register_write(dp.register("global_ver"), 0, VER)
    write = udp_packet(CLIENT, ORIGIN.ip, kvs(op.SET, KEY, b"v2"))
    assert len(dp.send(CLIENT.port, write)) == 3
    assert dp.reg("slot_ver", SLOT) == VER + 1
    dp.send_expect(R1.port, _confirm(R1, ver=VER), [])
    assert dp.reg("valid_ver", SLOT * MAX_SERVERS + 1) == VER
    for seq, holder in enumerate([ORIGIN, R1, ORIGIN]):
        get = udp_packet(CLIENT, ORIGIN.ip, kvs(op.GET, KEY, seq=seq))
        dp.send_expect(
            CLIENT.port, get, [(holder.port, routed(get, holder, redirect=holder != ORIGIN))]
        )


@pytest.fixture(scope="module", params=["kvswitch.p4", "kvswitch_tna.p4"])
def untrusting(request: pytest.FixtureRequest) -> object:
    """A build without trust's rules S and O (-DKVS_TEST_NO_TRUST_SOURCE, _SERVER_OPS:
    features/trust.p4): a server's message from another port reaches the replica rules, whose own
    sender check must hold."""
    from softswitch import Switch

    source = p4src_dir() / request.param
    defines = DEFINES | {"KVS_TEST_NO_TRUST_SOURCE": "1", "KVS_TEST_NO_TRUST_SERVER_OPS": "1"}
    return Switch.from_file(str(source), defines=defines, include_dirs=[str(source.parent)])


def test_replica_rules_check_the_sender_port_themselves(untrusting: object) -> None:
    # Rules 2 and 3 change a register only for a message from the server's own port, even where
    # the trust stage lets another port's through: an origin report and a CONFIRM from R2's port.
    op = proto().op
    for dp in fresh_plane(untrusting):  # type: ignore[arg-type]
        _setup(dp)
        report = kvs(op.SET_REPLY, KEY, epoch=EPOCH, ver=VER + 3, seq=9)
        frame = bytes(udp_packet(ORIGIN, CLIENT.ip, report, sport=proto().kvs_port))
        before = dp.snapshot()
        dp.send(R2.port, frame)
        dp.send_expect(R2.port, _confirm(R1), [])
        assert dp.snapshot() == before
        dp.send(ORIGIN.port, frame)  # from its own port: origin_ver takes it
        assert dp.reg("origin_ver", SLOT) == VER + 3
