"""An in-memory model of the KVSwitch pipeline behind the controller's driver interface.

Tables hold entries the way the switch does (exact match, with the action parameters of
docs/dataplane.md); registers and counters are numpy arrays. Queries run either through the
compiled kernel (:mod:`kvswitch.bench.kernel`, fast) or through :class:`ReferencePipeline`, the
same rules (:mod:`kvswitch.bench.coherence`) driven by a plain-Python loop that the tests compare
the kernel's loop against. The model also plays the agents' side of pushes (SYNC, SYNC_DONE, the
controller's push into each replica, CONFIRM, all delivered at once) and keeps which servers store
a replica copy of each key.

Keys are the simulator's integer ids (``key16(id)`` on the wire, ids < 2**31).
"""

from __future__ import annotations

import zlib
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from kvswitch.bench import coherence, kernel
from kvswitch.bench.workload import Workload
from kvswitch.controller import names
from kvswitch.controller.driver import Driver
from kvswitch.controller.hashring import key16, key_id
from kvswitch.controller.ops import (
    EntryOp,
    MulticastGroupDelete,
    MulticastGroupSet,
    Operation,
    PushRequest,
    RegisterWrite,
    RemoveRequest,
    TableEntry,
)
from kvswitch.controller.rack import Rack

MAX_KEY_ID = (1 << 31) - 1


def hp_index_ref(stage: int, key: bytes, width: int) -> int:
    """docs/protocol.md: crc32({seed_s, key16, 4 s zero bytes}) mod w, seed_s = 0x9E3779B9 * (s + 1)
    mod 2^32."""
    return zlib.crc32(kernel.stage_seed(stage).to_bytes(4, "big") + key + bytes(4 * stage)) % width


@dataclass
class Tables:
    """The table entries, by match key, with their action parameters."""

    hot: dict[int, tuple[int, int]] = field(default_factory=dict)  # key -> (slot, n)
    keyindex: dict[int, tuple[int, int, int]] = field(default_factory=dict)  # (slot, base, floor)
    servermap: dict[tuple[int, int], tuple[int, int]] = field(default_factory=dict)
    # (slot, ordinal) -> (vidx, server), the server resolved from the entry's IPv4 address
    serveroffset: dict[int, int] = field(default_factory=dict)  # server -> offset
    multigroup: dict[int, int] = field(default_factory=dict)  # key -> group
    groups: dict[int, tuple[tuple[int, int], ...]] = field(default_factory=dict)  # (port, rid)
    porttoserver: dict[int, int] = field(default_factory=dict)  # egress port -> server
    loadcount: dict[int, bool] = field(default_factory=dict)  # servers counted
    # liveness.p4: held, not modelled (the simulator's servers never die)
    replycount: dict[int, bool] = field(default_factory=dict)
    down: dict[int, bool] = field(default_factory=dict)


