"""The evaluation report: the right next skills of a state, failure attribution, and the files
``saycan eval --report`` writes (tables, JSON, chart). Plain and fast: the real planner with
scripted score sources on real tasks of config/tasks.yaml; no language model."""
import json
from pathlib import Path

import numpy as np
import pytest

from saycan_ros.planning.affordance import load_affordance
from saycan_ros.evaluation.plans import EvalReport, TaskOutcome, replay_reaches_goal
from saycan_ros.planning.local import LocalAffordance, WorldExecutor
from saycan_ros.planning.planner import ExecutionResult, Planner, PlanResult, StepRecord
from saycan_ros.strategies.registry import make_strategy
from saycan_ros.evaluation.report import (ATTRIBUTIONS, RightSkills, attribute_failure,
                                          has_skill_probabilities, render_markdown, write_report)
from saycan_ros.core.solver import clone_world, right_next_skills, solve, start_world
from saycan_ros.core.tasks import Task, TaskInit, load_tasks, parse_goal
from saycan_ros.core.world import SymbolicWorld

CONFIG = Path(__file__).resolve().parents[2] / "config"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def tasks(vocabulary):
    return {t.id: t for t in load_tasks(CONFIG / "tasks.yaml", vocabulary.kitchen)}


# -- score sources and runs -------------------------------------------------------------------
class ScriptedScores:
    """A score source: ``script[len(history)]`` maps skills to scores (the last entry repeats);
    skills it does not name share ``rest`` (language: what is left of 1; affordance: 0.5)."""

    def __init__(self, script, normalise=True):
        self.script, self.normalise = list(script), normalise

    def score(self, instruction, history, skills, min_state_revision=0, scene=""):
        wanted = self.script[min(len(history), len(self.script) - 1)]
        if isinstance(wanted, str):
            wanted = {wanted: 0.9}
        others = [s for s in skills if s not in wanted]
        rest = (1.0 - sum(wanted.values())) / len(others) if self.normalise else 0.5
        probs = np.array([wanted.get(s, rest) for s in skills], dtype=float)
        return probs, np.log(np.maximum(probs, 1e-12))


class FailingExecutor(WorldExecutor):
    """The oracle executor, except that ``broken`` skills fail (as in a simulator)."""

    def __init__(self, world, skills, broken):
        super().__init__(world, skills)
        self.broken = set(broken)

    def execute(self, skill, timeout_s=0.0):
        if skill in self.broken:
            return ExecutionResult(False, f"{skill} slipped")
        return super().execute(skill, timeout_s)


def run_task(vocabulary, task, strategy, language, affordance=None, broken=(), max_steps=20,
             cost=None) -> TaskOutcome:
    """Plan ``task`` from its start with the real planner, as ``saycan eval`` does."""
    kitchen, skills = vocabulary.kitchen, vocabulary.skills
    world = SymbolicWorld(kitchen, task.init)
    affordance = affordance or LocalAffordance(load_affordance(), world, skills)
    planner = Planner(skills, make_strategy(strategy, language, affordance),
                      FailingExecutor(world, skills, broken), max_steps=max_steps)
    result = planner.run(task.text)
    executed = result.state == "succeeded" and task.goal.holds(world)
    return TaskOutcome(task, result, replay_reaches_goal(task, result.plan, kitchen, skills),
                       executed, 0.5, cost if cost is not None else {"seconds": 0.5})


def solved_script(vocabulary, task) -> list[str]:
    return solve(task, vocabulary.kitchen, vocabulary.skills) + ["done"]


def attribution(vocabulary, outcome):
    return attribute_failure(outcome, kitchen=vocabulary.kitchen, skills=vocabulary.skills)


