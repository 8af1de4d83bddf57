"""Builders that turn configuration into the core's objects (shared by the CLI and the nodes)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from saycan_ros.kitchen import Kitchen, load_kitchen
from saycan_ros.language import LanguageScorer
from saycan_ros.prompt import DialoguePrompt, load_prompt
from saycan_ros.skills import SkillSet, load_skills

#: The default planning model: of the two shipped offline models, SmolLM2-135M planned better
#: with config/prompt.yaml and is twice as fast as Gemma-3-270M (README, Results).
DEFAULT_MODEL = "smollm2-135m"
TEST_MODEL = "smollm2-135m"

#: Node parameters of the language scorer and which back-end option each one feeds.
BACKEND_PARAMETERS = {
    "transformers": {"model": "model", "dtype": "dtype", "threads": "threads"},
    "openai": {"model": "model", "base_url": "base_url", "api_key_env": "api_key_env",
               "request_timeout_s": "timeout_s"},
}


def backend_config(params: Mapping[str, Any]) -> dict[str, Any]:
    """The back-end config for ``make_backend`` from flat parameters (node or CLI)."""
    kind = params.get("backend", "transformers")
    if kind not in BACKEND_PARAMETERS:
        raise ValueError(f"unknown backend {kind!r}; known: {', '.join(BACKEND_PARAMETERS)}")
    config = {"type": kind}
    for param, option in BACKEND_PARAMETERS[kind].items():
        value = params.get(param)
        if value not in (None, "", 0):
            config[option] = value
    return config


@dataclass(frozen=True)
class Vocabulary:
    kitchen: Kitchen
    skills: SkillSet
    prompt: DialoguePrompt


def load_vocabulary(kitchen_file=None, skills_file=None, prompt_file=None) -> Vocabulary:
    """Kitchen, skills and prompt, with the prompt checked against the skills."""
    kitchen = load_kitchen(kitchen_file or None)
    skills = load_skills(kitchen, skills_file or None)
    prompt = load_prompt(prompt_file or None)
    prompt.check_against(skills)
    return Vocabulary(kitchen, skills, prompt)


def make_language_scorer(params: Mapping[str, Any], prompt: DialoguePrompt) -> LanguageScorer:
    from saycan_ros.llm import make_backend  # imports torch: only when a scorer is wanted
    return LanguageScorer(make_backend(backend_config(params)), prompt)


def make_world(kind: str, kitchen: Kitchen, init=None, seed: int = 0, **options):
    """The world skills run in: ``symbolic`` (the oracle) or ``sim`` (the built-in simulator).

    Both offer ``reset(init)``, ``snapshot()``, ``execute(skill)``, ``revision``, ``robot_at``,
    ``holding``, ``objects`` and ``object_location(o)``. ``options`` go to the simulator
    (e.g. ``pick="learned"``: pick with the BC policy, see :mod:`saycan_ros.sim.executor`).
    """
    from saycan_ros.world import SymbolicWorld
    if kind == "symbolic":
        if options:
            raise ValueError(f"the symbolic world takes no options, got {sorted(options)}")
        return SymbolicWorld(kitchen, init)
    if kind == "sim":
        from saycan_ros.sim.executor import SimulatedKitchen  # numpy + OpenCV: only when asked
        return SimulatedKitchen(kitchen, init, seed=seed, **options)
    if kind == "nodes":   # the running node graph (saycan_ros.nodes.graph_world), reset to init
        graph = options.get("graph")
        if graph is None:
            raise ValueError("world 'nodes' needs graph=NodeGraphWorld(...)")
        graph.reset(init, seed=seed)
        return graph
    raise ValueError(f"unknown world {kind!r}; known: symbolic, sim, nodes")
