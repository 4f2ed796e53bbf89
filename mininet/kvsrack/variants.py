"""TESTS ONLY: broken variants of the fabric controller, which the Mininet fabric test
(tests/e2e/test_fabric.py) must catch. ``kvswitch rack --fabric --test-fabric-variant NAME`` runs
``python -m kvsrack.variants NAME ARGS`` instead of ``kvswitch fabric-controller ARGS``: the same
process with one rule taken out. Never use them in a fabric that serves anyone.

- ``no-home-steering``: a leaf does not steer the fabric-hot keys whose origin is in its own rack
  (docs/fabric.md "Leaves: steering", hazard F3): a client's write reaches its origin without
  crossing the key's spine, unstamped, while the spine keeps sending Gets to replicas that hold
  the old value.
- ``no-restart-reconcile``: a switch that went away is reconnected but not started again: a
  restarted spine gets no epoch, static entries or keys back, a restarted leaf no uplinks, routes
  or steering (and keeps holding KVSwitch packets).
- ``spine-not-rotated``: the fabric controller plans, freezes and reports its rotated keys
  (docs/protocol.md F7) but writes every spine's ``set_hot`` with ``rotate`` 0: the spines copy
  those keys' writes to every holder (rule 1) and no write of them goes to one writer.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

VARIANTS = ("no-home-steering", "no-restart-reconcile", "spine-not-rotated")


def no_home_steering() -> None:
    from kvswitch import protocol as p
    from kvswitch.controller import fabric_runtime

    steering, steering_diff = fabric_runtime.steering, fabric_runtime.steering_diff

    def foreign(fabric: Any, rack: int, keys: Mapping[bytes, int]) -> dict[bytes, int]:
        """``keys`` without those whose origin is in ``rack``."""
        shape = fabric.shape
        ring = p.HashRing.of(range(shape.total))
        return {k: s for k, s in keys.items() if shape.rack_of(ring.origin(k)) != rack}

    def steer(fabric: Any, rack: int, spine_of: Mapping[bytes, int]) -> Any:
        return steering(fabric, rack, foreign(fabric, rack, spine_of))

    def steer_diff(fabric: Any, rack: int, old: Any, new: Any) -> Any:
        return steering_diff(fabric, rack, foreign(fabric, rack, old), foreign(fabric, rack, new))

    fabric_runtime.steering = steer  # type: ignore[assignment]
    fabric_runtime.steering_diff = steer_diff  # type: ignore[assignment]


def no_restart_reconcile() -> None:
    from kvswitch.controller import fabric_main
    from kvswitch.controller.driver import DriverError
    from kvswitch.controller.fabric_runtime import FabricMetrics, FabricRuntime

    class NoRestartReconcile(FabricRuntime):
        def _repair(self, m: FabricMetrics) -> None:
            """Reconnect only: nothing is written to a switch that came back."""
            for s, drv in enumerate(self.spines):
                if not drv.connected:
                    try:
                        drv.reconnect()
                        self.spine_ok[s] = True
                    except DriverError as exc:
                        self.spine_ok[s] = False
                        m.errors.append(f"spine {s}: {exc!r}"[:200])
            for drv in self.leaves:
                if not drv.connected:
                    try:
                        drv.reconnect()
                    except DriverError as exc:
                        m.errors.append(f"leaf: {exc!r}"[:200])

    fabric_main.FabricRuntime = NoRestartReconcile  # type: ignore[misc]


def spine_not_rotated() -> None:
    from kvswitch.controller import fabric_runtime, names
    from kvswitch.controller.ops import TableEntry

    spine_diff = fabric_runtime.spine_diff

    def unflagged(*args: Any, **kwargs: Any) -> Any:
        """The spine's batch with every ``set_hot``'s ``rotate`` written as 0."""
        return [
            TableEntry(
                op.op, op.table, op.match, op.action,
                tuple((n, 0 if n == names.PARAM_ROTATE else v) for n, v in op.params),
            )
            if isinstance(op, TableEntry) and op.table == names.HOTKEY_TABLE
            else op
            for op in spine_diff(*args, **kwargs)
        ]  # fmt: skip

    fabric_runtime.spine_diff = unflagged  # type: ignore[assignment]


BREAK = {
    "no-home-steering": no_home_steering,
    "no-restart-reconcile": no_restart_reconcile,
    "spine-not-rotated": spine_not_rotated,
}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] not in VARIANTS:
        print(f"kvsrack.variants: expected one of {', '.join(VARIANTS)}", file=sys.stderr)
        return 2
    BREAK[args[0]]()
    from kvswitch.controller import fabric_main

    return fabric_main.main(args[1:])


if __name__ == "__main__":
    sys.exit(main())
