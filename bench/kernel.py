"""The compiled inner loop of the pipeline model: one query at a time, exact register semantics.

Everything here works on flat numpy arrays prepared by :mod:`kvswitch.bench.model`; nothing
allocates per query. Semantics (docs/protocol.md "Consistency" rules 1-4 and "HashPipe hashing"):

- a query of a key that misses the hot-key table enters HashPipe and goes to its origin;
- a Get of a hot key takes ordinal ``rr[slot]`` (wrapping at the holder count: :func:`rr_turn`) and is redirected to
  that holder only when its ServermapTable entry exists and it is in the read set (rule 4,
  :func:`coherence.in_read_set`); otherwise it goes to the origin;
- a Set of a hot key takes a fresh version (rule 1, :func:`coherence.write`), goes to the origin and
  to every replica member (rid != 0) of the key's multicast group, and is counted per slot
  (``hotkey_writes``); the origin's reply and the replicas' confirms come back ``lag`` queries
  later and apply rules 2 and 3 (:func:`coherence.origin_report`, :func:`coherence.confirm`; a
  confirm lands on ``valid_ver[base + offset(sender)]`` with the slot's ``floor``). Replies and
  confirms of a write land at the same time, the origin's first, and a Get is answered as it is
  routed, so a replica's read reply carries exactly the version the origin last reported and
  rule 6 drops nothing here (a reply racing a newer write's report is not modelled);
- every packet that reaches a server counts one in that server's load counter.

Keys are integer ids; the 16-byte key is ``id.to_bytes(16, "big")`` (ids < 2**32), so the CRC of a
HashPipe stage starts from a per-stage state after the seed and the 12 leading zero bytes, and ends
with the stage's 4 s zero bytes (``hp_index``).

HashPipe's later stages compare key ids where the data plane compares 32-bit key tags (a carried
key merges into a slot whose occupant has its tag: docs/protocol.md "HashPipe hashing"). For the
model's keys that is the same rule, not an approximation: the tag is affine in the key's bits and
one-to-one on the ids below 2**31 (``model.MAX_KEY_ID``), so two of them never share a tag
(tests/bench/test_model.py checks the map's rank). Keys from elsewhere would part from the data
plane only on a tag collision, with probability 2**-31 per comparison.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from kvswitch.bench import coherence

CRC_POLY = 0xEDB88320
HP_SEED = 0x9E3779B9
EMPTY = -1
TO_UNIT = 1.0 / 9007199254740992.0  # 2**-53: 53 random bits -> [0, 1)


def crc_table() -> np.ndarray:
    table = np.zeros(256, dtype=np.int64)
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ CRC_POLY if c & 1 else c >> 1
        table[n] = c
    return table


def stage_seed(stage: int) -> int:
    return (HP_SEED * (stage + 1)) & 0xFFFFFFFF


def hashpipe_width(slots: int, stages: int) -> int:
    """Slots per HashPipe stage for K = ``slots`` and d = ``stages``: the smallest power of two
    >= K / d, as p4src's ``HP_SLOTS`` (shared/sizes.p4): d * w >= K, and a power of two because
    Tofino takes the index as the hash's low bits (the stages' zero words keep them independent)."""
    return 1 << (max(1, -(-slots // stages)) - 1).bit_length()


def stage_prefixes(stages: int) -> np.ndarray:
    """CRC state after ``seed_s`` (4 bytes, big-endian) and the 12 zero bytes of every key16."""
    table = crc_table()
    out = np.zeros(stages, dtype=np.int64)
    for s in range(stages):
        c = 0xFFFFFFFF
        for byte in stage_seed(s).to_bytes(4, "big") + bytes(12):
            c = int(table[(c ^ byte) & 0xFF]) ^ (c >> 8)
        out[s] = c
    return out


@njit(cache=True)
def hp_index(prefix: int, table: np.ndarray, kid: int, width: int, stage: int) -> int:
    """crc32({seed_s, key16, 4 s zero bytes}) mod w (docs/protocol.md "HashPipe hashing")."""
    c = prefix
    for shift in (24, 16, 8, 0):
        c = table[(c ^ (kid >> shift)) & 0xFF] ^ (c >> 8)
    for _ in range(4 * stage):
        c = table[c & 0xFF] ^ (c >> 8)
    return ((~c) & 0xFFFFFFFF) % width


@njit(cache=True)
def rr_turn(t: int, turns: int) -> tuple[int, int]:
    """The round-robin turn of p4src's ``rr`` (features/replicas.p4): the turn taken from the
    register's ``t`` and the value written back, over ``turns`` holders. A ``t`` beyond the last
    turn (the holder count shrank) counts as turn 0 and restarts the rotation: the data plane's
    stateful ALU makes only the two comparisons of ``t`` with ``turns - 1``."""
    last = turns - 1 if turns > 0 else 0
    return (0 if t > last else t), (t + 1 if t < last else 0)


@njit(cache=True, inline="always")
def hashpipe_insert(kid, hp_key, hp_cnt, prefixes, table):
    stages, width = hp_cnt.shape
    i = hp_index(prefixes[0], table, kid, width, 0)
    if hp_cnt[0, i] == 0:
        hp_key[0, i] = kid
        hp_cnt[0, i] = 1
        return
    if hp_key[0, i] == kid:
        hp_cnt[0, i] += 1
        return
    ck = hp_key[0, i]
    cc = hp_cnt[0, i]
    hp_key[0, i] = kid
    hp_cnt[0, i] = 1
    for s in range(1, stages):
        i = hp_index(prefixes[s], table, ck, width, s)
        if hp_cnt[s, i] == 0:
            hp_key[s, i] = ck
            hp_cnt[s, i] = cc
            return
        if hp_key[s, i] == ck:
            hp_cnt[s, i] += cc
            return
        if hp_cnt[s, i] < cc:
            tk = hp_key[s, i]
            tc = hp_cnt[s, i]
            hp_key[s, i] = ck
            hp_cnt[s, i] = cc
            ck = tk
            cc = tc


@njit(cache=True, inline="always")
def hot_lookup(ht_keys, ht_vals, kid):
    mask = ht_keys.shape[0] - 1
    h = ((kid ^ (kid >> 16)) * 0x45D9F3B) & mask
    while True:
        k = ht_keys[h]
        if k == kid:
            return ht_vals[h]
        if k == EMPTY:
            return -1
        h = (h + 1) & mask


@njit(cache=True)
def deliver(slot, server, ver, slot_ver, origin_ver, valid_ver, base, floor, off, done_by):
    """The origin's reply (``server`` -1, rule 2), a replica's confirm (``server`` >= 0: its cell
    offset, rule 3), or a rotated key's holder report (``server`` <= -2: holder ``-server - 2``'s
    write reply, rule 2 of the write rotation, which may make it the key's ``done_by``)."""
    if server == -1:
        coherence.origin_report(slot, True, ver, origin_ver)
    elif server <= -2:
        s = -server - 2
        if base[slot] >= 0 and off[s] >= 0:
            cell = base[slot] + off[s]
            if coherence.holder_report(
                slot, cell, True, ver, floor[slot], slot_ver, origin_ver, valid_ver
            ):
                done_by[slot] = s
        else:
            coherence.origin_report(slot, True, ver, origin_ver)
    elif base[slot] >= 0:
        cell = base[slot] + server
        coherence.confirm(slot, cell, True, ver, floor[slot], slot_ver, valid_ver)


