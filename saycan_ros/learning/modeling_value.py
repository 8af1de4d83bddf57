"""The pick value function V(s, skill) (the paper's "Can"), and its calibration.

The network is the policy's FiLM-conditioned CNN (its own weights) with the arm state and the
text projection into an MLP and one sigmoid output: the probability that the BC policy,
started here with this skill text, succeeds (trained by TD with sparse 0/1 rewards and a log
loss, see ``train_value``). The affordance is the paper's calibration of it:
``clamp((v - v_min) / (v_max - v_min), 0, 1)`` with v_min, v_max fitted on held-out rollouts.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch
import torch.nn as nn

from saycan_ros.learning.configuration_common import FiLMNetConfig
from saycan_ros.learning.modeling_common import FiLMNet, LoadedModel, save_checkpoint
from saycan_ros.learning.text_encoder import EmbeddingTable


class ValueNet(FiLMNet):
    def __init__(self, cfg: FiLMNetConfig):
        super().__init__(cfg)
        self.mlp = nn.Sequential(nn.Linear(self.trunk_dim, cfg.hidden), nn.ReLU(),
                                 nn.Linear(cfg.hidden, cfg.hidden), nn.ReLU(),
                                 nn.Linear(cfg.hidden, 1))

    def forward(self, images, states, text, ee_images=None):
        """Logit of V; images preprocessed (B,3,H,W), states (B,5) raw, text (B,384)."""
        return self.head(self.features(images, text, ee_images), states, text)

    def head(self, features, states, text):
        """Logit of V from cached :meth:`features` (a frozen encoder's)."""
        return self.mlp(self.trunk(features, states, text)).squeeze(1)


# -- calibration -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Calibration:
    v_min: float = 0.0
    v_max: float = 1.0

    def __call__(self, v):
        v = np.asarray(v, dtype=np.float64)
        return np.clip((v - self.v_min) / (self.v_max - self.v_min), 0.0, 1.0)


def expected_calibration_error(p, y, bins: int = 10) -> float:
    """Sum over equal-width bins of (bin share) x |observed success - mean prediction|."""
    p, y = np.asarray(p, float), np.asarray(y, float)
    if len(p) == 0:
        return float("nan")
    index = np.minimum((p * bins).astype(int), bins - 1)
    ece = 0.0
    for b in range(bins):
        m = index == b
        if m.any():
            ece += m.mean() * abs(y[m].mean() - p[m].mean())
    return float(ece)


def reliability_bins(p, y, bins: int = 10) -> list[dict]:
    p, y = np.asarray(p, float), np.asarray(y, float)
    index = np.minimum((p * bins).astype(int), bins - 1)
    out = []
    for b in range(bins):
        m = index == b
        out.append({"lo": b / bins, "hi": (b + 1) / bins, "n": int(m.sum()),
                    "mean_prediction": float(p[m].mean()) if m.any() else None,
                    "observed": float(y[m].mean()) if m.any() else None})
    return out


def auroc(scores, labels) -> float:
    """Area under the ROC curve (Mann-Whitney U, ties count half)."""
    s, y = np.asarray(scores, float), np.asarray(labels, bool)
    pos, neg = s[y], s[~y]
    if len(pos) == 0 or len(neg) == 0:
        return float("nan")
    order = np.argsort(np.concatenate([pos, neg]), kind="mergesort")
    allv = np.concatenate([pos, neg])[order]
    ranks = np.empty(len(allv))
    i = 0
    while i < len(allv):                    # average ranks over ties
        j = i
        while j + 1 < len(allv) and allv[j + 1] == allv[i]:
            j += 1
        ranks[i:j + 1] = (i + j) / 2 + 1
        i = j + 1
    r = np.empty(len(allv))
    r[order] = ranks
    return float((r[:len(pos)].sum() - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg)))


def brier(p, y) -> float:
    return float(np.mean((np.asarray(p, float) - np.asarray(y, float)) ** 2))


def log_loss(p, y, eps: float = 1e-3) -> float:
    p = np.clip(np.asarray(p, float), eps, 1 - eps)
    y = np.asarray(y, float)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))


OBJECTIVES = {"brier": brier, "logloss": log_loss,
              "ece": lambda p, y: expected_calibration_error(p, y)}


def fit_calibration(raw, outcomes, objective: str = "brier", grid: int = 101) -> tuple[Calibration, dict]:
    """Choose v_min < v_max among raw-value quantiles (plus 0 and 1) minimising ``objective``
    of the calibrated values against the outcomes; ties go to the widest interval."""
    raw, y = np.asarray(raw, float), np.asarray(outcomes, float)
    if objective not in OBJECTIVES:
        raise ValueError(f"calibration objective must be one of {sorted(OBJECTIVES)}")
    score = OBJECTIVES[objective]
    cands = np.unique(np.concatenate([[0.0, 1.0], np.quantile(raw, np.linspace(0, 1, grid))]))
    best, best_key = None, None
    for i, lo in enumerate(cands):
        for hi in cands[i + 1:]:
            if hi - lo < 1e-6:
                continue
            cal = Calibration(float(lo), float(hi))
            key = (round(score(cal(raw), y), 12), -(hi - lo))
            if best_key is None or key < best_key:
                best, best_key = cal, key
    p = best(raw)
    return best, {"objective": objective, "value": float(best_key[0]), "n": int(len(raw)),
                  "ece": expected_calibration_error(p, y), "brier": brier(p, y),
                  "log_loss": log_loss(p, y), "auroc": finite(auroc(raw, y))}


# -- run time --------------------------------------------------------------------------------------
class PickValue(LoadedModel):
    """The trained value function: ``raw(images, states, skills)`` -> V in (0, 1) and
    ``affordance(...)`` -> calibrated probability, one batched forward pass per call."""

    def __init__(self, net: ValueNet, embeddings: EmbeddingTable,
                 calibration: Calibration = Calibration(), meta: dict | None = None):
        super().__init__(net, embeddings, meta)
        self.calibration = calibration

    @torch.no_grad()
    def raw(self, images: np.ndarray, states: np.ndarray, skills: Sequence[str]) -> np.ndarray:
        # Read before the skill starts: its start frame is the current one.
        start = images if self.start_frame else None
        return torch.sigmoid(self.net(*self.tensors(images, states, skills, start_images=start))
                             ).double().numpy()

    def affordance(self, images, states, skills) -> np.ndarray:
        return self.calibration(self.raw(images, states, skills))

    def save(self, path, extra: dict | None = None) -> None:
        meta = {"v_min": self.calibration.v_min, "v_max": self.calibration.v_max, **(extra or {})}
        save_checkpoint(path, "value_pick", self.net, self.embeddings, meta)

    @classmethod
    def load(cls, path) -> "PickValue":
        net, embeddings, meta = cls.load_net(path, "value_pick", ValueNet)
        cal = Calibration(float(meta.get("v_min", 0.0)), float(meta.get("v_max", 1.0)))
        return cls(net, embeddings, cal, meta)


def finite(x: float) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)
