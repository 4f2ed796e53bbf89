"""The switch's coherence rules (:mod:`kvswitch.consistency.rules`) compiled by numba.

The compiled kernel (:mod:`kvswitch.bench.kernel`) calls these per query and the model
(:mod:`kvswitch.bench.model`) per push and confirm; the exhaustive protocol explorer
(:mod:`kvswitch.consistency.explore`) runs the same source through ``.py_func``, which is the
function of :mod:`kvswitch.consistency.rules` itself. The rules are defined there only.
"""

from __future__ import annotations

from numba import njit

from kvswitch.consistency import rules

write = njit(cache=True)(rules.write)
origin_report = njit(cache=True)(rules.origin_report)
confirm = njit(cache=True)(rules.confirm)
in_read_set = njit(cache=True)(rules.in_read_set)
sync = njit(cache=True)(rules.sync)
replica_reply_passes = njit(cache=True)(rules.replica_reply_passes)
rotated_write = njit(cache=True)(rules.rotated_write)
holder_report = njit(cache=True)(rules.holder_report)
