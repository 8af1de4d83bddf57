"""``llm_planner``: LLM-Planner (Song et al. 2022) in this kitchen.

- The prompt's examples are the k (9) pool tasks most similar to the instruction
  (:class:`ExampleRetriever`), not a fixed list.
- The prompt lists the objects the robot has seen so far (from the planner's observer).
- One generation writes the *whole* remaining plan; each line is mapped to the nearest
  admissible skill (a line that is already a skill maps to itself), and the steps are executed
  in order without calling the model again.
- It re-plans (from the completed steps and the new observations) when a skill fails, when the
  plan runs out without "done", or after ``replan_every`` executed steps; at most
  ``max_replans`` times per instruction.

The point of the paper is fewer model calls than SayCan's per-step scoring; ``stats()`` counts
the calls.
"""
from __future__ import annotations

import re

import numpy as np

from saycan_ros.planning.planner import Decision, StepContext, StepRecord, Strategy
from saycan_ros.planning.prompt import DialoguePrompt, Example
from saycan_ros.strategies.resources import StrategyResources
from saycan_ros.strategies.retrieval import ExampleRetriever, SolvedTask, load_pool
from saycan_ros.strategies.translation import SkillTranslator, normalise_step

_NUMBERED = re.compile(r"^\s*\d+\s*[.)]\s*")


def with_objects(instruction: str, objects) -> str:
    """The instruction line followed by what the robot has seen (LLM-Planner's object list)."""
    seen = ", ".join(objects) if objects else "nothing yet"
    return f"{instruction}\nRobot: I see: {seen}."


_ENDS_AT_DONE = re.compile(r"(^|\n)\s*\d*\s*[.)]?\s*$")


def parse_plan(text: str, terminate: str = "done") -> list[str]:
    """Numbered or plain lines of a generated plan, normalised. Generation stops right before
    ``terminate`` (a stop string), so a text ending in a bare step number ends with it. A step
    repeated at once is a loop of the model: the plan ends there."""
    lines = []
    for line in text.split("\n"):
        if line.strip().lower().startswith(("human:", "robot:")):
            break
        step = normalise_step(_NUMBERED.sub("", line))
        if step and lines and step == lines[-1]:
            return lines + [terminate]
        if step:
            lines.append(step)
    if _ENDS_AT_DONE.search(text) and (not lines or lines[-1] != terminate):
        lines.append(terminate)
    return lines


class LLMPlannerStrategy(Strategy):
    name = "llm_planner"

    def __init__(self, language, affordance, resources: StrategyResources, k: int = 9,
                 pool_file: str | None = None, max_new_tokens: int = 80, replan_every: int = 8,
                 max_replans: int = 2, min_similarity: float = 0.5):
        super().__init__(language, affordance)
        resources.require(self.name, "prompt", "generator", "embed")
        self.resources = resources
        skills = resources.skills
        pool = load_pool(resources.prompt, pool_file, skills)
        # An example's robot starts where robots start by default and has seen what is there
        # (not the objects its plan needs: the model would learn to pick whatever it sees).
        kitchen = resources.kitchen
        start = kitchen.robot_start if kitchen is not None else None
        seen = sorted(o for o, spec in (kitchen.objects.items() if kitchen else ())
                      if spec.default_location == start)
        self.pool = [SolvedTask(with_objects(t.instruction, seen), t.steps) for t in pool]
        self.retriever = ExampleRetriever(pool, resources.embed, k)
        self._seen_text = {p.instruction: s for p, s in zip(pool, self.pool)}
        self.translator = SkillTranslator(skills.texts, resources.embed, beta=0.0)
        self.terminate = skills.terminate.text
        self.max_new_tokens = int(max_new_tokens)
        self.replan_every = int(replan_every)
        self.max_replans = int(max_replans)
        self.min_similarity = float(min_similarity)
        self.reset("")

    # -- per instruction ---------------------------------------------------------------------
    def reset(self, instruction: str) -> None:
        self.plan: list[str] = []
        self.since_plan = 0
        self.replans = 0
        self.needs_plan = True
        self.seen: list[str] = []
        self.prefix = ""
        self._counts = {"llm_calls": 0, "replans": 0, "generated_steps": 0,
                        "inadmissible_generations": 0}
        if instruction:
            examples = [self._seen_text[t.instruction] for t in self.retriever.nearest(instruction)]
            self.prefix = DialoguePrompt(self.resources.prompt.preamble, tuple(
                Example(e.instruction, e.steps) for e in examples)).prefix()

    def stats(self) -> dict:
        return dict(self._counts)

    def continue_after_failure(self, record: StepRecord) -> bool:
        if self.replans >= self.max_replans:
            return False
        self.needs_plan = True
        return True

    # -- planning ------------------------------------------------------------------------------
    def _observe(self, ctx: StepContext) -> None:
        for obj in (ctx.observation or {}).get("objects", ()):
            if obj not in self.seen:
                self.seen.append(obj)

    def _generate_plan(self, ctx: StepContext) -> str:
        if not self.prefix:
            self.reset(ctx.instruction)
        query = DialoguePrompt.query(with_objects(ctx.instruction, self.seen), ctx.history)
        gen = self.resources.generator.generate(
            self.prefix, query, max_new_tokens=self.max_new_tokens,
            stop=(self.terminate, "\nHuman:", "\nRobot:", "\n\n"),
            num_samples=1, temperature=0.0)[0]
        self._counts["llm_calls"] += 1
        lines = parse_plan(gen.text, self.terminate)   # the text after "N.": the next step first
        self.plan = []
        for line in lines:
            self._counts["generated_steps"] += 1
            if line in self.translator.skills:
                skill = line
            else:
                self._counts["inadmissible_generations"] += 1
                t = self.translator.translate([line])
                if t is None or t.score < self.min_similarity:
                    break                       # out of the repertoire: the plan stops here
                skill = t.skill
            self.plan.append(skill)
            if skill == self.terminate:
                break
        self.since_plan = 0
        self.needs_plan = False
        return gen.text

    def decide(self, ctx: StepContext) -> Decision:
        self._observe(ctx)
        note = ""
        budget_spent = self.replan_every and self.since_plan >= self.replan_every
        if self.needs_plan or not self.plan or budget_spent:
            if self._counts["llm_calls"] > 0:
                if self.replans >= self.max_replans:
                    self.plan = self.plan or [self.terminate]
                else:
                    self.replans += 1
                    self._counts["replans"] += 1
                    note = self._generate_plan(ctx)
            else:
                note = self._generate_plan(ctx)
            if not self.plan:
                self.plan = [self.terminate]
        selected = self.plan.pop(0)
        self.since_plan += 1
        nan = np.full(len(ctx.skills), np.nan)
        onehot = np.array([1.0 if s == selected else 0.0 for s in ctx.skills])
        return Decision(onehot, nan, onehot, selected,
                        f"plan: {note.strip()!r}" if note else "")
