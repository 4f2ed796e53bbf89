"""Every ``kvswitch`` subcommand checks its arguments: a bad value is one line on stderr and exit
status 2, never a traceback; every option has help text."""

from __future__ import annotations

import argparse
import importlib

import pytest

from kvswitch import cli
from kvswitch.bench import benchmarks as bench_cli

BAD = [
    ["switch", "--thrift-port", "99999", "x.p4"],
    ["switch", "--thrift-port", "-1", "x.p4"],
    ["switch", "--device-id", "-1", "x.p4"],
    ["switch", "-i", "1@"],
    ["switch", "-i", "600@veth0", "x.p4"],
    ["switch", "--use-files", "soon", "x.p4"],
    ["switch", "-L", "loud", "x.p4"],
    ["switch", "-D", "=1", "x.p4"],
    ["switch", "x.p4", "--", "--cpu-port", "512"],
    ["switch", "x.p4", "--", "--grpc-server-addr", "9559"],
    ["switch", "x.p4", "--", "--grpc-server-addr", "host:99999"],
    ["agent", "--port", "70000"],
    ["agent", "--port", "eighty"],
    ["agent", "--control-port", "65536"],
    ["agent", "--max-value", "-5"],
    ["agent", "--max-value", "100000"],
    ["agent", "--ids-clients", "0"],
    ["agent", "--switch-addr", "10.0.0.1:99999"],
    ["agent", "--backend-addr", "127.0.0.1:x"],
    ["agent", "--backend", "sqlite"],
    ["client", "--servers", "127.0.0.1:70000", "get", "x"],
    ["client", "--servers", ":80", "get", "x"],
    ["client", "--timeout", "0", "get", "x"],
    ["client", "--retries", "-1", "get", "x"],
    ["client", "get"],
    ["controller", "--rack", "r.json", "--thrift-port", "99999"],
    ["controller", "--rack", "r.json", "--grpc-addr", "localhost"],
    ["controller", "--rack", "r.json", "--period", "0"],
    ["controller", "--rack", "r.json", "--periods", "-3"],
    ["controller", "--rack", "r.json", "--k", "0"],
    ["controller", "--rack", "r.json", "--alpha", "1.5"],
    ["controller", "--rack", "r.json", "--gamma", "nan"],
    ["controller"],
    ["fabric-controller", "--config", "f.json", "--rotation-hysteresis", "1"],
    ["fabric-controller", "--config", "f.json", "--repeat-window", "0"],
    ["demo", "--servers", "0"],
    ["demo", "--rate", "-10"],
    ["demo", "--duration", "inf"],
    ["demo", "--gamma", "2"],
    ["rack", "--servers", "0"],
    ["rack", "--write-ratio", "1.5"],
    ["rack", "--period", "0"],
    ["rack", "--kill", "s3"],
    ["sim", "run", "--servers", "0"],
    ["sim", "run", "--keys", "3000000000"],
    ["sim", "run", "--write-ratio", "1.1"],
    ["sim", "racks", "--racks", "0"],
    ["sim", "figures", "--workers", "0"],
    ["sim"],
    ["bench", "sim", "--keys", "-1"],
    ["bench", "hosts", "--window", "0"],
    ["bench", "runtime", "--batch", "0"],
    ["bench", "dataplane", "--seconds", "0"],
    ["bench", "c-client", "--repeat", "0"],
]


@pytest.mark.parametrize("argv", BAD, ids=[" ".join(a) for a in BAD])
def test_bad_argument_is_one_line_and_status_2(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"kvswitch {argv[0]}") and ": error: " in lines[0], err


class Captured(Exception):
    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self.parser = parser


def parsers_of(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> list[argparse.ArgumentParser]:
    """The parser a subcommand builds (and its subparsers), caught at parse_args."""

    def capture(self: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        raise Captured(self)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", capture)
    with pytest.raises(Captured) as exc:
        cli.main(argv)
    found = [exc.value.parser]
    for action in exc.value.parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found += list(action.choices.values())
    return found


ENTRY_POINTS = [[name] for name in cli.SUBCOMMANDS if name != "bench"] + [
    ["bench", name] for name in bench_cli.BENCHMARKS
]


@pytest.mark.parametrize("argv", ENTRY_POINTS, ids=[" ".join(a) for a in ENTRY_POINTS])
def test_every_option_has_help(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    parsers = parsers_of(argv, monkeypatch)
    if argv == ["switch"]:
        parsers.append(importlib.import_module("softswitch.main").target_parser())
    missing = [
        f"{p.prog} {'/'.join(a.option_strings) or a.dest}"
        for p in parsers
        for a in p._actions
        if not isinstance(a, argparse._SubParsersAction) and not (a.help or "").strip()
    ]
    assert missing == []


def test_switch_errors_name_the_users_file_and_interface(
    tmp_path: object, capsys: pytest.CaptureFixture[str]
) -> None:
    import os
    from pathlib import Path

    bad = Path(str(tmp_path)) / "bad.p4"
    bad.write_text("#include <core.p4>\nheader h_t { bit<8> x }\n")
    assert cli.main(["switch", str(bad)]) == 1
    err = capsys.readouterr().err
    assert f"{bad}:2:" in err and "softswitch-bundle" not in err, err
    if os.geteuid() != 0:
        pytest.skip("the interface half needs root (raw sockets)")
    basic = Path(__file__).parents[1] / "softswitch" / "p4" / "basic.p4"
    assert cli.main(["switch", "-i", "1@nosuchif0", str(basic)]) == 1
    err = capsys.readouterr().err
    assert err.strip() == "kvswitch switch: interface nosuchif0 (port 1): No such device", err
