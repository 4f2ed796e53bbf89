"""Process supervision (:mod:`kvsrack.procs`): stopping every process of a run (the test: about 2 s)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from kvsrack.procs import Procs

# exits 0.5 s after its SIGTERM, or never (it ignores SIGTERM); says when it got it
SLOW_EXIT = """
import signal, sys, time
def on_term(*_):
    print(time.monotonic(), flush=True)
    if sys.argv[1] == "exit":
        time.sleep(0.5)
        sys.exit(0)
signal.signal(signal.SIGTERM, on_term)
print("ready", flush=True)
while True:
    time.sleep(1)
"""


def test_stop_all_signals_every_process_first_and_kills_what_ignores_it(tmp_path: Path) -> None:
    procs = Procs(record=tmp_path / "pids.txt")
    modes = ["exit", "exit", "ignore", "exit"]
    for mode in modes:
        p = subprocess.Popen(
            [sys.executable, "-c", SLOW_EXIT, mode], stdout=subprocess.PIPE, text=True
        )
        assert p.stdout is not None and p.stdout.readline() == "ready\n"
        procs.add(mode, p)
    done = subprocess.Popen([sys.executable, "-c", "pass"])  # exited before the stop
    done.wait()
    procs.add("done", done)
    popens = [proc.popen for proc in procs.items]
    began = time.monotonic()
    procs.stop_all(grace=1.0)
    assert not procs.items
    assert [p.returncode for p in popens] == [0, 0, -9, 0, 0]
    # every running process had its SIGTERM before the first one (0.5 s to exit) was gone
    got = [float(p.stdout.readline()) for p in popens[:4] if p.stdout is not None]
    assert max(got) - began < 0.5, [t - began for t in got]
    for p in popens[:4]:
        assert p.stdout is not None
        p.stdout.close()
