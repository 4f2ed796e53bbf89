"""The simulator end to end at a small scale, and the ``kvswitch sim`` command."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from kvswitch.bench.sim_cli import main
from kvswitch.bench.simulator import SimConfig, simulate, summary

SMALL = {"keys": 20_000, "k": 200, "servers": 8, "queries": 200_000, "periods": 5}


@pytest.fixture(scope="module")
def results() -> dict[str, dict]:
    out = {}
    for name, kw in {
        "original": {"mode": "original"},
        "all-hot": {"mode": "all-hot"},
        "netcache": {"mode": "netcache"},
        "ring": {"policy": "ring", "bound": 0.05},
        "balance": {"policy": "balance", "max_replicas_per_server": 53},
    }.items():
        out[name] = summary(simulate(SimConfig(skew=0.99, **SMALL, **kw)), warmup=2)
    return out


def test_balancing_beats_original(results: dict[str, dict]) -> None:
    original = results["original"]["imbalance"]
    assert original > 0.1
    assert results["ring"]["imbalance"] < original / 2
    assert results["balance"]["imbalance"] < 0.03
    assert results["balance"]["throughput_qps"] > 1.3 * results["original"]["throughput_qps"]
    assert results["balance"]["replicas_max"] <= 53


def test_baselines_and_prediction(results: dict[str, dict]) -> None:
    assert results["all-hot"]["replicas_mean"] == pytest.approx(200 * 7 / 8)
    assert results["netcache"]["throughput_qps"] > results["original"]["throughput_qps"]
    assert results["ring"]["top_k_overlap"] > 0.3
    assert results["ring"]["predicted_share"] <= results["ring"]["true_top_k_share"] + 0.01


def test_writes_cost_copies_and_balance_survives() -> None:
    rows = simulate(SimConfig(skew=0.99, write_ratio=0.2, policy="balance", **SMALL))
    assert rows[-1]["imbalance"] < rows[0]["imbalance"]
    assert rows[-1]["register_writes"] >= 0


def test_sim_run_writes_csv(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "run.csv"
    args = ["run", "--keys", "5000", "--k", "100", "--servers", "4", "--queries", "50000"]
    assert main([*args, "--periods", "3", "--policy", "balance", "--csv", str(path)]) == 0
    out = capsys.readouterr().out
    assert "period 3/3" in out and "summary" in out
    with path.open() as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 3 and {"imbalance", "threshold", "table_updates"} <= set(rows[0])


def test_sim_rejects_bad_config(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:  # refused by the argument parser, one line
        main(["run", "--keys", "100", "--write-ratio", "2"])
    assert exc.value.code == 2
    assert "--write-ratio: 2 is out of range (between 0 and 1)" in capsys.readouterr().err


def test_racks_partition_the_workload() -> None:
    from kvswitch.bench.workload import Workload

    parts = [Workload(5000, 0.99, racks=3, rack=r) for r in range(3)]
    ids = np.concatenate([w.perm for w in parts])
    assert sorted(ids.tolist()) == list(range(5000))
    assert sum(w.share for w in parts) == pytest.approx(1.0)
    full = Workload(5000, 0.99).key_probabilities()
    for w in parts:  # each rack keeps the global popularity of its keys
        assert np.allclose(
            w.key_probabilities() * w.share, np.where(w.key_probabilities() > 0, full, 0)
        )
    with pytest.raises(ValueError):
        Workload(100, 1.0, racks=2, rack=2)


def test_sim_racks_reports_the_imbalance_over_all_servers(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ["racks", "--racks", "2", "--keys", "4000", "--k", "50", "--servers", "4"]
    args += ["--queries", "40000", "--periods", "3", "--policy", "balance", "--warmup", "1"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "lambda over 8 servers" in out and "2 racks x 4 servers, balance+spine" in out
    assert main([*args, "--no-spine"]) == 0
    assert "2 racks x 4 servers, balance (racks alone)" in capsys.readouterr().out


def test_figures_only_reruns_one_experiment_and_keeps_the_rest(tmp_path: Path) -> None:
    out = str(tmp_path)
    assert main(["figures", "--quick", "--only", "scale", "--out", out]) == 0
    assert main(["figures", "--quick", "--only", "prediction", "--out", out]) == 0
    with (tmp_path / "summary.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert {r["experiment"] for r in rows} == {"scale", "prediction"}
    assert float(next(r for r in rows if r["experiment"] == "scale")["servers"]) > 0
    assert (tmp_path / "fig9c_scale.png").stat().st_size > 0
    assert main(["figures", "--quick", "--only", "nonesuch", "--out", out]) == 2
