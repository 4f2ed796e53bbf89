"""Software P4 target: loads P4-16 source and executes it with v1model (BMv2) semantics."""

from softswitch.errors import P4Error, SwitchError
from softswitch.switch import Switch

__all__ = ["P4Error", "Switch", "SwitchError"]
