"""Software P4 target: loads P4-16 source (or BMv2 JSON) and runs it as v1model (BMv2 simple_switch)
or TNA (one Tofino pipe), the architecture of the program's main package."""

from softswitch.errors import P4Error, SwitchError
from softswitch.switch import Switch

__all__ = ["P4Error", "Switch", "SwitchError"]
