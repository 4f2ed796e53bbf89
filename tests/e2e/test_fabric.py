"""The Mininet fabric (``kvswitch rack --fabric``, :mod:`kvsrack.fabric`): 2 spines, 2 leaves of
2 servers on the software switch, a rack controller per leaf and the fabric controller, under a
workload whose busiest rack carries about 1.7 times its fair share (by origin). One run (≈ 30 s)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import assert_torn_down, skip_reason

pytestmark = pytest.mark.netns

ARGS = ["--fabric", "--spines", "2", "--racks", "2", "--servers", "2", "--clients", "1",
        "--duration", "10", "--rate", "1000", "--zipf", "1.2", "--keys", "100", "--k", "16"]  # fmt: skip


def test_a_small_fabric_balances_across_racks(tmp_path: Path) -> None:
    why = skip_reason("softswitch", "v1model")
    if why:
        pytest.skip(f"e2e fabric test {why}")
    out = tmp_path / "fabric"
    done = subprocess.run(
        [sys.executable, "-m", "kvsrack", *ARGS, "--out", str(out)],
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert_torn_down(out)
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    rows = json.loads((out / "summary.json").read_text())["periods"]
    assert len(rows) >= 5, done.stdout[-2000:]
    # the workload, as the client sent it (by origin on the fabric's ring): the busiest rack
    # carries at least 1.5 times its fair share, the busiest server more than twice its
    (gen,) = json.loads((out / "summary.json").read_text())["loadgen"]
    sent = gen["sent_per_server"]
    assert len(sent) == 4 and gen["not_found"] == 0 and gen["lost"] < 0.01 * gen["sent"], gen
    by_rack = [sum(sent[:2]), sum(sent[2:])]
    assert max(by_rack) * 2 >= 1.5 * sum(sent) and max(sent) * 4 > 2 * sum(sent), sent
    # within 5 periods, lambda over all servers below 0.1 (the leaves' counts)
    assert min(x["lambda"] for x in rows[:5]) < 0.1, [round(x["lambda"], 3) for x in rows]
