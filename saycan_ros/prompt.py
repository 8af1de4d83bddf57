"""The SayCan dialogue prompt ("Human: ... / Robot: I would: 1. ..., 2. ..., done").

The few-shot examples live in ``config/prompt.yaml``. The prompt splits into a static
``prefix`` (preamble + examples, identical for every query, so its KV cache is computed once) and
a per-step ``query`` (the instruction and the steps done so far, ending in the next step number).
Each candidate skill is scored as the ``option`` text that would follow.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from saycan_ros.config import ConfigError, load_yaml
from saycan_ros.skills import SkillSet


@dataclass(frozen=True)
class Example:
    instruction: str
    steps: tuple[str, ...]


@dataclass(frozen=True)
class DialoguePrompt:
    preamble: str
    examples: tuple[Example, ...]

    def prefix(self) -> str:
        parts = [self.preamble.strip() + "\n"] if self.preamble.strip() else []
        for example in self.examples:
            parts.append(self.query(example.instruction, example.steps[:-1])
                         + self.option(example.steps[-1]))
        return "".join(parts)

    @staticmethod
    def query(instruction: str, history: Sequence[str]) -> str:
        lines = [f"Human: {instruction}", "Robot: I would:"]
        lines += [f"{i}. {step}" for i, step in enumerate(history, start=1)]
        return "\n".join(lines) + f"\n{len(history) + 1}."

    @staticmethod
    def option(skill_text: str) -> str:
        return f" {skill_text}\n"

    def check_against(self, skills: SkillSet) -> None:
        """Every example step must be a skill of the repertoire, and every example ends in done."""
        terminate = skills.terminate.text
        for example in self.examples:
            unknown = [s for s in example.steps if s not in skills]
            if unknown:
                raise ConfigError(f"prompt example {example.instruction!r} uses steps that are not "
                                  f"skills: {unknown}")
            if example.steps[-1] != terminate:
                raise ConfigError(f"prompt example {example.instruction!r} must end with "
                                  f"{terminate!r}")


def prompt_from_dict(data: Mapping) -> DialoguePrompt:
    examples = data.get("examples")
    if not isinstance(examples, list) or not examples:
        raise ConfigError("prompt config: expected a non-empty 'examples' list")
    parsed = []
    for i, item in enumerate(examples):
        if (not isinstance(item, Mapping) or not isinstance(item.get("instruction"), str)
                or not isinstance(item.get("steps"), list) or not item["steps"]):
            raise ConfigError(f"prompt example {i}: needs 'instruction' text and a 'steps' list")
        parsed.append(Example(item["instruction"].strip(), tuple(str(s) for s in item["steps"])))
    return DialoguePrompt(str(data.get("preamble", "")), tuple(parsed))


def load_prompt(path: str | Path | None = None) -> DialoguePrompt:
    data, _ = load_yaml(path, default_name="prompt.yaml")
    return prompt_from_dict(data)
