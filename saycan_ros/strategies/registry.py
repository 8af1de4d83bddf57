"""Every planning strategy, in one table: its name, where its class lives, what it needs beyond
the two score sources, whether its ``llm`` arrays are per-skill language-model probabilities,
and how dear a task is (``saycan eval --jobs`` starts the dearest first).

The CLI, the planner node, the evaluation runner and the report all read this table; a class is
imported only when its strategy is made.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from saycan_ros.planning.planner import ScoreSource, Strategy


@dataclass(frozen=True)
class StrategySpec:
    name: str
    target: str                      # "module:Class"
    #: StrategyResources fields it needs (a text generator, sentence embeddings, the pick
    #: policy); none: the two score sources are enough, so the planner node can run it.
    needs: tuple[str, ...] = ()
    #: Its ``llm`` arrays are the language model's probabilities of each skill (else one-hot
    #: choices or similarities, which the report does not read as probabilities).
    scores_skills: bool = True
    cost: int = 2                    # relative cost of a task
    summary: str = ""
    #: It takes ``prune``: the language model scores only the skills that can run.
    prunes: bool = False

    @property
    def runs_in_node(self) -> bool:
        return not self.needs

    def load(self) -> type[Strategy]:
        module, _, attr = self.target.partition(":")
        return getattr(importlib.import_module(module), attr)


STRATEGIES: dict[str, StrategySpec] = {s.name: s for s in (
    StrategySpec("saycan", "saycan_ros.planning.planner:SayCanStrategy", prunes=True,
                 summary="language score x affordance (Ahn et al. 2022)"),
    StrategySpec("no_vf", "saycan_ros.planning.planner:NoVFStrategy",
                 summary="the language score alone (the paper's No VF)"),
    StrategySpec("saycan_cot", "saycan_ros.strategies.chain_of_thought:SayCanCoTStrategy",
                 needs=("generator",), cost=3, prunes=True,
                 summary="SayCan with a generated explanation kept in the context"),
    StrategySpec("generative", "saycan_ros.strategies.generative:GenerativeStrategy",
                 needs=("prompt", "generator", "embed"), scores_skills=False, cost=4,
                 summary="generate a step, translate it to the nearest skill (Huang et al. 2022)"),
    StrategySpec("llm_planner", "saycan_ros.strategies.llm_planner:LLMPlannerStrategy",
                 needs=("prompt", "generator", "embed"), scores_skills=False, cost=3,
                 summary="retrieved examples, whole plans, re-planning (Song et al. 2022)"),
    StrategySpec("bc_use", "saycan_ros.strategies.baselines:BCUseStrategy",
                 needs=("embed",), scores_skills=False, cost=0,
                 summary="the paper's BC USE baseline"),
    StrategySpec("bc_nl", "saycan_ros.strategies.baselines:BCNLStrategy",
                 needs=("pick_policy",), scores_skills=False, cost=1,
                 summary="the paper's BC NL baseline"),
)}


def strategy_names() -> list[str]:
    return list(STRATEGIES)


def node_strategy_names() -> list[str]:
    """The strategies the planner node runs (it has only the score services)."""
    return [s.name for s in STRATEGIES.values() if s.runs_in_node]


def strategy_spec(name: str) -> StrategySpec:
    try:
        return STRATEGIES[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown strategy {name!r}; known: {', '.join(STRATEGIES)}") from None


def make_strategy(name: str, language: ScoreSource | None, affordance: ScoreSource | None,
                  resources: Any = None, *, prune: bool = True, skill_reliability: float = 0.95,
                  **options) -> Strategy:
    """Strategy ``name`` over the two score sources; ``resources`` (a StrategyResources) for
    those that need more. Strategies that multiply by the affordance
    (:attr:`StrategySpec.prunes`) take ``prune`` (the language model scores only the skills
    that can run) and ``skill_reliability`` (a failure's evidence against an affordance, see
    :class:`~saycan_ros.planning.planner.SayCanStrategy`); the others ignore both."""
    spec = strategy_spec(name)
    cls = spec.load()
    if spec.prunes:
        options = {"prune": prune, "skill_reliability": skill_reliability, **options}
    if not spec.needs:
        return cls(language, affordance, **options)
    if resources is None:
        raise ValueError(f"strategy {name!r} needs in-process resources "
                         f"({', '.join(spec.needs)}): use saycan eval")
    return cls(language, affordance, resources, **options)
