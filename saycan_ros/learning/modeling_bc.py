"""The BC-Z-style pick policy, scaled to a 96x96 simulator camera and a CPU.

Image (96x96 RGB) -> stem conv (stride 2) -> stages of FiLM residual blocks (each stage after
the first halves the resolution), every block's output modulated by a scale and shift computed
from the skill text's sentence embedding (FiLM, as in BC-Z) -> spatial-softmax keypoints of the
stage before last (x, y per keypoint: where things are, to the pixel; the text-queried one,
"where is the named object", refined at twice that resolution with ``fine_keypoints``) + a
global average pool of the last stage (what is there) -> MLP with the arm state and a
projection of the text embedding -> three heads, weighted evenly in the loss: end-effector
delta (3, MSE), gripper (open/close, cross-entropy) and terminate (no/yes, cross-entropy).

With ``ee_view`` (the shipped config) a second encoder of the same kind, its own weights, reads
the end-effector view: the head camera at twice the resolution in a 48x48 crop centred on the
fingertips (``sim.camera.EEViewCamera``), where a flat object's edge beside a finger spans pixels
the 96-px frame blurs into one. Its text-queried keypoint learns the target's pixel in that view;
its features join the head camera's before the MLP.

With ``start_frame`` (an option, not shipped) the head encoder reads the current frame stacked
with the frame the skill started from (6 channels): once the arm reaches over a flat object
lying along it, the telescoping link hides the object from the head camera, while the start
frame still shows where it lies. Trained from scratch it did not lift the energy bar (157 of
180 starts against 158, ``config/learning.yaml``).

The non-image state (end-effector x, y, z in the base frame, gripper opening, holding) is fed
to the MLP: the camera shows where the object is relative to the gripper, the state gives the
arm's height and the hand's condition exactly, which the descend / close / lift phases need.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from saycan_ros.learning.configuration_common import FiLMNetConfig
from saycan_ros.learning.modeling_common import (  # noqa: F401 - re-exported
    IMAGE_MEAN, IMAGE_STD, FiLMBlock, FiLMEncoder, FiLMNet, LoadedModel, SpatialSoftmax, TextNorm,
    augment, autocast, cosine_lr, count_parameters, load_checkpoint, normalise_state,
    preprocess_images, save_checkpoint)
from saycan_ros.learning.text_encoder import EmbeddingTable

__all__ = ["IMAGE_MEAN", "IMAGE_STD", "FiLMBlock", "FiLMEncoder", "FiLMNet", "SpatialSoftmax",
           "TextNorm", "augment", "autocast", "cosine_lr", "count_parameters", "load_checkpoint",
           "normalise_state", "preprocess_images", "save_checkpoint", "AUX_SCALE", "PIX_SCALE",
           "BCPolicyNet", "PickPolicy", "bc_loss", "to_actions"]


class BCPolicyNet(FiLMNet):
    def __init__(self, cfg: FiLMNetConfig):
        super().__init__(cfg)
        self.mlp = nn.Sequential(nn.Linear(self.trunk_dim, cfg.hidden), nn.ReLU(),
                                 nn.Linear(cfg.hidden, cfg.hidden), nn.ReLU())
        self.delta = nn.Linear(cfg.hidden, 3)
        self.gripper = nn.Linear(cfg.hidden, 2)      # 0 open, 1 close
        self.terminate = nn.Linear(cfg.hidden, 2)    # 0 continue, 1 terminate
        self.aux = nn.Linear(cfg.hidden, cfg.aux_dim) if cfg.aux_dim else None

    def forward(self, images, states, text, ee_images=None):
        """images: preprocessed (B,3,H,W) (B,6,H,W with ``cfg.start_frame``: + the skill's start
        frame); states (B,5) raw; text (B,384); ee_images:
        preprocessed end-effector views (B,3,S,S), with ``cfg.ee_view``."""
        h = self.mlp(self.trunk(self.features(images, text, ee_images), states, text))
        out = {"delta": self.delta(h), "gripper": self.gripper(h), "terminate": self.terminate(h)}
        if self.aux is not None:
            out["aux"] = self.aux(h)
        if self.cfg.supervised_keypoints and self.encoder.keypoints is not None:
            out["pix"] = self.encoder.keypoints.pixels(self.cfg.supervised_keypoints, images.shape[-1])
            if self.ee_encoder is not None and self.ee_encoder.keypoints is not None:
                # + the target's pixel in the end-effector view (its first keypoint)
                out["pix"] = torch.cat([out["pix"], self.ee_encoder.keypoints.pixels(
                    1, ee_images.shape[-1])], dim=1)
        return out


#: The auxiliary target (privileged, training only) is the target object's offset from the
#: gripper in the base frame, divided by this (metres).
AUX_SCALE = 0.1


#: Keypoint labels are compared in units of this many pixels.
PIX_SCALE = 4.0


def bc_loss(out: dict, actions: torch.Tensor, aux: torch.Tensor | None = None,
            aux_weight: float = 0.0, pix: torch.Tensor | None = None) -> tuple[torch.Tensor, dict]:
    """Evenly weighted: MSE on the delta, cross-entropy on gripper and terminate; plus
    ``aux_weight`` x (smooth L1 of the target-offset head + smooth L1 of the supervised
    keypoints: target and gripper pixels) when given."""
    out = {k: v.float() for k, v in out.items()}     # bfloat16 under autocast
    delta = F.mse_loss(out["delta"], actions[:, :3])
    grip = F.cross_entropy(out["gripper"], (actions[:, 3] > 0).long())
    term = F.cross_entropy(out["terminate"], (actions[:, 4] > 0).long())
    loss = delta + grip + term
    parts = {"delta": delta.item(), "gripper": grip.item(), "terminate": term.item()}
    if aux is not None and aux_weight > 0 and "aux" in out:
        a = F.smooth_l1_loss(out["aux"], (aux / AUX_SCALE).clamp(-5, 5), beta=0.1)   # ~L1: sharp
        loss = loss + aux_weight * a
        parts["aux"] = a.item()
    if pix is not None and aux_weight > 0 and "pix" in out:
        k = out["pix"].shape[1]
        a = F.smooth_l1_loss(out["pix"] / PIX_SCALE, pix[:, :k] / PIX_SCALE, beta=0.25)
        loss = loss + aux_weight * a
        parts["pix"] = a.item()
    return loss, parts


def to_actions(out: dict) -> np.ndarray:
    """Network outputs -> env actions [dx, dy, dz, gripper, terminate] in [-1, 1]."""
    delta = out["delta"].clamp(-1.0, 1.0)
    grip = torch.where(out["gripper"].argmax(1) == 1, 1.0, -1.0)
    term = torch.where(out["terminate"].argmax(1) == 1, 1.0, -1.0)
    return torch.cat([delta, grip[:, None], term[:, None]], dim=1).numpy().astype(np.float32)


class PickPolicy(LoadedModel):
    """The trained policy at run time: ``act(obs)`` or batched ``__call__(images, states, skills)``
    (the :data:`saycan_ros.learning.data.PolicyFn` signature)."""

    def __init__(self, net: BCPolicyNet, embeddings: EmbeddingTable, meta: dict | None = None):
        super().__init__(net, embeddings, meta)

    @torch.no_grad()
    def __call__(self, images: np.ndarray, states: np.ndarray, skills: Sequence[str],
                 ee_images: np.ndarray | None = None,
                 start_images: np.ndarray | None = None) -> np.ndarray:
        return to_actions(self.net(*self.tensors(images, states, skills, ee_images, start_images)))

    def act(self, obs: dict) -> np.ndarray:
        ee, start = obs.get("ee_image"), obs.get("start_image")
        return self(obs["image"][None], obs["state"][None], [obs["skill"]],
                    None if ee is None else ee[None], None if start is None else start[None])[0]

    def save(self, path, extra: dict | None = None) -> None:
        save_checkpoint(path, "bc_pick", self.net, self.embeddings, extra)

    @classmethod
    def load(cls, path) -> "PickPolicy":
        return cls(*cls.load_net(path, "bc_pick", BCPolicyNet))
