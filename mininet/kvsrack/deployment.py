"""A topology up and torn down: the run's tag and socket folder, its output folder (``run.json``,
``pids.txt``, one log per process), the Mininet network, every process by PID. What runs on it
(switch programs, agents, controllers) is a subclass's: :class:`kvsrack.rack.Rack` for one rack;
a fabric would be another subclass over the same parts.

Use as a context manager: ``__exit__`` tears everything down, also on Ctrl-C, SIGTERM or a failed
start, and removes only what this run created.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import signal
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, Self

from kvsrack.network import Network, SwitchNode, switch_name
from kvsrack.procs import Proc, Procs
from kvsrack.topology import Topology


def new_tag() -> tuple[str, Path]:
    """A tag no other run uses, and the run's socket folder. The tag names the switches (their
    interfaces are t<tag>-ethN) and the folder (unix socket paths must stay short: 108 bytes)."""
    while True:
        tag = uuid.uuid4().hex[:6]
        run_dir = Path(f"/tmp/kvswitch-{tag}")
        if not run_dir.exists() and not Path(f"/sys/class/net/{switch_name(tag, 0)}-eth1").exists():
            return tag, run_dir


class Deployment:
    """The life cycle shared by every topology: :meth:`start` makes the folders, builds the
    network with :meth:`switch_nodes`, records ``run.json`` and calls :meth:`start_roles`."""

    def __init__(self, topo: Topology, out: Path) -> None:
        self.topology = topo
        self.out = out
        self.tag, self.run_dir = new_tag()
        self.run_dir_made = False
        self.procs = Procs()
        self.network = Network(topo, self.tag)
        self.echo: Callable[[str], None] = print

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- what a subclass says

    def switch_nodes(self) -> dict[str, SwitchNode]:
        """How each switch role of the topology runs (called once, before the network starts)."""
        raise NotImplementedError

    def start_roles(self) -> None:
        """Start what runs on the network once it is up (agents, controllers)."""
        raise NotImplementedError

    def run_info(self) -> dict[str, Any]:
        """What else ``run.json`` tells a test (the switches' runtime ports)."""
        return {}

    # -- start-up

    def start(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        self.procs.record = self.out / "pids.txt"
        self.procs.record.write_text("")
        run = {"tag": self.tag, "switch": switch_name(self.tag, 0), "run_dir": str(self.run_dir)}
        (self.out / "run.json").write_text(json.dumps(run))
        self.run_dir.mkdir(mode=0o700)
        self.run_dir_made = True
        self.network.start(self.switch_nodes(), self.procs)
        self.write_run_file()
        self.start_roles()

    def write_run_file(self) -> None:
        """``OUT/run.json``: what teardown checks (tag, switch, socket folder) and what a test
        needs to act inside the network: each host's PID (``mnexec -a PID`` enters its network
        namespace), and :meth:`run_info`."""
        run = json.loads((self.out / "run.json").read_text())
        run["hosts"] = {n.name: self.network.host(n.name).pid for n in self.topology.hosts}
        run.update(self.run_info())
        (self.out / "run.json").write_text(json.dumps(run) + "\n")

    def start_in(self, host: str, args: list[str], log_name: str) -> Proc:
        """``args`` inside host ``host``, its output to ``OUT/log_name``."""
        return self.procs.start_in(self.network.host(host), args, self.out / log_name)

    # -- switch faults

    def kill_switch(self, role: str) -> None:
        """SIGKILL the process of switch ``role`` (a crash: its controllers see the connection
        drop, its links stay)."""
        self.network.switches[role].kill_process()

    def restart_switch(self, role: str) -> None:
        """Start switch ``role`` again on its ports, empty (no program, no entries), until its
        P4Runtime port answers: its controllers must notice and program it again."""
        self.network.switches[role].start_process()

    # -- teardown

    def close(self) -> None:
        # a second Ctrl-C or SIGTERM must not cut the teardown short
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        with contextlib.suppress(Exception):
            self.procs.stop_all()
        self.network.close()
        if self.run_dir_made:  # the agents' sockets, a redis working folder
            shutil.rmtree(self.run_dir, ignore_errors=True)
