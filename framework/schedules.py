"""When a callback or writer fires: every N steps, or every T seconds of simulated time.

A schedule is asked `due(step, time, dt)` after each step; `TimeInterval` fires on the first step
whose time reaches the next multiple of T (exactly on it when dt divides T).
"""
from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class IterationInterval:
    steps: int

    def __post_init__(self):
        if not (isinstance(self.steps, int) and self.steps >= 1):
            raise ValueError(f"IterationInterval: steps = {self.steps!r}; expected an integer >= 1")

    def due(self, step: int, time: float, dt: float) -> bool:
        return step % self.steps == 0


@dataclass(frozen=True)
class TimeInterval:
    seconds: float

    def __post_init__(self):
        if not (math.isfinite(self.seconds) and self.seconds > 0):
            raise ValueError(f"TimeInterval: seconds = {self.seconds!r}; expected a positive time")

    def due(self, step: int, time: float, dt: float) -> bool:
        slack = 1e-6 * dt
        return math.floor((time + slack) / self.seconds) > math.floor((time - dt + slack) / self.seconds)
