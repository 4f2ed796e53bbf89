"""The spine program (p4src/kvswitch_spine.p4 and its TNA twin; docs/fabric.md "Spine program"):
a fabric-hot key's serializer runs the rack's rules 1-6 over holders behind other leaves
(docs/protocol.md F2), with rule S per rack (F5) and a dead rack's origin (F6). The fabric is
spine.py's; every test runs on every spine build (conftest.py's ``spine_target``)."""

from __future__ import annotations

from scapy.packet import Packet

from kvswitch.consistency import rules
from kvswitch.controller import names

from .base import EPOCH, SWITCH_IP, Host, key16, kvs, proto, routed, udp_packet, with_kvs
from .spine import (
    FAR_CLIENT,
    HOLDER_CELLS,
    MAX_HOLDERS,
    PARAM_ROTATE,
    REG_DONE_BY,
    REG_ROTATED,
    A,
    B,
    C,
    D,
    E,
    SpinePlane,
)

KEY = "fabric-hot"
SLOT = 3
BASE = SLOT * MAX_HOLDERS
HOLDERS = [A, C, D]  # origin in rack 1, replicas in rack 2 (one leaf port, two rids)
VALUE = b"fabric value"


def _gets_reach(sp: SpinePlane, holders: list[Host], first_seq: int = 0) -> None:
    """Gets of the client, addressed to the origin, reach ``holders`` in that order."""
    for i, holder in enumerate(holders):
        get = udp_packet(FAR_CLIENT, A.ip, kvs(proto().op.GET, KEY, seq=first_seq + i))
        want = routed(get, holder, redirect=holder != A)
        sp.send_expect(FAR_CLIENT.port, get, [(holder.port, want)])


def _reply(sender: Host, op: int, ver: int, *, status: int = 0, epoch: int = EPOCH) -> Packet:
    msg = kvs(op, KEY, status=status, epoch=epoch, ver=ver, seq=9)
    return udp_packet(sender, FAR_CLIENT.ip, msg, sport=proto().kvs_port)


def test_gets_round_robin_over_holders_behind_other_leaves(sp: SpinePlane) -> None:
    sp.make_hot(KEY, SLOT, HOLDERS)
    sp.make_valid(SLOT, HOLDERS, ver=5)
    _gets_reach(sp, HOLDERS * 2)
    for holder in HOLDERS:
        assert sp.load_count(holder)[1] == 2  # (bytes, packets)
    assert sp.hot_count(KEY)[1] == 6
    assert sp.reg(names.REG_RR, SLOT) == 0


def test_get_stays_with_the_origin_until_the_replica_confirms(sp: SpinePlane) -> None:
    op = proto().op
    sp.make_hot(KEY, SLOT, HOLDERS)
    sp.make_valid(SLOT, [A, C], ver=5)  # d has not confirmed version 5: not in the read set
    _gets_reach(sp, [A, C, A])
    # d's CONFIRM from its own leaf counts (rule 3: cell base + its ordinal 2), and is consumed
    confirm = udp_packet(D, SWITCH_IP, kvs(op.CONFIRM, KEY, epoch=EPOCH, ver=5, cid=0))
    sp.send_expect(D.port, confirm, [])
    assert sp.reg(names.REG_VALID_VER, BASE + 2) == 5
    _gets_reach(sp, [A, C, D], first_seq=10)


def test_confirm_counts_only_from_a_holder_on_its_leaf(sp: SpinePlane) -> None:
    op = proto().op
    sp.make_hot(KEY, SLOT, HOLDERS)
    sp.make_valid(SLOT, [A, C], ver=5)
    before = sp.snapshot()
    confirm = kvs(op.CONFIRM, KEY, epoch=EPOCH, ver=5, cid=0)
    # e holds nothing of the key: no (slot, e) entry, ignored; d's address from rack 1's leaf
    # is spoofed (rule S per rack, F5): dropped before any register
    sp.send_expect(E.port, udp_packet(E, SWITCH_IP, confirm), [])
    sp.send_expect(A.port, udp_packet(D, SWITCH_IP, confirm), [])
    assert sp.snapshot() == before


