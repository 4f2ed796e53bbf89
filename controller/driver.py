"""The one interface between the controller and a target.

Implemented by the P4Runtime/Thrift driver (BMv2 and the software switch), the BfRt driver
(Tofino) and the simulator's in-memory model (``kvswitch.bench.model``). The planning code never
imports a driver; the period loop (``kvswitch.controller.period``) talks only to this interface.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

from kvswitch.controller.ops import Operation


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
