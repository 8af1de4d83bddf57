"""Nearest-neighbour retrieval of solved examples (LLM-Planner §4.3, as its code does it:
MiniLM sentence embeddings, cosine similarity). Used by the LLM-Planner strategy for its
generation prompt and by the SayCan scorer for its few-shot prefix (``retrieve: k``)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

#: texts -> (len(texts), dim) L2-normalised embeddings
Embedder = Callable[[Sequence[str]], np.ndarray]


@dataclass(frozen=True)
class SolvedTask:
    instruction: str
    steps: tuple[str, ...]
    scene: str = ""          # the scene line it was solved from (empty: not known)


class ExampleRetriever:
    """The ``k`` pool tasks most similar to an instruction, most similar *last* (nearest the
    query: small models weigh the closest example most)."""

    def __init__(self, pool: Sequence[SolvedTask], embed: Embedder, k: int = 9):
        if not pool:
            raise ValueError("empty example pool")
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        self.pool = list(pool)
        self.embed = embed
        self.k = min(int(k), len(self.pool))
        self.vectors = np.asarray(embed([t.instruction for t in self.pool]), dtype=np.float32)

    def nearest(self, instruction: str, exclude: str | None = None) -> list[SolvedTask]:
        query = np.asarray(self.embed([instruction]), dtype=np.float32)[0]
        similarity = self.vectors @ query
        order = [int(i) for i in np.argsort(-similarity, kind="stable")
                 if self.pool[int(i)].instruction != exclude][:self.k]
        return [self.pool[i] for i in reversed(order)]
