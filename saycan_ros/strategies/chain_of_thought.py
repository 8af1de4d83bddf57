"""``saycan_cot``: SayCan with chain-of-thought (the paper's §5.2).

Before the first step the model *generates* an "Explanation:" line after few-shot examples
that carry one (``config/prompt_cot.yaml``); the explanation then stays in the context and
every step is *scored* as in SayCan (LLM × affordance) after it. Meant for negation and
reasoning ("a fruit-flavoured drink without caffeine").
"""
from __future__ import annotations

import dataclasses

from saycan_ros.core.config import ConfigError, load_yaml
from saycan_ros.planning.language import LanguageScorer
from saycan_ros.planning.planner import Decision, SayCanStrategy, StepContext
from saycan_ros.planning.prompt import DialoguePrompt, Example
from saycan_ros.strategies.resources import StrategyResources


def with_explanation(instruction: str, explanation: str) -> str:
    return f"{instruction}\nExplanation: {explanation}"


def load_cot_prompt(path=None, skills=None) -> DialoguePrompt:
    data, source = load_yaml(path, default_name="prompt_cot.yaml")
    items = data.get("examples")
    if not isinstance(items, list) or not items:
        raise ConfigError(f"{source}: expected a non-empty 'examples' list")
    examples = []
    for i, item in enumerate(items):
        if not all(isinstance(item.get(k), str) for k in ("instruction", "explanation")) \
                or not isinstance(item.get("steps"), list) or not item["steps"]:
            raise ConfigError(f"{source}: examples[{i}] needs instruction, explanation, steps")
        examples.append(Example(with_explanation(item["instruction"].strip(),
                                                 item["explanation"].strip()),
                                tuple(map(str, item["steps"]))))
    prompt = DialoguePrompt(str(data.get("preamble", "")), tuple(examples))
    if skills is not None:
        prompt.check_against(skills)
    return prompt


class _ExplainedLanguage:
    """Scores with the chain-of-thought prompt, the explanation after the instruction."""

    def __init__(self, scorer: LanguageScorer, strategy: "SayCanCoTStrategy"):
        self.scorer = scorer
        self.strategy = strategy

    def score(self, instruction, history, skills, min_state_revision: int = 0, scene: str = ""):
        return self.scorer.score(with_explanation(instruction, self.strategy.explanation),
                                 history, skills)


class SayCanCoTStrategy(SayCanStrategy):
    name = "saycan_cot"

    def __init__(self, language, affordance, resources: StrategyResources,
                 prompt_file: str | None = None, max_new_tokens: int = 40, prune: bool = True,
                 skill_reliability: float = 0.95):
        resources.require(self.name, "generator")
        self.cot_prompt = load_cot_prompt(prompt_file, resources.skills)
        self.generator = resources.generator
        self.max_new_tokens = int(max_new_tokens)
        self.prefix = self.cot_prompt.prefix()
        self.explanation = ""
        self._pending = True
        super().__init__(_ExplainedLanguage(LanguageScorer(resources.generator, self.cot_prompt),
                                            self), affordance, prune=prune,
                         skill_reliability=skill_reliability)

    def reset(self, instruction: str) -> None:
        super().reset(instruction)
        self.explanation, self._pending = "", True

    def stats(self) -> dict:
        return {"explanation": self.explanation}

    def decide(self, ctx: StepContext) -> Decision:
        if self._pending:
            query = f"Human: {ctx.instruction}\nExplanation:"
            gen = self.generator.generate(self.prefix, query, max_new_tokens=self.max_new_tokens,
                                          stop=("\n",), num_samples=1, temperature=0.0)[0]
            self.explanation = gen.text.strip() or "(none)"
            self._pending = False
        decision = super().decide(ctx)
        return dataclasses.replace(decision, note=f"explanation: {self.explanation}")
