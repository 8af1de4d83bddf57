"""Configuration of the behaviour-cloning pick policy (``config/learning.yaml``, section ``bc``)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from saycan_ros.learning.configuration_common import (  # noqa: F401 - re-exported
    AugmentConfig, FiLMNetConfig, SectionConfig, TrainConfig)


@dataclass(frozen=True)
class DemoConfig:
    """Demonstrations of the scripted expert with noise injection (DART): the expert executes
    its clean action plus Gaussian noise of a per-episode std drawn from ``noise``; the label is
    always the clean action at the state actually visited."""
    episodes: int = 2400
    seed_base: int = 10_000_000          # episode i uses env seed seed_base + i
    noise: tuple[float, float] = (0.0, 0.25)
    distractors: tuple[int, int] = (1, 6)  # other objects at the location (task scenes: up to 6)
    undershoot: float = 0.0              # the expert aims its descent this far below the grasp
    # height (it closes within 1 cm above it): a margin
    # for the policy's imprecise last descent steps


@dataclass(frozen=True)
class DaggerConfig:
    """Optional DAgger rounds: roll out the current policy (with DART noise) on fresh feasible
    starts, label every visited state with the expert's clean action, add, keep training."""
    rounds: int = 0
    start: float = 0.5                # the rounds are spread over [start, 1) of the training steps
    episodes: int = 600
    noise: tuple[float, float] = (0.0, 0.1)
    seed_base: int = 11_000_000


@dataclass(frozen=True)
class BCTrainConfig(TrainConfig):
    aux_weight: float = 1.0           # auxiliary loss (target offset, privileged sim state)
    oversample: dict = field(default_factory=dict)   # shape kind -> sampling weight of its
    # objects' frames (e.g. {sphere: 2.5}); others weigh 1
    grasp_weight: float = 1.0         # sampling weight of the frames where the grasp is decided
    # (fingers at grasp height, hand open, nothing held)
    eval_episodes_per_object: int = 4  # quick success check at the end (seeds of the training range)


@dataclass(frozen=True)
class BCConfig(SectionConfig):
    SECTION: ClassVar[str] = "bc"

    data: DemoConfig = field(default_factory=DemoConfig)
    dagger: DaggerConfig = field(default_factory=DaggerConfig)
    model: FiLMNetConfig = field(default_factory=FiLMNetConfig)
    augment: AugmentConfig = field(default_factory=AugmentConfig)
    train: BCTrainConfig = field(default_factory=BCTrainConfig)
