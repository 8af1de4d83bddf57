"""Affordances ("Can"): the probability that each skill succeeds from the current state.

One model per skill kind, chosen by configuration (``config/affordance.yaml``) through a
registry, so a learned value function can replace any family without touching the planner:

- ``distance``   go-to skills: ``clamp((d_max - d) / (d_max - d_min), 0, 1)``; 0 when there is
  nowhere to go (the object is absent or already in the gripper).
- ``symbolic_pick``  1 when the object is where the robot stands and the hand is empty, else 0.
- ``holding``    place skills: 1 only while holding that object.
- ``constant``   e.g. ``done`` at 0.1, so the robot can stop when nothing else makes sense.

Skills already completed whose effect still holds are capped (``completed_cap``): the paper's
guard against repeating a skill whose reward has been received.
"""
from __future__ import annotations

import abc
import math
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np

from saycan_ros.core.config import ConfigError, load_yaml
from saycan_ros.core.kitchen import Kitchen
from saycan_ros.core.skills import Skill, SkillSet
from saycan_ros.core.world import WorldSnapshot, effect_holds, target_location


@dataclass(frozen=True)
class AffordanceContext:
    """What affordance models may look at: the symbolic state, and sensors when there are any."""
    kitchen: Kitchen
    state: WorldSnapshot
    observation: object | None = None   # e.g. the latest camera image, for learned models


class AffordanceModel(abc.ABC):
    """p(success | state, skill) for a batch of skills of the kinds this model serves."""

    @abc.abstractmethod
    def evaluate(self, skills: Sequence[Skill], context: AffordanceContext
                 ) -> tuple[np.ndarray, np.ndarray]:
        """Returns (probabilities in [0, 1], raw values) with one entry per skill."""


def clamp01(x: float) -> float:
    return min(1.0, max(0.0, x))


class DistanceAffordance(AffordanceModel):
    """Go-to skills by distance; subclasses change how the distance is measured."""
    name = "distance"

    def __init__(self, d_min: float = 0.0, d_max: float = 100.0):
        if not (math.isfinite(d_min) and math.isfinite(d_max) and d_max > d_min >= 0):
            raise ConfigError(f"{self.name} affordance needs 0 <= d_min < d_max, got "
                              f"{d_min}, {d_max}")
        self.d_min, self.d_max = float(d_min), float(d_max)

    def distance(self, kitchen: Kitchen, start: tuple[float, float],
                 goal: tuple[float, float]) -> float:
        """Straight-line distance (inf = unreachable)."""
        return kitchen.distance(start, goal)

    def evaluate(self, skills, context):
        probs, raws = [], []
        x, y, _ = context.state.robot_pose
        for skill in skills:
            target = target_location(context.state, skill)
            d = math.inf if target is None else self.distance(
                context.kitchen, (x, y), context.kitchen.location(target).approach)
            raws.append(d)
            probs.append(0.0 if not math.isfinite(d) else
                         clamp01((self.d_max - d) / (self.d_max - self.d_min)))
        return np.array(probs, dtype=np.float64), np.array(raws, dtype=np.float64)


class SymbolicPickAffordance(AffordanceModel):
    def evaluate(self, skills, context):
        state = context.state
        probs = [float(state.holding is None and state.objects.get(s.object) == state.robot_at)
                 for s in skills]
        return np.array(probs), np.array(probs)


class HoldingAffordance(AffordanceModel):
    def evaluate(self, skills, context):
        probs = [float(context.state.holding == s.object) for s in skills]
        return np.array(probs), np.array(probs)


class ConstantAffordance(AffordanceModel):
    def __init__(self, value: float = 0.1):
        if not (math.isfinite(value) and 0.0 <= value <= 1.0):
            raise ConfigError(f"constant affordance must be in [0, 1], got {value}")
        self.value = float(value)

    def evaluate(self, skills, context):
        values = np.full(len(skills), self.value)
        return values, values.copy()


