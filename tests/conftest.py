"""Suite-wide: tests that build network namespaces, veth pairs or a Mininet rack (marker
``netns``) form one pytest-xdist group, so that ``make test`` (``-n 2 --dist loadgroup``) runs
them one after the other on one worker while the other worker takes the rest of the suite."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("netns") is not None:
            item.add_marker(pytest.mark.xdist_group("netns"))
