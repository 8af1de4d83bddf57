"""Configuration of the behaviour-cloning pick policy (``config/learning.yaml``, section ``bc``)."""
from __future__ import annotations

from dataclasses import dataclass, field

from saycan_ros.learning._config_util import from_dict, load_section, to_dict


@dataclass(frozen=True)
class DemoConfig:
    """Demonstrations of the scripted expert with noise injection (DART): the expert executes
    its clean action plus Gaussian noise of a per-episode std drawn from ``noise``; the label is
    always the clean action at the state actually visited."""
    episodes: int = 2400
    seed_base: int = 10_000_000          # episode i uses env seed seed_base + i
    noise: tuple[float, float] = (0.0, 0.25)
    distractors: tuple[int, int] = (1, 2)
    image_size: int = 96


@dataclass(frozen=True)
class DaggerConfig:
    """Optional DAgger rounds: roll out the current policy (with DART noise) on fresh feasible
    starts, label every visited state with the expert's clean action, add, keep training."""
    rounds: int = 0
    episodes: int = 600
    noise: tuple[float, float] = (0.0, 0.1)
    seed_base: int = 11_000_000


@dataclass(frozen=True)
class FiLMNetConfig:
    """A small ResNet-style CNN with FiLM conditioning (BC-Z), ending in spatial-softmax
    keypoints (from the stage before last) and a global average pool (last stage)."""
    channels: tuple[int, ...] = (16, 32, 64)
    blocks_per_stage: tuple[int, ...] = (0, 1, 1)   # FiLM residual blocks per stage
    keypoints: int = 32
    text_dim: int = 384
    text_proj: int = 64               # the text embedding also enters the MLP through this
    state_dim: int = 5                # [ee x, y, z, gripper opening, holding]; 0 = image only
    hidden: int = 256
    groups: int = 4                   # GroupNorm groups
    flatten: int = 0                  # >0: also a linear map of the last stage, reduced to this
                                      # many channels and flattened (position-aware features)
    coord_conv: bool = True           # two pixel-coordinate channels appended to the image
    text_queries: int = 1             # keypoints whose heat map is queried by the text
    supervised_keypoints: int = 2     # the first keypoints learn the target's and the
                                      # gripper's pixel (auxiliary, training only); 0 = none
    aux_dim: int = 3                  # auxiliary head: target offset from the gripper (0 = none)


@dataclass(frozen=True)
class AugmentConfig:
    shift: int = 2                    # pad-and-crop: random shift up to this many pixels
    brightness: float = 0.1           # additive, fraction of full scale
    contrast: float = 0.15            # multiplicative around the image mean


@dataclass(frozen=True)
class BCTrainConfig:
    steps: int = 6000
    batch_size: int = 64
    lr: float = 1e-3
    weight_decay: float = 1e-4
    warmup: int = 200
    aux_weight: float = 1.0           # auxiliary loss (target offset, privileged sim state)
    threads: int = 1
    eval_episodes_per_object: int = 4  # quick success check at the end (seeds of the training range)


@dataclass(frozen=True)
class BCConfig:
    data: DemoConfig = field(default_factory=DemoConfig)
    dagger: DaggerConfig = field(default_factory=DaggerConfig)
    model: FiLMNetConfig = field(default_factory=FiLMNetConfig)
    augment: AugmentConfig = field(default_factory=AugmentConfig)
    train: BCTrainConfig = field(default_factory=BCTrainConfig)

    @classmethod
    def from_dict(cls, data) -> "BCConfig":
        return from_dict(cls, data, "bc")

    @classmethod
    def load(cls, path=None) -> "BCConfig":
        section, _ = load_section(path, "bc")
        return cls.from_dict(section)

    def to_dict(self) -> dict:
        return to_dict(self)