def test_write_stamped_and_copied_to_holders_behind_their_leaves(sp: SpinePlane) -> None:
    op = proto().op
    settled = proto().f_settled
    sp.make_hot(KEY, SLOT, HOLDERS)
    sp.make_valid(SLOT, HOLDERS, ver=5)
    # versions a client put on its request are cleared (rule V), then the spine stamps
    pkt = udp_packet(FAR_CLIENT, A.ip, kvs(op.SET, KEY, VALUE, seq=42, epoch=3, ver=99))
    stamped = kvs(op.SET, KEY, VALUE, seq=42, epoch=EPOCH, ver=6, flags=settled)
    update = kvs(op.UPDATE, KEY, VALUE, seq=42, epoch=EPOCH, ver=6, flags=settled)
    sp.send_expect(
        FAR_CLIENT.port,
        pkt,
        [
            (A.port, with_kvs(routed(pkt, A), stamped)),
            # both copies leave on rack 2's leaf port, told apart by rid (RidtoserverTable)
            (C.port, with_kvs(routed(pkt, C, redirect=True), update)),
            (D.port, with_kvs(routed(pkt, D, redirect=True), update)),
        ],
    )
    assert sp.reg(names.REG_GLOBAL_VER) == 6
    assert sp.reg(names.REG_SLOT_VER, SLOT) == 6
    assert sp.sw.counter_read(sp.counter(names.HOTKEY_WRITES), SLOT)[1] == 1
    # in flight: Gets keep spreading over the read set of version 5
    _gets_reach(sp, HOLDERS)
    # the origin's reply completes version 6 (rule 2) and goes on to the client's rack
    reply = _reply(A, op.SET_REPLY, 6)
    sp.send_expect(A.port, reply, [(FAR_CLIENT.port, routed(reply, FAR_CLIENT))])
    assert sp.reg(names.REG_ORIGIN_VER, SLOT) == 6
    _gets_reach(sp, [A, A, A], first_seq=20)  # no replica confirmed 6 yet
    for holder in (C, D):
        confirm = udp_packet(holder, SWITCH_IP, kvs(op.CONFIRM, KEY, epoch=EPOCH, ver=6, cid=0))
        sp.send_expect(holder.port, confirm, [])
    _gets_reach(sp, HOLDERS, first_seq=30)


def test_read_reply_newer_than_the_origin_dropped_even_from_a_former_holder(
    sp: SpinePlane,
) -> None:
    op, status = proto().op, proto().status
    sp.make_hot(KEY, SLOT, HOLDERS)
    sp.make_valid(SLOT, HOLDERS, ver=5)
    for sender, ver in ((C, 5), (A, 5)):
        reply = _reply(sender, op.GET_REPLY, ver)
        sp.send_expect(sender.port, reply, [(FAR_CLIENT.port, routed(reply, FAR_CLIENT))])
    # a replica's version the origin has not reported, or an older one (it may be one the origin
    # never held), a miss, another epoch: dropped (rule 6); b left the key (no entry of its own
    # any more) and answers a Get redirected to it before
    cases = ((C, 6, EPOCH), (C, 4, EPOCH), (D, 0, EPOCH), (C, 5, EPOCH + 1), (B, 6, EPOCH))
    for sender, ver, epoch in cases:
        sp.send_expect(sender.port, _reply(sender, op.GET_REPLY, ver, epoch=epoch), [])
    moved = _reply(B, op.GET_REPLY, 0, status=status.MOVED)  # no read result: passes
    sp.send_expect(B.port, moved, [(FAR_CLIENT.port, routed(moved, FAR_CLIENT))])


