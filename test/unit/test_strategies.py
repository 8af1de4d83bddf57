"""The strategies beyond SayCan's scoring loop: generative translation (Huang et al.), LLM-Planner
retrieval and re-planning (Song et al.), chain of thought, and the BC NL / BC USE baselines.
Parsing, translation and retrieval are checked with the real MiniLM embedder; each strategy then
plans real tasks with the real language model (SmolLM2-135M) and the real BC pick policy."""
import re

import pytest
import yaml

from saycan_ros.planning.affordance import load_affordance
from saycan_ros.core.config import ConfigError
from saycan_ros.evaluation.plans import evaluate
from saycan_ros.planning.planner import StepContext
from saycan_ros.strategies.registry import make_strategy, strategy_names
from saycan_ros.strategies.baselines import sequence_text, skill_sequences
from saycan_ros.strategies.chain_of_thought import load_cot_prompt
from saycan_ros.strategies.llm_planner import parse_plan
from saycan_ros.strategies.resources import StrategyResources, minilm_embedder
from saycan_ros.strategies.retrieval import ExampleRetriever, load_pool
from saycan_ros.strategies.translation import SkillTranslator, normalise_step
from saycan_ros.core.tasks import load_tasks

from test_tasks import CONFIG, _norm


@pytest.fixture(scope="module")
def embed():
    return minilm_embedder()


@pytest.fixture(scope="module")
def resources(vocabulary, test_scorer):
    from saycan_ros.evaluation.runner import strategy_resources
    return strategy_resources(vocabulary, test_scorer, seed=0)


@pytest.fixture(scope="module")
def public_tasks(vocabulary):
    return load_tasks(CONFIG / "tasks.yaml", vocabulary.kitchen)


# -- text handling ---------------------------------------------------------------------------------
@pytest.mark.parametrize("raw, step", [
    (" find an apple", "find an apple"), ("3. Pick up the apple.", "pick up the apple"),
    ("  go to the table\nHuman: x", "go to the table"), ("", ""), ("12.", ""), (".)", "")])
def test_normalise_step(raw, step):
    assert normalise_step(raw) == step


def test_parse_plan_stops_at_done_loops_and_dialogue_turns():
    assert parse_plan(" find a sponge\n2. pick up the sponge\n3. ") == \
        ["find a sponge", "pick up the sponge", "done"]
    assert parse_plan(" pick up the apple\n2. pick up the apple\n3. pick up") == \
        ["pick up the apple", "done"]
    assert parse_plan(" go to the table\nRobot: I see: x\n1. pick up the x") == ["go to the table"]
    assert parse_plan(" find a coke can\n2. pick up the co") == ["find a coke can", "pick up the co"]


def test_translation_maps_paraphrases_to_the_nearest_skill(vocabulary, embed):
    translator = SkillTranslator(vocabulary.skills.texts, embed, beta=0.3)
    for text, skill in [("grab the apple", "pick up the apple"),
                        ("walk over to the trash can", "go to the trash can"),
                        ("pick up the sponge", "pick up the sponge")]:
        t = translator.translate([text], [-0.5])
        assert t.skill == skill, (text, t)
        assert t.admissible == (text == skill)
    assert translator.translate(["", "  "]) is None
    # the log-probability term decides between samples of equal similarity
    both = translator.translate(["pick up the apple", "pick up the orange"], [-3.0, -0.1])
    assert both.skill == "pick up the orange"


def test_pool_is_valid_and_does_not_copy_evaluation_tasks(vocabulary):
    pool = load_pool(vocabulary.prompt, skills=vocabulary.skills)
    assert len(pool) >= 40
    evaluation = {_norm(t.text) for f in ("tasks.yaml", "tasks_extra.yaml")
                  for t in load_tasks(CONFIG / f, vocabulary.kitchen)}
    copied = [t.instruction for t in pool if _norm(t.instruction) in evaluation]
    assert not copied
    cot = yaml.safe_load((CONFIG / "prompt_cot.yaml").read_text(encoding="utf-8"))
    assert not [e["instruction"] for e in cot["examples"] if _norm(e["instruction"]) in evaluation]
    load_cot_prompt(skills=vocabulary.skills)


def test_pool_rejects_unknown_steps(tmp_path, vocabulary):
    bad = tmp_path / "pool.yaml"
    bad.write_text("pool:\n- {instruction: x, steps: [fly to the moon, done]}\n")
    with pytest.raises(ConfigError, match="fly to the moon"):
        load_pool(vocabulary.prompt, bad, vocabulary.skills)


def test_retrieval_returns_the_most_similar_examples_last(vocabulary, embed):
    retriever = ExampleRetriever(load_pool(vocabulary.prompt), embed, k=9)
    chosen = retriever.nearest("Throw away the coke can.")
    assert len(chosen) == 9
    assert "trash can" in " ".join(chosen[-1].steps)
    assert len({t.instruction for t in chosen}) == 9


def test_bc_use_projects_onto_single_skills_and_pairs(vocabulary, resources):
    sequences = skill_sequences(vocabulary.skills.texts, "done")
    n = len(vocabulary.skills.texts) - 1
    assert len(sequences) == n + n * (n - 1)
    assert sequence_text(("find a sponge", "pick up the sponge")) == \
        "find a sponge, pick up the sponge"
    strategy = make_strategy("bc_use", None, None, resources=resources)
    strategy.reset("Go to the table.")
    plan = [strategy.decide(StepContext("Go to the table.", [], vocabulary.skills.texts, 0)).selected
            for _ in range(4)]
    assert "go to the table" in plan and plan[-1] == "done"


