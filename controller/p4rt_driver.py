"""The controller's driver for BMv2 (``simple_switch_grpc``) and the software switch.

P4Runtime (through ``finsy``) carries tables, direct counters, multicast groups and the pipeline
config. Registers go over P4Runtime where the switch takes them there, and otherwise over BMv2's
Thrift runtime API (``bm_runtime``): BMv2's P4Runtime server answers a register Read with
UNIMPLEMENTED and a RegisterEntry MODIFY with UNKNOWN. Which one is decided at every connection by
what the switch answers (:meth:`P4RuntimeDriver.registers`), not by a flag: one P4Runtime Read of
the epoch cell and one MODIFY writing back the value read. The software switch takes both.

One period's batch (:meth:`P4RuntimeDriver.apply`) is one P4Runtime ``Write`` holding every table,
multicast and (where P4Runtime takes them) register update in the planner's order; the software
switch applies a Write between two packets, in order. Where registers go over Thrift, the batch is
cut at each run of register writes: P4Runtime Write, Thrift writes, P4Runtime Write, ..., which
keeps the planner's order (make-before-use, break-before-delete). Pushes and removals then go to
the agents' control API: a run of agent operations starts after the switch writes before it and
ends before those after it; inside a run, different keys' operations run at once (a bounded pool,
four workers per server by default) and one key's one after the other, in the given order.

HashPipe is read over Thrift on both targets: the P4 program keeps each 128-bit key as four 32-bit
words (Thrift carries register cells as signed 64-bit integers, and BMv2's P4Runtime reads no
registers).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Coroutine, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

import finsy as fy
from bm_runtime.standard import Standard
from finsy.p4client import P4ClientError
from finsy.proto import p4i
from finsy.switch import SwitchFailFastError
from google.protobuf.empty_pb2 import Empty
from thrift.protocol import TBinaryProtocol, TMultiplexedProtocol
from thrift.transport import TSocket, TTransport

from kvswitch import protocol as p
from kvswitch.agent.control import NotHeld
from kvswitch.controller import names
from kvswitch.controller.driver import DriverError, SwitchDriver
from kvswitch.controller.ops import (
    DefaultAction,
    EntryOp,
    HeldEntry,
    Match,
    MulticastGroupDelete,
    MulticastGroupSet,
    Operation,
    PushRequest,
    RebaseRequest,
    RegisterWrite,
    RemoveRequest,
    TableEntry,
)
from kvswitch.controller.plan import Plan, assemble
from kvswitch.controller.rack import Rack
from kvswitch.ports import listens

AgentOp = PushRequest | RemoveRequest | RebaseRequest  # what the agents' control API carries
#: Keys whose agent operations run at once, per server of the rack. A push mostly waits (for its
#: SYNC reflection: up to 3 x 0.5 s when the switch refuses it), so a period with more failing
#: pushes than workers waits once more per round; the agents serve each connection in a thread.
AGENT_WORKERS_PER_SERVER = 4

LOG = logging.getLogger("kvswitch.controller")
T = TypeVar("T")
RegisterPath = Literal["p4runtime", "thrift"]


@dataclass(frozen=True)
class SwitchAddress:
    grpc_addr: str = "127.0.0.1:9559"
    device_id: int = 0
    thrift_host: str = "127.0.0.1"
    thrift_port: int = 9090
    timeout: float = 10.0
    # a P4Runtime role (None: the default role). A fabric's leaf has two controllers, its rack
    # controller (default role) and the fabric controller (role "fabric"), each the primary of
    # its own role (docs/fabric.md "Runtime")
    role: str | None = None


@dataclass(frozen=True)
class Program:
    """What SetForwardingPipelineConfig sends: the P4Info and the target's device config."""

    p4info: p4i.P4Info
    device_config: bytes


def _election_id_in_use(exc: BaseException | None) -> bool:
    """The switch refused the stream's election id as another stream's of the same role
    (P4Runtime: INVALID_ARGUMENT)."""
    return (
        isinstance(exc, P4ClientError)
        and exc.code == fy.GRPCStatusCode.INVALID_ARGUMENT
        and "election id" in exc.message.lower()
    )


class _TaskFailures(logging.Handler):
    """The exceptions of one finsy switch's tasks that failed while it connected. finsy logs such
    an exception (CRITICAL, "Switch task %r failed") and raises only ``SwitchFailFastError``; kept
    here, the driver's error says what the switch answered (e.g. a refused pipeline)."""

    def __init__(self, switch_name: str) -> None:
        super().__init__(logging.CRITICAL)
        self.prefix = f"fy:{switch_name}|"
        self.errors: list[BaseException] = []

    def emit(self, record: logging.LogRecord) -> None:
        exc = record.exc_info[1] if record.exc_info else None
        task = record.args[0] if isinstance(record.args, tuple) and record.args else None
        if exc is not None and isinstance(task, str) and task.startswith(self.prefix):
            self.errors.append(exc)