@njit(cache=True)
def _drain(now, q, qpos, slot_ver, origin_ver, valid_ver, base, floor, off, done_by):
    # q: [capacity, 4] rows of (due, slot, server or -1 for the origin's reply, version)
    cap = q.shape[0]
    head = qpos[0]
    tail = qpos[1]
    while head < tail and q[head % cap, 0] <= now:
        row = head % cap
        deliver(q[row, 1], q[row, 2], q[row, 3], slot_ver, origin_ver, valid_ver, base, floor, off,
                done_by)  # fmt: skip
        head += 1
    qpos[0] = head


@njit(cache=True)
def _enqueue(due, slot, server, ver, q, qpos, slot_ver, origin_ver, valid_ver, base, floor, off,
             done_by):  # fmt: skip
    cap = q.shape[0]
    if qpos[1] - qpos[0] >= cap:  # full: deliver the oldest now
        _drain(q[qpos[0] % cap, 0], q, qpos, slot_ver, origin_ver, valid_ver, base, floor, off,
               done_by)  # fmt: skip
    row = qpos[1] % cap
    q[row, 0] = due
    q[row, 1] = slot
    q[row, 2] = server
    q[row, 3] = ver
    qpos[1] += 1


@njit(cache=True)
def _hot_write(slot, o, due, mg_of_slot, mg_members, mg_size, off, slot_ver, origin_ver,
               valid_ver, base, floor, gver, load, q, qpos, done_by):  # fmt: skip
    """Rule 1: stamp a fresh version, send to the origin and the multicast group; the replies
    and confirms are queued for ``due``."""
    g, _ = coherence.write(slot, gver, slot_ver, origin_ver)
    load[o] += 1
    _enqueue(due, slot, -1, g, q, qpos, slot_ver, origin_ver, valid_ver, base, floor, off, done_by)
    grp = mg_of_slot[slot]
    if grp > 0:
        for j in range(mg_size[grp]):
            s = mg_members[grp, j]
            load[s] += 1
            if off[s] >= 0:
                _enqueue(due, slot, off[s], g, q, qpos, slot_ver, origin_ver, valid_ver, base,
                         floor, off, done_by)  # fmt: skip


