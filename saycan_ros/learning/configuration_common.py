"""Configuration parts shared by the pick policy and its value function
(``config/learning.yaml``): the network, the augmentation, the optimiser settings, and the
load / dump of a section."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from saycan_ros.learning._config_util import from_dict, load_section, to_dict
from saycan_ros.robot.cameras import EE_CAMERAS, HEAD_CAMERA_SIZE


@dataclass(frozen=True)
class FiLMNetConfig:
    """A small ResNet-style CNN with FiLM conditioning (BC-Z), ending in spatial-softmax
    keypoints (from the stage before last) and a global average pool (last stage)."""
    image_size: int = HEAD_CAMERA_SIZE  # input side in pixels (the head camera's); images
    # of another size are resized to it at run time
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
    match_score: bool = False         # also output, per text-queried map: its max and
    # log-mean-exp (is the named object in view?), the
    # attended features (what is there) and its spread
    text_queries: int = 1             # keypoints whose heat map is queried by the text
    supervised_keypoints: int = 2     # the first keypoints learn the target's and the
    # gripper's pixel (auxiliary, training only); 0 = none
    aux_dim: int = 3                  # auxiliary head: target offset from the gripper (0 = none)
    fine_keypoints: int = 0           # >0: the text-queried maps at twice the resolution: the
    # coarse map upsampled plus a correction from this many
    # channels of the stage before (1 px of error is 1.2-1.8 cm
    # on the table; the 4-px cells of the coarse map were too coarse)
    ee_view: int = 0                  # >0: a second input, the end-effector view (a crop of the
    # head camera around the fingertips, this many px square,
    # sim/camera.EEViewCamera), through its own encoder of the
    # same kind; its first keypoint learns the target's pixel
    ee_view_zoom: float = 2.0         # its pixels per head-camera pixel
    ee_camera: str = "crop"           # the view's camera: "crop" of the head camera, or "wrist"
    # (sim/camera.WristCamera, on the gripper; zoom unused)
    start_frame: bool = False         # the head camera's frame at the skill's start is stacked
    # with the current one (3 more input channels): where the
    # target was before the arm came over it and hid it

    def __post_init__(self):
        # Checked here, before any demonstrations are built (the network is made after them).
        if self.ee_view and (isinstance(self.ee_view, bool) or self.ee_view < 16):
            raise ValueError(f"ee_view: expected 0 (off) or a side of at least 16 px, got {self.ee_view!r}")
        if not self.ee_view_zoom >= 1:
            raise ValueError(f"ee_view_zoom: expected at least 1, got {self.ee_view_zoom!r}")
        if self.ee_camera not in EE_CAMERAS:
            raise ValueError(f"ee_camera: expected one of {EE_CAMERAS}, got {self.ee_camera!r}")


@dataclass(frozen=True)
class AugmentConfig:
    shift: int = 2                    # pad-and-crop: random shift up to this many pixels
    brightness: float = 0.1           # additive, fraction of full scale
    contrast: float = 0.15            # multiplicative around the image mean


@dataclass(frozen=True)
class TrainConfig:
    """Optimiser settings both trainers use (AdamW, linear warm-up then cosine decay)."""
    steps: int = 6000
    batch_size: int = 64
    lr: float = 1e-3
    weight_decay: float = 1e-4
    warmup: int = 200
    threads: int = 1                  # torch threads (1: best on a shared 2-core machine)
    precision: str = "fp32"           # "bf16": convolutions under bfloat16 autocast (weights,
    # optimiser and keypoint softmax stay float32); "auto":
    # bf16 where the CPU has it natively, else fp32

    def __post_init__(self):
        for name in ("steps", "batch_size", "threads"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: expected at least 1, got {getattr(self, name)!r}")
        if not self.lr > 0 or self.warmup < 0 or self.weight_decay < 0:
            raise ValueError(f"lr must be > 0, warmup and weight_decay >= 0 (got lr {self.lr!r}, "
                             f"warmup {self.warmup!r}, weight_decay {self.weight_decay!r})")


class SectionConfig:
    """A top-level section of ``config/learning.yaml`` (``SECTION``) as a frozen dataclass."""
    SECTION: ClassVar[str] = ""

    @classmethod
    def from_dict(cls, data):
        return from_dict(cls, data, cls.SECTION)

    @classmethod
    def load(cls, path=None):
        section, _ = load_section(path, cls.SECTION)
        return cls.from_dict(section)

    def to_dict(self) -> dict:
        return to_dict(self)
