"""Runner for STF files, the packet test format of p4c's BMv2 test suite (``*.stf`` next to a
program): table entries, multicast groups and mirroring sessions, packets in, packets expected out.

    python -m softswitch.stf PROGRAM.p4 TEST.stf [-I DIR] [-D NAME=VALUE]

Supported commands: ``add TABLE [PRIORITY] FIELD:VALUE ... ACTION(PARAM:VALUE, ...)`` (VALUE may be
``v&&&mask``, ``v/prefix_len`` or ``lo..hi``), ``setdefault TABLE ACTION(...)``, ``packet PORT HEX``,
``expect PORT HEX`` (``*`` matches any nibble, a final ``$`` requires the exact length),
``mc_mgrp_create GROUP``, ``mc_node_create RID PORT...``, ``mc_node_associate GROUP NODE``,
``mirroring_add SESSION PORT``, ``wait``. Expected packets are compared per port, in order; a packet
on a port with no expectation is a failure.
"""

from __future__ import annotations

import argparse
import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from softswitch.errors import SwitchError
from softswitch.switch import Switch


@dataclass
class StfRun:
    sw: Switch
    expected: dict[int, list[str]] = field(default_factory=lambda: defaultdict(list))
    received: dict[int, list[str]] = field(default_factory=lambda: defaultdict(list))
    nodes: list[tuple[int, list[int]]] = field(default_factory=list)
    groups: dict[int, list[tuple[int, int]]] = field(default_factory=dict)

    def command(self, line: str) -> None:
        words = line.split()
        cmd, args = words[0], words[1:]
        if cmd == "packet":
            for port, data in self.sw.process(int(args[0]), bytes.fromhex("".join(args[1:]))):
                self.received[port].append(data.hex())
        elif cmd == "expect":
            self.expected[int(args[0])].append("".join(args[1:]).lower())
        elif cmd == "add":
            self.add(line[len("add") :].strip())
        elif cmd == "setdefault":
            name, params = parse_action(" ".join(args[1:]))
            self.sw.table_set_default(args[0], name, params)
        elif cmd == "mc_mgrp_create":
            self.groups[int(args[0])] = []
            self.sw.mc_group_set(int(args[0]), [])
        elif cmd == "mc_node_create":
            self.nodes.append((int(args[0]), [int(a) for a in args[1:]]))
        elif cmd == "mc_node_associate":
            rid, ports = self.nodes[int(args[1])]
            members = self.groups.setdefault(int(args[0]), [])
            members += [(p, rid) for p in ports]
            self.sw.mc_group_set(int(args[0]), members)
        elif cmd == "mirroring_add":
            self.sw.mirroring_session_set(int(args[0]), port=int(args[1]))
        elif cmd == "wait":
            pass
        else:
            raise SwitchError(f"STF command {cmd!r} is not supported")

    def add(self, rest: str) -> None:
        m = re.match(r"(\S+)\s+(?:(\d+)\s+)?(.*?)\s*([\w.$]+\(.*\))$", rest)
        if m is None:
            raise SwitchError(f"bad STF add: {rest!r}")
        table, prio, keys, action = m.groups()
        t = self.sw.table_info(table).runtime
        match: dict[str, Any] = {}
        for item in keys.split():
            name, value = item.split(":", 1)
            k = t.key_field(re.sub(r"\$(\d+)", r"[\1]", name))  # STF writes stack[0] as stack$0
            full = (1 << k.width) - 1
            if "*" in value:  # hex digits that are '*' are wildcards (a ternary mask)
                digits = value[2:] if value.lower().startswith("0x") else value
                v = int(digits.replace("*", "0"), 16)
                mk = int("".join("0" if c == "*" else "f" for c in digits), 16)
                match[k.name] = (v & mk, mk)
            elif "&&&" in value:
                v, mk = (int(x, 0) for x in value.split("&&&"))
                match[k.name] = (
                    (v & mk, bin(mk).count("1")) if k.match_kind == "lpm" else (v & mk, mk)
                )
            elif "/" in value:
                v, plen = value.split("/")
                match[k.name] = (int(v, 0), int(plen))
            elif ".." in value:
                lo, hi = (int(x, 0) for x in value.split(".."))
                match[k.name] = (lo, hi)
            else:
                v = int(value, 0)
                match[k.name] = {"ternary": (v, full), "range": (v, v)}.get(k.match_kind, v)
        name, params = parse_action(action)
        priority = int(prio) if prio is not None else (1 if t.needs_priority() else None)
        self.sw.table_add(table, match, name, params, priority=priority)

    def failures(self) -> list[str]:
        out = []
        for port in sorted(set(self.expected) | set(self.received)):
            want, got = self.expected.get(port, []), self.received.get(port, [])
            if len(want) != len(got):
                out.append(f"port {port}: expected {len(want)} packets, got {len(got)}")
                continue
            for pattern, data in zip(want, got, strict=True):
                if not matches(pattern, data):
                    out.append(f"port {port}: expected {pattern}, got {data}")
        return out


def parse_action(text: str) -> tuple[str, dict[str, int]]:
    m = re.match(r"\s*([\w.$]+)\((.*)\)\s*$", text)
    if m is None:
        raise SwitchError(f"bad STF action: {text!r}")
    params = {}
    for item in filter(None, (x.strip() for x in m.group(2).split(","))):
        k, v = item.split(":", 1)
        params[k.strip()] = int(v.strip(), 0)
    return m.group(1), params


def matches(pattern: str, data: str) -> bool:
    exact = pattern.endswith("$")
    pattern = pattern.rstrip("$")
    if len(data) < len(pattern) or (exact and len(data) != len(pattern)):
        return False
    return all(p in ("*", d) for p, d in zip(pattern, data, strict=False))


def run_stf(sw: Switch, text: str) -> list[str]:
    """Run an STF script against ``sw``; returns the failures (empty when it passes)."""
    run = StfRun(sw)
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if line:
            run.command(line)
    return run.failures()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Run an STF test against the software switch.")
    ap.add_argument("program")
    ap.add_argument("stf")
    ap.add_argument("-I", dest="include", action="append", default=[])
    ap.add_argument("-D", dest="define", action="append", default=[])
    args = ap.parse_args(argv)
    defines = dict(d.split("=", 1) if "=" in d else (d, "1") for d in args.define)
    sw = Switch.from_file(args.program, defines=defines, include_dirs=args.include)
    with open(args.stf) as f:
        failures = run_stf(sw, f.read())
    for msg in failures:
        print(msg)
    print("PASS" if not failures else f"FAIL ({len(failures)})")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
