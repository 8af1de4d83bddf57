"""LLM-Planner's pool of solved tasks (``config/planner_pool.yaml`` + the prompt's examples);
the retrieval itself is :mod:`saycan_ros.planning.retrieval`."""
from __future__ import annotations

from pathlib import Path

from saycan_ros.core.config import ConfigError, load_yaml
from saycan_ros.planning.retrieval import ExampleRetriever, SolvedTask
from saycan_ros.planning.prompt import DialoguePrompt
from saycan_ros.core.skills import SkillSet

__all__ = ["ExampleRetriever", "SolvedTask", "load_pool"]


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
