"""Fixtures of the controller's tests: the agent's (in-process agents on real backends,
tests/server_agent/conftest.py, for the write freeze on real agents: test_rotation.py) and the
test fabric's (fabric_net.py: its switches, and its P4 programs compiled once per module)."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from kvswitch.controller.p4rt_driver import Program
from tests.controller.fabric_net import Net, fabric_net, programs
from tests.server_agent.conftest import (  # noqa: F401 (fixtures, found by pytest by name)
    agent_factory,
    backend_factory,
    memcached_addr,
    redis_addr,
)


@pytest.fixture(scope="module")
def progs() -> tuple[Program, Program]:
    return programs()


@pytest.fixture
def net(tmp_path: Path) -> Iterator[Net]:
    with fabric_net(tmp_path) as n:
        yield n
