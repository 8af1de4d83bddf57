"""The SayCan dialogue prompt ("Human: ... / Robot: I would: 1. ..., 2. ..., done").

The few-shot examples live in ``config/prompt.yaml``. The prompt splits into a static
``prefix`` (preamble + examples, identical for every query, so its KV cache is computed once) and
a per-step ``query`` (the instruction and the steps done so far, ending in the next step number).
Each candidate skill is scored as the ``option`` text that would follow.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Mapping, Sequence

from saycan_ros.core.config import ConfigError, load_yaml
from saycan_ros.core.skills import SkillSet


@dataclass(frozen=True)
class Example:
    instruction: str
    steps: tuple[str, ...]
    scene: str = ""          # the scene line shown with it (empty: none)


@dataclass(frozen=True)
class DialoguePrompt:
    preamble: str
    examples: tuple[Example, ...]
    scene: bool = False       # the scene line follows each instruction (``scene: true``)
    temperature: float = 1.0  # the candidates' softmax is taken over summed log-probs / this
    #: ``scene: step``: the scene line is read again after each put-down (the planner's
    #: ``refresh_scene``), for an adapter trained that way; ``true`` shows the start's only.
    scene_refresh: bool = False
    #: ``scene_details: true``: the scene line says what each object is (the kitchen file's
    #: attributes) and where trash goes (:func:`~saycan_ros.planning.scene.scene_line`).
    scene_details: bool = False

    def prefix(self) -> str:
        parts = [self.preamble.strip() + "\n"] if self.preamble.strip() else []
        for example in self.examples:
            parts.append(self.query(example.instruction, example.steps[:-1], example.scene)
                         + self.option(example.steps[-1]))
        return "".join(parts)

    @staticmethod
    def query(instruction: str, history: Sequence[str], scene: str = "") -> str:
        """The dialogue after the prefix, ending right before the next step's option text;
        ``scene`` (a :mod:`~saycan_ros.planning.scene` line) follows the instruction."""
        lines = [f"Human: {instruction}"]
        if scene:
            lines.append(" ".join(scene.split()))   # one line, whatever the caller sent
        lines.append("Robot: I would:")
        lines += [f"{i}. {step}" for i, step in enumerate(history, start=1)]
        return "\n".join(lines) + f"\n{len(history) + 1}."

    def dialogue(self, instruction: str, steps: Sequence[str],
                 scenes: str | Sequence[str] = "") -> list[tuple[str, str]]:
        """A whole plan as (query, option) pairs, one per step: what the scorer sees at each
        step and the option it should rank first (the planner adapter's training targets).
        ``scenes``: the scene line before each step (one text: the same at every step)."""
        if isinstance(scenes, str):
            scenes = [scenes] * len(steps)
        if len(scenes) != len(steps):
            raise ValueError(f"{len(scenes)} scene lines for {len(steps)} steps")
        return [(self.query(instruction, steps[:k], scenes[k] if self.scene else ""),
                 self.option(step)) for k, step in enumerate(steps)]

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

    def fitted_to(self, skills: SkillSet, source: str = "the prompt file"
                  ) -> tuple["DialoguePrompt", list[str]]:
        """The prompt with only the examples whose steps are all skills of ``skills`` (another
        kitchen's objects are not), and the instructions of the examples left out. A prompt
        whose examples all fail keeps none only if it has a preamble; else it is one line
        naming the file to change."""
        kept = [e for e in self.examples if all(s in skills for s in e.steps)]
        dropped = [e.instruction for e in self.examples if e not in kept]
        if self.examples and not kept and not self.preamble.strip():
            raise ConfigError(f"{source}: none of its {len(self.examples)} examples uses only "
                              "this kitchen's skills; write examples for your kitchen there (or "
                              "plan with the planner adapter, whose prompt needs none)")
        fitted = replace(self, examples=tuple(kept))
        fitted.check_against(skills)
        return fitted, dropped


def prompt_from_dict(data: Mapping) -> DialoguePrompt:
    examples = data.get("examples")
    # No examples is allowed for a model fine-tuned on the dialogue (the planner adapter).
    if not isinstance(examples, list) or not (examples or str(data.get("preamble", "")).strip()):
        raise ConfigError("prompt config: expected an 'examples' list (it may be empty only "
                          "with a preamble)")
    parsed = []
    for i, item in enumerate(examples):
        if (not isinstance(item, Mapping) or not isinstance(item.get("instruction"), str)
                or not isinstance(item.get("steps"), list) or not item["steps"]):
            raise ConfigError(f"prompt example {i}: needs 'instruction' text and a 'steps' list")
        scene = item.get("scene", "")
        if not isinstance(scene, str):
            raise ConfigError(f"prompt example {i}: 'scene' must be text")
        parsed.append(Example(item["instruction"].strip(), tuple(str(s) for s in item["steps"]),
                              " ".join(scene.split())))
    scene = data.get("scene", False)
    if not isinstance(scene, bool) and scene != "step":
        raise ConfigError("prompt config: 'scene' must be true, false or step")
    temperature = data.get("temperature", 1.0)
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) \
            or not 0.05 <= temperature <= 20:
        raise ConfigError(f"prompt config: 'temperature' must be a number in [0.05, 20], "
                          f"got {temperature!r}")
    details = data.get("scene_details", False)
    if not isinstance(details, bool):
        raise ConfigError("prompt config: 'scene_details' must be true or false")
    return DialoguePrompt(str(data.get("preamble", "")), tuple(parsed), bool(scene),
                          float(temperature), scene_refresh=scene == "step",
                          scene_details=details)


def load_prompt(path: str | Path | None = None) -> DialoguePrompt:
    data, _ = load_yaml(path, default_name="prompt.yaml")
    return prompt_from_dict(data)
