"""Translation of free text to the nearest admissible skill (Huang et al. 2022, §3.2):

    R(â, a_e) = cos(f(â), f(a_e)) + β · mean log p(â)

over k sampled candidates â and every skill a_e; the best pair wins, and a best score below
ε means the model has left the repertoire (the plan ends).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from saycan_ros.planning.retrieval import Embedder


@dataclass(frozen=True)
class Translation:
    skill: str               # the admissible skill chosen
    score: float             # its R
    source: str              # the generated text it came from
    similarity: np.ndarray   # max over samples of R, one per skill (for display)
    admissible: bool         # whether the chosen sample was already a skill, word for word


def normalise_step(text: str) -> str:
    """A generated step as a skill would be written: one line, no numbering or full stop."""
    text = text.strip().splitlines()[0] if text.strip() else ""
    text = text.strip().rstrip(".").strip()
    while text and (text[0].isdigit() or text[0] in ".)"):
        text = text[1:].lstrip()
    return text.lower()


class SkillTranslator:
    def __init__(self, skills: Sequence[str], embed: Embedder, beta: float = 0.3):
        if not skills:
            raise ValueError("no skills to translate to")
        self.skills = list(skills)
        self.embed = embed
        self.beta = float(beta)
        self.skill_vectors = np.asarray(embed(self.skills), dtype=np.float32)

    def translate(self, samples: Sequence[str], mean_logprobs: Sequence[float] | None = None
                  ) -> Translation | None:
        """The best (sample, skill) pair, or None when every sample is empty."""
        texts = [normalise_step(s) for s in samples]
        keep = [i for i, t in enumerate(texts) if t]
        if not keep:
            return None
        vectors = np.asarray(self.embed([texts[i] for i in keep]), dtype=np.float32)
        cosine = vectors @ self.skill_vectors.T                        # (samples, skills)
        lp = np.zeros(len(keep))
        if mean_logprobs is not None:
            lp = np.array([mean_logprobs[i] for i in keep], dtype=np.float64)
            lp = np.where(np.isfinite(lp), lp, -10.0)
        score = cosine + self.beta * lp[:, None]
        best_sample, best_skill = np.unravel_index(int(np.argmax(score)), score.shape)
        chosen = texts[keep[best_sample]]
        return Translation(self.skills[best_skill], float(score[best_sample, best_skill]), chosen,
                           score.max(axis=0), chosen in self.skills)


def cosine_ranking(query: str, texts: Sequence[str], embed: Embedder) -> np.ndarray:
    """Cosine similarity of ``query`` to each of ``texts`` (embeddings are L2-normalised)."""
    vectors = np.asarray(embed([query, *texts]), dtype=np.float32)
    return vectors[1:] @ vectors[0]