def test_sync_reflected_to_the_origin_through_its_leaf(sp: SpinePlane) -> None:
    op, kport = proto().op, proto().kvs_port
    sp.make_hot(KEY, SLOT, HOLDERS)
    sp.make_valid(SLOT, HOLDERS, ver=5)
    for sender in (C, E):  # not the origin: dropped, no version
        sync = udp_packet(sender, SWITCH_IP, kvs(op.SYNC, KEY, epoch=EPOCH, seq=3), sport=kport)
        sp.send_expect(sender.port, sync, [])
    assert sp.reg(names.REG_GLOBAL_VER) == 5
    sync = udp_packet(A, SWITCH_IP, kvs(op.SYNC, KEY, epoch=EPOCH, seq=3), sport=kport)
    back = sync.copy()
    back["Ether"].src, back["Ether"].dst = sync["Ether"].dst, sync["Ether"].src
    back["IP"].src, back["IP"].dst = SWITCH_IP, A.ip
    back["UDP"].sport, back["UDP"].dport = sync["UDP"].dport, sync["UDP"].sport
    synced = with_kvs(back, kvs(op.SYNC, KEY, epoch=EPOCH, ver=6, seq=3))
    sp.send_expect(A.port, sync, [(A.port, synced)])
    assert sp.reg(names.REG_SLOT_VER, SLOT) == 6


def test_dead_rack_origin_served_by_replicas_writes_unavailable(sp: SpinePlane) -> None:
    op, status = proto().op, proto().status
    sp.make_hot(KEY, SLOT, HOLDERS)
    sp.make_valid(SLOT, HOLDERS, ver=5)
    sp.set_down(A)  # rack 1's leaf died (F6): the origin is down for the spine
    _gets_reach(sp, [C, D, C])
    pkt = udp_packet(FAR_CLIENT, A.ip, kvs(op.SET, KEY, VALUE, seq=8))
    answer = pkt.copy()
    answer["Ether"].src, answer["Ether"].dst = "02:00:00:00:00:fe", FAR_CLIENT.mac
    answer["IP"].src, answer["IP"].dst, answer["IP"].ttl = A.ip, FAR_CLIENT.ip, 64
    answer["UDP"].sport, answer["UDP"].dport = pkt["UDP"].dport, pkt["UDP"].sport
    msg = kvs(op.SET_REPLY, KEY, status=status.UNAVAILABLE, seq=8) + VALUE
    sp.send_expect(FAR_CLIENT.port, pkt, [(FAR_CLIENT.port, with_kvs(answer, msg))])
    assert sp.reg(names.REG_GLOBAL_VER) == 5


def test_cold_traffic_routed_by_rack_and_no_candidate_state(sp: SpinePlane) -> None:
    op = proto().op
    before = sp.snapshot()
    for seq, server in enumerate((A, C, E)):
        get = udp_packet(FAR_CLIENT, server.ip, kvs(op.GET, f"cold-{seq}", seq=seq))
        sp.send_expect(FAR_CLIENT.port, get, [(server.port, routed(get, server))])
    assert sp.snapshot() == before  # a spine has no HashPipe: cold keys leave no trace
    spoofed = udp_packet(C, A.ip, kvs(op.GET, "cold-0"))  # rack 2's address from rack 1's leaf
    sp.send_expect(A.port, spoofed, [])


def test_held_until_the_fabric_controller_reinstalled_the_spine(sp: SpinePlane) -> None:
    """A restarted spine (SpineHoldTable's default ``hold``) drops every well-formed KVSwitch
    message, requests and replies of hot and cold keys alike, and changes no register; plain IP
    passes; once the default is NoAction it forwards again (docs/fabric.md "Failures")."""
    op = proto().op
    sp.make_hot(KEY, SLOT, HOLDERS)
    sp.make_valid(SLOT, HOLDERS, ver=5)
    sp.ready(installed=False)
    before = sp.snapshot()
    get = udp_packet(FAR_CLIENT, A.ip, kvs(op.GET, KEY, seq=1))
    cold = udp_packet(FAR_CLIENT, C.ip, kvs(op.GET, "cold", seq=2))
    write = udp_packet(FAR_CLIENT, A.ip, kvs(op.SET, KEY, VALUE, seq=3))
    sent = [(FAR_CLIENT, get), (FAR_CLIENT, cold), (FAR_CLIENT, write)]
    sent += [(A, _reply(A, op.SET_REPLY, 6)), (C, _reply(C, op.GET_REPLY, 5))]
    for sender, pkt in sent:
        sp.send_expect(sender.port, pkt, [])
    assert sp.snapshot() == before
    plain = udp_packet(FAR_CLIENT, C.ip, b"not kvswitch", dport=4000)
    sp.send_expect(FAR_CLIENT.port, plain, [(C.port, routed(plain, C))])
    sp.ready()
    sp.send_expect(FAR_CLIENT.port, cold, [(C.port, routed(cold, C))])