# -- the right next skills --------------------------------------------------------------------
@pytest.mark.parametrize("task_id", ["t001", "t013", "t016", "t019", "t067", "t070"])
def test_right_next_skills_are_the_first_steps_of_shortest_plans(vocabulary, tasks, task_id):
    kitchen, skills, task = vocabulary.kitchen, vocabulary.skills, tasks[task_id]
    world = start_world(task, kitchen)
    before = world.snapshot()
    right = right_next_skills(task, world, skills, kitchen)
    assert world.snapshot() == before                              # the world is untouched
    shortest = solve(task, kitchen, skills)
    assert shortest[0] in right
    expected = set()
    for skill in skills.of_kind("navigate", "navigate_to_object", "pick", "place"):
        after = clone_world(world)
        if after.execute(skill).success:
            rest = solve(task, kitchen, skills, world=after)
            if rest is not None and len(rest) == len(shortest) - 1:
                expected.add(skill.text)
    assert right == expected


def test_right_next_skills_of_known_states(vocabulary, tasks):
    kitchen, skills = vocabulary.kitchen, vocabulary.skills

    def right(task_id, world=None):
        task = tasks[task_id]
        return right_next_skills(task, world or start_world(task, kitchen), skills, kitchen)

    assert right("t067") == {"put down the coke can"}       # holding it where it belongs
    assert right("t016") == {"pick up the orange"}          # the orange is by the robot
    assert right("t001") == {"pick up the apple"}           # at the far counter, by the apple
    sponge = right("t019")              # at the far counter; the sponge is on the close counter
    assert sponge == {"go to the close counter", "find a sponge", "find a water bottle",
                      "find the rice chips", "find an energy bar"}
    soda = right("t020")                                    # a wide or(...) of five sodas
    assert {"find a coke can", "find a pepsi can", "go to the far counter"} <= soda
    assert all(not s.startswith("pick up") for s in soda)
    done = start_world(tasks["t016"], kitchen)
    for text in ["pick up the orange", "bring it to you", "put down the orange"]:
        assert done.execute(skills.get(text)).success
    assert right("t016", done) == {"done"}
    absent = Task("u1", "embodiment", "Bring me an apple.", TaskInit(absent=("apple",)),
                  parse_goal("at(apple, user)", kitchen))
    assert right_next_skills(absent, start_world(absent, kitchen), skills, kitchen) == set()


def test_a_walk_along_right_skills_reaches_the_goal(vocabulary, tasks):
    kitchen, skills = vocabulary.kitchen, vocabulary.skills
    for task_id in ("t017", "t091", "t070"):
        task = tasks[task_id]
        world, steps = start_world(task, kitchen), 0
        length = len(solve(task, kitchen, skills))
        while (right := right_next_skills(task, world, skills, kitchen)) != {"done"}:
            assert world.execute(skills.get(sorted(right)[0])).success
            steps += 1
        assert steps == length and task.goal.holds(world), task_id


def test_the_search_model_agrees_with_the_symbolic_world(vocabulary, tasks):
    """The solver's cached skill effects equal SymbolicWorld.execute on states met on random
    walks (tracking every object)."""
    from saycan_ros.core.solver import _SkillEffects
    kitchen, skills = vocabulary.kitchen, vocabulary.skills
    rng = np.random.default_rng(0)
    actions = skills.of_kind("navigate", "navigate_to_object", "pick", "place")
    for task_id in ("t001", "t013", "t070", "t091"):
        world = start_world(tasks[task_id], kitchen)
        effects = _SkillEffects(clone_world(world), world.objects)
        for _ in range(30):
            state = effects.state_of(world)
            for skill in actions:
                after = clone_world(world)
                expected = effects.state_of(after) if after.execute(skill).success else None
                assert effects.after(state, skill) == expected, (task_id, skill.text)
            feasible = [s for s in actions if clone_world(world).execute(s).success]
            world.execute(feasible[rng.integers(len(feasible))])


# -- failure attribution ----------------------------------------------------------------------
def test_a_successful_plan_has_no_attribution(vocabulary, tasks):
    task = tasks["t016"]
    outcome = run_task(vocabulary, task, "saycan",
                       ScriptedScores(solved_script(vocabulary, task)))
    assert outcome.plan_success and attribution(vocabulary, outcome) is None