#: Every affordance model type by name: a class, or ``"module:Class"`` imported on first use
#: (the path planner and the value network stay unloaded until a configuration names them).
#: The one table: nothing registers itself on import, so every process (an eval worker
#: included) knows every type.
AFFORDANCE_MODELS: dict[str, Callable[..., AffordanceModel] | str] = {
    "distance": DistanceAffordance,
    "symbolic_pick": SymbolicPickAffordance,
    "holding": HoldingAffordance,
    "constant": ConstantAffordance,
    "path_distance": "saycan_ros.skills.navigation.affordance:PathDistanceAffordance",
    "learned_pick": "saycan_ros.skills.pick.affordance:LearnedPickAffordance",
}


def affordance_model_type(name: str) -> Callable[..., AffordanceModel]:
    """The class of affordance model type ``name`` (imported if the table holds its path)."""
    try:
        entry = AFFORDANCE_MODELS[name]
    except (KeyError, TypeError):
        raise ConfigError(f"unknown affordance model {name!r}; known: "
                          f"{', '.join(AFFORDANCE_MODELS)}") from None
    if isinstance(entry, str):
        import importlib
        module, _, attr = entry.partition(":")
        entry = getattr(importlib.import_module(module), attr)
    return entry


def make_affordance_model(spec: Mapping) -> AffordanceModel:
    """Build one model from ``{type: NAME, **params}``."""
    if not isinstance(spec, Mapping) or "type" not in spec:
        raise ConfigError(f"affordance model spec needs a 'type', got {spec!r}")
    params = {k: v for k, v in spec.items() if k != "type"}
    factory = affordance_model_type(spec["type"])
    try:
        return factory(**params)
    except TypeError as exc:
        raise ConfigError(f"affordance model {spec['type']!r}: {exc}") from None


class AffordanceScorer:
    """Scores every candidate skill: dispatches to the model of its kind, then caps completed ones."""

    def __init__(self, models: Mapping[str, AffordanceModel], completed_cap: float = 0.0):
        self.models = dict(models)
        if not (0.0 <= completed_cap <= 1.0):
            raise ConfigError(f"completed_cap must be in [0, 1], got {completed_cap}")
        self.completed_cap = float(completed_cap)

    def score(self, skills: Sequence[Skill], history: Sequence[Skill],
              context: AffordanceContext) -> tuple[np.ndarray, np.ndarray]:
        probs = np.zeros(len(skills))
        raws = np.zeros(len(skills))
        by_kind: dict[str, list[int]] = {}
        for i, skill in enumerate(skills):
            by_kind.setdefault(skill.kind, []).append(i)
        for kind, indices in by_kind.items():  # one batched call per model
            model = self.models.get(kind)
            if model is None:
                raise ConfigError(f"no affordance model for skill kind {kind!r}")
            p, r = model.evaluate([skills[i] for i in indices], context)
            probs[indices], raws[indices] = p, r
        done = {s.text for s in history}
        for i, skill in enumerate(skills):
            if skill.text in done and effect_holds(context.state, skill):
                probs[i] = min(probs[i], self.completed_cap)
        if not np.all(np.isfinite(probs)) or probs.min(initial=0) < 0 or probs.max(initial=0) > 1:
            raise ValueError(f"affordance model returned values outside [0, 1]: {probs}")
        return probs, raws


def affordance_from_dict(data: Mapping) -> AffordanceScorer:
    section = data.get("affordance", data)
    models = section.get("models")
    if not isinstance(models, Mapping):
        raise ConfigError("affordance config: expected 'models' mapping skill kind -> model spec")
    return AffordanceScorer({kind: make_affordance_model(spec) for kind, spec in models.items()},
                            completed_cap=float(section.get("completed_cap", 0.0)))


def load_affordance(path=None) -> AffordanceScorer:
    data, _ = load_yaml(path, default_name="affordance.yaml")
    return affordance_from_dict(data)


def check_covers(scorer: AffordanceScorer, skills: SkillSet) -> None:
    """Every kind in the repertoire has a model (fail at start-up, not mid-plan)."""
    missing = {s.kind for s in skills} - set(scorer.models)
    if missing:
        raise ConfigError(f"no affordance model for skill kinds {sorted(missing)}")