class _Loop:
    """An asyncio event loop in a thread: finsy is asynchronous, the Driver interface is not."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.closed = False
        self.thread = threading.Thread(
            target=self.loop.run_forever, name="kvswitch-p4rt", daemon=True
        )
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float) -> T:
        if self.closed:
            coro.close()
            raise DriverError("the P4Runtime connection is closed")
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(timeout)
        except FutureTimeout as exc:
            future.cancel()
            raise DriverError(f"no answer from the switch within {timeout} s") from exc

    def close(self) -> None:
        if self.closed:
            return
        with contextlib.suppress(DriverError, RuntimeError):
            self.run(_cancel_tasks(), 5)
        self.closed = True
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)
        if not self.thread.is_alive():
            self.loop.close()


async def _cancel_tasks() -> None:
    """Cancel what finsy and gRPC leave running, so that closing the loop is quiet."""
    tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


class _Names:
    """Fully qualified P4Info names of the aliases in :mod:`kvswitch.controller.names`."""

    def __init__(self, info: p4i.P4Info) -> None:
        self.full: dict[str, dict[str, str]] = {}
        self.sizes: dict[str, int] = {}
        self.lpm: set[tuple[str, str]] = set()
        for kind, objects in (
            ("table", info.tables),
            ("action", info.actions),
            ("register", info.registers),
            ("counter", info.counters),
        ):
            found: dict[str, str] = {}
            for obj in objects:
                full = obj.preamble.name
                parts = full.split(".")
                for i in range(len(parts)):  # every suffix; an ambiguous one maps to nothing
                    suffix = ".".join(parts[i:])
                    found[suffix] = "" if suffix in found and found[suffix] != full else full
            self.full[kind] = found
        # HashPipe stage -> every register of it the program has, by P4Info name: the key words
        # and the count, and what a build keeps beside them (TNA: the later stages' hp_tag)
        self.hashpipe: dict[int, list[str]] = {}
        for reg in info.registers:
            self.sizes[reg.preamble.name] = reg.size
            parts = reg.preamble.name.split(".")
            stage = names.hp_stage_of(parts[-2]) if len(parts) > 1 else None
            if stage is not None:
                self.hashpipe.setdefault(stage, []).append(reg.preamble.name)
        for table in info.tables:
            for mf in table.match_fields:
                if mf.match_type == p4i.MatchField.LPM:
                    self.lpm.add((table.preamble.name, mf.name))

    def __call__(self, kind: str, alias: str) -> str:
        full = self.full[kind].get(alias, "")
        if not full:
            raise DriverError(f"the P4 program has no single {kind} named {alias!r}")
        return full

    def register_parts(self, alias: str) -> list[tuple[str, int]]:
        """The registers that hold ``alias``'s cells, first cell first, with their sizes: the
        register itself, then ``alias_1``, ``alias_2``, ... where the program has them (valid_ver
        beyond one Tofino stage's SRAM: p4src/shared/sizes.p4, "valid_ver's parts")."""
        parts = [self("register", alias)]
        while self.has("register", f"{alias}_{len(parts)}"):
            parts.append(self("register", f"{alias}_{len(parts)}"))
        return [(full, self.sizes[full]) for full in parts]

    def register_size(self, alias: str) -> int:
        return sum(size for _full, size in self.register_parts(alias))

    def register_cells(self, alias: str, start: int, count: int) -> list[tuple[str, int, int]]:
        """Cells ``start .. start + count - 1`` of ``alias`` (one index space over its parts) as
        (register, first cell in it, cells) runs, one per part they touch. Cells past the end
        stay in the last part's run, for the switch to refuse."""
        out: list[tuple[str, int, int]] = []
        base = 0
        parts = self.register_parts(alias)
        for i, (full, size) in enumerate(parts):
            end = start + count if i == len(parts) - 1 else min(start + count, base + size)
            lo = start if i == 0 else max(start, base)
            if lo < end:
                out.append((full, lo - base, end - lo))
            base += size
        return out

    def has(self, kind: str, alias: str) -> bool:
        return bool(self.full[kind].get(alias))

    def hashpipe_stages(self) -> int:
        stages = 0
        while self.full["register"].get(names.reg_hp_cnt(stages)):
            stages += 1
        return stages


class P4RuntimeDriver(SwitchDriver):
    """:class:`SwitchDriver` over P4Runtime + Thrift, plus the agents' control API for pushes/removals.

    ``agents`` carries pushes and removals to the servers (:class:`AgentHooks`); a failure there
    is logged and counted in :attr:`agent_errors` (the switch side is already consistent: replicas
    that were not pushed stay invalid, so Gets keep going to the origin). Different keys' agent
    operations run in parallel on up to ``agent_workers`` threads (default: four per server), so
    a period's pushes take about as long as the slowest key's (an origin waiting for SYNC
    reflections, 3 x 0.5 s when none comes), not the sum over keys; ``agents`` must take calls
    from several threads at once (:class:`~kvswitch.controller.agents.AgentPool` does).
    """

    def __init__(
        self,
        address: SwitchAddress,
        program: Program,
        rack: Rack,
        agents: AgentHooks | None = None,
        set_pipeline: bool = True,
        row: int | None = None,
        agent_workers: int | None = None,
    ) -> None:
        """``row``: the ``valid_ver`` cells of one slot the controller uses: the rack's servers
        (default), or a spine's ``MAX_HOLDERS`` (docs/fabric.md "Spine program").
        ``agent_workers``: how many keys' agent operations run at once (default: four per server
        of ``rack``, :data:`AGENT_WORKERS_PER_SERVER`; 1: one after the other)."""
        self.address = address
        self.program = program
        self.rack = rack
        self.agents = agents
        if agent_workers is None:
            agent_workers = AGENT_WORKERS_PER_SERVER * len(rack)
        self.agent_workers = max(1, agent_workers)
        self._agent_pool: ThreadPoolExecutor | None = None
        self.names = _Names(program.p4info)
        self._slots = self.names.register_size(names.REG_SLOT_VER)
        valid = self.names.register_size(names.REG_VALID_VER)
        width = len(rack) if row is None else row
        if valid < self._slots * width:
            raise DriverError(
                f"{width} cells per slot do not fit the program's valid_ver ({valid} cells for "
                f"{self._slots} slots): build it with a larger MAX_SERVERS or MAX_HOLDERS"
            )
        self.stages = self.names.hashpipe_stages()
        self.agent_errors = 0
        self.failed_pushes: dict[bytes, PushRequest] = {}  # by key; retried by the runtime
        self.not_held: set[bytes] = set()  # keys whose last push found no copy at the origin
        self.deferred_removals: list[RemoveRequest] = []  # run by the next apply()
        self.p4rt_writes = 0
        self._set_pipeline = set_pipeline
        self._loop = _Loop()
        self._thrift_lock = threading.Lock()
        self._transport: TTransport.TTransportBase | None = None
        self._thrift_broken = False
        self.registers: RegisterPath = "thrift"
        self._switch = self._connect()

    def _connect(self) -> fy.Switch:
        """A primary P4Runtime connection (the pipeline set unless its cookie matches) and a
        Thrift connection; on failure everything is closed and :class:`DriverError` raised."""
        options = fy.SwitchOptions(
            p4info=self.program.p4info,  # type: ignore[arg-type]  # finsy takes a P4Info as well
            p4blob=self.program.device_config if self._set_pipeline else None,
            device_id=self.address.device_id,
            fail_fast=True,
            role_name=self.address.role or "",
            role_config=Empty() if self.address.role else None,
        )
        name = f"kvswitch@{self.address.grpc_addr}" + (
            f"/{self.address.role}" if self.address.role else ""
        )
        deadline = time.monotonic() + self.address.timeout
        while True:
            switch = fy.Switch(name, self.address.grpc_addr, options)
            try:
                self._open(switch, name, deadline - time.monotonic())
                break
            except DriverError as exc:
                # A controller that closed its stream just before (a restart) may still hold
                # the election id until the switch notices: that id is free a moment later.
                if not _election_id_in_use(exc.__cause__) or time.monotonic() + 0.1 > deadline:
                    self._loop.close()
                    raise
                LOG.info("%s: the election id is still held by a closed stream; again", name)
                time.sleep(0.1)
        self._switch = switch
        try:
            self._transport, self._thrift = _thrift_client(self.address)
            self._thrift_broken = False
            self.registers = self._register_path()
        except DriverError:
            self.close()
            raise
        return switch

    def _open(self, switch: fy.Switch, name: str, timeout: float) -> None:
        """``switch``'s stream, arbitration and pipeline within ``timeout`` seconds, or
        :class:`DriverError` caused by what the switch answered."""
        failures = _TaskFailures(name)
        finsy_log = logging.getLogger("finsy")
        finsy_log.addHandler(failures)
        try:
            self._loop.run(switch.__aenter__(), max(timeout, 0.1))
        except (Exception, SwitchFailFastError) as exc:
            cause = failures.errors[0] if failures.errors else exc
            said = str(cause) or repr(cause)  # finsy's P4ClientError has an empty repr
            raise DriverError(f"P4Runtime at {self.address.grpc_addr}: {said}") from cause
        finally:
            finsy_log.removeHandler(failures)

    def _register_path(self) -> RegisterPath:
        """P4Runtime when the switch reads the epoch cell over P4Runtime and takes a MODIFY of
        it (the value just read: nothing changes), else BMv2's Thrift API, checked to answer."""
        register = self.names("register", names.REG_EPOCH)
        try:
            value = self._read_register(register, [0]).get(0)
            if value is None:
                raise DriverError("the switch answered a register Read with no cell")
            self._run(self._switch.write([fy.P4RegisterEntry(register, index=0, data=value)]))
        except DriverError as exc:
            self._thrift_call("bm_register_read", 0, register, 0)
            LOG.info("registers over BMv2's Thrift API: P4Runtime refused them (%s)", exc)
            return "thrift"
        return "p4runtime"

    @property
    def connected(self) -> bool:
        """The P4Runtime stream is up and the Thrift connection did not fail."""
        return bool(self._switch.is_up) and not self._thrift_broken

    def reachable(self, timeout: float) -> bool:
        """The P4Runtime port takes a TCP connection within ``timeout`` seconds (closed at
        once)."""
        host, _, port = self.address.grpc_addr.rpartition(":")
        try:
            return listens(host.strip("[]") or "127.0.0.1", int(port), timeout)
        except ValueError:
            return False

    def reconnect(self) -> None:
        """Drop both connections and open new ones (after the switch went away)."""
        self.close()
        self._loop = _Loop()
        self._switch = self._connect()

    # -- Driver -------------------------------------------------------------------------------------

    @property
    def servers(self) -> int:
        return len(self.rack)

    @property
    def slots(self) -> int:
        return self._slots

    def read_hot_counters(self) -> dict[bytes, int]:
        out: dict[bytes, int] = {}
        for entry in self._read_table(names.HOTKEY_TABLE, counters=True):
            key = _key_bytes(entry.match[names.MATCH_KEY])
            out[key] = entry.counter_data.packet_count if entry.counter_data else 0
        return out

    def read_hot_writes(self) -> list[int]:
        counter = self.names("counter", names.HOTKEY_WRITES)
        cells = self._run(self._collect(fy.P4CounterEntry(counter)))
        out = [0] * self._slots
        for cell in cells:
            if cell.index is not None and 0 <= cell.index < self._slots and cell.data is not None:
                out[cell.index] = int(cell.data.packet_count)
        return out

    def read_version(self) -> int:
        return int(self.read_register(names.REG_GLOBAL_VER)[0])

    def read_hashpipe(self) -> list[tuple[bytes, int]]:
        out: list[tuple[bytes, int]] = []
        for stage in range(self.stages):
            counts, *words = (
                self._thrift_call("bm_register_read_all", 0, self.names("register", reg))
                for reg in (
                    names.reg_hp_cnt(stage),
                    *(names.reg_hp_key(stage, w) for w in range(names.HP_KEY_WORDS)),
                )
            )
            out += [
                (names.hp_key_from_words([word[i] for word in words]), c)
                for i, c in enumerate(counts)
                if c
            ]
        return out

    def read_load_counters(self) -> list[int]:
        return self._per_server_counts(names.LOADCOUNT_TABLE, names.MATCH_DST)

    @property
    def has_liveness(self) -> bool:
        """The program has liveness.p4's tables (a build without them: no reply counts, no
        refusals; the failure detector then goes by the agents' pings alone)."""
        return self.names.has("table", names.REPLYCOUNT_TABLE) and self.names.has(
            "table", names.DOWN_TABLE
        )

    @property
    def has_rotation(self) -> bool:
        return self.names.has("register", names.REG_DONE_BY)

    @property
    def has_hold(self) -> bool:
        return self.names.has("table", names.SPINE_HOLD_TABLE)

    def read_reply_counters(self) -> list[int]:
        """Replies each server sent since the last reset (ReplycountTable, liveness.p4)."""
        return self._per_server_counts(names.REPLYCOUNT_TABLE, names.MATCH_SRC)

    def _per_server_counts(self, table: str, field: str) -> list[int]:
        """Packets per server of a direct-counter table keyed by a server address."""
        server_of_ip = self.rack.server_of_ip()
        counts = [0] * len(self.rack)
        for entry in self._read_table(table, counters=True):
            server = server_of_ip.get(int(entry.match[field]))
            if server is not None and entry.counter_data is not None:
                counts[server] += entry.counter_data.packet_count
        return counts

    def read_down(self) -> set[int]:
        """Servers the switch's DownTable holds as dead (a restarted controller keeps them)."""
        server_of_ip = self.rack.server_of_ip()
        down: set[int] = set()
        if not self.has_liveness:
            return down
        for entry in self._read_table(names.DOWN_TABLE):
            server = server_of_ip.get(int(entry.match[names.MATCH_DST]))
            if server is not None:
                down.add(server)
        return down

    def reset_counters(self) -> None:
        tables = (names.HOTKEY_TABLE, names.LOADCOUNT_TABLE, names.REPLYCOUNT_TABLE)
        for table in tables[:2] if not self.has_liveness else tables:
            self._thrift_call("bm_mt_reset_counters", 0, self.names("table", table))
        self._thrift_call("bm_counter_reset_all", 0, self.names("counter", names.HOTKEY_WRITES))
        # every register of every stage, TNA's hp_tag too (a stale tag would merge its key into
        # the emptied slot, whose key words stay 0), in name order: hp_cnt, hp_key0-3, hp_tag
        for stage in range(self.stages):
            for reg in sorted(self.names.hashpipe[stage], key=lambda n: n.rsplit(".", 1)[-1]):
                self._thrift_call("bm_register_reset", 0, reg)

    def apply(self, ops: Sequence[Operation]) -> None:
        """One P4Runtime Write for the switch part (cut at register writes on BMv2, which go over
        Thrift), then the agents' pushes, all in the given order.

        Removals wait one batch (one period): they run at the start of the next call, before its
        tables can point at those servers again. A Get routed to a leaving replica just before the
        tables changed may still be on its way; removing the copy under it, with an old UPDATE of
        the key arriving after, would let that Get read an older value (found by the exhaustive
        explorer, preset ``hotset-undrained``). A period is far longer than a rack's delays."""
        deferred, self.deferred_removals = self.deferred_removals, []
        self._agent_ops(deferred)
        self._apply(ops)

    def repair(self, ops: Sequence[Operation]) -> None:
        """Apply a repair made later in the same period as the last :meth:`apply` (pushes again,
        replicas out of the read set): the removals that batch deferred keep waiting for the next
        :meth:`apply`, since Gets routed to their servers just before may still be on their way.
        A repair names only the plan's current holders, which a deferred removal is not."""
        self._apply(ops)

    def _apply(self, ops: Sequence[Operation]) -> None:
        batch: list[Any] = []
        run: list[Operation] = []  # agent operations after the switch writes before them
        groups: set[int] | None = None
        for op in ops:
            if isinstance(op, RemoveRequest):
                self.deferred_removals.append(op)
                continue
            if isinstance(op, PushRequest | RebaseRequest):
                self._write(batch)
                batch = []
                run.append(op)
                continue
            self._agent_ops(run)  # done before the switch writes after them
            run = []
            if isinstance(op, RegisterWrite) and self.registers == "thrift":
                self._write(batch)
                batch = []
                self._thrift_register_write(op)
            elif isinstance(op, RegisterWrite):
                batch += [
                    fy.P4RegisterEntry(register, index=i, data=op.value)
                    for register, first, n in self.names.register_cells(op.name, op.index, op.count)
                    for i in range(first, first + n)
                ]
            elif isinstance(op, TableEntry):
                batch.append(self._table_update(op))
            elif isinstance(op, DefaultAction):
                batch.append(self._default_update(op))
            elif isinstance(op, MulticastGroupSet | MulticastGroupDelete):
                if groups is None:  # a group set is an insert or a modify: ask once per batch
                    groups = set(self.read_groups())
                batch.append(_group_update(op, groups))
            else:
                raise TypeError(f"not an operation: {op!r}")
        self._write(batch)
        self._agent_ops(run)

    # -- what the switch holds (a restarted controller's state) -----------------------------------

    def read_plan(self) -> tuple[Plan, list[bytes]]:
        """The hot keys the switch holds (HotkeyTable (slot, n) and ServermapTable ordinals) as a
        plan, and the HotkeyTable keys that cannot be in one: an ordinal missing or pointing at no
        server of the rack (or at another ``valid_ver`` cell than this rack's), a holder twice, a
        slot out of range or taken by an earlier key."""
        server_of_ip = self.rack.server_of_ip()
        m = len(self.rack)
        ordinals: dict[tuple[int, int], int] = {}
        for entry in self._read_table(names.SERVERMAP_TABLE):
            slot = int(entry.match[names.MATCH_SLOT])
            server = server_of_ip.get(int(entry.action.args[names.PARAM_IP]), -1)
            if int(entry.action.args[names.PARAM_VIDX]) != names.valid_base(slot, m) + server:
                server = -1
            ordinals[(slot, int(entry.match[names.MATCH_ORDINAL]))] = server
        hot = [
            (
                _key_bytes(entry.match[names.MATCH_KEY]),
                int(entry.action.args[names.PARAM_SLOT]),
                int(entry.action.args[names.PARAM_HOLDERS]),
            )
            for entry in self._read_table(names.HOTKEY_TABLE)
        ]
        return assemble(hot, ordinals, m, self._slots, m)

    def read_groups(self) -> dict[int, tuple[tuple[int, int], ...]]:
        """Multicast groups: group -> sorted (egress port, replication id)."""
        groups = self._run(self._collect(fy.P4MulticastGroupEntry()))
        out: dict[int, tuple[tuple[int, int], ...]] = {}
        for g in groups:
            members = [(r, 0) if isinstance(r, int) else (r.port, r.instance) for r in g.replicas]
            out[g.multicast_group_id] = tuple(sorted(members))
        return out

    def read_entries(self, table: str) -> dict[Match, HeldEntry]:
        """Entries of ``table`` by match (sorted (field, value); lpm values are (value, length))."""
        out: dict[Match, HeldEntry] = {}
        for entry in self._read_table(table):
            match = tuple(sorted(entry.match.items()))
            raw = tuple((k, v[0] if isinstance(v, tuple) else v) for k, v in match)
            action = entry.action.name.split(".")[-1] if entry.action is not None else ""
            params = {k: int(v) for k, v in entry.action.args.items()} if entry.action else {}
            out[match] = HeldEntry(action, params, raw)
        return out

    def reconcile(
        self, wanted: Sequence[Operation], prune: Sequence[str] = (), prune_groups: bool = False
    ) -> list[Operation]:
        """Operations that make the switch hold ``wanted`` (table adds and group sets): entries
        already there as wanted are skipped, different ones modified, missing ones added. With
        ``prune``, entries of those tables that are not wanted are deleted first (and groups that
        are not wanted, with ``prune_groups``)."""
        held = {
            t: self.read_entries(t)
            for t in {op.table for op in wanted if isinstance(op, TableEntry)}
        }
        held |= {t: self.read_entries(t) for t in prune if t not in held}
        groups = self.read_groups()
        deletes: list[Operation] = []
        out: list[Operation] = []
        wanted_matches: dict[str, set[Any]] = {t: set() for t in held}
        wanted_groups: set[int] = set()
        for op in wanted:
            if isinstance(op, TableEntry):
                match = self._match_key(op)
                wanted_matches[op.table].add(match)
                have = held[op.table].get(match)
                if have is None:
                    out.append(op)
                elif (have.action, have.params) != (op.action, op.param_dict()):
                    out.append(TableEntry(EntryOp.MODIFY, op.table, op.match, op.action, op.params))
            elif isinstance(op, MulticastGroupSet):
                wanted_groups.add(op.group)
                if groups.get(op.group) != tuple(sorted(op.members)):
                    out.append(op)
        for table in prune:
            for match, have in held[table].items():
                if match not in wanted_matches[table]:
                    deletes.append(TableEntry(EntryOp.DELETE, table, have.raw_match))
        if prune_groups:
            deletes += [MulticastGroupDelete(g) for g in groups if g not in wanted_groups]
        return deletes + out

    def _match_key(self, op: TableEntry) -> Match:
        table = self.names("table", op.table)
        return tuple(
            sorted(
                (name, _lpm(v) if (table, name) in self.names.lpm else _int(v))
                for name, v in op.match
            )
        )

    def read_register(self, name: str) -> list[int]:
        """Every cell of register ``name`` (an alias of :mod:`names`)."""
        out: list[int] = []
        for register, size in self.names.register_parts(name):
            if self.registers == "thrift":
                out += self._thrift_call("bm_register_read_all", 0, register)
            else:
                cells = self._read_register(register)
                out += [cells.get(i, 0) for i in range(size)]
        return out

    def read_register_cells(self, name: str, indexes: Iterable[int]) -> dict[int, int]:
        """The cells ``indexes`` of register ``name``: one P4Runtime Read of those entities (a
        switch whose registers go over Thrift: the whole register, one call)."""
        wanted = sorted(set(indexes))
        if not wanted:
            return {}
        if self.registers == "thrift":
            cells = self.read_register(name)
            return {i: cells[i] for i in wanted}
        out: dict[int, int] = {}
        base = 0
        for register, size in self.names.register_parts(name):
            part = [i - base for i in wanted if base <= i < base + size]
            if part:
                out.update((base + i, v) for i, v in self._read_register(register, part).items())
            base += size
        return out

    def close(self) -> None:
        if self._agent_pool is not None:  # idle between batches: apply() waits for its runs
            self._agent_pool.shutdown(wait=False)
            self._agent_pool = None
        if self._transport is not None:
            self._transport.close()
            self._transport = None
        try:
            self._loop.run(self._switch.__aexit__(None, None, None), 5)
        except (Exception, SwitchFailFastError) as exc:  # closing: report, do not hide others
            LOG.debug("closing the P4Runtime connection: %r", exc)
        self._loop.close()

    def __enter__(self) -> P4RuntimeDriver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- helpers ------------------------------------------------------------------------------------

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        try:
            return self._loop.run(coro, self.address.timeout)
        except DriverError:
            raise
        except fy.P4ClientError as exc:  # the switch answered with an error
            raise DriverError(f"P4Runtime: {_client_error(exc)}") from exc
        except (Exception, SwitchFailFastError) as exc:  # the stream went down
            raise DriverError(f"P4Runtime: {exc!r}") from exc

    async def _collect(self, entity: Any) -> list[Any]:
        return [e async for e in self._switch.read(entity)]

    def _read_table(self, table: str, counters: bool = False) -> list[fy.P4TableEntry]:
        entity = fy.P4TableEntry(
            self.names("table", table), counter_data=fy.P4CounterData() if counters else None
        )
        return self._run(self._collect(entity))

    def _read_register(self, reg: str, indexes: list[int] | None = None) -> dict[int, int]:
        """Cells of register ``reg`` (a P4Info name) by index: all (a wildcard Read), or
        ``indexes`` (one Read of those entities)."""
        if indexes is None:
            query: Any = fy.P4RegisterEntry(reg)
        else:
            query = [fy.P4RegisterEntry(reg, index=i) for i in indexes]
        cells = self._run(self._collect(query))
        return {int(c.index): int(c.data) for c in cells if c.index is not None}

    def _write(self, batch: list[Any]) -> None:
        if batch:
            self._run(self._switch.write(batch))
            self.p4rt_writes += 1

    def _table_update(self, op: TableEntry) -> Any:
        table = self.names("table", op.table)
        match = fy.P4TableMatch(
            {name: _lpm(v) if (table, name) in self.names.lpm else _int(v) for name, v in op.match}
        )
        if op.op is EntryOp.DELETE:
            return -fy.P4TableEntry(table, match=match)
        action = fy.P4TableAction(self.names("action", op.action), **op.param_dict())
        entry = fy.P4TableEntry(table, match=match, action=action)
        return +entry if op.op is EntryOp.ADD else ~entry

    def _default_update(self, op: DefaultAction) -> Any:
        action = fy.P4TableAction(self.names("action", op.action), **dict(op.params))
        entry = fy.P4TableEntry(
            self.names("table", op.table), action=action, is_default_action=True
        )
        return ~entry

    def _thrift_register_write(self, op: RegisterWrite) -> None:
        for register, first, n in self.names.register_cells(op.name, op.index, op.count):
            # BMv2's range ends before its end index
            self._thrift_call("bm_register_write_range", 0, register, first, first + n, op.value)

    def _thrift_call(self, method: str, *args: Any) -> Any:
        with self._thrift_lock:
            try:
                return getattr(self._thrift, method)(*args)
            except (TTransport.TTransportException, OSError) as exc:
                self._thrift_broken = True  # reconnected after the period (Runtime)
                raise DriverError(f"Thrift {method}{args[1:2]}: {exc!r}") from exc
            except Exception as exc:
                raise DriverError(f"Thrift {method}{args[1:2]}: {exc!r}") from exc

    def _agent_ops(self, ops: Sequence[AgentOp]) -> None:
        """Run agent operations: those of one key one after the other in the given order (a
        key's removal before its push), different keys at once on up to :attr:`agent_workers`
        threads; return when all are done. Each outcome is then recorded in the given order, as
        one at a time would have: a refused or timed-out operation is counted and logged, a
        failed push kept for a retry, none of them taken for done."""
        if not ops:
            return
        by_key: dict[bytes, list[int]] = {}
        for i, op in enumerate(ops):
            by_key.setdefault(op.key, []).append(i)
        errors: list[Exception | None] = [None] * len(ops)

        def run(indexes: list[int]) -> None:
            for i in indexes:
                errors[i] = self._agent_call(ops[i])

        if len(by_key) == 1 or self.agent_workers == 1:
            for indexes in by_key.values():
                run(indexes)
        else:
            if self._agent_pool is None:
                self._agent_pool = ThreadPoolExecutor(self.agent_workers, "agent-op")
            for done in [self._agent_pool.submit(run, indexes) for indexes in by_key.values()]:
                done.result()
        for op, error in zip(ops, errors, strict=True):
            self._agent_outcome(op, error)

    def _agent_call(self, op: AgentOp) -> Exception | None:
        """One agent operation (in a worker thread); the exception it raised, if any."""
        try:
            if self.agents is None:
                raise RuntimeError("no agent control API")
            if isinstance(op, PushRequest):
                self.agents.push(op.key, op.origin, op.replicas)
            elif isinstance(op, RemoveRequest):
                for server in op.servers:
                    self.agents.remove(op.key, server)
            else:
                for server in op.servers:
                    self.agents.rebase(op.key, server)
        except Exception as exc:
            return exc
        return None

    def _agent_outcome(self, op: AgentOp, error: Exception | None) -> None:
        if isinstance(error, NotHeld):  # nothing to push: the key's next write validates replicas
            LOG.info("push of %s: its origin holds no copy (not retried)", op.key.hex())
            self.failed_pushes.pop(op.key, None)
            self.not_held.add(op.key)
        elif error is not None:  # the switch is already consistent; replicas stay invalid (safe)
            self.agent_errors += 1
            if isinstance(op, PushRequest):
                self.failed_pushes[op.key] = op
            LOG.warning("agent %s of key %s failed: %s", type(op).__name__, op.key.hex(), error)
        elif isinstance(op, PushRequest):
            self.failed_pushes.pop(op.key, None)
            self.not_held.discard(op.key)


class AgentHooks(Protocol):
    """The agents' side of pushes and removals (implemented by ``agents.AgentPool``)."""

    def push(self, key: bytes, origin: int, replicas: tuple[int, ...]) -> None: ...

    def remove(self, key: bytes, server: int) -> None: ...

    def rebase(self, key: bytes, server: int) -> None: ...


def _thrift_client(address: SwitchAddress) -> tuple[TTransport.TTransportBase, Any]:
    sock = TSocket.TSocket(address.thrift_host, address.thrift_port)
    sock.setTimeout(address.timeout * 1000)
    transport = TTransport.TBufferedTransport(sock)
    protocol = TBinaryProtocol.TBinaryProtocol(transport)
    try:
        transport.open()
    except TTransport.TTransportException as exc:
        raise DriverError(
            f"Thrift at {address.thrift_host}:{address.thrift_port}: {exc.message}"
        ) from exc
    standard = Standard.Client(TMultiplexedProtocol.TMultiplexedProtocol(protocol, "standard"))
    return transport, standard


def _group_update(op: MulticastGroupSet | MulticastGroupDelete, groups: set[int]) -> Any:
    if isinstance(op, MulticastGroupDelete):
        groups.discard(op.group)
        return -fy.P4MulticastGroupEntry(op.group)
    group = fy.P4MulticastGroupEntry(op.group, replicas=list(op.members))
    if op.group in groups:
        return ~group
    groups.add(op.group)
    return +group


def _client_error(exc: fy.P4ClientError) -> str:
    """The gRPC status and message of a refusal, and the first per-entity error of a Write."""
    code = getattr(exc.code, "name", str(exc.code))
    text = f"{code} {exc.message!r}" if exc.message else code
    for detail in (exc.details or {}).values():
        return f"{text}: {getattr(detail, 'message', detail)}"
    return text


def _lpm(value: int | bytes | tuple[int, int]) -> tuple[int, int]:
    """An LPM match value: (address, prefix length) as given, or an address as a /32."""
    return (int(value[0]), int(value[1])) if isinstance(value, tuple) else (_int(value), 32)


def _int(value: int | bytes) -> int:
    return int.from_bytes(value, "big") if isinstance(value, bytes) else int(value)


def _key_bytes(value: Any) -> bytes:
    return int(value).to_bytes(p.KEY_LEN, "big")