@njit(cache=True)
def _rotated_write(slot, kid, now, o, due, nhold, smap, off, slot_ver, origin_ver, valid_ver,
                   base, floor, gver, load, q, qpos, done_by):  # fmt: skip
    """Rule 1 of the write rotation: a fresh version, the write to one holder (its writer, a
    hash of the request id: here the key and the query's number), no copies; the writer's
    reply is queued for ``due``."""
    g, j = coherence.rotated_write(slot, gver, slot_ver, kid, now, nhold[slot])
    s = o
    if j > 0 and smap[slot, j] >= 0:
        s = smap[slot, j]
    load[s] += 1
    _enqueue(due, slot, -2 - s, g, q, qpos, slot_ver, origin_ver, valid_ver, base, floor, off,
             done_by)  # fmt: skip


@njit(cache=True)
def process(kids, origins, writes, count, start, lag, ht_keys, ht_vals, nhold, smap, vidx, base,
            floor, off, mg_of_slot, mg_members, mg_size, rr, slot_ver, origin_ver, valid_ver,
            gver, hot_cnt, hot_wr, hp_key, hp_cnt, prefixes, table, load, q, qpos, rot,
            done_by):  # fmt: skip
    """Queries ``0 .. count-1`` of the arrays: key id, origin, Set or not. The cold path is written
    out in the loop and the hot path is a call: a small loop body runs about twice as fast."""
    for i in range(count):
        kid = kids[i]
        o = origins[i]
        now = start + i
        if qpos[1] > qpos[0]:
            _drain(now, q, qpos, slot_ver, origin_ver, valid_ver, base, floor, off, done_by)
        slot = hot_lookup(ht_keys, ht_vals, kid)
        if slot < 0:
            hashpipe_insert(kid, hp_key, hp_cnt, prefixes, table)
            load[o] += 1
            continue
        hot_cnt[slot] += 1
        if rot[slot]:  # the write rotation (docs/protocol.md F7)
            if writes[i]:
                hot_wr[slot] += 1
                _rotated_write(slot, kid, now, o, now + lag, nhold, smap, off, slot_ver,
                               origin_ver, valid_ver, base, floor, gver, load, q, qpos,
                               done_by)  # fmt: skip
                continue
            # a Get: to the holder whose report made the latest completed version, if it is in
            # the read set, else to the origin (rule 6 judges whoever answers)
            d = done_by[slot]
            dst = o
            if (
                d >= 0
                and base[slot] >= 0
                and off[d] >= 0
                and coherence.in_read_set(slot, base[slot] + off[d], origin_ver, valid_ver)
            ):
                dst = d
            load[dst] += 1
            continue
        if writes[i]:
            hot_wr[slot] += 1
            _hot_write(slot, o, now + lag, mg_of_slot, mg_members, mg_size, off, slot_ver,
                       origin_ver, valid_ver, base, floor, gver, load, q, qpos,
                       done_by)  # fmt: skip
            continue
        n = nhold[slot]
        ordv, rr[slot] = rr_turn(rr[slot], n)
        dst = o
        if ordv > 0:
            s = smap[slot, ordv]
            if s >= 0 and coherence.in_read_set(slot, vidx[slot, ordv], origin_ver, valid_ver):
                dst = s
        load[dst] += 1


@njit(cache=True, inline="always")
def _draw(x, b, write_ratio, alias, head, p_head, rank_info, counts, kids, origins, writes):
    """Draw ``b`` queries into ``kids``/``origins``/``writes`` (see :func:`run_sampled`) with the
    xorshift64* state ``x``; returns the new state."""
    tail = alias.shape[0] - head
    for j in range(b):
        x ^= x >> np.uint64(12)
        x ^= x << np.uint64(25)
        x ^= x >> np.uint64(27)
        u = ((x * np.uint64(0x2545F4914F6CDD1D)) >> np.uint64(11)) * TO_UNIT
        if u < p_head:
            first, size = 0, head
            u = u / p_head * size
        else:
            first, size = head, tail
            u = (u - p_head) / (1.0 - p_head) * size
        r = int(u)
        if r >= size:
            r = size - 1
        a = alias[first + r]
        if int((u - r) * 4294967296.0) >= (a >> 31):
            r = a & 0x7FFFFFFF
        else:
            r += first
        counts[r] += 1
        info = rank_info[r]
        kids[j] = info & 0xFFFFFFFF
        origins[j] = info >> 32
    if write_ratio > 0.0:
        for j in range(b):
            x ^= x >> np.uint64(12)
            x ^= x << np.uint64(25)
            x ^= x >> np.uint64(27)
            writes[j] = (
                (x * np.uint64(0x2545F4914F6CDD1D)) >> np.uint64(11)
            ) * TO_UNIT < write_ratio
    return x


