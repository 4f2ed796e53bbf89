"""The backends' command lines (kvswitch.agent.backend_procs): the one home of memcached's and
redis-server's arguments, for the tests, the benchmarks and the Mininet rack
(tests/mininet/kvsrack/test_rack_launchers.py checks that the rack uses them)."""

from __future__ import annotations

import os
import pwd
from pathlib import Path

from kvswitch.agent.backend_procs import memcached_command, redis_command


def test_memcached_serves_tcp_on_loopback_as_this_user() -> None:
    user = pwd.getpwuid(os.geteuid()).pw_name  # memcached refuses root without -u
    assert memcached_command(11211) == [
        "memcached", "-l", "127.0.0.1", "-p", "11211", "-U", "0", "-m", "64", "-u", user,
    ]  # fmt: skip
    assert memcached_command(5, Path("/opt/bin/memcached"))[:5] == [
        "/opt/bin/memcached", "-l", "127.0.0.1", "-p", "5",
    ]  # fmt: skip


def test_redis_keeps_nothing_on_disk_in_its_folder(tmp_path: Path) -> None:
    assert redis_command(6379, tmp_path) == [
        "redis-server", "--bind", "127.0.0.1", "--port", "6379", "--save", "",
        "--appendonly", "no", "--dir", str(tmp_path),
    ]  # fmt: skip
    assert redis_command(7, "w", "/opt/bin/redis-server")[0] == "/opt/bin/redis-server"
