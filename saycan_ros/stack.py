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
    "transformers": {"model": "model", "dtype": "dtype", "threads": "threads",
                     "adapter": "adapter"},
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
    if kind == "transformers":
        adapter = resolve_adapter(config.get("model", DEFAULT_MODEL), config.pop("adapter", "none"))
        if adapter is not None:
            config["adapter"] = str(adapter)
    return config


def resolve_adapter(model: str, adapter: str = "none"):
    """The planner adapter folder for ``model``: ``auto`` = the shipped one
    (models/planner_smollm2 for smollm2-135m) when it is there, ``none`` = no adapter (the
    frozen model), else ``adapter`` itself, which must be an adapter folder."""
    from pathlib import Path

    from saycan_ros.learning import models_dir
    from saycan_ros.learning.train_planner import ADAPTER_DIRS
    if adapter in ("none", ""):
        return None
    if adapter == "auto":
        name = ADAPTER_DIRS.get(model)
        path = models_dir() / name if name else None
        return path if path is not None and (path / "adapter_config.json").is_file() else None
    path = Path(adapter).expanduser()
    if not (path / "adapter_config.json").is_file():
        raise ValueError(f"adapter {adapter!r}: not a LoRA adapter folder (no adapter_config.json)")
    return path


def adapter_prompt(adapter) -> DialoguePrompt:
    """The dialogue format an adapter was trained on (its record's ``prompt``)."""
    import json
    from pathlib import Path
    record = Path(adapter) / "planner.json"
    name = json.loads(record.read_text(encoding="utf-8")).get("prompt") if record.is_file() else None
    return load_prompt(name or "prompt_adapter.yaml")


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
    """A scorer for ``params``; with a planner adapter (and no explicit ``prompt_file``) it
    scores in the adapter's own dialogue format, not ``prompt``'s."""
    from saycan_ros.llm import make_backend  # imports torch: only when a scorer is wanted
    config = backend_config(params)
    if config.get("adapter") and not params.get("prompt_file"):
        prompt = adapter_prompt(config["adapter"])
    return LanguageScorer(make_backend(config), prompt,
                          prior_weight=float(params.get("prior_weight") or 0.0))


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
