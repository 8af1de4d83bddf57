"""Injected skill failures, for proving that re-planning recovers (issue 23's fault suite).

:class:`FaultInjectingExecutor` wraps any :class:`~saycan_ros.planning.planner.SkillExecutor`
and fails a seeded random fraction of executions *before* they run, so the world is left as it
was, the way a missed grasp or a blocked path leaves it. Off (rate 0) unless asked for:
``saycan eval --fault-rate 0.2`` and the ``fault_rate`` parameter of the skill_executor node.
"""
from __future__ import annotations

import math

import numpy as np

from saycan_ros.planning.planner import ExecutionResult, SkillExecutor


def check_fault_rate(rate) -> float:
    """``rate`` as a probability; ValueError naming it otherwise."""
    try:
        value = float(rate)
    except (TypeError, ValueError):
        raise ValueError(f"fault rate must be a number in [0, 1], got {rate!r}") from None
    if not (math.isfinite(value) and 0.0 <= value <= 1.0):
        raise ValueError(f"fault rate must be in [0, 1], got {rate!r}")
    return value


def fault_message(skill: str) -> str:
    return f"injected fault: {skill!r} was not executed"


class FaultDice:
    """Seeded draws: ``strike()`` is True for a ``rate`` fraction of calls."""

    def __init__(self, rate: float, seed: int = 0):
        self.rate = check_fault_rate(rate)
        self.rng = np.random.default_rng(seed)
        self.injected = 0                  # faults so far (reports, tests)

    def strike(self) -> bool:
        hit = self.rate > 0.0 and self.rng.random() < self.rate
        self.injected += int(hit)
        return hit


class FaultInjectingExecutor:
    def __init__(self, executor: SkillExecutor, rate: float, seed: int = 0):
        self.executor = executor
        self.dice = FaultDice(rate, seed)

    @property
    def injected(self) -> int:
        return self.dice.injected

    def execute(self, skill: str, timeout_s: float = 0.0) -> ExecutionResult:
        if self.dice.strike():
            return ExecutionResult(False, fault_message(skill))
        return self.executor.execute(skill, timeout_s)

    def cancel(self) -> None:
        cancel = getattr(self.executor, "cancel", None)
        if cancel is not None:
            cancel()
