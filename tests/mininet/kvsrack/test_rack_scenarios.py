"""The fault schedule's checks before a rack starts (pure: no Mininet, no root)."""

from __future__ import annotations

import pytest

from kvsrack.scenarios import ServerEvent, check_events, spares_of


def ev(text: str) -> ServerEvent:
    action, rest = text.split(" ")
    server, at = rest.split("@")
    return ServerEvent(action, server, float(at))


@pytest.mark.parametrize(
    ("events", "servers", "why"),
    [
        (["kill s3@2", "restart s3@4"], 8, ""),
        (["add s9@1", "remove s3@2"], 8, ""),
        (["kill s3@6", "remove s3@10", "restart s3@14", "add s3@16"], 8, ""),
        (["restart s3@4"], 8, "--restart s3@4: its agent is running then"),
        (["kill s3@2", "kill s3@3"], 8, "--kill s3@3: its agent is not running then"),
        (["kill s9@2"], 8, "--kill s9: the rack has servers s1 .. s8"),
        (["add s2@1"], 8, "--add s2@1: it is already a member then"),
        (["remove s9@1", "add s9@2"], 8, "--remove s9@1: it is not a member then"),
        (["kill s9@1", "add s9@2"], 8, "--add s9@2: its agent is not running then"),
        (["remove s1@1"], 1, "--remove s1@1: the ring would have no member"),
    ],
)
def test_check_events(events: list[str], servers: int, why: str) -> None:
    assert check_events([ev(e) for e in events], servers) == why


def test_spares_are_the_servers_adds_name_beyond_the_rack() -> None:
    assert spares_of([ev("add s10@1"), ev("kill s2@1")], 8) == 2
    assert spares_of([ev("add s3@1")], 8) == 0
    assert spares_of([], 8) == 0
