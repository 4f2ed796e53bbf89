"""The switch's coherence rules (docs/protocol.md "Consistency", rules 1-6), once, over register
arrays, in plain Python.

These functions are the rules of p4src/features/replicas.p4 written over numpy arrays, lists or
any indexable of ints. Everything that needs a rule calls these: the controller's runtime
(:mod:`kvswitch.controller.repair`, rule 4), the host tests' model switch
(tests/server_agent/model_switch.py), the exhaustive explorer (:mod:`kvswitch.consistency.explore`),
and the simulator, whose numba kernel compiles them (:mod:`kvswitch.bench.coherence`). A test
runs p4src/ and these functions side by side (tests/bench/test_differential.py). This module
imports nothing (no numba: the controller loads it).

Registers: ``gver[0]`` (global_ver), ``slot_ver[slot]``, ``origin_ver[slot]``, ``valid_ver[cell]``
with ``cell = base + offset(server)``. ``current``: the message's epoch is the switch's. Each
function reads and writes each register once, as the P4 program does (one stateful-ALU access per
register per packet on Tofino). ``global_ver += 1`` (rules 1 and 5) is written out in both rules:
numba compiles each function on its own, so one rule cannot call another plain function.
"""

from __future__ import annotations


def write(slot, gver, slot_ver, origin_ver) -> tuple[int, bool]:
    """Rule 1: a Set/Delete of a hot key takes a fresh version (global_ver += 1); slot_ver
    follows it. The packet goes to the origin and, as UPDATE copies, to every replica. Returns the
    version and whether the write is *settled* (flag ``F_SETTLED``): no earlier write of the key
    was on its way to the origin when it was stamped (the old slot_ver <= origin_ver, the test of
    rule 5), so no other write's version lies between the origin's last reported version and this
    one. Only a settled repeat of a request id may move the first application's value to the
    repeat's version (docs/protocol.md "Agent rules")."""
    g = gver[0] + 1
    gver[0] = g
    settled = slot_ver[slot] <= origin_ver[slot]
    slot_ver[slot] = g
    return g, settled


def origin_report(slot, current, ver, origin_ver) -> None:
    """Rule 2: the origin says it holds the key at ``ver`` (an OK write reply, SYNC_DONE or any
    read reply): origin_ver = max(origin_ver, ver), in the current epoch only."""
    if current and ver > origin_ver[slot]:
        origin_ver[slot] = ver


def confirm(slot, cell, current, ver, floor, slot_ver, valid_ver) -> None:
    """Rule 3: a replica's CONFIRM of ``ver`` (from its own port and address):
    valid_ver = max(valid_ver, ver), only for a version this switch handed out in the current
    epoch (``ver <= slot_ver``) after the key's holders last changed (``ver > floor``)."""
    if current and floor < ver <= slot_ver[slot] and ver > valid_ver[cell]:
        valid_ver[cell] = ver


def in_read_set(slot, cell, origin_ver, valid_ver) -> bool:
    """Rule 4: a Get whose round-robin turn falls on a replica goes there only if the replica
    confirmed the latest completed version (origin_ver) or a newer one; else to the origin."""
    ov = origin_ver[slot]
    return ov != 0 and valid_ver[cell] >= ov


def sync(slot, gver, slot_ver, origin_ver) -> int:
    """Rule 5: the origin's SYNC takes a fresh version (global_ver += 1) and stamps it only when
    no write is on its way to the origin (slot_ver <= origin_ver); returns the stamped version, 0
    when reflected unstamped."""
    g = gver[0] + 1
    gver[0] = g
    if slot_ver[slot] <= origin_ver[slot]:
        slot_ver[slot] = g
        return g
    return 0


def replica_reply_passes(slot, current, ver, origin_ver) -> bool:
    """Rule 6: a replica's read reply reaches the client only with exactly the version the
    origin last reported (current epoch, 0 < ver == origin_ver): the latest completed version,
    whose value every holder of that version shares. An older version may be one the origin
    never held (a repeat's copy, docs/protocol.md "Agent rules"), a newer one is of a write the
    origin has not reported yet; the switch drops both."""
    return current and ver != 0 and ver == origin_ver[slot]


# -- the write rotation of a fabric-hot key (docs/protocol.md "F7 — write rotation") -------------


def rotated_write(slot, gver, slot_ver, cid, seq, n) -> tuple[int, int]:
    """Rule 1 for a rotated key: a Set/Delete takes a fresh version (global_ver += 1, slot_ver
    follows it) and goes to **one** holder, its *writer*, and to no other: ordinal
    ``(crc32(cid, seq) mod 256) mod n`` over the key's ``n`` holders (the origin is ordinal 0).
    A function of the request id, so that a repeat reaches the holder that applied the first
    attempt and remembers its id (a repeat sent to another holder would be applied twice, around
    a second writer's write). Never flagged ``F_SETTLED``: no writer adopts a repeat's version
    (the writer may not hold the latest completed version, so the adoption's argument does not
    hold). Returns (version, writer ordinal).

    The hash is the spine's (p4src/features/replicas*.p4, docs/protocol.md F7): CRC-32 (zlib's,
    v1model's ``crc32``) of ``cid`` and ``seq`` as two big-endian 32-bit words, its low 8 bits, then
    mod n (v1model ``hash(..., max = n)``; TNA, which has no modulo, a constant table on (n, those
    8 bits)). Written out bit by bit: numba compiles this function, zlib is not available there."""
    g = gver[0] + 1
    gver[0] = g
    slot_ver[slot] = g
    c = 0xFFFFFFFF
    for i in range(8):
        word = cid if i < 4 else seq
        c ^= (word >> (8 * (3 - i % 4))) & 0xFF
        for _ in range(8):
            c = (c >> 1) ^ (0xEDB88320 if c & 1 else 0)
    return g, ((c ^ 0xFFFFFFFF) & 0xFF) % n


def holder_report(slot, cell, current, ver, floor, slot_ver, origin_ver, valid_ver) -> bool:
    """Rule 2 for a rotated key: a write reply (OK or STALE: the version the holder now holds) or
    a SYNC_DONE from one of the key's holders, the origin or any other (its address and port named
    by ServeroffsetTable), in the current epoch. The latest completed version rises,
    origin_ver = max(origin_ver, ver), and the holder's own cell records what it holds, as a
    CONFIRM would (rule 3's test: floor < ver <= slot_ver). Returns whether this report raised
    origin_ver: the switch then keeps the holder's ordinal (``done_by``), a holder that holds the
    latest completed version, where a Get goes if its cell is in the read set (R4) and the only
    holder whose SYNC is stamped (R5). (Not "and its cell holds it": the spine writes done_by
    before it reaches valid_ver, as one pass through Tofino's stages must; R4 tests the cell.)"""
    if not current:
        return False
    raised = ver > origin_ver[slot]
    if raised:
        origin_ver[slot] = ver
    if floor < ver <= slot_ver[slot] and ver > valid_ver[cell]:
        valid_ver[cell] = ver
    return raised