class Model(Driver):
    def __init__(
        self, rack: Rack, slots: int, stages: int, origin: np.ndarray, lag: int = 0
    ) -> None:
        servers = len(rack)
        if servers <= 0 or slots <= 0 or stages <= 0:
            raise ValueError("need servers, slots and stages > 0")
        if lag < 0:
            raise ValueError("lag must be >= 0")
        self.rack = rack
        self._ip = rack.server_of_ip()
        self._port = rack.server_of_port()
        self._servers = servers
        self._slots = slots
        self.stages = stages
        self.width = kernel.hashpipe_width(slots, stages)
        self.origin = np.ascontiguousarray(origin)
        self.lag = lag
        self.tables = Tables()
        self.rr = np.zeros(slots, np.int32)
        self.slot_ver = np.zeros(slots, np.int32)
        self.origin_ver = np.zeros(slots, np.int32)
        self.valid_ver = np.zeros(slots * servers, np.int32)
        self.gver = np.zeros(1, np.int64)
        self.epoch = np.zeros(1, np.int64)
        self.hot_cnt = np.zeros(slots, np.int64)
        self.hot_wr = np.zeros(slots, np.int64)
        self.hp_key = np.zeros((stages, self.width), np.int64)
        self.hp_cnt = np.zeros((stages, self.width), np.int32)
        self.load = np.zeros(servers, np.int64)
        self.prefixes = kernel.stage_prefixes(stages)
        self.table = kernel.crc_table()
        self.queue = np.zeros((1 << 16, 4), np.int64)
        self.qpos = np.zeros(2, np.int64)
        self.now = 0
        # the write rotation (docs/protocol.md F7), per slot: whether the slot's key rotates its
        # writes (set by the fabric controller's plan, :meth:`set_rotated`), and ``done_by``, the
        # server whose report made the latest completed version (-1: none yet)
        self.rot = np.zeros(slots, np.bool_)
        self.done_by = np.full(slots, -1, np.int32)
        self.stored: dict[int, set[int]] = {}  # key id -> servers holding a replica copy
        self.slot_owner: dict[int, int] = {}  # slot -> key id of its KeyindexTable entry
        self._compiled: tuple | None = None

    # -- Driver ---------------------------------------------------------------------------------
    @property
    def servers(self) -> int:
        return self._servers

    @property
    def slots(self) -> int:
        return self._slots

    def read_hot_counters(self) -> dict[bytes, int]:
        return {key16(k): int(self.hot_cnt[slot]) for k, (slot, _) in self.tables.hot.items()}

    def read_hot_writes(self) -> list[int]:
        return [int(x) for x in self.hot_wr]

    def read_version(self) -> int:
        return int(self.gver[0])

    def read_hashpipe(self) -> list[tuple[bytes, int]]:
        full = np.nonzero(self.hp_cnt)
        return [
            (key16(int(k)), int(c))
            for k, c in zip(self.hp_key[full].tolist(), self.hp_cnt[full].tolist(), strict=True)
        ]

    def read_load_counters(self) -> list[int]:
        return [int(x) if s in self.tables.loadcount else 0 for s, x in enumerate(self.load)]

    def reset_counters(self) -> None:
        self.hot_cnt[:] = 0
        self.hot_wr[:] = 0
        self.hp_key[:] = 0
        self.hp_cnt[:] = 0
        self.load[:] = 0

    def apply(self, ops: Sequence[Operation]) -> None:
        try:
            for op in ops:
                if not isinstance(op, PushRequest | RemoveRequest | RegisterWrite):
                    self._compiled = None  # a push in the batch reads the tables as they are now
                self._apply_one(op)
        finally:
            self._compiled = None

    # -- operations -----------------------------------------------------------------------------
    def _server_of(self, params: dict[str, int], what: str = names.PARAM_IP) -> int:
        table = self._ip if what == names.PARAM_IP else self._port
        if params.get(what) not in table:
            raise ValueError(f"{what} {params.get(what)} is no server of the rack")
        return table[params[what]]

    def _apply_one(self, op: Operation) -> None:
        t = self.tables
        if isinstance(op, TableEntry):
            self._entry(op)
        elif isinstance(op, MulticastGroupSet):
            if any(port not in self._port for port, _ in op.members):
                raise ValueError(f"multicast group {op.group}: a port is no server's")
            t.groups[op.group] = tuple(op.members)
        elif isinstance(op, MulticastGroupDelete):
            if t.groups.pop(op.group, None) is None:
                raise ValueError(f"multicast group {op.group} does not exist")
        elif isinstance(op, RegisterWrite):
            reg = self._register(op.name)
            if op.index < 0 or op.index + op.count > reg.size:
                raise ValueError(f"register {op.name}: index {op.index}+{op.count} out of range")
            reg[op.index : op.index + op.count] = op.value
        elif isinstance(op, PushRequest):
            self.push(key_id(op.key), op.replicas)
        elif isinstance(op, RemoveRequest):
            self.stored.get(key_id(op.key), set()).difference_update(op.servers)
        else:  # pragma: no cover - the union is closed
            raise TypeError(f"unknown operation {op!r}")

    def _entry(self, op: TableEntry) -> None:
        t = self.tables
        match = op.match_dict()
        p = op.param_dict()
        deleting = op.op is EntryOp.DELETE
        value: object = None
        if op.table == names.HOTKEY_TABLE:
            table, key = t.hot, _kid(match[names.MATCH_KEY])
            if not deleting:
                value = (p[names.PARAM_SLOT], p[names.PARAM_HOLDERS])
        elif op.table == names.KEYINDEX_TABLE:
            table, key = t.keyindex, _kid(match[names.MATCH_KEY])
            if not deleting:
                value = (p[names.PARAM_SLOT], p[names.PARAM_BASE], p.get(names.PARAM_FLOOR, 0))
        elif op.table == names.SERVERMAP_TABLE:
            table, key = t.servermap, (match[names.MATCH_SLOT], match[names.MATCH_ORDINAL])
            if not deleting:
                value = (p[names.PARAM_VIDX], self._server_of(p))
        elif op.table == names.MULTIGROUP_TABLE:
            table, key = t.multigroup, _kid(match[names.MATCH_KEY])
            if not deleting:
                value = p[names.PARAM_GROUP]
        elif op.table == names.SERVEROFFSET_TABLE:
            table, key = (
                t.serveroffset,
                self._server_of({names.PARAM_IP: match[names.MATCH_SERVER_IP]}),
            )
            if not deleting:
                value = p[names.PARAM_OFFSET]
        elif op.table == names.PORTTOSERVER_TABLE:
            table, key = t.porttoserver, int(match[names.MATCH_PORT])
            if not deleting:
                value = self._server_of(p)
        elif op.table in (names.LOADCOUNT_TABLE, names.DOWN_TABLE):
            table = t.loadcount if op.table == names.LOADCOUNT_TABLE else t.down
            key = self._server_of({names.PARAM_IP: match[names.MATCH_DST]})
            value = True
        elif op.table == names.REPLYCOUNT_TABLE:
            table = t.replycount
            key = self._server_of({names.PARAM_IP: match[names.MATCH_SRC]})
            value = True
        else:
            raise ValueError(f"model has no table {op.table!r}")
        old = t.keyindex.get(key) if op.table == names.KEYINDEX_TABLE else None
        _entry_op(table, key, op.op, value, op.table)
        if old is not None and self.slot_owner.get(old[0]) == key:
            del self.slot_owner[old[0]]
        if op.table == names.HOTKEY_TABLE and op.op is EntryOp.ADD:
            self.hot_cnt[p[names.PARAM_SLOT]] = 0  # a direct counter starts with its entry
        if op.table == names.KEYINDEX_TABLE and not deleting:
            self.slot_owner[value[0]] = key  # type: ignore[index]
            if old is None or old[0] != value[0]:  # type: ignore[index]
                self.done_by[value[0]] = -1  # type: ignore[index]  # a slot's registers start over

    def _register(self, name: str) -> np.ndarray:
        regs = {
            names.REG_RR: self.rr,
            names.REG_SLOT_VER: self.slot_ver,
            names.REG_ORIGIN_VER: self.origin_ver,
            names.REG_VALID_VER: self.valid_ver,
            names.REG_GLOBAL_VER: self.gver,
            names.REG_EPOCH: self.epoch,
        }
        if name not in regs:
            raise ValueError(f"model has no register {name!r}")
        return regs[name]

    # -- agents ---------------------------------------------------------------------------------
    def push(self, kid: int, replicas: Sequence[int]) -> None:
        """The origin SYNCs the key (rule 5: fresh version), acknowledges it (SYNC_DONE, rule 2)
        and the controller pushes it into ``replicas``, which store it and CONFIRM (rule 3);
        delivered at once.

        While a write of the key is on its way to the origin (``slot_ver > origin_ver``) the
        switch reflects the SYNC unstamped: nothing is validated, the replicas wait for the key's
        next completed write (the agent would ask again after its SYNC timeout)."""
        self.stored.setdefault(kid, set()).update(replicas)
        hot = self.tables.hot.get(kid)
        if hot is None:
            return
        slot = hot[0]
        ver = coherence.sync(slot, self.gver, self.slot_ver, self.origin_ver)
        self.load[int(self.origin[kid])] += 1  # the SYNC reflected to the origin
        if ver == 0:
            return
        # the origin's SYNC_DONE: for a rotated key a holder's report (its own cell too)
        self.ack(slot, -2 - int(self.origin[kid]) if self.rot[slot] else -1, ver)
        for s in replicas:
            offset = self.tables.serveroffset.get(s)
            if offset is not None:
                self.ack(slot, offset, ver)

    def ack(self, slot: int, offset: int, ver: int) -> None:
        """Rule 2 (offset -1: the origin's SYNC_DONE/SET_REPLY), rule 3 (a replica's CONFIRM
        landing on ``valid_ver[base + offset]``) or, offset -2 - s, a rotated key's report from
        holder s (docs/protocol.md F7), as the kernel delivers them."""
        c = self.compiled()
        base, floor, off = c[5], c[6], c[7]
        kernel.deliver(
            slot, offset, ver, self.slot_ver, self.origin_ver, self.valid_ver, base, floor, off,
            self.done_by,
        )  # fmt: skip

    def set_rotated(self, slots: Sequence[int]) -> None:
        """The slots whose keys rotate their writes (the HotkeyTable parameter of docs/protocol.md
        F7; the others copy every write to every holder)."""
        self.rot[:] = False
        self.rot[np.asarray(list(slots), np.int64)] = True

    def serving(self) -> list[tuple[int, int]]:
        """(key id, server) of every replica a Get may be redirected to right now."""
        out = []
        for (slot, ordinal), (vidx, server) in self.tables.servermap.items():
            # a rotated key's Gets go to done_by only, when it is in the read set
            ok = ordinal > 0 and (not self.rot[slot] or server == self.done_by[slot])
            if ok and coherence.in_read_set(slot, vidx, self.origin_ver, self.valid_ver):
                kid = self.slot_owner.get(slot)
                if kid is not None and kid in self.tables.hot:
                    out.append((kid, server))
        return out

    # -- compiled fast path ---------------------------------------------------------------------
    def compiled(self) -> tuple:
        """Flat arrays of the table contents for the kernel (rebuilt after every batch)."""
        if self._compiled is not None:
            return self._compiled
        t = self.tables
        k, m = self._slots, self._servers
        size = 1 << max(4, (2 * max(1, len(t.hot)) - 1).bit_length())
        ht_keys = np.full(size, kernel.EMPTY, np.int32)
        ht_vals = np.zeros(size, np.int32)
        nhold = np.ones(k, np.int32)
        base = np.full(k, -1, np.int32)
        floor = np.zeros(k, np.int64)
        smap = np.full((k, m), -1, np.int16)
        vidx = np.zeros((k, m), np.int32)
        mg_of_slot = np.zeros(k, np.int32)
        groups = max(t.groups, default=0) + 1
        mg_members = np.zeros((groups, m), np.int16)
        mg_size = np.zeros(groups, np.int64)
        for g, members in t.groups.items():
            replicas = [t.porttoserver[p] for p, rid in members if rid and p in t.porttoserver]
            mg_size[g] = len(replicas)
            mg_members[g, : len(replicas)] = replicas
        for kid, (slot, holders) in t.hot.items():
            h = ((kid ^ (kid >> 16)) * 0x45D9F3B) & (size - 1)
            while ht_keys[h] != kernel.EMPTY:
                h = (h + 1) & (size - 1)
            ht_keys[h] = kid
            ht_vals[h] = slot
            nhold[slot] = holders
            index = t.keyindex.get(kid)
            base[slot] = index[1] if index is not None else -1
            floor[slot] = index[2] if index is not None else 0
            group = t.multigroup.get(kid, 0)
            mg_of_slot[slot] = group if group in t.groups else 0
        for (slot, ordinal), (v, server) in t.servermap.items():
            if 0 <= slot < k and 0 <= ordinal < m:
                smap[slot, ordinal] = server
                vidx[slot, ordinal] = v
        off = np.array([t.serveroffset.get(s, -1) for s in range(m)], np.int64)
        self._compiled = (
            ht_keys, ht_vals, nhold, smap, vidx, base, floor, off, mg_of_slot, mg_members,
            mg_size,
        )  # fmt: skip
        return self._compiled

    def _state(self) -> tuple:
        return (
            self.rr, self.slot_ver, self.origin_ver, self.valid_ver, self.gver, self.hot_cnt,
            self.hot_wr, self.hp_key, self.hp_cnt, self.prefixes, self.table, self.load, self.queue, self.qpos,
            self.rot, self.done_by,
        )  # fmt: skip

    def run_trace(self, kids: np.ndarray, writes: np.ndarray) -> None:
        """Process an explicit trace of key ids (``writes[i]``: a Set, else a Get)."""
        kids = np.ascontiguousarray(kids, np.int64)
        writes = np.ascontiguousarray(writes, np.bool_)
        if kids.shape != writes.shape:
            raise ValueError("one write flag per query")
        if kids.size and (kids.min() < 0 or kids.max() >= self.origin.size):
            raise ValueError("key id outside the keyspace")
        origins = self.origin[kids].astype(np.int64)
        kernel.process(
            kids, origins, writes, kids.size, self.now, self.lag, *self.compiled(), *self._state()
        )
        self.now += kids.size

    def run_sampled(
        self,
        n: int,
        seed: int,
        workload: Workload,
        rank_info: np.ndarray,
        counts: np.ndarray,
    ) -> None:
        """``n`` queries of ``workload`` drawn by the kernel (see :func:`kernel.run_sampled`);
        ``counts[r]`` counts the queries of rank r."""
        kernel.run_sampled(
            n, seed, self.now, workload.write_ratio, workload.alias, workload.head,
            workload.p_head, rank_info, counts, self.lag,
            *self.compiled(), *self._state(),
        )  # fmt: skip
        self.now += n

    def flush(self) -> None:
        """Deliver every outstanding reply and confirm."""
        cap = self.queue.shape[0]
        while self.qpos[0] < self.qpos[1]:
            _, slot, offset, ver = (int(x) for x in self.queue[self.qpos[0] % cap])
            self.ack(slot, offset, ver)
            self.qpos[0] += 1


