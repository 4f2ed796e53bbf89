"""Workloads and fault scenarios run against a running network: the preload, the load
generators and history clients on the clients, server kills and restarts, online membership
changes and controller restarts at their times; what happened, in a summary (``summary.json``).

A scenario needs only what :class:`Cluster` declares, which the rack has (and a fabric can).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from kvsrack.launchers import Agents, Controller, history_command, loadgen_command
from kvsrack.procs import Proc
from kvsrack.topology import Topology
from kvswitch.controller.elastic import ask


@dataclass(frozen=True)
class ServerEvent:
    """``--kill s3@20``: SIGKILL server s3's agent 20 s into the load; ``--restart s3@30``:
    start it again (an empty memory backend; memcached/Redis keep running); ``--add s9@10``:
    bring s9 into the ring online (a server after --servers is a spare until then);
    ``--remove s3@20``: take s3 out of the ring online (its agent keeps running, owning nothing;
    after ``--kill s3@T``: removed while down, its keys' new owners get what its replicas hold).
    """

    action: str  # "kill", "restart", "add" or "remove"
    server: str
    at: float


@dataclass
class Workload:
    rate: int = 400
    duration: float = 20.0
    zipf: float = 0.99
    keys: int = 1000
    write_ratio: float = 0.0
    preload: bool = True
    seed: int = 1
    loadgens: int = 1
    loadgen_args: list[str] = field(default_factory=list)  # more for every loadgen
    history_args: list[str] = field(default_factory=list)  # more for every history client
    history_threads: int = 0
    history_keys: int = 4
    history_rate: float = 100.0
    history_set_ratio: float = 0.05
    read_tail: float = 0.0
    restart_controller_at: float = 0.0
    restart_pause: float = 1.0
    settle: float = 1.0
    events: list[ServerEvent] = field(default_factory=list)


class Cluster(Protocol):
    """What a scenario drives: the running network's hosts, agents, controller, admin socket
    and switch processes, and where its files go."""

    out: Path
    topology: Topology
    agents: Agents
    controller: Controller
    admin: Path
    echo: Callable[[str], None]

    def start_in(self, host: str, args: list[str], log_name: str) -> Proc: ...

    def kill_switch(self, role: str) -> None: ...

    def restart_switch(self, role: str) -> None: ...


def spares_of(events: list[ServerEvent], servers: int) -> int:
    """How many servers beyond ``servers`` the --add events name (s9 with 8: one spare)."""
    top = max((int(e.server[1:]) for e in events if e.action == "add"), default=0)
    return max(0, top - servers)


def check_events(events: list[ServerEvent], servers: int) -> str:
    """'' when every event names a server of the rack and, in time order, kills only a running
    agent, restarts only a killed one, adds only a non-member whose agent runs and removes only a
    member (at least one left; a killed one too: removed while down); else why not. Servers beyond ``servers`` exist only if some --add names
    them (spares)."""
    total = servers + spares_of(events, servers)
    names = {f"s{i + 1}" for i in range(total)}
    running = set(names)
    members = {f"s{i + 1}" for i in range(servers)}
    for e in sorted(events, key=lambda e: e.at):
        if e.server not in names:
            return f"--{e.action} {e.server}: the rack has servers s1 .. s{total}"
        if e.action in ("kill", "restart"):
            if (e.action == "kill") != (e.server in running):
                state = "not running" if e.action == "kill" else "running"
                return f"--{e.action} {e.server}@{e.at:g}: its agent is {state} then"
            running ^= {e.server}
            continue
        if (e.action == "add") == (e.server in members):
            state = "already" if e.action == "add" else "not"
            return f"--{e.action} {e.server}@{e.at:g}: it is {state} a member then"
        if e.action == "add" and e.server not in running:
            return f"--{e.action} {e.server}@{e.at:g}: its agent is not running then"
        members ^= {e.server}
        if not members:
            return f"--remove {e.server}@{e.at:g}: the ring would have no member"
    return ""


def check_switch_events(events: list[ServerEvent], switches: tuple[str, ...]) -> str:
    """'' when every event kills or restarts a switch of ``switches`` and, in time order, kills
    only a running one and restarts only a killed one; else why not."""
    running = set(switches)
    for e in sorted(events, key=lambda e: e.at):
        if e.action not in ("kill", "restart") or e.server not in switches:
            return (f"--{e.action} {e.server}: a fabric run kills and restarts switches only "
                    f"({', '.join(switches)})")  # fmt: skip
        if (e.action == "kill") != (e.server in running):
            state = "not running" if e.action == "kill" else "running"
            return f"--{e.action} {e.server}@{e.at:g}: the switch is {state} then"
        running ^= {e.server}
    return ""


def loadgen_count(c: Cluster, w: Workload) -> int:
    clients = len(c.topology.clients)
    return max(1, min(w.loadgens or clients, clients))


def loadgen_args(c: Cluster, w: Workload, extra: bool = True) -> list[str]:
    """The loadgen's command line (``extra``: with the --loadgen-arg ones; the preload is
    set-up, not workload, and goes without them)."""
    return loadgen_command(
        c.topology.members,
        rate=max(1, w.rate // loadgen_count(c, w)),
        duration=w.duration + w.read_tail,
        zipf=w.zipf,
        keys=w.keys,
        write_ratio=w.write_ratio,
        seed=w.seed,
        extra=w.loadgen_args if extra else (),
    )


def history_args(c: Cluster, w: Workload, client_index: int) -> list[str]:
    return history_command(
        c.topology.members,
        threads=w.history_threads,
        keys=w.history_keys,
        rate=w.history_rate,
        set_ratio=w.history_set_ratio,
        duration=w.duration,
        read_tail=w.read_tail,
        client=client_index,
        out=c.out / f"{c.topology.clients[client_index].name}-history.jsonl",
        extra=w.history_args,
    )


def preload(c: Cluster, w: Workload) -> None:
    """Every key Set once from the first client (one second's loadgen run with --preload)."""
    args = loadgen_args(c, w, extra=False)
    args[args.index("--duration") + 1] = "1"
    args[args.index("--rate") + 1] = "1"
    p = c.start_in(c.topology.clients[0].name, [*args, "--preload"], "preload.log")
    if p.popen.wait() != 0:
        raise RuntimeError(f"preload failed: {p.log.read_text() if p.log else ''}")


def run(c: Cluster, w: Workload) -> dict[str, Any]:
    """The workload: loadgens (and history clients) on the clients, the events at their times;
    returns the summary."""
    summary: dict[str, Any] = {"loadgen": [], "history": [], "failed": []}
    clients = c.topology.clients
    if w.preload and w.rate > 0:
        preload(c, w)
    summary["load_start"] = time.time()
    loadgens = [
        c.start_in(n.name, loadgen_args(c, w), f"{n.name}-loadgen.json")
        for n in clients[: loadgen_count(c, w)]
        if w.rate > 0
    ]
    histories = [
        c.start_in(n.name, history_args(c, w, i), f"{n.name}-history.log")
        for i, n in enumerate(clients)
        if w.history_threads > 0
    ]
    start = time.monotonic()
    restarted = False
    pending = sorted(w.events, key=lambda e: e.at)
    summary["events"] = []
    while any(p.popen.poll() is None for p in [*loadgens, *histories]):
        elapsed = time.monotonic() - start
        while pending and elapsed >= pending[0].at:
            summary["events"].append(server_event(c, pending.pop(0), elapsed))
            elapsed = time.monotonic() - start
        if w.read_tail and "versions" not in summary and elapsed > w.duration + w.read_tail / 2:
            # the Sets have stopped, the keys are still read (hot): what do the holders hold?
            summary["versions"] = c.agents.versions()
            summary["versions_time"] = time.time()
        crashed = c.controller.crash_in_handoff and c.controller.exited()
        kill = bool(w.restart_controller_at) and elapsed >= w.restart_controller_at
        if not restarted and (crashed or kill):
            how = "exited (mid-handoff)" if crashed else "killed (SIGKILL)"
            c.echo(f"rack: controller {how} at {elapsed:.1f} s, restarting")
            c.controller.restart(w.restart_pause, kill=not crashed)
            restarted = True
            summary["restart_time"], summary["restart_mono"] = time.time(), time.monotonic()
        if elapsed > w.duration + w.read_tail + 120:
            raise RuntimeError("the workload did not end")
        time.sleep(0.1 if not pending else max(0.0, min(0.1, pending[0].at - elapsed)))
    summary["load_end"] = time.time()
    for p in [*loadgens, *histories]:
        if p.popen.returncode != 0:
            summary["failed"].append({"name": p.name, "status": p.popen.returncode})
    for p in loadgens:
        if p.log is not None and p.popen.returncode == 0:
            summary["loadgen"].append(json.loads(p.log.read_text().strip().splitlines()[-1]))
    summary["history"] = [str(c.out / f"{n.name}-history.jsonl") for n in clients][: len(histories)]
    if "versions" not in summary:
        time.sleep(w.settle)
        summary["versions"] = c.agents.versions()
        summary["versions_time"] = time.time()
    # where each rotated key's writes were applied (its writers, docs/protocol.md F7)
    summary["writer_writes"] = c.agents.writer_writes()
    return summary


#: how long a membership event waits for the controller's admin socket to listen: a controller
#: started again (after a crash) binds it only once its start-up (recovery from the switch and
#: its state file) is done, which takes seconds on a loaded machine
ADMIN_WAIT = 30.0


def ask_when_listening(path: str, action: str, server: str) -> dict[str, Any]:
    """``ask`` the controller's admin socket; while nothing listens on it yet (refused or not
    there: the request was not sent), ask again, for up to :data:`ADMIN_WAIT` seconds."""
    deadline = time.monotonic() + ADMIN_WAIT
    while True:
        try:
            return ask(path, action, server)
        except (ConnectionRefusedError, FileNotFoundError):
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.1)


