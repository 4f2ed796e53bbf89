"""``kvswitch sim explore`` and ``kvswitch sim explore-fabric``: the command lines of the exhaustive
explorers (:mod:`.explore`, :mod:`.explore_fabric`), next to them. ``kvswitch sim``
(bench/sim_cli.py) adds them to its subcommands; nothing here imports bench/.

kvswitch sim explore                          # the protocol's bounded exhaustive check
kvswitch sim explore --preset faults --losses 2 --client "set a1,get" --client "get,set b1"
kvswitch sim explore-fabric --no-steering     # the fabric's write path, its broken rule
"""

from __future__ import annotations

import argparse
from dataclasses import replace

from kvswitch import argtypes as t
from kvswitch.consistency import explore as ex
from kvswitch.consistency import explore_fabric as exf


def add_explore(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``explore`` subcommand (its handler in ``func``)."""
    explore = sub.add_parser(
        "explore", help="bounded exhaustive check of the coherence protocol (linearizability)"
    )
    _explore_args(explore)
    explore.set_defaults(func=cmd_explore)


def add_explore_fabric(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``explore-fabric`` subcommand (its handler in ``func``)."""
    fabric = sub.add_parser(
        "explore-fabric",
        help="the exhaustive check of a fabric-hot key's write path (clients in the origin's rack)",
    )
    fabric.add_argument(
        "--preset",
        action="append",
        choices=sorted(exf.PRESETS),
        help="a named fabric scenario (repeatable; default: all)",
    )
    fabric.add_argument(
        "--steering",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the home leaf steers the key through its spine (--no-steering: the broken rule)",
    )
    fabric.add_argument(
        "--broken",
        choices=sorted(exf.ROTATION_BROKEN),
        help="a broken rule of the write rotation, on the preset that catches it (exit status 1 "
        "with the counterexample)",
    )
    fabric.add_argument(
        "--max-states",
        type=t.positive_int,
        default=None,
        help="stop after this many states (the check is then not exhaustive)",
    )
    fabric.set_defaults(func=cmd_explore_fabric)


def _explore_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--preset",
        action="append",
        choices=sorted(ex.PRESETS),
        help="a named scenario (repeatable; default: " + ", ".join(ex.CHECKED) + ")",
    )
    parser.add_argument(
        "--client",
        action="append",
        help="one client's operations, e.g. \"set a1,get\" (repeatable; replaces the presets')",
    )
    for name in ("replicas", "losses", "dups", "retries", "sync-retries"):
        parser.add_argument(f"--{name}", type=t.nonneg_int, help="bound (default: the preset's)")
    parser.add_argument(
        "--retriers",
        help="the clients that may resend, e.g. 0,2, or 'all' (default: the preset's)",
    )
    parser.add_argument(
        "--ahead",
        choices=("zero", "adopt", "none"),
        help="the controller's answer to a replica above origin_ver: zero its cell (the real "
        "rule), adopt its version (wrong for a live origin), none (default: the preset's)",
    )
    for name, text in (
        ("hotset-change", "a replica removed and re-added"),
        ("restart", "a switch restart (epoch + 1)"),
        ("eager-retries", "clients may time out while the first attempt is on its way"),
        ("drain-before-remove", "remove a replica's copy only once no Get is on its way to it"),
        ("restart-when-quiet", "restart the switch only while no write is on its way"),
        ("stale-is-success", "a Set answered STALE counts as done (the clients before StaleWrite)"),
        ("latest-reply-only", "a client takes only its latest attempt's reply (rejected fix)"),
        ("unstamped-repeats", "the switch does not stamp a repeated request (rejected fix)"),
        (
            "repeat-confirms-ignored",
            "a replica's CONFIRM of a repeat's copy is not counted (rejected fix)",
        ),
    ):
        parser.add_argument(
            f"--{name}", action=argparse.BooleanOptionalAction, default=None, help=text
        )
    parser.add_argument(
        "--copies",
        choices=sorted(ex.COPIES),
        help="which writes the switch copies to the replicas (default all; the others are "
        "candidate fixes for resend-reread)",
    )
    parser.add_argument("--broken", choices=sorted(ex.BROKEN), help="a broken variant of the rules")
    parser.add_argument(
        "--max-states",
        type=t.positive_int,
        default=None,
        help="stop after this many states (the check is then not exhaustive)",
    )


def _retriers(text: str) -> tuple[int, ...] | None:
    if text == "all":
        return None
    try:
        return tuple(int(c) for c in text.split(","))
    except ValueError:
        raise ValueError(f"--retriers: client numbers like 0,2 or 'all', not {text!r}") from None


def cmd_explore(ns: argparse.Namespace) -> int:
    overrides: dict = {}
    if ns.client:
        overrides["programs"] = tuple(ex.parse_program(text) for text in ns.client)
    for name in ("replicas", "losses", "dups", "retries", "sync_retries"):
        if getattr(ns, name) is not None:
            overrides[name] = getattr(ns, name)
    flags = (
        "hotset_change",
        "restart",
        "eager_retries",
        "drain_before_remove",
        "restart_when_quiet",
        "stale_is_success",
        "latest_reply_only",
        "unstamped_repeats",
        "repeat_confirms_ignored",
    )
    for name in flags:
        if getattr(ns, name) is not None:
            overrides[name] = getattr(ns, name)
    if ns.retriers is not None:
        overrides["retriers"] = _retriers(ns.retriers)
    if ns.copies is not None:
        overrides["copies"] = ns.copies
    if ns.ahead is not None:
        overrides["ahead"] = "" if ns.ahead == "none" else ns.ahead
    rules = ex.BROKEN[ns.broken] if ns.broken else None
    failed = 0
    for preset in ns.preset or ex.CHECKED:
        scenario = replace(ex.PRESETS[preset], **overrides)
        print(f"{preset}: {scenario.describe()}", flush=True)

        def progress(rep: ex.Report) -> None:
            print(
                f"  ... {rep.states} states, {rep.end_states} end states, "
                f"{rep.histories} histories, {rep.seconds:.0f} s",
                flush=True,
            )

        failed += _explored(ex.explore(scenario, rules, ns.max_states, progress))
    return 1 if failed else 0


def _explored(rep: ex.Report) -> int:
    """Print an explorer's report (and its counterexample); 1 if it failed, else 0."""
    print(f"  {rep.summary()}", flush=True)
    if rep.violation is not None:
        print("  counterexample (message by message):")
        for i, line in enumerate(rep.violation, 1):
            print(f"    {i:2d}. {line}")
        print("  history:")
        for line in ex.format_history(rep.history):
            print(f"    {line}")
        return 1
    return 0 if rep.complete else 1


def cmd_explore_fabric(ns: argparse.Namespace) -> int:
    if ns.broken:  # a broken rotation rule: the check must find a violation
        preset, change = exf.ROTATION_BROKEN[ns.broken]
        fabric = replace(exf.PRESETS[preset], **change)  # type: ignore[arg-type]
        print(f"{ns.broken} on {preset}: {fabric.describe()}", flush=True)
        return _explored(exf.explore_fabric(fabric, max_states=ns.max_states))
    failed = 0
    for preset in ns.preset or exf.CHECKED + exf.ROTATION_CHECKED:
        fabric = replace(exf.PRESETS[preset], steering=ns.steering)
        print(f"{preset}: {fabric.describe()}", flush=True)
        failed += _explored(exf.explore_fabric(fabric, max_states=ns.max_states))
    return 1 if failed else 0
