"""A spine restarted under the fabric runtime (docs/fabric.md "Failures", "Write rotation"): the
restarted spine holds every KVSwitch message (p4src/features/spine_hold.p4) until the fabric
controller has reinstalled it and gathered the rotated keys it held into their origins (frozen,
exported, imported, released); only then is the hold lifted and the key's Gets pass again.
The test fabric of tests/controller/fabric_net.py on the software switch."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from kvswitch import protocol as p
from kvswitch.controller import names
from kvswitch.controller.ops import DefaultAction
from kvswitch.controller.p4rt_driver import Program
from tests.controller import fabric_net as fn
from tests.controller.test_fabric_rotation import Fabric, RotationSpine, inputs, kinds, made
from tests.controller.test_fabric_runtime import HOT, ORIGIN


class HoldSpine(RotationSpine):
    """RotationSpine that also logs the lift of its hold (``ready``), and just before it what
    ``probe`` (a Get of HOT through the fabric) delivered (``probe``)."""

    probe: Callable[[], list] | None = None

    def apply(self, ops) -> None:
        for op in ops:
            if isinstance(op, DefaultAction) and op.table == names.SPINE_HOLD_TABLE:
                if HoldSpine.probe is not None:
                    self.log.append(("probe", HoldSpine.probe()))
                self.log.append(("ready", op.action))
        super().apply(ops)


def restart(sw: fn.LiveSwitch) -> None:
    """The spine's process restarted with its program (as ``simple_switch_grpc prog.json``):
    every table, default action and register as the program starts."""
    dev = sw.device
    old = dev.require()
    dev.install(dev.load_config(old.device_config, old.switch.p4info, old.cookie))


def get_hot(net: fn.Net, seq: int) -> list[tuple[str, p.Message]]:
    net.from_host("c3", net.server_ip(ORIGIN), p.Message(p.Op.GET, HOT, cid=9, seq=seq))
    return net.take()


def test_a_restarted_spine_holds_until_its_rotated_keys_are_gathered(
    net: fn.Net, progs: tuple[Program, Program], tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setattr("tests.controller.test_fabric_rotation.RotationSpine", HoldSpine)
    f = Fabric(net, progs, tmp_path / "state.json")
    try:
        rt, s, kp = made(f)
        assert kp.rotate
        assert [e for e in f.agents.events if e[0] == "ready"] == [("ready", names.ACT_PASS)] * 2
        assert [m.op for _, m in get_hot(net, 1)] == [p.Op.GET]  # served
        restart(net.spines[s])
        f.spines[s].close()  # its stream broke with the restart
        f.agents.events.clear()
        HoldSpine.probe = lambda: get_hot(net, 2)
        rt.period(inputs())
        HoldSpine.probe = None
        ev = [e for e in f.agents.events if e[0] != "spine"]
        ev = ev[: ev.index(("ready", names.ACT_PASS)) + 1]  # the restart's repair (then a plan)
        assert kinds(ev) == ["freeze", "export", "import", "release", "probe", "ready"]
        # reinstalled (its routes back, no entry for HOT yet), HOT gathered: still held
        assert ("probe", []) in ev
        assert sorted(e[1] for e in ev if e[0] == "import") == sorted(kp.holders)
        assert f.freezes.frozen == set()
        assert [m.op for _, m in get_hot(net, 4)] == [p.Op.GET]  # the hold is lifted
    finally:
        f.close()