# -- the write rotation (docs/protocol.md F7, rules R1-R6) ---------------------------------------

CID = 0x1234  # base.kvs's default client id


def _seq_for(writer: int, n: int = len(HOLDERS), start: int = 1) -> int:
    """A request sequence number whose rotated write goes to ordinal ``writer`` of ``n`` holders
    (rules.rotated_write: the Python side of the spine's hash)."""
    seq = start
    while rules.rotated_write(0, [0], [0], CID, seq, n)[1] != writer:
        seq += 1
    return seq


def _passes(sp: SpinePlane, sender: Host, reply: Packet) -> None:
    """``sender``'s reply goes on to the client's rack."""
    sp.send_expect(sender.port, reply, [(FAR_CLIENT.port, routed(reply, FAR_CLIENT))])


def _rotated_write(sp: SpinePlane, writer: Host, ver: int, seq: int) -> Packet:
    """A client's SET addressed to the origin: stamped ``ver``, flagged F_REDIRECT (never
    F_SETTLED) and sent to ``writer`` alone (R1); returns the packet the spine sent."""
    op = proto().op
    pkt = udp_packet(FAR_CLIENT, A.ip, kvs(op.SET, KEY, VALUE, seq=seq, epoch=3, ver=99))
    stamped = kvs(op.SET, KEY, VALUE, seq=seq, epoch=EPOCH, ver=ver, flags=proto().f_redirect)
    out = with_kvs(routed(pkt, writer, redirect=writer != A), stamped)
    sp.send_expect(FAR_CLIENT.port, pkt, [(writer.port, out)])
    return out


def test_rotated_write_goes_to_one_holder_chosen_by_its_request_id(sp: SpinePlane) -> None:
    """R1: a fresh version, slot_ver follows, origin_ver does not; one packet, to ordinal
    crc32(cid, seq) mod 256 mod n, no UPDATE copies; a repeat of the id reaches the same holder."""
    sp.make_hot(KEY, SLOT, HOLDERS, rotate=True)
    sp.make_valid(SLOT, HOLDERS, ver=5)
    ver = 5
    for ordinal in (1, 2, 0, 2):
        seq = _seq_for(ordinal, start=ver * 10)
        for _attempt in range(2):  # the repeat: a new version, the same writer
            ver += 1
            _rotated_write(sp, HOLDERS[ordinal], ver, seq)
            assert sp.reg(names.REG_GLOBAL_VER) == ver
            assert sp.reg(names.REG_SLOT_VER, SLOT) == ver
    assert sp.reg(names.REG_ORIGIN_VER, SLOT) == 5
    assert sp.sw.counter_read(sp.counter(names.HOTKEY_WRITES), SLOT)[1] == 8
    # a write addressed to another holder than the origin is not the spine's: as rule 1
    pkt = udp_packet(FAR_CLIENT, C.ip, kvs(proto().op.SET, KEY, VALUE, seq=3))
    sp.send_expect(FAR_CLIENT.port, pkt, [(C.port, routed(pkt, C))])
    assert sp.reg(names.REG_GLOBAL_VER) == ver


