"""The fabric runner's periods (``kvswitch rack --fabric``'s table; pure: no root, no network):
lambda over all servers from the rack controllers' metrics, the fabric-hot and rotated keys from
the fabric controller's ``--metrics`` (docs/fabric.md "Mininet fabric: histories and restarts")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("mininet")

from kvsrack import fabric as fab


def lines(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_each_period_names_the_rotated_keys_of_the_plan_it_ran_under(tmp_path: Path) -> None:
    for r in range(2):
        lines(
            tmp_path / f"l{r + 1}" / "metrics.jsonl",
            [{"period": p, "time": 100.0 + p, "loads": [10, 10]} for p in (1, 2, 3)],
        )
    # fabric periods ending at 101.5 (no key rotated) and 102.5 (two of three rotated)
    lines(
        tmp_path / "fabric-metrics.jsonl",
        [
            {"time": 101.5, "keys": {"aa": [0, [0, 2]]}, "rotated": []},
            {"time": 102.5, "keys": {"aa": [0, [0, 2]], "bb": [1, [1, 3]], "cc": [0, [2, 0]]},
             "rotated": ["aa", "bb"]},
        ],
    )  # fmt: skip
    rows = fab.periods(tmp_path, 2)
    assert [(x["period"], x["fabric_keys"], x["rotated"]) for x in rows] == [
        (1, None, None),
        (2, 1, 0),
        (3, 3, 2),
    ]
    assert [x["lambda"] for x in rows] == [0.0, 0.0, 0.0]
    text = fab.table(rows).splitlines()
    assert "rotated" in text[0] and text[1].split()[4:6] == ["-", "-"]
    assert text[3].split()[4:6] == ["3", "2"]
