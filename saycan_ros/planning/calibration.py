"""Correction for the language model's prior over the skill texts (contextual calibration,
Zhao et al. 2021; PMI scoring, Holtzman et al. 2021).

A small model prefers some option texts whatever the instruction ("bring it to you" after
"pick up"). Scoring each option also under a content-free instruction measures that prior, and
dividing it out (weighted) leaves what the instruction itself adds:

    log p'(s) = log p(s | instruction, history) - w * log p(s | content-free, history)

``w = 0`` is plain SayCan scoring, ``w = 1`` pointwise mutual information.
"""
from __future__ import annotations

import numpy as np

#: The instruction that carries no task (the calibration papers' "N/A").
CONTENT_FREE = "N/A"


def prior_corrected(raw: np.ndarray, prior: np.ndarray, weight: float) -> np.ndarray:
    """Summed log-probs ``raw`` with ``weight`` times the content-free ``prior`` taken out."""
    raw = np.asarray(raw, dtype=np.float64)
    prior = np.asarray(prior, dtype=np.float64)
    if raw.shape != prior.shape:
        raise ValueError(f"prior has shape {prior.shape}, scores {raw.shape}")
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"prior weight must be in [0, 1], got {weight!r}")
    return raw - weight * prior
