"""Evidence of reruns (``make test`` reruns a failed rack test once, pytest-rerunfailures): each
first failure's text and output go to ``build/rack-reruns.log``, and its one-line reason to the
terminal summary, so a rerun that passed still says why it was needed."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

RERUN_LOG = "build/rack-reruns.log"
_reruns: list[str] = []  # this session's, for the summary
_log: list[Path] = []  # the log's path under the session's root folder


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.outcome != "rerun":
        return
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is None:
        reason = report.longreprtext[-200:]
    else:  # the message's first line and pytest's "assert ..." line (the message may be a log)
        lines = crash.message.splitlines()
        asserted = [x.strip() for x in lines[1:] if x.strip().startswith("assert ")]
        reason = " | ".join([lines[0][:200], *asserted[-1:]])
    _reruns.append(f"{report.nodeid} ({report.when}, {report.duration:.0f} s): {reason}")
    _log[0].parent.mkdir(parents=True, exist_ok=True)
    with _log[0].open("a") as f:
        f.write(f"==== {time.strftime('%Y-%m-%d %H:%M:%S')} rerun of {report.nodeid}\n")
        f.write(f"{report.longreprtext}\n")
        for name, text in report.sections:
            f.write(f"---- {name}\n{text}\n")


def pytest_configure(config: pytest.Config) -> None:
    _log[:] = [config.rootpath / RERUN_LOG]


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _reruns:
        terminalreporter.section(f"reruns: first failures (full text in {RERUN_LOG})")
        for line in _reruns:
            terminalreporter.write_line(line)