def test_rotated_write_reply_from_any_holder_completes_and_gets_follow_it(sp: SpinePlane) -> None:
    """R2 and R4: the writer's reply raises origin_ver and its own cell and names it done_by;
    Gets then go to it alone (no round robin), the origin until then."""
    op, status = proto().op, proto().status
    sp.make_hot(KEY, SLOT, HOLDERS, rotate=True)
    sp.make_valid(SLOT, HOLDERS, ver=5)
    _gets_reach(sp, [A, A, A])  # done_by 0: the origin
    assert sp.reg(names.REG_RR, SLOT) == 0
    _rotated_write(sp, D, 6, _seq_for(2))
    _gets_reach(sp, [A, A], first_seq=10)  # in flight: nothing completed yet
    # a report from d's address off another leaf, or of another epoch: nothing
    sp.send_expect(A.port, _reply(D, op.SET_REPLY, 6), [])  # spoofed (rule S, F5)
    stale_epoch = _reply(D, op.SET_REPLY, 6, epoch=EPOCH + 1)
    sp.send_expect(D.port, stale_epoch, [(FAR_CLIENT.port, routed(stale_epoch, FAR_CLIENT))])
    assert sp.reg(names.REG_ORIGIN_VER, SLOT) == 5
    reply = _reply(D, op.SET_REPLY, 6)
    sp.send_expect(D.port, reply, [(FAR_CLIENT.port, routed(reply, FAR_CLIENT))])
    assert sp.reg(names.REG_ORIGIN_VER, SLOT) == 6
    assert sp.reg(names.REG_VALID_VER, BASE + 2) == 6
    assert sp.reg(REG_DONE_BY, SLOT) == 2
    _gets_reach(sp, [D, D, D], first_seq=20)
    # c's STALE reply of an older version raises nothing; c's newer write moves the reads to c
    stale = _reply(C, op.SET_REPLY, 4, status=status.STALE)
    sp.send_expect(C.port, stale, [(FAR_CLIENT.port, routed(stale, FAR_CLIENT))])
    assert sp.reg(REG_DONE_BY, SLOT) == 2
    _rotated_write(sp, C, 7, _seq_for(1))
    done = _reply(C, op.DEL_REPLY, 7)
    sp.send_expect(C.port, done, [(FAR_CLIENT.port, routed(done, FAR_CLIENT))])
    assert (sp.reg(names.REG_ORIGIN_VER, SLOT), sp.reg(REG_DONE_BY, SLOT)) == (7, 1)
    _gets_reach(sp, [C, C], first_seq=30)
    # the origin's reply completes too (it is a holder like the others): reads back at the origin
    _rotated_write(sp, A, 8, _seq_for(0))
    _passes(sp, A, _reply(A, op.SET_REPLY, 8))
    assert (sp.reg(names.REG_ORIGIN_VER, SLOT), sp.reg(REG_DONE_BY, SLOT)) == (8, 0)
    assert sp.reg(names.REG_VALID_VER, BASE + 0) == 8
    _gets_reach(sp, [A, A], first_seq=40)


def test_rotated_get_goes_to_the_origin_when_done_by_is_not_in_the_read_set(
    sp: SpinePlane,
) -> None:
    """R2's cell takes rule 3's test (a version after the holders last changed): a report of an
    older one raises origin_ver but not the cell, and R4 then sends Gets to the origin."""
    op = proto().op
    sp.make_hot(KEY, SLOT, HOLDERS, floor=6, rotate=True)
    sp.make_valid(SLOT, HOLDERS, ver=5)
    _rotated_write(sp, C, 6, _seq_for(1))
    _passes(sp, C, _reply(C, op.SET_REPLY, 6))
    assert sp.reg(names.REG_ORIGIN_VER, SLOT) == 6
    assert sp.reg(names.REG_VALID_VER, BASE + 1) == 5  # 6 <= floor
    _gets_reach(sp, [A, A])
    # c confirms a newer version (a push): in the read set again
    sp.sw.register_write(sp.register(names.REG_SLOT_VER), SLOT, 7)
    confirm = udp_packet(C, SWITCH_IP, kvs(op.CONFIRM, KEY, epoch=EPOCH, ver=7, cid=0))
    sp.send_expect(C.port, confirm, [])
    _gets_reach(sp, [C, C], first_seq=10)