def test_the_language_model_out_ranking_the_right_skill_is_llm(vocabulary, tasks):
    outcome = run_task(vocabulary, tasks["t016"], "no_vf",
                       ScriptedScores(["go to the trash can"]), max_steps=3)
    assert not outcome.plan_success
    blamed = attribution(vocabulary, outcome)
    assert blamed.category == "llm" and blamed.step == 1
    assert blamed.selected == "go to the trash can" and blamed.right == ("pick up the orange",)


def test_an_infeasible_choice_of_the_language_model_is_llm(vocabulary, tasks):
    # No VF tries to pick the apple where it is not: the skill fails, the LLM is to blame.
    outcome = run_task(vocabulary, tasks["t016"], "no_vf", ScriptedScores(["pick up the apple"]))
    assert outcome.result.state == "failed"
    assert attribution(vocabulary, outcome).category == "llm"


def test_the_affordance_suppressing_the_right_skill_is_affordance(vocabulary, tasks):
    language = ScriptedScores([{"pick up the orange": 0.6, "go to the trash can": 0.3}])
    affordance = ScriptedScores([{"pick up the orange": 0.1, "go to the trash can": 1.0}],
                                normalise=False)
    outcome = run_task(vocabulary, tasks["t016"], "saycan", language, affordance, max_steps=2)
    assert outcome.result.steps[0].selected == "go to the trash can"
    blamed = attribution(vocabulary, outcome)
    assert blamed.category == "affordance" and blamed.step == 1
    assert "pick up the orange" in blamed.reason


def test_a_later_wrong_step_is_the_one_blamed(vocabulary, tasks):
    task = tasks["t016"]   # right first step, then the LM wants the trash can
    script = ["pick up the orange", "go to the trash can"]
    outcome = run_task(vocabulary, task, "no_vf", ScriptedScores(script), max_steps=4)
    blamed = attribution(vocabulary, outcome)
    assert (blamed.category, blamed.step, blamed.right) == ("llm", 2, ("bring it to you",))


def test_a_right_skill_that_fails_when_executed_is_execution(vocabulary, tasks):
    task = tasks["t016"]
    outcome = run_task(vocabulary, task, "saycan", ScriptedScores(solved_script(vocabulary, task)),
                       broken={"bring it to you"})
    blamed = attribution(vocabulary, outcome)
    assert (blamed.category, blamed.step, blamed.selected) == ("execution", 2, "bring it to you")
    assert "slipped" in blamed.reason


def _step(skills, number, selected, llm, success=True):
    nan = np.full(len(skills.texts), np.nan)
    return StepRecord(number, list(skills.texts), llm, nan, llm.copy(), selected, success)


def _one_hot(skills, selected):
    return np.array([1.0 if s == selected else 0.0 for s in skills.texts])


def test_strategies_without_skill_probabilities_are_planner(vocabulary, tasks):
    skills, task = vocabulary.skills, tasks["t016"]
    steps = [_step(skills, 1, "go to the trash can", _one_hot(skills, "go to the trash can")),
             _step(skills, 2, "done", _one_hot(skills, "done"))]
    for strategy in ("bc_use", "llm_planner", "some_new_planner"):
        result = PlanResult(task.text, strategy, "succeeded", "done after 1 skills", steps)
        outcome = TaskOutcome(task, result, False, False, 0.1)
        assert attribution(vocabulary, outcome).category == "planner", strategy
    similarity = np.linspace(-0.2, 0.6, len(skills.texts))     # generative: cosine similarities
    assert not has_skill_probabilities("generative", _step(skills, 1, "done", similarity))
    assert has_skill_probabilities("saycan", _step(skills, 1, "done", np.full(51, 1 / 51)))


def test_a_plan_stopped_by_an_error_is_unknown(vocabulary, tasks):
    task = tasks["t016"]
    result = PlanResult(task.text, "saycan", "failed", "step 1: scoring failed: boom")
    blamed = attribution(vocabulary, TaskOutcome(task, result, False, False, 0.1))
    assert blamed.category == "unknown" and "boom" in blamed.reason


