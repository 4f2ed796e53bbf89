"""Exceptions shared by the frontend, the engine and the control API."""

from __future__ import annotations


class P4Error(Exception):
    """A load-time error in a P4 program; the message starts with ``file:line:col:``."""

    def __init__(self, message: str, file: str = "<input>", line: int = 0, col: int = 0) -> None:
        self.file = file
        self.line = line
        self.col = col
        self.msg = message
        super().__init__(f"{file}:{line}:{col}: {message}")


class SwitchError(Exception):
    """A bad control-plane request (unknown table/action/field, wrong width, full table...)."""