class ReferencePipeline:
    """The pipeline rules written out in plain Python over a model's state (slow and obvious)."""

    def __init__(self, model: Model) -> None:
        self.m = model
        self.pending: deque[tuple[int, int, int, int]] = deque()

    def run(self, kids: Sequence[int], writes: Sequence[bool]) -> None:
        for kid, write in zip(kids, writes, strict=True):
            self.process(int(kid), bool(write))

    def process(self, kid: int, is_write: bool) -> None:
        m = self.m
        t = m.tables
        now = m.now
        m.now += 1
        while self.pending and self.pending[0][0] <= now:
            _, slot, offset, ver = self.pending.popleft()
            m.ack(slot, offset, ver)
        o = int(m.origin[kid])
        hot = t.hot.get(kid)
        if hot is None:
            self._hashpipe(kid)
            m.load[o] += 1
            return
        slot, n = hot
        m.hot_cnt[slot] += 1
        if is_write:
            m.hot_wr[slot] += 1
            ver, _ = coherence.write(slot, m.gver, m.slot_ver, m.origin_ver)
            m.load[o] += 1
            self.pending.append((now + m.lag, slot, -1, ver))
            for port, rid in t.groups.get(t.multigroup.get(kid, -1), ()):
                server = t.porttoserver.get(port)
                if rid == 0 or server is None:
                    continue
                m.load[server] += 1
                if server in t.serveroffset:
                    self.pending.append((now + m.lag, slot, t.serveroffset[server], ver))
            return
        # p4src's rr: a turn beyond the last (n shrank) is turn 0, and the rotation restarts
        turn, last = int(m.rr[slot]), max(n - 1, 0)
        ordinal = 0 if turn > last else turn
        m.rr[slot] = turn + 1 if turn < last else 0
        dst = o
        entry = t.servermap.get((slot, ordinal))
        if ordinal > 0 and entry is not None:
            vidx, server = entry
            if coherence.in_read_set(slot, vidx, m.origin_ver, m.valid_ver):
                dst = server
        m.load[dst] += 1

    def _hashpipe(self, kid: int) -> None:
        m = self.m
        carried_key, carried = kid, 1
        for s in range(m.stages):
            i = hp_index_ref(s, key16(carried_key), m.width)
            slot_key, count = int(m.hp_key[s, i]), int(m.hp_cnt[s, i])
            if count == 0 or slot_key == carried_key:
                m.hp_key[s, i] = carried_key
                m.hp_cnt[s, i] = count + carried
                return
            if s == 0 or count < carried:
                m.hp_key[s, i], m.hp_cnt[s, i] = carried_key, carried
                carried_key, carried = slot_key, count

    def flush(self) -> None:
        while self.pending:
            _, slot, offset, ver = self.pending.popleft()
            self.m.ack(slot, offset, ver)


def _kid(key: int | bytes) -> int:
    kid = key_id(key) if isinstance(key, bytes) else int(key)
    if not 0 <= kid <= MAX_KEY_ID:
        raise ValueError(f"model keys are ids below 2**31, got {kid}")
    return kid


def _entry_op(table: dict, key: object, op: EntryOp, value: object, name: str) -> None:
    if op is EntryOp.ADD:
        if key in table:
            raise ValueError(f"{name}: entry {key!r} already exists")
        table[key] = value
    elif op is EntryOp.MODIFY:
        if key not in table:
            raise ValueError(f"{name}: no entry {key!r} to modify")
        table[key] = value
    else:
        if table.pop(key, None) is None:
            raise ValueError(f"{name}: no entry {key!r} to delete")
