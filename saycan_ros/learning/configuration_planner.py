"""Configuration of the planner adapter (``config/learning.yaml``, section ``planner``): a LoRA
adapter of the scoring language model, fine-tuned on synthetic planning dialogues
(:mod:`saycan_ros.learning.planner_data`)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from saycan_ros.learning.configuration_common import SectionConfig


@dataclass(frozen=True)
class PlannerDataConfig:
    dialogues: int = 4000             # training dialogues drawn from the generator
    seed_offset: int = 0              # generator seed = --seed + this
    languages: bool = True            # also config/planner_languages.yaml
    scene_refresh: bool = True        # scene line re-read after each put-down (prompt scene: step)
    # Weights of named families in place of planner_data.FAMILY_WEIGHTS (the others keep theirs):
    # a continued run can spend its few dialogues on what the adapter gets wrong.
    family_weights: dict = field(default_factory=dict)
    # Share of the dialogues drawn in random kitchens of config/planner_lexicon.yaml (0-1; the
    # rest in the built-in kitchen), and how many dialogues share one random kitchen.
    many_kitchens: float = 0.0
    per_kitchen: int = 4
    # Which object the plan of a request any of several fulfil fetches: "random" (the model
    # spreads its probability over them) or "first" (the first in the scene line: the model is
    # sure where any will do, and unsure only where the words have several readings).
    any_reading: str = "random"

    def __post_init__(self):
        from saycan_ros.learning.planner_data import FAMILY_WEIGHTS
        if self.dialogues < 1:
            raise ValueError(f"dialogues: expected at least 1, got {self.dialogues!r}")
        if isinstance(self.many_kitchens, bool) or not 0 <= self.many_kitchens <= 1:
            raise ValueError(f"many_kitchens: expected a share in [0, 1], got "
                             f"{self.many_kitchens!r}")
        from saycan_ros.learning.planner_data import ANY_READINGS
        if self.any_reading not in ANY_READINGS:
            raise ValueError(f"any_reading: expected one of {ANY_READINGS}, got "
                             f"{self.any_reading!r}")
        if self.per_kitchen < 1:
            raise ValueError(f"per_kitchen: expected at least 1, got {self.per_kitchen!r}")
        unknown = sorted(set(self.family_weights) - set(FAMILY_WEIGHTS))
        if unknown:
            raise ValueError(f"family_weights: unknown families {unknown}; "
                             f"known: {sorted(FAMILY_WEIGHTS)}")
        for family, weight in self.family_weights.items():
            if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not weight >= 0:
                raise ValueError(f"family_weights.{family}: expected a number >= 0, got {weight!r}")
        if not sum({**FAMILY_WEIGHTS, **self.family_weights}.values()) > 0:
            raise ValueError("family_weights: at least one family needs a weight above 0")


@dataclass(frozen=True)
class LoraConfig:
    r: int = 16
    alpha: int = 32
    dropout: float = 0.05
    target_modules: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj",
                                       "up_proj", "down_proj")

    def __post_init__(self):
        if self.r < 1 or self.alpha < 1 or not 0 <= self.dropout < 1:
            raise ValueError(f"lora: r and alpha >= 1, 0 <= dropout < 1 (got {self.r!r}, "
                             f"{self.alpha!r}, {self.dropout!r})")


ATTENTIONS = ("auto", "eager", "sdpa")


def resolve_attention(attention: str, device: str) -> str:
    """The attention implementation a training run on ``device`` uses."""
    if attention == "auto":
        return "eager" if device == "cpu" else "sdpa"
    return attention


@dataclass(frozen=True)
class PlannerTrainConfig:
    epochs: int = 1
    batch_size: int = 8
    lr: float = 5e-4
    weight_decay: float = 0.0
    warmup: int = 20                  # optimiser steps of linear warm-up, then cosine decay
    threads: int = 2
    checkpoint_every: int = 50        # optimiser steps between checkpoints (--resume continues)
    precision: str = "auto"           # bf16 autocast where the device has it natively, else fp32
    device: str = "auto"              # cuda where torch sees a GPU, else cpu; or cpu / cuda
    # The attention kernel while training: auto = eager on the CPU (for dialogues of ~250
    # tokens its backward is faster than the CPU flash kernel's), sdpa on a GPU.
    attention: str = "auto"
    # Most padded tokens one forward/backward pass holds: a longer batch is run in parts whose
    # gradients add up to the batch's (the same loss, less memory; 0 = the batch at once).
    # Long built-in scene lines made a batch of 8 need more than 24 GB with Qwen 0.5B.
    max_batch_tokens: int = 0

    def __post_init__(self):
        from saycan_ros.learning.modeling_common import DEVICES
        if self.device not in DEVICES:
            raise ValueError(f"device: expected one of {DEVICES}, got {self.device!r}")
        if self.attention not in ATTENTIONS:
            raise ValueError(f"attention: expected one of {ATTENTIONS}, got {self.attention!r}")
        for name in ("epochs", "batch_size", "threads"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: expected at least 1, got {getattr(self, name)!r}")
        if self.max_batch_tokens < 0:
            raise ValueError(f"max_batch_tokens: expected 0 (off) or more, got "
                             f"{self.max_batch_tokens!r}")
        if not self.lr > 0 or self.warmup < 0:
            raise ValueError(f"lr must be > 0 and warmup >= 0 (got {self.lr!r}, {self.warmup!r})")


@dataclass(frozen=True)
class PlannerAdapterConfig(SectionConfig):
    SECTION: ClassVar[str] = "planner"

    base_model: str = "smollm2-135m"
    prompt: str = "prompt_adapter_step.yaml"   # the dialogue format the adapter is trained and used with
    # An adapter folder to continue from (relative to models/; "" = a fresh LoRA): the data of
    # a new version then costs a fraction of a run from scratch.
    init_adapter: str = ""
    data: PlannerDataConfig = field(default_factory=PlannerDataConfig)
    lora: LoraConfig = field(default_factory=LoraConfig)
    train: PlannerTrainConfig = field(default_factory=PlannerTrainConfig)
