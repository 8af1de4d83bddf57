"""Say: p(skill | instruction, history) from a language model's scores of fixed option texts.

Each candidate skill is scored as the summed log-probability of its option text after the
dialogue prompt; the probabilities are the softmax of those sums over the candidates (the
paper's normalisation). Nothing is generated and parsed: the options are the skills.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from saycan_ros.prompt import DialoguePrompt


class ScoringError(RuntimeError):
    """The back end could not give usable scores (it is never papered over with uniform ones)."""


def normalise_logprobs(raw: np.ndarray) -> np.ndarray:
    """Softmax over candidates; rejects NaN and +inf, treats -inf as impossible."""
    raw = np.asarray(raw, dtype=np.float64)
    if raw.size == 0:
        raise ScoringError("no scores to normalise")
    if np.isnan(raw).any() or np.isposinf(raw).any():
        raise ScoringError(f"back end returned non-finite log-probs: {raw.tolist()}")
    if np.isneginf(raw).all():
        raise ScoringError("back end gave every candidate zero probability")
    shifted = np.exp(raw - raw.max())
    return shifted / shifted.sum()


class LanguageScorer:
    """Scores candidate skills with a :class:`~saycan_ros.llm.backend.LanguageBackend`."""

    def __init__(self, backend, prompt: DialoguePrompt):
        self.backend = backend
        self.prompt = prompt
        self._prefix = prompt.prefix()

    def score(self, instruction: str, history: Sequence[str], skills: Sequence[str]
              ) -> tuple[np.ndarray, np.ndarray]:
        """Returns (probabilities summing to 1, summed log-probs), one per skill."""
        if not skills:
            raise ValueError("no candidate skills to score")
        options = [self.prompt.option(s) for s in skills]
        try:
            raw = self.backend.option_logprobs(self._prefix,
                                               self.prompt.query(instruction, history), options)
        except ScoringError:
            raise
        except (RuntimeError, OSError, ValueError) as exc:
            raise ScoringError(f"{getattr(self.backend, 'name', 'back end')}: {exc}") from exc
        raw = np.asarray(raw, dtype=np.float64)
        if raw.shape != (len(skills),):
            raise ScoringError(f"back end returned {raw.shape} scores for {len(skills)} skills")
        return normalise_logprobs(raw), raw