def test_the_registry_names_each_class_and_what_it_needs(vocabulary):
    from saycan_ros.planning.planner import Strategy
    from saycan_ros.strategies.registry import STRATEGIES, node_strategy_names
    for spec in STRATEGIES.values():
        cls = spec.load()
        assert issubclass(cls, Strategy) and cls.name == spec.name
        if spec.needs:      # made without what it declares, it names what is missing
            with pytest.raises(ValueError, match=f"strategy {spec.name!r} needs"):
                make_strategy(spec.name, None, None, resources=StrategyResources(vocabulary.skills))
    assert node_strategy_names() == ["saycan", "no_vf"]


def test_strategy_errors_are_clear(vocabulary):
    with pytest.raises(ValueError, match="needs in-process resources"):
        make_strategy("generative", None, None)
    with pytest.raises(ValueError, match="needs generator"):
        make_strategy("generative", None, None,
                      resources=StrategyResources(vocabulary.skills, vocabulary.prompt))
    assert {"saycan", "no_vf", "generative", "llm_planner", "saycan_cot", "bc_use",
            "bc_nl"} <= set(strategy_names())


# -- each strategy plans real tasks with the real model -------------------------------------------
TASKS = {  # cheap, varied tasks: a pick where the robot stands, a fetch, a navigation
    "generative": ["t001"],
    "llm_planner": ["t001"],
    "saycan_cot": ["t001"],
    "bc_use": ["t001", "t002", "t004"],
    "bc_nl": ["t001", "t003", "t002"],
}


@pytest.mark.parametrize("strategy", list(TASKS))
def test_strategy_plans_real_tasks_with_skills_of_the_repertoire(
        strategy, vocabulary, test_scorer, resources, public_tasks):
    tasks = [t for t in public_tasks if t.id in TASKS[strategy]]
    report = evaluate(tasks, kitchen=vocabulary.kitchen, skills=vocabulary.skills,
                      language_scorer=test_scorer, affordance_scorer=load_affordance(),
                      strategy=strategy, model_name="smollm2-135m", max_steps=5,
                      progress=False, resources=resources)
    assert len(report.outcomes) == len(tasks)
    for outcome in report.outcomes:
        result = outcome.result
        assert result.steps, outcome.task.id
        assert all(s.selected in vocabulary.skills for s in result.steps)
        assert result.state in ("succeeded", "failed", "max_steps"), result.message
        if result.state == "succeeded":
            assert result.plan[-1] == "done"
        assert outcome.cost["seconds"] > 0
    stats = report.outcomes[0].strategy_stats
    uses_lm = strategy in ("generative", "llm_planner", "saycan_cot")
    assert (report.outcomes[0].cost["llm_calls"] > 0) == uses_lm
    if strategy == "generative":
        assert stats["generations"] == 4 * stats["steps"] > 0
        assert all(s.note.startswith("generated:") for s in report.outcomes[0].result.steps)
    if strategy == "llm_planner":    # one call writes the whole plan: fewer calls than steps
        assert stats["llm_calls"] <= 1 + stats["replans"]
    if strategy == "saycan_cot":
        assert stats["explanation"] and report.outcomes[0].result.steps[0].note.startswith(
            "explanation:")
    if strategy == "bc_use":         # t001 "Pick up the apple." at the far counter
        assert "pick up the apple" in report.outcomes[0].result.plan
    if strategy == "bc_nl":          # t002 "Go to the trash can.": the policy cannot go anywhere
        by_id = {o.task.id: o for o in report.outcomes}
        plan = by_id["t002"].result.plan     # at most a pick of whatever the policy grasped
        assert plan[-1] == "done" and len(plan) <= 2 and not by_id["t002"].plan_success
        assert all(step.startswith("pick up the ") for step in plan[:-1])
        assert all(re.match(r"holding|nothing", o.strategy_stats["policy_outcome"])
                   for o in report.outcomes)


def test_llm_planner_replans_after_a_failed_skill(vocabulary, resources):
    """Scripted generator: the first plan picks what is not there; after the failure the
    strategy asks again (with the completed steps and the objects seen) and finishes."""
    from saycan_ros.llm.backend import Generation
    from saycan_ros.planning.local import WorldExecutor
    from saycan_ros.planning.planner import Planner
    from saycan_ros.evaluation.plans import observation_of
    from saycan_ros.core.world import SymbolicWorld

    class Scripted:
        def __init__(self):
            self.queries = []

        def generate(self, prefix, query, **kwargs):
            self.queries.append(query)
            text = (" pick up the sponge\n2. " if len(self.queries) == 1 else
                    " find a sponge\n2. pick up the sponge\n3. ")
            return [Generation(text, -0.1, 8)]

    scripted = Scripted()
    res = StrategyResources(vocabulary.skills, vocabulary.prompt, kitchen=vocabulary.kitchen,
                            generator=scripted, embed=resources.embed)
    world = SymbolicWorld(vocabulary.kitchen)
    planner = Planner(vocabulary.skills, make_strategy("llm_planner", None, None, resources=res),
                      WorldExecutor(world, vocabulary.skills),
                      observe=lambda: observation_of(world))
    result = planner.run("Hold the sponge for me.")
    assert result.state == "succeeded", result.message
    assert result.plan == ["find a sponge", "pick up the sponge", "done"]
    assert len(scripted.queries) == 2
    assert "I see: green tea, multigrain chips, orange, redbull can." in scripted.queries[0]
    assert planner.strategy.stats()["replans"] == 1


@pytest.mark.parametrize("argv", [["--strategies", "magic"], ["--max-failures", "-1"],
                                  ["--jobs", "0"], ["--jobs", "2", "--world", "nodes"]])
def test_eval_cli_rejects_bad_options_before_loading_a_model(argv, capsys):
    from saycan_ros.cli.main import main
    assert main(["eval", "--tasks", "tasks.yaml", "--limit", "1", *argv]) == 2
    assert "saycan eval:" in capsys.readouterr().err
