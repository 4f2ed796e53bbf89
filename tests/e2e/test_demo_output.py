"""The demo's reading of the metrics stream and its plot (no rack needed)."""

from __future__ import annotations

import json
from pathlib import Path

from kvswitch.bench.demo import describe, format_period, plot, read_metrics


def row(period: int, loads: list[int]) -> dict[str, object]:
    return {"period": period, "time": 100.0 + period, "lambda": 0.25 / period, "max_mean": 1.5,
            "threshold": 40.0, "hot_keys": 3, "replicas": period, "updates": 2, "loads": loads}  # fmt: skip


def test_metrics_read_incrementally_and_partial_lines_wait(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    assert read_metrics(path, 0) == []
    path.write_text(json.dumps(row(1, [5, 7])) + "\n" + json.dumps(row(2, [6, 6]))[:10])
    first = read_metrics(path, 0)
    assert [m["period"] for m in first] == [1]
    path.write_text(json.dumps(row(1, [5, 7])) + "\n" + json.dumps(row(2, [6, 6])) + "\n")
    assert [m["period"] for m in read_metrics(path, len(first))] == [2]


def test_period_line_names_every_server() -> None:
    line = format_period(row(2, [10, 20, 30]), ["s1", "s2", "s3"])
    assert "lambda 0.125" in line and "T 40" in line and "replicas 2" in line
    assert line.endswith("load s1=10 s2=20 s3=30")


def test_plot_is_a_png(tmp_path: Path) -> None:
    png = tmp_path / "out" / "demo.png"
    plot([row(p, [p, 2 * p, 3]) for p in range(1, 6)], ["s1", "s2", "s3"], png, "test")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_summary_counts_only_periods_inside_the_load(tmp_path: Path) -> None:
    rows = [row(p, [10, 10]) for p in range(1, 9)]  # times 101 .. 108, lambda 0.25 / period
    summary = tmp_path / "summary.json"
    assert describe(rows, summary, 1.0) == "lambda: the rack wrote no summary"
    summary.write_text(json.dumps({"load_start": 102.0, "load_end": 107.5}))
    # inside: periods 3..7 (times 103..107); second half: periods 5..7
    text = describe(rows, summary, 1.0)
    assert text.startswith(f"lambda: {0.25 / 3:.3f} in the first period of load")
    assert f"highest {0.25 / 5:.3f}) over the last 3 periods" in text
