"""The agent's bounded capacity (``kvswitch agent --capacity R``, docs/agent.md "Bounded
capacity"): at most R requests/s, FIFO, the rest waiting up to a limit; on every backend."""

from __future__ import annotations

import socket
import statistics
import time
from collections.abc import Callable

import pytest

from kvswitch import protocol as p
from kvswitch.agent.backends import Backend
from kvswitch.agent.capacity import ServiceQueue
from kvswitch.agent.server import AgentServer

RATE = 200.0
BURST = 60


def burst(agent: AgentServer, count: int, op: p.Op = p.Op.GET) -> list[tuple[int, float]]:
    """Send ``count`` requests at once over UDP; (seq, seconds since the send) of each reply, in
    arrival order, until 1 s passes without one."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(1.0)
    dest = ("127.0.0.1", agent.port)
    raw = [
        p.Message(op, p.pad_key(f"k{i % 7}"), b"v" if op == p.Op.SET else b"", cid=5, seq=i + 1)
        for i in range(count)
    ]
    start = time.monotonic()
    for msg in raw:
        sock.sendto(msg.encode(), dest)
    replies: list[tuple[int, float]] = []
    try:
        while len(replies) < count:
            data, _ = sock.recvfrom(65535)
            replies.append((p.Message.decode(data).seq, time.monotonic() - start))
    except TimeoutError:
        pass
    finally:
        sock.close()
    return replies


def test_a_bounded_agent_serves_a_burst_at_its_rate_in_order(
    backend: Backend, agent_factory: Callable[..., AgentServer]
) -> None:
    agent = agent_factory(backend, capacity=RATE)
    replies = burst(agent, BURST)
    assert [seq for seq, _ in replies] == list(range(1, BURST + 1))  # all, first in first out
    elapsed = replies[-1][1]
    # BURST service times from the send to the last reply: never faster than R; slower only by
    # what a loaded machine adds (the virtual clock does not let late wake-ups accumulate)
    assert BURST / RATE * 0.98 <= elapsed <= BURST / RATE * 1.5
    assert BURST / elapsed == pytest.approx(RATE, rel=0.35)
    # latency grows with the queue: the i-th reply waited about i service times
    for i, (_, t) in enumerate(replies):
        assert t >= (i + 1) / RATE * 0.98
    stats = agent.control({"cmd": "stats"})["stats"]
    assert stats["queue_served"] == BURST and stats["queue_dropped"] == 0
    assert stats["queue_max_depth"] >= BURST // 2


def test_sets_are_bounded_too(agent_factory: Callable[..., AgentServer], backend: Backend) -> None:
    agent = agent_factory(backend, capacity=RATE)
    replies = burst(agent, 30, p.Op.SET)
    assert [seq for seq, _ in replies] == list(range(1, 31))
    assert replies[-1][1] >= 30 / RATE * 0.98


def test_unbounded_by_default(agent_factory: Callable[..., AgentServer], backend: Backend) -> None:
    agent = agent_factory(backend)
    assert agent.queue is None
    replies = burst(agent, BURST)
    assert len(replies) == BURST
    assert "queue_served" not in agent.control({"cmd": "stats"})["stats"]
    # 60 Gets on loopback take a few ms unbounded; at 200/s they would take 0.3 s
    assert replies[-1][1] < (BURST - 1) / RATE


def test_the_queue_is_bounded(agent_factory: Callable[..., AgentServer], backend: Backend) -> None:
    agent = agent_factory(backend, capacity=50.0, queue_limit=10)
    replies = burst(agent, 40)
    seqs = [seq for seq, _ in replies]
    # the first ten always find room; a later one is admitted only when a service (20 ms) has
    # freed a place while the burst was still arriving, which a loaded machine can take that long
    assert seqs[:10] == list(range(1, 11))
    assert seqs == sorted(set(seqs))  # first in first out, none twice
    stats = agent.control({"cmd": "stats"})["stats"]
    assert stats["queue_max_depth"] == 10  # never more than the limit waiting
    assert stats["queue_dropped"] == 40 - len(replies) > 0


def test_tcp_requests_wait_for_their_service(
    agent_factory: Callable[..., AgentServer], backend: Backend
) -> None:
    agent = agent_factory(backend, capacity=RATE)
    count = 20
    segment = b"".join(
        p.Message(p.Op.GET, p.pad_key("t"), cid=9, seq=i + 1).encode() for i in range(count)
    )
    with socket.create_connection(("127.0.0.1", agent.port), timeout=5) as conn:
        start = time.monotonic()
        conn.sendall(segment)
        buf = b""
        while len(buf) < count * p.HEADER_LEN:
            chunk = conn.recv(65536)
            assert chunk
            buf += chunk
        elapsed = time.monotonic() - start
    seqs = [p.Message.decode(buf[i : i + p.HEADER_LEN]).seq for i in range(0, len(buf), 36)]
    assert seqs == list(range(1, count + 1))
    assert elapsed >= count / RATE * 0.98


def test_control_and_sync_do_not_wait(agent_factory: Callable[..., AgentServer]) -> None:
    """The control API answers at once while the request queue holds seconds of work."""
    from kvswitch.agent.backends import MemoryBackend

    agent = agent_factory(MemoryBackend(), capacity=20.0)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for i in range(60):  # 3 s of work
        sock.sendto(p.Message(p.Op.GET, p.pad_key("x"), cid=1, seq=i + 1).encode(),
                    ("127.0.0.1", agent.port))  # fmt: skip
    sock.close()
    assert agent.queue is not None
    deadline = time.monotonic() + 2
    while agent.queue.depth() < 30 and time.monotonic() < deadline:
        time.sleep(0.01)
    start = time.monotonic()
    assert agent.control({"cmd": "ping"})["ok"]
    assert time.monotonic() - start < 0.5
    assert agent.queue.depth() > 25  # still seconds of work waiting


def test_exponential_service_times_are_seeded_with_mean_one_over_r() -> None:
    a = ServiceQueue(RATE, "exp", seed=3)
    b = ServiceQueue(RATE, "exp", seed=3)
    xs = [a.service_time() for _ in range(4000)]
    assert xs[:50] == [b.service_time() for _ in range(50)]
    assert statistics.fmean(xs) == pytest.approx(1 / RATE, rel=0.06)
    assert statistics.pstdev(xs) == pytest.approx(1 / RATE, rel=0.1)  # exponential: sd = mean
    assert ServiceQueue(RATE).service_time() == 1 / RATE


@pytest.mark.parametrize(
    ("args", "why"),
    [((0.0,), "capacity"), ((10.0, "uniform"), "service"), ((10.0, "fixed", 0, 0), "limit")],
)
def test_bad_settings_are_refused(args: tuple, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        ServiceQueue(*args)
