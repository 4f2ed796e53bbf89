"""A server of bounded capacity: at most R requests/s, the rest waiting FIFO (docs/agent.md
"Bounded capacity").

:class:`ServiceQueue` is a single-server queue in front of the agent's request path: each job
(one request, handled and answered) gets a service time, fixed ``1/R`` or exponential with mean
``1/R`` (a seeded generator), and is answered when its service ends. Service starts at the later
of the job's arrival and the end of the previous job's service, on a virtual clock: the worker
sleeps until a job's departure time, and a sleep that overshoots delays that reply, not the next
job's start, so the long-run rate stays R on a loaded machine as long as handling a request takes
less than ``1/R`` of CPU. At most ``limit`` jobs wait; beyond that a job is dropped and counted
(an overloaded agent holds at most ``limit`` requests, never more memory).
"""

from __future__ import annotations

import random
import threading
import time
from collections import deque
from collections.abc import Callable

SERVICES = ("fixed", "exp")


class ServiceQueue:
    """FIFO jobs served at ``rate`` per second by one worker thread."""

    def __init__(
        self, rate: float, service: str = "fixed", seed: int = 0, limit: int = 1000
    ) -> None:
        if not rate > 0:
            raise ValueError(f"capacity must be > 0 requests/s, not {rate}")
        if service not in SERVICES:
            raise ValueError(f"service must be one of {', '.join(SERVICES)}, not {service!r}")
        if limit < 1:
            raise ValueError(f"queue limit must be >= 1, not {limit}")
        self.rate = rate
        self.service = service
        self.limit = limit
        self._random = random.Random(seed)
        self._jobs: deque[tuple[float, Callable[[], None]]] = deque()
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._free_at = 0.0  # virtual time the server finishes its current job
        self._thread: threading.Thread | None = None
        self.served = 0
        self.dropped = 0
        self.max_depth = 0

    def service_time(self) -> float:
        if self.service == "exp":
            return self._random.expovariate(self.rate)
        return 1.0 / self.rate

    def start(self) -> None:
        self._thread = threading.Thread(target=self._work, name="agent-service", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the worker; jobs still waiting are discarded (no answer, as a crash would)."""
        self._stop.set()
        with self._cond:
            self._jobs.clear()
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=2)

    def submit(self, job: Callable[[], None]) -> bool:
        """Queue ``job``; False (and counted as dropped) when ``limit`` jobs already wait."""
        with self._cond:
            if len(self._jobs) >= self.limit or self._stop.is_set():
                self.dropped += 1
                return False
            self._jobs.append((time.monotonic(), job))
            self.max_depth = max(self.max_depth, len(self._jobs))
            self._cond.notify()
        return True

    def depth(self) -> int:
        with self._cond:
            return len(self._jobs)

    def stats(self) -> dict[str, float]:
        with self._cond:
            depth = len(self._jobs)
        return {
            "capacity": self.rate,
            "queue_depth": depth,
            "queue_max_depth": self.max_depth,
            "queue_served": self.served,
            "queue_dropped": self.dropped,
        }

    def _work(self) -> None:
        while not self._stop.is_set():
            with self._cond:
                while not self._jobs and not self._stop.is_set():
                    self._cond.wait(0.5)
                if self._stop.is_set():
                    return
                arrival, job = self._jobs.popleft()
            start = max(arrival, self._free_at)
            self._free_at = start + self.service_time()
            delay = self._free_at - time.monotonic()
            if delay > 0 and self._stop.wait(delay):
                return
            self.served += 1
            job()