@njit(cache=True)
def run_sampled(n, seed, start, write_ratio, alias, head, p_head, rank_info, counts, lag,
                ht_keys, ht_vals, nhold, smap, vidx, base, floor, off, mg_of_slot, mg_members,
                mg_size, rr, slot_ver, origin_ver, valid_ver, gver, hot_cnt, hot_wr, hp_key,
                hp_cnt, prefixes, table, load, q, qpos, rot, done_by):  # fmt: skip
    """Draw ``n`` queries and process them. ``alias`` packs two Walker alias tables (bits 31..63:
    the acceptance threshold scaled by 2**32, bits 0..30: the alias rank, absolute): ranks
    ``0 .. head-1`` (drawn with probability ``p_head``; small enough to stay in cache) and the rest.
    ``rank_info[r]`` packs
    the key id of rank r (bits 0..31) and its origin (bits 32..); ``counts[r]`` counts the queries
    of rank r (the ground truth).

    Random numbers come from xorshift64* seeded by ``seed``. Queries are drawn in batches: the
    table look-ups of a batch are independent of each other, so the processor overlaps their cache
    misses; the pipeline then runs over the batch in order."""
    x = np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15) | np.uint64(1)
    batch = 512
    kids = np.empty(batch, np.int64)
    origins = np.empty(batch, np.int64)
    writes = np.zeros(batch, np.bool_)
    done = 0
    while done < n:
        b = min(batch, n - done)
        x = _draw(x, b, write_ratio, alias, head, p_head, rank_info, counts, kids, origins, writes)
        process(kids, origins, writes, b, start + done, lag, ht_keys, ht_vals, nhold, smap, vidx,
                base, floor, off, mg_of_slot, mg_members, mg_size, rr, slot_ver, origin_ver,
                valid_ver, gver, hot_cnt, hot_wr, hp_key, hp_cnt, prefixes, table, load, q,
                qpos, rot, done_by)  # fmt: skip
        done += b


@njit(cache=True)
def sample(seed, write_ratio, alias, head, p_head, rank_info, counts, kids, origins, writes):
    """Draw ``kids.size`` queries into the arrays without processing them (the fabric simulator
    routes them to several switch models); the same draws as :func:`run_sampled`'s."""
    x = np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15) | np.uint64(1)
    _draw(x, kids.size, write_ratio, alias, head, p_head, rank_info, counts, kids, origins, writes)


@njit(cache=True)
def group(ids, groups, order, starts):
    """Counting sort: ``order`` lists the positions of ``ids`` (each in 0 .. groups-1) group by
    group, each group's in their original order; group g is ``order[starts[g]:starts[g + 1]]``."""
    starts[:] = 0
    for i in range(ids.size):
        starts[ids[i] + 1] += 1
    for g in range(groups):
        starts[g + 1] += starts[g]
    fill = starts[:groups].copy()
    for i in range(ids.size):
        g = ids[i]
        order[fill[g]] = i
        fill[g] += 1


def pack_alias(prob: np.ndarray, alias: np.ndarray) -> np.ndarray:
    thr = np.minimum(np.round(prob * 4294967296.0), 4294967296.0).astype(np.int64)
    return (thr << 31) | alias.astype(np.int64)


@njit(cache=True)
def alias_table(weights):
    """Walker/Vose alias table of ``weights`` (not necessarily normalised)."""
    n = weights.shape[0]
    total = weights.sum()
    scaled = weights * (n / total)
    prob = np.ones(n, dtype=np.float64)
    alias = np.arange(n).astype(np.int64)
    small = np.empty(n, dtype=np.int64)
    large = np.empty(n, dtype=np.int64)
    ns = 0
    nl = 0
    for i in range(n):
        if scaled[i] < 1.0:
            small[ns] = i
            ns += 1
        else:
            large[nl] = i
            nl += 1
    while ns > 0 and nl > 0:
        ns -= 1
        s = small[ns]
        nl -= 1
        g = large[nl]
        prob[s] = scaled[s]
        alias[s] = g
        scaled[g] = (scaled[g] + scaled[s]) - 1.0
        if scaled[g] < 1.0:
            small[ns] = g
            ns += 1
        else:
            large[nl] = g
            nl += 1
    return prob, alias
