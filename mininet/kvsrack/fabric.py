"""A KVSwitch leaf-spine fabric on Mininet (docs/fabric.md): S spines and R leaves of the
software switch (or BMv2), M servers with agents per rack, clients on the leaves; one rack
controller per leaf (``kvswitch controller`` on p4src/kvswitch_leaf.p4, writing the rack's
inputs for the fabric and reading its share back) and the fabric controller
(``kvswitch fabric-controller`` over the fabric file, which programs the spines and the leaves'
steering). ``kvswitch rack --fabric`` runs it (:mod:`kvsrack.cli`).

The rack controllers run ``--observe-only`` unless ``racks_balance`` (``--racks-balance``): they
measure their rack (loads, candidates) and hand it to the fabric controller, which places every
replica. Every rack file names the fabric's ring (every server, in the fabric's order): the
agents serve it and the rack controllers compute origins on it, as the clients and the fabric
controller do. With the rack controllers balancing too, λ moves more from period to period (their
own replica changes; docs/fabric.md "Mininet fabric: histories and restarts").

Start-up, files and teardown are :class:`~kvsrack.deployment.Deployment`'s; each rack
controller's files are in ``OUT/l<r>/`` (``metrics.jsonl``, its log, state, hand-off files).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from subprocess import DEVNULL, PIPE
from typing import Any

from kvsrack import topology
from kvsrack.deployment import Deployment
from kvsrack.launchers import PY, Agents, Controller, controller_command
from kvsrack.launchers import probe_command as probe
from kvsrack.network import SwitchNode
from kvsrack.switches import TARGETS
from kvsrack.topology import FabricLayout
from kvswitch.agent.backend_procs import free_port
from kvswitch.controller.fabricfile import Endpoint, FabricFile, RackSide, SpineSide
from kvswitch.controller.rackfile import _ip, _mac
from kvswitch.controller.threshold import imbalance
from kvswitch.paths import p4src_dir


@dataclass
class FabricOptions:
    spines: int = 2
    racks: int = 4
    servers: int = 4  # per rack
    clients: int = 1
    backend: str = "memory"
    target: str = "softswitch"
    period: float = 1.0
    k: int = 16  # hot-key slots of every switch (the fabric controller's k per spine)
    spine_level: bool = False  # False: the fabric controller only routes (the no-spine baseline)
    racks_balance: bool = False  # the rack controllers balance too (default: they observe only)
    agent_args: list[str] = field(default_factory=list)
    variant: str = ""  # TESTS ONLY: a broken fabric controller (kvsrack.variants)


class Fabric(Deployment):
    """The running fabric. Use as a context manager: ``__exit__`` tears everything down."""

    def __init__(self, opts: FabricOptions, out: Path) -> None:
        self.layout = FabricLayout(opts.spines, opts.racks, opts.servers, opts.clients)
        super().__init__(self.layout.topology(), out)
        self.opts = opts
        self.ports = {sw: (free_port(), free_port()) for sw in self.topology.switches}
        self.fabric_file = out / "fabric.json"
        self.agents = Agents(
            self.procs, self.network.host, self.topology, backend=opts.backend,
            run_dir=self.run_dir, out=out, extra=opts.agent_args,
        )  # fmt: skip
        self.racks = [
            Controller(self.procs, self.rack_out(r), self.rack_command(r), self.echo_rack(r))
            for r in range(opts.racks)
        ]
        # the fabric controller: what a scenario restarts or stops as "the controller"
        self.controller = Controller(
            self.procs, out, lambda _n: self.fabric_command(), lambda line: self.echo(line)
        )
        self.admin = self.run_dir / "l1.admin"  # no membership changes in a fabric

    # -- the parts

    def rack_out(self, r: int) -> Path:
        return self.out / self.layout.leaf(r)

    def echo_rack(self, r: int):
        leaf = self.layout.leaf(r)
        return lambda line: self.echo(f"{leaf}: {line}")

    def spine_defines(self) -> list[str]:
        total = self.opts.racks * self.opts.servers
        return [f"HOT_KEYS={self.opts.k}", f"MAX_SERVERS={total}", f"MAX_HOLDERS={total}"]

    def leaf_defines(self) -> list[str]:
        return [f"HOT_KEYS={self.opts.k}", f"MAX_SERVERS={self.opts.servers}"]

    def rack_command(self, r: int):
        o, rack_out = self.opts, self.rack_out(r)
        grpc, thrift = self.ports[self.layout.leaf(r)]

        def command(_start: int) -> list[str]:
            return controller_command(
                rack_file=rack_out / "rack.json", arch="v1model", target=o.target,
                grpc_port=grpc, thrift_port=thrift, period=o.period, k=o.k, policy="balance",
                out=rack_out, admin=self.run_dir / f"{self.layout.leaf(r)}.admin",
                defines=self.leaf_defines(), observe_only=not o.racks_balance,
                program=p4src_dir() / "kvswitch_leaf.p4",
                extra=["--fabric-out", str(rack_out / "inputs.json"),
                       "--fabric-in", str(rack_out / "share.json")],
            )  # fmt: skip

        return command

    def fabric_command(self) -> list[str]:
        o = self.opts
        program = (
            ["kvsrack.variants", o.variant] if o.variant else ["kvswitch", "fabric-controller"]
        )
        cmd = [
            PY, "-m", *program, "--config", str(self.fabric_file),
            "--state", str(self.out / "fabric.state"), "--period", str(o.period),
            "--metrics", str(self.out / "fabric-metrics.jsonl"),
            "--target", o.target,
        ]  # fmt: skip
        for d in self.spine_defines():
            cmd += ["--spine-define", d]
        for d in self.leaf_defines():
            cmd += ["--leaf-define", d]
        if not o.spine_level:
            cmd += ["--periods", "0"]  # start-up only: routes and uplinks, no fabric-hot key
        return cmd

    def fabric_doc(self) -> FabricFile:
        """The fabric file of this run (:class:`~kvswitch.controller.fabricfile.FabricFile`)."""
        lay, o = self.layout, self.opts

        def end(sw: str) -> Endpoint:
            grpc, thrift = self.ports[sw]
            return Endpoint(sw, f"127.0.0.1:{grpc}", "127.0.0.1", thrift)

        spines = tuple(
            SpineSide(end(lay.spine(s)), _mac(lay.spine_mac(s), "mac"),
                      tuple(r + 1 for r in range(o.racks)))
            for s in range(o.spines)
        )  # fmt: skip
        racks = tuple(
            RackSide(
                end(lay.leaf(r)), _mac(lay.leaf_mac(r), "mac"),
                (_ip(lay.subnet(r).split("/")[0], "subnet"), 16),
                tuple(topology.UPLINK + s for s in range(o.spines)),
                tuple(_ip(n.ip, n.name) for n in lay.rack_servers(r)),
                tuple(topology.control_endpoint(self.run_dir, n.name)
                      for n in lay.rack_servers(r)),
                str(self.rack_out(r) / "inputs.json"), str(self.rack_out(r) / "share.json"),
            )
            for r in range(o.racks)
        )  # fmt: skip
        total = o.racks * o.servers
        return FabricFile(spines, racks, o.k, total, 4 * o.k)

    # -- Deployment

    def switch_nodes(self) -> dict[str, SwitchNode]:
        cls = TARGETS[self.opts.target]
        return {
            sw: SwitchNode(cls, *self.ports[sw], self.out / f"{sw}.log")
            for sw in self.topology.switches
        }

    def start_roles(self) -> None:
        """The rack and fabric files, the agents, the rack controllers, then the fabric
        controller, until the first client reaches the last server of every rack."""
        for r in range(self.opts.racks):
            self.rack_out(r).mkdir(parents=True, exist_ok=True)
            view = self.layout.rack_topology(r)
            rf = topology.rack_file(view, self.run_dir)
            # the fabric's ring: the agents and the rack controller hash over every server, as
            # the clients and the fabric controller do
            ring = tuple(_ip(n.ip, n.name) for n in self.topology.servers)
            rf = replace(rf, fabric_ring=ring, fabric_first=r * self.opts.servers)
            rf.write(self.rack_out(r) / "rack.json")
        self.fabric_doc().write(self.fabric_file)
        self.agents.start_all()
        for rc in self.racks:
            rc.start()
        self.controller.start()
        self.wait_reachable()

    def run_info(self) -> dict[str, Any]:
        return {"ports": self.ports}

    def wait_reachable(self, timeout: float = 120) -> None:
        c = self.topology.clients[0]
        for r in range(self.opts.racks):
            s = self.layout.rack_servers(r)[-1]
            deadline = time.monotonic() + timeout
            said = ""
            while True:
                for rc in [*self.racks, *([self.controller] if self.opts.spine_level else [])]:
                    if rc.exited():
                        raise RuntimeError(f"a controller exited (see {rc.out})")
                p = self.network.host(c.name).popen(probe(s), stdout=DEVNULL, stderr=PIPE)
                _, err = p.communicate()
                if p.returncode in (0, 1):
                    break
                said = err.decode(errors="replace").strip()
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{s.name} not reachable from {c.name}: {said}")
                time.sleep(0.3)

    def stop_controllers(self) -> dict[str, int | None]:
        status = {"fabric": self.controller.stop()}
        for r, rc in enumerate(self.racks):
            status[self.layout.leaf(r)] = rc.stop()
        return status


# ---------------------------------------------------------------- lambda per period


def periods(
    out: Path, racks: int, start: float = 0.0, end: float = float("inf"), period: float = 1.0
) -> list[dict]:
    """Each period of the first rack controller between ``start`` and ``end`` (Unix times), with
    each other rack's period nearest in time: the loads of every server (fabric order), lambda
    over all servers, across the racks' totals and inside each rack. A rack with no period within
    ``period`` of it (its controller counted nothing: its leaf was down) counts as no load
    (``missing`` names it). With the fabric controller's ``fabric-metrics.jsonl``, each row
    also has the fabric-hot keys and the rotated ones (docs/protocol.md F7) of its last period
    that ended before the row's (the plan the row's period ran under; None: none yet)."""
    fabric_path = out / "fabric-metrics.jsonl"
    fabric_rows = (
        [json.loads(x) for x in fabric_path.read_text().splitlines() if x.strip()]
        if fabric_path.exists()
        else []
    )
    series = []
    for r in range(racks):
        path = out / f"l{r + 1}" / "metrics.jsonl"
        rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
        series.append([m for m in rows if m.get("loads")])
    out_rows = []
    for m in series[0]:
        t = float(m["time"])
        if not start <= t <= end:
            continue
        picks = [
            min(rows, key=lambda x: abs(float(x["time"]) - t), default=None) for rows in series
        ]
        missing = [
            r for r, x in enumerate(picks) if x is None or abs(float(x["time"]) - t) > period
        ]
        size = len(m["loads"])  # servers per rack
        loads = [
            [float(v) for v in x["loads"]] if x is not None and r not in missing else [0.0] * size
            for r, x in enumerate(picks)
        ]
        flat = [v for rack in loads for v in rack]
        plan = max(
            (x for x in fabric_rows if float(x["time"]) < t), key=lambda x: x["time"], default=None
        )
        out_rows.append(
            {
                "period": m["period"],
                "time": t,
                "missing": missing,
                "loads": flat,
                "lambda": imbalance(flat),
                "racks_lambda": imbalance([sum(x) for x in loads]),
                "rack_share": [sum(x) / max(1.0, sum(flat)) for x in loads],
                "in_rack": [imbalance(x) for x in loads],
                "fabric_keys": None if plan is None else len(plan["keys"]),
                "rotated": None if plan is None else len(plan.get("rotated", [])),
            }
        )
    return out_rows


def table(rows: list[dict]) -> str:
    lines = [
        "period  lambda(all)  lambda(racks)  busiest rack/fair  fabric keys  rotated  "
        "lambda inside each rack"
    ]
    for x in rows:
        busiest = max(x["rack_share"]) * len(x["rack_share"])
        inside = " ".join(f"{v:.3f}" for v in x["in_rack"])
        keys, rotated = ("-", "-") if x.get("rotated") is None else (x["fabric_keys"], x["rotated"])
        lines.append(
            f"{x['period']:>6}  {x['lambda']:>11.3f}  {x['racks_lambda']:>13.3f}  "
            f"{busiest:>17.2f}  {keys:>11}  {rotated:>7}  {inside}"
        )
    return "\n".join(lines)


def plot(rows: list[dict], path: Path, title: str) -> None:
    """lambda over all servers and across racks (top), inside each rack (bottom)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t0 = rows[0]["time"]
    ts = [x["time"] - t0 for x in rows]
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(9, 7), sharex=True)
    ax1.plot(ts, [x["lambda"] for x in rows], marker="o", label="all servers")
    ax1.plot(ts, [x["racks_lambda"] for x in rows], marker="s", label="across racks")
    ax1.axhline(0.1, color="grey", linestyle=":")
    ax1.set_ylabel("imbalance lambda")
    ax1.set_ylim(bottom=0)
    ax1.legend()
    ax1.grid(alpha=0.3)
    ax1.set_title(title)
    for r in range(len(rows[0]["in_rack"])):
        ax2.plot(ts, [x["in_rack"][r] for x in rows], label=f"inside rack {r + 1}")
    ax2.set_ylabel("lambda inside a rack")
    ax2.set_xlabel("time (s)")
    ax2.set_ylim(bottom=0)
    ax2.legend(ncol=4, fontsize="small")
    ax2.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
