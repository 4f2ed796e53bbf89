"""The console entry point: every subcommand and benchmark it names resolves to a real main()."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from kvswitch import cli
from kvswitch.bench import benchmarks as bench_cli


def _resolve(target: str):
    module_name, _, func_name = target.partition(":")
    return getattr(importlib.import_module(module_name), func_name or "main")


@pytest.mark.parametrize("name", sorted(cli.SUBCOMMANDS))
def test_subcommand_resolves(name: str) -> None:
    assert callable(_resolve(cli.SUBCOMMANDS[name][0]))


@pytest.mark.parametrize("name", sorted(bench_cli.BENCHMARKS))
def test_benchmark_resolves(name: str) -> None:
    assert callable(importlib.import_module(bench_cli.BENCHMARKS[name][0]).main)


def test_help_lists_subcommands() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "kvswitch", "--help"], capture_output=True, text=True, check=True
    ).stdout
    for name in cli.SUBCOMMANDS:
        assert name in out


def test_unknown_subcommand_is_an_error() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "kvswitch", "no-such-thing"], capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert "unknown subcommand" in proc.stderr