def test_right_skills_are_remembered_per_state(vocabulary, tasks):
    right = RightSkills(vocabulary.skills, vocabulary.kitchen)
    task = tasks["t001"]
    first = right(task, start_world(task, vocabulary.kitchen))
    assert right(task, start_world(task, vocabulary.kitchen)) is first
    assert len(right._known) == 1


# -- the report -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def reports(vocabulary, tasks):
    """saycan: 2 of 3 plans (the embodiment one suppressed by the affordance); no_vf: 2 of 3
    (the single-skill one out-ranked by the LM); generative: counted generations only."""
    t001, t016, t067 = tasks["t001"], tasks["t016"], tasks["t067"]

    def script(task):
        return ScriptedScores(solved_script(vocabulary, task))

    lm_cost = {"seconds": 1.0, "forward_passes": 10, "scored_tokens": 100,
               "generated_tokens": 0, "prompt_tokens": 50, "llm_calls": 2}
    suppressed = run_task(vocabulary, t067, "saycan",
                          ScriptedScores([{"put down the coke can": 0.6,
                                           "go to the trash can": 0.3}]),
                          ScriptedScores([{"put down the coke can": 0.1,
                                           "go to the trash can": 1.0}], normalise=False),
                          max_steps=2, cost={**lm_cost, "forward_passes": 30, "seconds": 3.0})
    saycan = EvalReport("saycan", "models/tiny-lm", "symbolic", [
        run_task(vocabulary, t001, "saycan", script(t001), cost=lm_cost),
        run_task(vocabulary, t016, "saycan", script(t016), cost=lm_cost),
        suppressed])
    no_vf = EvalReport("no_vf", "models/tiny-lm", "symbolic", [
        run_task(vocabulary, t001, "no_vf", ScriptedScores(["pick up the apple"]), cost={}),
        run_task(vocabulary, t016, "no_vf", script(t016), cost={}),
        run_task(vocabulary, t067, "no_vf", script(t067), cost={})])
    generative = EvalReport("generative", "models/tiny-lm", "symbolic", [
        TaskOutcome(t016, PlanResult(t016.text, "generative", "failed", "stopped"), False,
                    False, 0.2, {"seconds": 0.2, "generated_tokens": 12},
                    {"generations": 4, "inadmissible_generations": 1}),
        TaskOutcome(t001, PlanResult(t001.text, "generative", "failed", "stopped"), False,
                    False, 0.4, {"seconds": 0.4, "generated_tokens": 20},
                    {"generations": 6, "inadmissible_generations": 2})])
    return [saycan, no_vf, generative]


def _table(markdown: str, title: str) -> list[list[str]]:
    """The rows (cells) of the Markdown table after heading ``title``."""
    section = markdown.split(f"## {title}\n", 1)[1]
    lines = [line for line in section.split("\n## ", 1)[0].splitlines() if line.startswith("|")]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]


def test_the_success_table(vocabulary, reports):
    assert [o.plan_success for o in reports[0].outcomes] == [True, True, False]
    assert [o.plan_success for o in reports[1].outcomes] == [False, True, True]
    written = render_markdown(reports, [[None] * 3] * 3)
    rows = _table(written, "Success by family")
    assert rows[0] == ["family", "plan: saycan", "execution: saycan", "plan: no_vf",
                       "execution: no_vf", "plan: generative", "execution: generative"]
    body = {row[0]: row[1:] for row in rows[2:]}
    assert list(body) == ["nl_single", "nl_nouns", "embodiment", "**total**"]   # first seen
    assert body["nl_single"][:4] == ["1/1 (100%)", "1/1 (100%)", "0/1 (0%)", "0/1 (0%)"]
    assert body["embodiment"] == ["0/1 (0%)", "0/1 (0%)", "1/1 (100%)", "1/1 (100%)", "–", "–"]
    assert body["**total**"] == ["2/3 (67%)", "2/3 (67%)", "2/3 (67%)", "2/3 (67%)",
                                 "0/2 (0%)", "0/2 (0%)"]