def test_rotated_read_replies_pass_only_at_origin_ver_the_origins_too(sp: SpinePlane) -> None:
    """R6: every holder's read reply, the origin's included, passes only at exactly origin_ver in
    the current epoch, and none raises origin_ver (R2: no GET_REPLY reports)."""
    op, status = proto().op, proto().status
    sp.make_hot(KEY, SLOT, HOLDERS, rotate=True)
    sp.make_valid(SLOT, HOLDERS, ver=5)
    _gets_reach(sp, [A])  # a request records the key's flag for its replies
    for sender in (A, C):
        reply = _reply(sender, op.GET_REPLY, 5)
        sp.send_expect(sender.port, reply, [(FAR_CLIENT.port, routed(reply, FAR_CLIENT))])
    cases = ((A, 4, EPOCH), (A, 6, EPOCH), (A, 0, EPOCH), (A, 5, EPOCH + 1), (D, 6, EPOCH))
    for sender, ver, epoch in cases:
        sp.send_expect(sender.port, _reply(sender, op.GET_REPLY, ver, epoch=epoch), [])
    assert sp.reg(names.REG_ORIGIN_VER, SLOT) == 5
    moved = _reply(A, op.GET_REPLY, 0, status=status.MOVED)  # no read result: passes
    sp.send_expect(A.port, moved, [(FAR_CLIENT.port, routed(moved, FAR_CLIENT))])


def _sync(sp: SpinePlane, sender: Host, ver: int | None) -> None:
    """``sender``'s SYNC: reflected stamped ``ver``, or dropped (None)."""
    op, kport = proto().op, proto().kvs_port
    sync = udp_packet(sender, SWITCH_IP, kvs(op.SYNC, KEY, epoch=EPOCH, seq=3), sport=kport)
    if ver is None:
        sp.send_expect(sender.port, sync, [])
        return
    back = sync.copy()
    back["Ether"].src, back["Ether"].dst = sync["Ether"].dst, sync["Ether"].src
    back["IP"].src, back["IP"].dst = SWITCH_IP, sender.ip
    back["UDP"].sport, back["UDP"].dport = sync["UDP"].dport, sync["UDP"].sport
    synced = with_kvs(back, kvs(op.SYNC, KEY, epoch=EPOCH, ver=ver, seq=3))
    sp.send_expect(sender.port, sync, [(sender.port, synced)])


def test_rotated_sync_stamped_only_from_done_by_or_the_origin_at_make(sp: SpinePlane) -> None:
    """R5: while origin_ver is 0 (the key's make) only the origin's SYNC is stamped; after that
    only done_by's, the holder that holds the latest completed version."""
    op = proto().op
    sp.make_hot(KEY, SLOT, HOLDERS, rotate=True)
    _gets_reach(sp, [A])  # the key's first request records its flag
    _sync(sp, C, None)
    _sync(sp, A, 1)
    done = udp_packet(A, SWITCH_IP, kvs(op.SYNC_DONE, KEY, epoch=EPOCH, ver=1, cid=0))
    sp.send_expect(A.port, done, [])  # R2, consumed
    assert (sp.reg(names.REG_ORIGIN_VER, SLOT), sp.reg(names.REG_VALID_VER, BASE)) == (1, 1)
    _rotated_write(sp, C, 2, _seq_for(1))
    _passes(sp, C, _reply(C, op.SET_REPLY, 2))
    assert sp.reg(REG_DONE_BY, SLOT) == 1
    _sync(sp, A, None)  # the origin may hold an older value than version 2 now
    _sync(sp, D, None)
    _sync(sp, C, 3)
    assert (sp.reg(names.REG_GLOBAL_VER), sp.reg(names.REG_SLOT_VER, SLOT)) == (3, 3)


