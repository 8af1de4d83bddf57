"""In-process score sources and executor: the planner's protocols served by the ROS-free core.

The nodes wrap exactly these objects, and ``saycan eval --world symbolic`` uses them directly.
"""
from __future__ import annotations

import time
from typing import Sequence

import numpy as np

from saycan_ros.planning.affordance import AffordanceContext, AffordanceScorer
from saycan_ros.planning.language import LanguageScorer
from saycan_ros.planning.planner import ExecutionResult
from saycan_ros.core.skills import SkillSet
from saycan_ros.core.world import SymbolicWorld


class LocalLanguage:
    def __init__(self, scorer: LanguageScorer):
        self.scorer = scorer

    def score(self, instruction: str, history: Sequence[str], skills: Sequence[str],
              min_state_revision: int = 0, scene: str = "") -> tuple[np.ndarray, np.ndarray]:
        return self.scorer.score(instruction, history, skills, scene=scene)


#: Affordance model types that score from AffordanceContext.observation (the robot's sensors).
OBSERVING_MODELS = ("LearnedPickAffordance",)


def needs_observation(scorer: AffordanceScorer) -> bool:
    """Whether any model of ``scorer`` reads the robot's sensors."""
    return any(getattr(m, "needs_observation", type(m).__name__ in OBSERVING_MODELS)
               for m in scorer.models.values())


class LocalAffordance:
    """Affordances from the world's current state, plus what the robot senses when the world
    has sensors (``world.observation()``: the simulator's camera frame and arm state, for
    learned affordances such as ``learned_pick``)."""

    def __init__(self, scorer: AffordanceScorer, world: SymbolicWorld, skills: SkillSet):
        self.scorer = scorer
        self.world = world
        self.skills = skills

    def score(self, instruction: str, history: Sequence[str], skills: Sequence[str],
              min_state_revision: int = 0, scene: str = "") -> tuple[np.ndarray, np.ndarray]:
        observe = getattr(self.world, "observation", None)
        sense = callable(observe) and needs_observation(self.scorer)
        context = AffordanceContext(self.world.kitchen, self.world.snapshot(),
                                    observe() if sense else None)
        return self.scorer.score([self.skills.get(s) for s in skills],
                                 [self.skills.get(s) for s in history], context)


class WorldExecutor:
    """Executes skills on the symbolic world (the oracle executor)."""

    def __init__(self, world: SymbolicWorld, skills: SkillSet):
        self.world = world
        self.skills = skills

    def execute(self, skill: str, timeout_s: float = 0.0) -> ExecutionResult:
        started = time.perf_counter()
        outcome = self.world.execute(self.skills.get(skill))
        return ExecutionResult(outcome.success, outcome.message,
                               time.perf_counter() - started, self.world.revision)