def server_event(c: Cluster, event: ServerEvent, elapsed: float) -> dict[str, Any]:
    """Kill, restart, add or remove a server now; what happened, when (Unix time)."""
    record: dict[str, Any] = {"action": event.action, "server": event.server}
    if event.action in ("add", "remove"):
        record["time"], record["mono"] = time.time(), time.monotonic()
        try:
            answer = ask_when_listening(str(c.admin), event.action, event.server)
        except (OSError, ValueError) as exc:
            answer = {"ok": False, "error": str(exc)}
        record["done"], record["done_mono"] = time.time(), time.monotonic()
        record["answer"] = answer
        if not answer.get("ok") and c.controller.crash_in_handoff and c.controller.exited(5):
            c.echo(f"rack: {event.action} {event.server}: the controller died under it")
            return record
        if not answer.get("ok"):
            raise RuntimeError(f"--{event.action} {event.server}: {answer.get('error')}")
        c.echo(f"rack: {event.action} {event.server} at {elapsed:.2f} s: {answer}")
        return record
    if event.server in c.topology.switches:
        # a switch process: SIGKILLed, or started again empty ("ready": its P4Runtime answers)
        record["switch"] = True
        record["time"], record["mono"] = time.time(), time.monotonic()
        if event.action == "kill":
            c.kill_switch(event.server)
        else:
            c.restart_switch(event.server)
            record["ready"] = time.time()
    elif event.action == "kill":
        record["held"] = c.agents.kill(event.server)
        record["time"], record["mono"] = time.time(), time.monotonic()
    else:
        # started (Unix and monotonic time: the histories'); "ready": its control answers
        record["time"], record["mono"] = time.time(), time.monotonic()
        c.agents.start(event.server)
        c.agents.wait(event.server)
        record["ready"] = time.time()
    c.echo(f"rack: {event.action} {event.server} at {elapsed:.2f} s")
    return record
