"""The interfaces between the controller and a target.

:class:`Driver` is what the period loop needs (``kvswitch.controller.period``): implemented by the
simulator's in-memory model (``kvswitch.bench.model``) and by every switch driver. :class:`SwitchDriver`
adds what the runtime on a real switch needs (``kvswitch.controller.runtime``: registers, the
plan the switch holds, reconciliation, liveness, reconnection, the agents' outcomes): implemented
by :class:`kvswitch.controller.p4rt_driver.P4RuntimeDriver` (BMv2's ``simple_switch_grpc`` and
the software switch, registers over P4Runtime or BMv2's Thrift API by what the switch answers).
A Tofino driver (BfRt) would be a third. The planning code never imports a driver.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence

from kvswitch.controller.ops import HeldEntry, Match, Operation, PushRequest, RemoveRequest
from kvswitch.controller.plan import Plan


class DriverError(RuntimeError):
    """The switch refused or could not be reached."""


class Driver(ABC):
    """A switch (plus the agents' control API for pushes and removals)."""

    @property
    @abstractmethod
    def servers(self) -> int:
        """Number of servers in the rack (M)."""

    @property
    @abstractmethod
    def slots(self) -> int:
        """Number of hot-key slots (K)."""

    @abstractmethod
    def read_hot_counters(self) -> dict[bytes, int]:
        """Queries per HotkeyTable entry since the last reset, by key."""

    @abstractmethod
    def read_hot_writes(self) -> list[int]:
        """Sets and Deletes per hot-key slot since the last reset (``hotkey_writes``)."""

    @abstractmethod
    def read_version(self) -> int:
        """The newest version the switch handed out (``global_ver``)."""

    @abstractmethod
    def read_hashpipe(self) -> list[tuple[bytes, int]]:
        """(key, count) of every non-empty HashPipe slot, all stages."""

    @abstractmethod
    def read_load_counters(self) -> list[int]:
        """KVS packets per server (LoadcountTable) since the last reset."""

    @abstractmethod
    def reset_counters(self) -> None:
        """Zero the hot-key counters (queries and writes), the HashPipe registers and the load
        counters."""

    @abstractmethod
    def apply(self, ops: Sequence[Operation]) -> None:
        """Apply one period's batch in order (make-before-use order is the caller's)."""


class SwitchDriver(Driver):
    """A real switch and the agents' control API, as the runtime drives them.

    The agents' outcomes of :meth:`apply` are kept for the runtime: ``failed_pushes`` (by key,
    retried), ``not_held`` (keys whose last push found no copy at the origin),
    ``deferred_removals`` (run by the next :meth:`apply`, not by a :meth:`repair`) and
    ``agent_errors`` (a count)."""

    failed_pushes: dict[bytes, PushRequest]
    not_held: set[bytes]
    deferred_removals: list[RemoveRequest]
    agent_errors: int

    @abstractmethod
    def repair(self, ops: Sequence[Operation]) -> None:
        """Apply a repair made in the same period as the last :meth:`apply` (pushes again, read-set
        writes) without running the removals that batch deferred: they wait for the next
        :meth:`apply`."""

    @property
    @abstractmethod
    def connected(self) -> bool:
        """The connections to the switch are up."""

    @abstractmethod
    def reconnect(self) -> None:
        """Drop the connections and open new ones (after the switch went away)."""

    def reachable(self, timeout: float) -> bool:
        """Whether the switch's control port takes a new connection within ``timeout``
        seconds: False for a switch whose process is gone even while :attr:`connected` has not
        noticed yet (its calls would wait for their timeout). A live switch that is slow to
        answer still takes the connection (its kernel does). A driver that cannot tell says
        True."""
        return True

    @property
    @abstractmethod
    def has_liveness(self) -> bool:
        """The program has liveness.p4's tables (reply counts, DownTable)."""

    @property
    @abstractmethod
    def has_rotation(self) -> bool:
        """The program has the write rotation (docs/protocol.md F7): a spine's ``done_by``
        register, which comes with ``set_hot``'s ``rotate`` parameter."""

    @property
    @abstractmethod
    def has_hold(self) -> bool:
        """The program has a spine's restart hold (``SpineHoldTable``, spine_hold.p4)."""

    @abstractmethod
    def read_reply_counters(self) -> list[int]:
        """Replies each server sent since the last reset."""

    @abstractmethod
    def read_down(self) -> set[int]:
        """Servers the switch holds as dead."""

    @abstractmethod
    def read_register(self, name: str) -> list[int]:
        """Every cell of register ``name`` (an alias of :mod:`kvswitch.controller.names`)."""

    @abstractmethod
    def read_register_cells(self, name: str, indexes: Iterable[int]) -> dict[int, int]:
        """The cells ``indexes`` of register ``name``."""

    @abstractmethod
    def read_plan(self) -> tuple[Plan, list[bytes]]:
        """The hot keys the switch holds as a plan, and the HotkeyTable keys that cannot be in
        one."""

    @abstractmethod
    def read_entries(self, table: str) -> dict[Match, HeldEntry]:
        """Entries of ``table`` by match (sorted (field, value); lpm values are (value, length))."""

    @abstractmethod
    def reconcile(
        self, wanted: Sequence[Operation], prune: Sequence[str] = (), prune_groups: bool = False
    ) -> list[Operation]:
        """Operations that make the switch hold ``wanted`` (deleting, with ``prune``, entries of
        those tables that are not wanted, and groups with ``prune_groups``)."""
