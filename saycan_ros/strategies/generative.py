"""``generative``: Huang et al. 2022 ("Language Models as Zero-Shot Planners") over SayCan's
dialogue prompt.

Each step the language model *generates* k candidate next steps after the same few-shot
prompt; each is translated to the nearest admissible skill (:class:`SkillTranslator`:
cosine similarity of MiniLM embeddings + β · mean token log-prob, β = 0.3); the translated
skill, not the raw text, goes into the history (autoregressive trajectory correction). The plan
ends ("done") when more than half of the samples are empty or the best score falls below ε.
"""
from __future__ import annotations

import zlib

import numpy as np

from saycan_ros.planning.planner import Decision, StepContext, Strategy
from saycan_ros.strategies.resources import StrategyResources
from saycan_ros.strategies.translation import SkillTranslator, normalise_step


def step_seed(base: int, instruction: str, step: int) -> int:
    """A sampling seed that depends on the task and step only (runs are reproducible)."""
    return (base * 1_000_003 + zlib.crc32(instruction.encode()) * 31 + step) % (2 ** 31)


class GenerativeStrategy(Strategy):
    name = "generative"

    def __init__(self, language, affordance, resources: StrategyResources, samples: int = 4,
                 temperature: float = 0.7, beta: float = 0.3, epsilon: float = 0.4,
                 max_new_tokens: int = 12):
        super().__init__(language, affordance)
        resources.require(self.name, "prompt", "generator", "embed")
        if samples < 1 or temperature < 0 or max_new_tokens < 1:
            raise ValueError("generative: samples >= 1, temperature >= 0, max_new_tokens >= 1")
        self.resources = resources
        self.samples = int(samples)
        self.temperature = float(temperature)
        self.epsilon = float(epsilon)
        self.max_new_tokens = int(max_new_tokens)
        self.translator = SkillTranslator(resources.skills.texts, resources.embed, beta)
        self.prefix = resources.prompt.prefix()
        self.terminate = resources.skills.terminate.text
        self._counts = {}
        self.reset("")

    def reset(self, instruction: str) -> None:
        self._counts = {"generations": 0, "inadmissible_generations": 0, "steps": 0,
                        "inadmissible_chosen": 0}

    def stats(self) -> dict:
        return dict(self._counts)

    def decide(self, ctx: StepContext) -> Decision:
        query = self.resources.prompt.query(ctx.instruction, ctx.history)
        gens = self.resources.generator.generate(
            self.prefix, query, max_new_tokens=self.max_new_tokens, stop=("\n",),
            num_samples=self.samples, temperature=self.temperature,
            seed=step_seed(self.resources.seed, ctx.instruction, len(ctx.history)))
        texts = [g.text for g in gens]
        steps = [normalise_step(t) for t in texts]
        self._counts["steps"] += 1
        self._counts["generations"] += len(steps)
        self._counts["inadmissible_generations"] += sum(s not in ctx.skills for s in steps)
        note = "generated: " + " | ".join(repr(t.strip()) for t in texts)
        nan = np.full(len(ctx.skills), np.nan)
        translation = None
        if sum(not s for s in steps) * 2 <= len(steps):
            translation = self.translator.translate(texts, [g.mean_logprob for g in gens])
        if translation is None or translation.score < self.epsilon:
            why = "empty generations" if translation is None else \
                f"best score {translation.score:.2f} < {self.epsilon}"
            scores = nan if translation is None else self._align(translation.similarity, ctx)
            return Decision(scores, nan, scores, self.terminate, f"{note}; stop: {why}")
        self._counts["inadmissible_chosen"] += not translation.admissible
        scores = self._align(translation.similarity, ctx)
        return Decision(scores, nan, scores, translation.skill,
                        f"{note}; {translation.source!r} -> {translation.skill!r} "
                        f"(R={translation.score:.2f})")

    def _align(self, per_skill: np.ndarray, ctx: StepContext) -> np.ndarray:
        """The translator's per-skill scores in the order of ``ctx.skills``."""
        index = {s: i for i, s in enumerate(self.translator.skills)}
        return np.array([per_skill[index[s]] if s in index else np.nan for s in ctx.skills])
