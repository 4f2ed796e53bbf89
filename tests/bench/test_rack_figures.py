"""The rack ramps' reading of a run (``kvswitch bench rack-ramp`` and ``slo``): figures from the
load generators' summaries, and the rate sustained at a p99 bound. No rack."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvswitch.bench import slo
from kvswitch.bench.rack_ramp import figures, sustained, within


def loadgen(p99s: list[float], sent: int = 100, received: int = 100) -> dict[str, Any]:
    intervals = [
        {"t": i + 1.0, "sent": sent, "received": received, "p50_us": 1000.0, "p99_us": p99,
         "p999_us": p99 * 1.1, "sent_per_server": [60, 20, 20], "replies_per_server": [40, 30, 30]}
        for i, p99 in enumerate(p99s)
    ]  # fmt: skip
    n = len(p99s)
    return {
        "sent": sent * n, "received": received * n, "throughput": float(received),
        "latency_us": {"p50": 1000.0, "p99": max(p99s), "p999": max(p99s) * 1.1},
        "intervals": intervals,
    }  # fmt: skip


def test_figures_of_the_second_half() -> None:
    # a bad first half (the controller not yet balancing) and one stalled second in the second
    fig = figures({"loadgen": [loadgen([900e3, 800e3, 20e3, 30e3, 400e3, 25e3])]})
    assert fig["late_p99_ms"] == pytest.approx(400.0)  # the worst second of the second half
    assert fig["late_p99_med_ms"] == pytest.approx(30.0)  # its median second
    assert fig["p99_ms"] == pytest.approx(900.0)
    assert fig["max_share"] == pytest.approx(0.4)
    assert fig["offered_max_share"] == pytest.approx(0.6)
    assert fig["late_loss"] == 0.0
    lossy = figures({"loadgen": [loadgen([10e3] * 4, sent=100, received=90)]})
    assert lossy["late_loss"] == pytest.approx(0.1)


def test_sustained_is_the_highest_throughput_within_the_bound() -> None:
    rows = [
        {"throughput": 200.0, "late_p99_med_ms": 30.0, "late_loss": 0.0},
        {"throughput": 300.0, "late_p99_med_ms": 90.0, "late_loss": 0.0},
        {"throughput": 350.0, "late_p99_med_ms": 120.0, "late_loss": 0.0},  # over the bound
        {"throughput": 380.0, "late_p99_med_ms": 50.0, "late_loss": 0.05},  # lost 5 %
        {"error": "rack failed"},
    ]
    assert sustained(rows, 100.0, slo.P99) == 300.0
    assert not within(rows[4], 100.0, slo.P99)
    assert sustained(rows[2:], 100.0, slo.P99) == 0.0


def test_workload_flags_bound_the_agents() -> None:
    flags = slo.workload_flags(100.0, "exp", 500, 1.2, 0.05)
    assert flags[:6] == ["--zipf", "1.2", "--keys", "500", "--write-ratio", "0.05"]
    assert "--agent-arg=--capacity=100" in flags and "--agent-arg=--service=exp" in flags
    assert "--agent-arg=--queue-limit=50" in flags  # 0.5 s of service: the loadgen's timeout


def test_replot_of_a_bad_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    bad = tmp_path / "slo.json"
    bad.write_text("{not json")
    assert slo.main(["--replot", str(bad), "--plot", str(tmp_path / "x.png")]) == 2
    assert capsys.readouterr().out.count("\n") == 1


def test_replot_draws_earlier_results(tmp_path: Path) -> None:
    rows = {m: [{"rate": 200, "throughput": 200.0, "late_p99_med_ms": 30.0, "late_loss": 0.0}]
            for m in slo.MODES}  # fmt: skip
    res = {"rows": rows, "sustained": {m: 200.0 for m in slo.MODES}, "ratio": 1.0,
           "sim_ratios": [1.1], "bound_ms": 100.0}  # fmt: skip
    (tmp_path / "slo.json").write_text(json.dumps({"softswitch": {"zipf 1.2": res}}))
    out = tmp_path / "p.png"
    assert slo.main(["--replot", str(tmp_path / "slo.json"), "--plot", str(out)]) == 0
    assert out.stat().st_size > 1000
