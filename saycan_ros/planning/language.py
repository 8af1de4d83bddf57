"""Say: p(skill | instruction, history) from a language model's scores of fixed option texts.

Each candidate skill is scored as the summed log-probability of its option text after the
dialogue prompt; the probabilities are the softmax of those sums over the candidates (the
paper's normalisation). Nothing is generated and parsed: the options are the skills.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Sequence

import numpy as np

from saycan_ros.planning.calibration import CONTENT_FREE, prior_corrected
from saycan_ros.planning.prompt import DialoguePrompt, Example


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

    def __init__(self, backend, prompt: DialoguePrompt, prior_weight: float = 0.0,
                 examples_for: Callable[[str], Sequence[Example]] | None = None):
        """``prior_weight``: how much of each skill's probability under a content-free
        instruction is divided out (:mod:`saycan_ros.planning.calibration`; 0 = none, and
        one scoring pass a step instead of two). ``examples_for(instruction)``: the few-shot
        examples for that instruction (retrieved ones, :mod:`saycan_ros.planning.retrieval`),
        shown after the prompt's own; the prefix is then built, and its KV cache computed, once
        per instruction."""
        prior_corrected(np.zeros(1), np.zeros(1), prior_weight)      # checks the weight
        self.backend = backend
        self.prompt = prompt
        self.prior_weight = float(prior_weight)
        self.examples_for = examples_for
        self._prefix = prompt.prefix()
        self._retrieved: tuple[str, str] = ("", self._prefix)   # (instruction, its prefix)

    def prefix_for(self, instruction: str) -> str:
        """The prompt prefix the candidates of ``instruction`` are scored after."""
        if self.examples_for is None:
            return self._prefix
        if self._retrieved[0] != instruction:
            shown = tuple(Example(e.instruction, e.steps, e.scene if self.prompt.scene else "")
                          for e in self.examples_for(instruction))
            prompt = dataclasses.replace(self.prompt, examples=self.prompt.examples + shown)
            self._retrieved = (instruction, prompt.prefix())
        return self._retrieved[1]

    @property
    def uses_scene(self) -> bool:
        """Whether the prompt shows the scene line (``scene: true`` in its YAML)."""
        return self.prompt.scene

    @property
    def refreshes_scene(self) -> bool:
        """Whether the planner should read the scene line again after each put-down
        (``scene: step`` in the prompt's YAML: what its adapter was trained on)."""
        return self.prompt.scene_refresh

    def score(self, instruction: str, history: Sequence[str], skills: Sequence[str],
              scene: str = "") -> tuple[np.ndarray, np.ndarray]:
        """Returns (probabilities summing to 1, summed log-probs), one per skill. ``scene`` is
        shown only when the prompt asks for it."""
        if not skills:
            raise ValueError("no candidate skills to score")
        options = [self.prompt.option(s) for s in skills]
        scene = scene if self.prompt.scene else ""
        try:
            prefix = self.prefix_for(instruction)
            raw = self.backend.option_logprobs(
                prefix, self.prompt.query(instruction, history, scene), options)
            if self.prior_weight > 0:
                prior = self.backend.option_logprobs(
                    prefix, self.prompt.query(CONTENT_FREE, history, scene), options)
                raw = prior_corrected(raw, prior, self.prior_weight)
        except ScoringError:
            raise
        except (RuntimeError, OSError, ValueError) as exc:
            raise ScoringError(f"{getattr(self.backend, 'name', 'back end')}: {exc}") from exc
        raw = np.asarray(raw, dtype=np.float64)
        if raw.shape != (len(skills),):
            raise ScoringError(f"back end returned {raw.shape} scores for {len(skills)} skills")
        return normalise_logprobs(raw / self.prompt.temperature), raw
