"""Builders that turn configuration into the core's objects (shared by the CLI and the nodes)."""
from __future__ import annotations

from typing import Any, Mapping

from saycan_ros.core.kitchen import Kitchen
from saycan_ros.llm.config import LLMConfig
from saycan_ros.planning.language import LanguageScorer
from saycan_ros.planning.prompt import DialoguePrompt, load_prompt
from saycan_ros.planning.vocabulary import load_vocabulary

#: The model the tests load: the small one (the tests check mechanics, not plan quality).
TEST_MODEL = "smollm2-135m"


def adapter_prompt(adapter) -> DialoguePrompt:
    """The dialogue format an adapter was trained on (its record's ``prompt``)."""
    import json
    from pathlib import Path
    record = Path(adapter) / "planner.json"
    name = json.loads(record.read_text(encoding="utf-8")).get("prompt") if record.is_file() else None
    return load_prompt(name or "prompt_adapter.yaml")


def make_language_scorer(llm: LLMConfig | Mapping[str, Any], prompt: DialoguePrompt,
                         prompt_file: str = "") -> LanguageScorer:
    """A scorer for ``llm`` (an :class:`LLMConfig` or its flat parameters); with a planner
    adapter (and no explicit ``prompt_file``) it scores in the adapter's own dialogue format,
    not ``prompt``'s. ``retrieve: k`` (> 0) adds the k nearest solved dialogues of
    :func:`retrieval_pool` to the prompt's examples."""
    from saycan_ros.llm import make_backend  # imports torch: only when a scorer is wanted
    if not isinstance(llm, LLMConfig):
        llm = LLMConfig.from_params(llm)
    config = llm.backend_config()
    if config.get("adapter") and not prompt_file:
        prompt = adapter_prompt(config["adapter"])
    examples_for = retrieved_examples(llm.retrieve) if llm.retrieve else None
    return LanguageScorer(make_backend(config), prompt, prior_weight=llm.prior_weight,
                          examples_for=examples_for)


#: The retrieval pool: synthetic dialogues of a generator seed that no adapter trains on
#: (training uses --seed + offset, its held-out check that + 1,000,003).
RETRIEVAL_POOL_SEED = 7_000_003
RETRIEVAL_POOL_SIZE = 2000


def retrieval_pool(size: int = RETRIEVAL_POOL_SIZE, seed: int = RETRIEVAL_POOL_SEED):
    """Solved dialogues of this kitchen (:mod:`saycan_ros.learning.planner_data`), each with
    the scene it was solved from; no instruction of a test set or of the development set."""
    from saycan_ros.core.config import config_dir
    from saycan_ros.learning.planner_data import (PlanDataGenerator, heldout_instructions,
                                                  load_lexicon)
    from saycan_ros.planning.retrieval import SolvedTask
    vocabulary = load_vocabulary()
    kitchen = vocabulary.kitchen
    generator = PlanDataGenerator(kitchen, vocabulary.skills, load_lexicon(kitchen), seed=seed,
                                  exclude=heldout_instructions(config_dir(), kitchen))
    return [SolvedTask(d.instruction, d.steps, d.scene) for d in generator.dialogues(size)]


def retrieved_examples(k: int, pool=None):
    """instruction -> the ``k`` pool dialogues nearest to it (MiniLM), as prompt examples,
    the nearest last. The pool's embeddings are cached on disk by content."""
    import hashlib

    import numpy as np

    from saycan_ros.core.paths import cache_dir
    from saycan_ros.learning.text_encoder import ENCODER_NAME, embed_texts
    from saycan_ros.planning.retrieval import ExampleRetriever
    from saycan_ros.planning.prompt import Example
    pool = retrieval_pool() if pool is None else list(pool)
    texts = [t.instruction for t in pool]
    key = hashlib.sha1("\n".join([ENCODER_NAME, *texts]).encode()).hexdigest()[:16]
    cached = cache_dir() / f"retrieval_pool_{key}.npy"
    if cached.is_file():
        vectors = np.load(cached)
    else:
        vectors = embed_texts(texts, use_cache=False)
        np.save(cached.with_suffix(".tmp.npy"), vectors)
        cached.with_suffix(".tmp.npy").replace(cached)
    table = dict(zip(texts, vectors))

    def embed(batch):
        missing = [t for t in batch if t not in table]
        fresh = dict(zip(missing, embed_texts(missing, use_cache=False))) if missing else {}
        return np.stack([table[t] if t in table else fresh[t] for t in batch])

    retriever = ExampleRetriever(pool, embed, k)
    return lambda instruction: [Example(t.instruction, t.steps, t.scene)
                                for t in retriever.nearest(instruction)]


#: Where skills take effect (``saycan run --world``, ``saycan eval --world``).
WORLDS = ("symbolic", "sim", "nodes")


def make_world(kind: str, kitchen: Kitchen, init=None, seed: int = 0, **options):
    """The world skills run in: ``symbolic`` (the oracle), ``sim`` (the built-in simulator) or
    ``nodes`` (the running node graph).

    Both offer ``reset(init)``, ``snapshot()``, ``execute(skill)``, ``revision``, ``robot_at``,
    ``holding``, ``objects`` and ``object_location(o)``. ``options`` go to the simulator
    (e.g. ``pick="learned"``: pick with the BC policy, see :mod:`saycan_ros.worlds.simulated`).
    """
    from saycan_ros.core.world import SymbolicWorld
    if kind == "symbolic":
        if options:
            raise ValueError(f"the symbolic world takes no options, got {sorted(options)}")
        return SymbolicWorld(kitchen, init)
    if kind == "sim":
        from saycan_ros.worlds.simulated import SimulatedKitchen  # numpy + OpenCV: only when asked
        return SimulatedKitchen(kitchen, init, seed=seed, **options)
    if kind == "nodes":   # the running node graph (saycan_ros.ros.nodes.graph_world), reset to init
        graph = options.get("graph")
        if graph is None:
            raise ValueError("world 'nodes' needs graph=NodeGraphWorld(...)")
        graph.reset(init, seed=seed)
        return graph
    raise ValueError(f"unknown world {kind!r}; known: {', '.join(WORLDS)}")
