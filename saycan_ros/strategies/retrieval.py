"""A pool of solved tasks and nearest-neighbour retrieval of few-shot examples (LLM-Planner
§4.3, as its code does it: MiniLM sentence embeddings, cosine similarity)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from saycan_ros.config import ConfigError, load_yaml
from saycan_ros.prompt import DialoguePrompt
from saycan_ros.skills import SkillSet
from saycan_ros.strategies.resources import Embedder


@dataclass(frozen=True)
class SolvedTask:
    instruction: str
    steps: tuple[str, ...]


def load_pool(prompt: DialoguePrompt, path: str | Path | None = None,
              skills: SkillSet | None = None) -> list[SolvedTask]:
    """The prompt's own examples plus ``config/planner_pool.yaml``; every step must be a skill
    and every plan must end in the terminate skill."""
    data, source = load_yaml(path, default_name="planner_pool.yaml")
    items = data.get("pool")
    if not isinstance(items, list) or not items:
        raise ConfigError(f"{source}: expected a non-empty 'pool' list")
    pool = [SolvedTask(e.instruction, e.steps) for e in prompt.examples]
    for i, item in enumerate(items):
        if (not isinstance(item, dict) or not isinstance(item.get("instruction"), str)
                or not isinstance(item.get("steps"), list) or not item["steps"]):
            raise ConfigError(f"{source}: pool[{i}] needs 'instruction' text and a 'steps' list")
        pool.append(SolvedTask(item["instruction"].strip(), tuple(map(str, item["steps"]))))
    if skills is not None:
        for task in pool:
            unknown = [s for s in task.steps if s not in skills]
            if unknown or task.steps[-1] != skills.terminate.text:
                raise ConfigError(f"{source}: {task.instruction!r}: steps must be skills ending in "
                                  f"{skills.terminate.text!r} (unknown: {unknown})")
    return pool


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
