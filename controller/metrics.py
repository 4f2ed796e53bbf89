"""One period's figures, as the runtime prints them (the period line) and writes them
(``--metrics``, one JSON object per period; docs/controller_runtime.md "Command line")."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Metrics:
    period: int
    time: float
    lambda_: float
    max_mean: float
    threshold: float
    hot_keys: int
    replicas: int
    updates: int
    loads: list[int]
    agent_errors: int = 0
    period_ms: float = 0.0  # time the period's reads, planning and batch took
    error: str = ""
    down: list[int] = field(default_factory=list)  # servers declared dead (failure detector)
    events: list[str] = field(default_factory=list)  # membership changes seen this period
    # replicated keys (hex) -> their holders, origin first, as the switch holds them after the batch
    holders: dict[str, list[int]] = field(default_factory=dict)

    def line(self) -> str:
        text = (
            f"period {self.period}  lambda {self.lambda_:.3f}  T {self.threshold:.0f}  "
            f"hot {self.hot_keys}  replicas {self.replicas}  updates {self.updates}  "
            f"loads {','.join(str(x) for x in self.loads)}"
        )
        if self.down:
            text += f"  down {','.join(str(s) for s in self.down)}"
        if self.events:
            text += f"  events {','.join(self.events)}"
        return text + (f"  error {self.error}" if self.error else "")

    def record(self) -> dict[str, Any]:
        return {
            "period": self.period,
            "time": self.time,
            "lambda": self.lambda_,
            "max_mean": self.max_mean,
            "threshold": self.threshold,
            "hot_keys": self.hot_keys,
            "replicas": self.replicas,
            "updates": self.updates,
            "loads": self.loads,
            "agent_errors": self.agent_errors,
            "period_ms": round(self.period_ms, 2),
            "error": self.error,
            "down": self.down,
            "events": self.events,
            "holders": self.holders,
        }
