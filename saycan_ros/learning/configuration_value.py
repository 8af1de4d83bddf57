"""Configuration of the pick value function (``config/learning.yaml``, section ``value``)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from saycan_ros.learning.configuration_common import (AugmentConfig, FiLMNetConfig, SectionConfig,
                                                      TrainConfig)


@dataclass(frozen=True)
class ValueDataConfig:
    """Rollouts of the BC policy from diverse starts, feasible and impossible."""
    policy: str = "bc_pick.pt"             # the policy whose value is learned (models/ name or path)
    train_episodes: int = 3000
    train_seed_base: int = 20_000_000
    calib_episodes: int = 600              # held out: fits v_min / v_max
    calib_seed_base: int = 30_000_000
    feasible_fraction: float = 0.5
    reasons: tuple[str, ...] = ("absent", "holding", "out_of_reach", "away", "holding_target")
    distractors: tuple[int, int] = (1, 6)  # other objects at the location (task scenes: up to 6)
    elsewhere: float = 0.0                 # share of starts with the other shelves stocked too
    n_envs: int = 16
    # Per training episode, its first frame again with the pick text of objects that are not
    # where the robot stands, target 0: they cannot be picked, so need no rollout (see td).
    absent_relabels: int = 0

    def __post_init__(self):
        if self.absent_relabels < 0:
            raise ValueError(f"absent_relabels must be at least 0, got {self.absent_relabels}")


@dataclass(frozen=True)
class TDConfig:
    """n-step TD targets from a Polyak-averaged target network; sparse 0/1 reward at the end."""
    gamma: float = 1.0                     # undiscounted, as in the paper's affordance argument
    n_step: int = 4
    tau: float = 0.01                      # target network update rate per step
    initial_fraction: float = 0.25         # share of each batch drawn from episodes' first states
    absent_fraction: float = 0.0           # share drawn from the absent relabels (data)

    def __post_init__(self):
        for name in ("initial_fraction", "absent_fraction"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ValueError(f"{name} must be in [0, 1), got {getattr(self, name)}")
        if self.initial_fraction + self.absent_fraction >= 1.0:
            raise ValueError("initial_fraction + absent_fraction must stay under 1, got "
                             f"{self.initial_fraction} + {self.absent_fraction}")


@dataclass(frozen=True)
class ValueTrainConfig(TrainConfig):
    steps: int = 4000
    init_from_policy: bool = True          # start the encoder from the BC policy's (transfer)
    freeze_encoder: bool = False           # keep that encoder fixed: cache its features once and
    # train only the value head by TD (fast on a CPU)


@dataclass(frozen=True)
class CalibrationConfig:
    """v_min / v_max are fitted on the calibration rollouts' first states against the actual
    outcomes, minimising ``objective`` (brier | logloss | ece) over a grid of raw-value quantiles."""
    objective: str = "brier"
    grid: int = 101
    bins: int = 10


@dataclass(frozen=True)
class ValueConfig(SectionConfig):
    SECTION: ClassVar[str] = "value"

    data: ValueDataConfig = field(default_factory=ValueDataConfig)
    model: FiLMNetConfig = field(default_factory=FiLMNetConfig)
    augment: AugmentConfig = field(default_factory=AugmentConfig)
    td: TDConfig = field(default_factory=TDConfig)
    train: ValueTrainConfig = field(default_factory=ValueTrainConfig)
    calibration: CalibrationConfig = field(default_factory=CalibrationConfig)