def test_the_written_report(vocabulary, reports, tmp_path):
    command = "saycan eval --tasks config/tasks.yaml --strategies saycan,no_vf,generative"
    paths = write_report(reports, tmp_path / "out", kitchen=vocabulary.kitchen,
                         skills=vocabulary.skills, command=command)
    assert set(paths) == {"markdown", "json", "png"}
    assert all(p.is_file() and p.parent == tmp_path / "out" for p in paths.values())
    markdown = paths["markdown"].read_text(encoding="utf-8")
    assert command in markdown.split("## ")[0]                      # the command at the top

    cost = {row[0]: row[1:] for row in _table(markdown, "Cost per task")[2:]}
    assert cost["saycan"] == ["3", "16.7", "100.0", "0.0", "2.0", "1.67"]
    assert cost["no_vf"] == ["3", "–", "–", "–", "–", "0.50"]
    assert cost["generative"] == ["2", "–", "–", "16.0", "–", "0.30"]

    attribution_rows = _table(markdown, "Failure attribution")
    assert attribution_rows[0] == ["run", "failed plans", *ATTRIBUTIONS]
    rows = {row[0]: row[1:] for row in attribution_rows[2:]}
    assert rows["saycan"] == ["1", "0 (0%)", "1 (100%)", "0 (0%)", "0 (0%)", "0 (0%)"]
    assert rows["no_vf"] == ["1", "1 (100%)", "0 (0%)", "0 (0%)", "0 (0%)", "0 (0%)"]
    assert rows["generative"] == ["2", "0 (0%)", "0 (0%)", "0 (0%)", "0 (0%)", "2 (100%)"]

    generations = _table(markdown, "Inadmissible generations")
    assert generations[2:] == [["generative", "10", "3/10 (30%)"]]

    data = json.loads(paths["json"].read_text(encoding="utf-8"),
                      parse_constant=lambda c: pytest.fail(f"not strict JSON: {c}"))
    assert data["command"] == command
    assert data["families"] == ["nl_single", "nl_nouns", "embodiment"]
    saycan = data["runs"][0]
    assert (saycan["strategy"], saycan["plan_success"], saycan["tasks"]) == ("saycan", 2, 3)
    assert saycan["attribution"]["counts"]["affordance"] == 1
    detail = saycan["tasks_detail"]
    assert [d["id"] for d in detail] == ["t001", "t016", "t067"]
    assert detail[0]["attribution"] is None and detail[0]["plan"][-1] == "done"
    assert detail[2]["attribution"]["category"] == "affordance"
    assert detail[2]["steps"][0]["selected"] == "go to the trash can"
    assert {"skill", "llm", "affordance", "combined"} <= set(detail[2]["steps"][0]["top"][0])
    assert detail[2]["cost"]["forward_passes"] == 30
    assert data["runs"][2]["generations"] == {"raw": 10, "inadmissible": 3}

    png = paths["png"].read_bytes()
    assert png.startswith(PNG_SIGNATURE)
    import matplotlib.image
    image = matplotlib.image.imread(paths["png"])
    assert image.ndim == 3 and image.shape[0] > 100 and image.shape[1] > 100

    again = write_report(reports, tmp_path / "again", kitchen=vocabulary.kitchen,
                         skills=vocabulary.skills, command=command)
    for kind in ("markdown", "json", "png"):                       # deterministic
        assert again[kind].read_bytes() == paths[kind].read_bytes(), kind


def test_models_are_named_when_several_are_compared(vocabulary, reports):
    other = EvalReport("saycan", "other/bigger-lm", "symbolic", reports[0].outcomes)
    rows = _table(render_markdown([reports[0], other], [[None] * 3] * 2), "Success by family")
    assert rows[0][1:3] == ["plan: saycan (tiny-lm)", "execution: saycan (tiny-lm)"]
    assert rows[0][3] == "plan: saycan (bigger-lm)"