def test_a_reused_slot_judges_replies_by_its_new_keys_flag_before_any_request(
    sp: SpinePlane,
) -> None:
    """A rotated key's last request left 1 in its slot's ``rotated`` cell; the slot, reset, goes
    to a key that does not rotate, and its origin's read reply (of a Get sent before the key was
    hot) reaches the spine before the key's first request. The controller sets the cell with the
    new key's HotkeyTable entry (SpinePlane.set_flag), so rule 2 passes that reply (the origin's)
    and raises origin_ver; judged by the stale flag, R6 would drop it (not at origin_ver)."""
    op = proto().op
    sp.make_hot(KEY, SLOT, HOLDERS, rotate=True)
    sp.make_valid(SLOT, HOLDERS, ver=5)
    _gets_reach(sp, [A])
    assert sp.reg(REG_ROTATED, SLOT) == 1
    for name in (names.REG_SLOT_VER, names.REG_ORIGIN_VER, names.REG_RR, REG_DONE_BY):
        sp.sw.register_write(sp.register(name), SLOT, 0)  # the slot's reset
    other = int.from_bytes(key16("reused"), "big")
    sp.sw.table_add(
        names.HOTKEY_TABLE,
        {names.MATCH_KEY: other},
        names.ACT_SET_HOT,
        {names.PARAM_SLOT: SLOT, names.PARAM_HOLDERS: len(HOLDERS), PARAM_ROTATE: 0},
    )
    sp.sw.table_add(
        names.KEYINDEX_TABLE,
        {names.MATCH_KEY: other},
        names.ACT_SET_BASE,
        {names.PARAM_SLOT: SLOT, names.PARAM_BASE: BASE, names.PARAM_FLOOR: 0},
    )
    sp.set_flag(SLOT, False)
    msg = kvs(op.GET_REPLY, "reused", epoch=EPOCH, ver=4, seq=9)
    reply = udp_packet(A, FAR_CLIENT.ip, msg, sport=proto().kvs_port)
    _passes(sp, A, reply)
    assert sp.reg(names.REG_ORIGIN_VER, SLOT) == 4


def test_keys_served_from_rows_at_any_base_of_the_pool(sp: SpinePlane) -> None:
    """The build's valid_ver is a pool of HOLDER_CELLS cells, fewer than K rows of MAX_HOLDERS:
    slots 60 and 61 have no row at slot x MAX_HOLDERS; the controller gives each key a row of
    the pool (here the last cells, and the first) and the spine reads and confirms at that
    row's base + ordinal only."""
    op = proto().op
    far, near = "pooled-far", "pooled-near"
    assert 60 * MAX_HOLDERS >= HOLDER_CELLS
    sp.make_hot(far, 60, HOLDERS, base=HOLDER_CELLS - 4)
    sp.make_hot(near, 61, [B, E], base=0)
    sp.make_valid(60, [A, C], ver=5)
    sp.make_valid(61, [B, E], ver=7)
    before = sp.snapshot()
    assert sum(len(cells) for r, cells in before.items() if "valid_ver" in r) == HOLDER_CELLS
    confirm = udp_packet(D, SWITCH_IP, kvs(op.CONFIRM, far, epoch=EPOCH, ver=5, cid=0))
    sp.send_expect(D.port, confirm, [])
    assert [sp.reg(names.REG_VALID_VER, HOLDER_CELLS - 4 + o) for o in range(4)] == [5, 5, 5, 0]
    after = sp.snapshot()
    changed = {(r, i) for r in before for i, v in enumerate(before[r]) if after[r][i] != v}
    assert changed == {sp.valid_ver_cell(HOLDER_CELLS - 4 + 2)}  # d's cell, nothing else
    for key, holders in ((far, HOLDERS), (near, [B, E])):
        for i, holder in enumerate(holders):
            get = udp_packet(FAR_CLIENT, holders[0].ip, kvs(op.GET, key, seq=i))
            want = routed(get, holder, redirect=holder != holders[0])
            sp.send_expect(FAR_CLIENT.port, get, [(holder.port, want)])
    assert [sp.reg(names.REG_VALID_VER, o) for o in range(3)] == [7, 7, 0]
