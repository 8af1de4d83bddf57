"""The ROS-free planning loop: strategies, termination, failures, bad scores, cancel; and the
whole SayCan loop with a real language model on a few tasks."""
import threading

import numpy as np
import pytest

from saycan_ros.planning.affordance import load_affordance
from saycan_ros.evaluation.plans import evaluate
from saycan_ros.planning.language import LanguageScorer, ScoringError, normalise_logprobs
from saycan_ros.planning.local import LocalAffordance, WorldExecutor
from saycan_ros.planning.planner import ExecutionResult, Planner
from saycan_ros.strategies.registry import make_strategy
from saycan_ros.core.tasks import parse_tasks
from saycan_ros.core.world import SymbolicWorld


class ScriptedLanguage:
    """Test double: puts all probability on the next skill of a fixed script."""

    def __init__(self, script, values=None):
        self.script, self.values, self.calls = list(script), values, 0

    def score(self, instruction, history, skills, min_state_revision=0, scene=""):
        self.calls += 1
        if self.values is not None:
            return np.asarray(self.values(skills), dtype=float), np.zeros(len(skills))
        target = self.script[min(len(history), len(self.script) - 1)]
        probs = np.array([0.9 if s == target else 0.1 / (len(skills) - 1) for s in skills])
        return probs, np.log(probs)


def make_planner(vocabulary, language, strategy="saycan", world=None, **kwargs):
    world = world or SymbolicWorld(vocabulary.kitchen)
    affordance = LocalAffordance(load_affordance(), world, vocabulary.skills)
    planner = Planner(vocabulary.skills, make_strategy(strategy, language, affordance),
                      WorldExecutor(world, vocabulary.skills), **kwargs)
    return planner, world


def test_saycan_follows_the_language_model_when_feasible(vocabulary):
    script = ["find a sponge", "pick up the sponge", "bring it to you", "put down the sponge",
              "done"]
    planner, world = make_planner(vocabulary, ScriptedLanguage(script))
    result = planner.run("wipe")
    assert result.state == "succeeded"
    assert result.plan == script
    assert world.object_location("sponge") == "user"


def test_affordance_vetoes_an_infeasible_first_choice(vocabulary):
    # The language model prefers picking the sponge, which is not where the robot stands:
    # SayCan goes to find it first; No VF tries the pick and fails.
    def prefers_pick(skills):
        return [0.5 if s == "pick up the sponge" else 0.4 if s == "find a sponge"
                else 0.1 / (len(skills) - 2) for s in skills]

    saycan, _ = make_planner(vocabulary, ScriptedLanguage([], prefers_pick), max_steps=1)
    assert saycan.run("get the sponge").steps[0].selected == "find a sponge"
    no_vf, world = make_planner(vocabulary, ScriptedLanguage([], prefers_pick), "no_vf")
    result = no_vf.run("get the sponge")
    assert result.state == "failed" and "pick up the sponge" in result.message
    assert world.holding is None


def test_step_limit_and_completed_skills(vocabulary):
    # A model that always wants "go to the table": after the first time, the completed-skill
    # cap lets "done" (0.1 affordance) win; the plan never loops.
    def wants_table(skills):
        return [0.9 if s == "go to the table" else 0.09 if s == "done"
                else 0.01 / (len(skills) - 2) for s in skills]

    world = SymbolicWorld(vocabulary.kitchen)
    world.execute(vocabulary.skills.get("go to the far counter"))
    planner, _ = make_planner(vocabulary, ScriptedLanguage([], wants_table), world=world)
    result = planner.run("go to the table")
    assert result.plan == ["go to the table", "done"]
    assert result.state == "succeeded"
    looping, _ = make_planner(vocabulary, ScriptedLanguage([], wants_table), "no_vf",
                              max_steps=3)
    assert looping.run("x").state == "max_steps"


@pytest.mark.parametrize("values, expected", [
    (lambda skills: [float("nan")] * len(skills), "outside [0, 1] or NaN"),
    (lambda skills: [2.0] * len(skills), "outside [0, 1]"),
    (lambda skills: [0.5] * (len(skills) - 1), "scores for"),
])
def test_bad_scores_stop_the_plan_before_anything_runs(vocabulary, values, expected):
    executed = []

    class RecordingExecutor:
        def execute(self, skill, timeout_s=0.0):
            executed.append(skill)
            return ExecutionResult(True, "ok")

    world = SymbolicWorld(vocabulary.kitchen)
    affordance = LocalAffordance(load_affordance(), world, vocabulary.skills)
    planner = Planner(vocabulary.skills,
                      make_strategy("saycan", ScriptedLanguage([], values), affordance),
                      RecordingExecutor())
    result = planner.run("anything")
    assert result.state == "failed" and expected in result.message
    assert executed == []


def test_a_strategy_cannot_run_an_unregistered_skill(vocabulary):
    class Rogue:
        name = "rogue"

        def reset(self, instruction):
            pass

        def decide(self, ctx):
            from saycan_ros.planning.planner import Decision
            z = np.zeros(len(ctx.skills))
            return Decision(z, z, z, "open the fridge")

    executed = []
    planner = Planner(vocabulary.skills, Rogue(),
                      type("E", (), {"execute": lambda self, s, t=0: executed.append(s)})())
    result = planner.run("x")
    assert result.state == "failed" and "unregistered" in result.message and executed == []


def test_cancel_stops_before_the_next_skill(vocabulary):
    started, release = threading.Event(), threading.Event()

    class SlowExecutor:
        def execute(self, skill, timeout_s=0.0):
            started.set()
            release.wait(5)
            return ExecutionResult(True, "ok")

    world = SymbolicWorld(vocabulary.kitchen)
    planner = Planner(vocabulary.skills,
                      make_strategy("saycan", ScriptedLanguage(["find a sponge"] * 5),
                                    LocalAffordance(load_affordance(), world, vocabulary.skills)),
                      SlowExecutor())
    box = {}
    thread = threading.Thread(target=lambda: box.update(result=planner.run("x")))
    thread.start()
    assert started.wait(5)
    planner.cancel()
    release.set()
    thread.join(5)
    assert box["result"].state == "cancelled"
    assert len(box["result"].steps) == 1


def test_unknown_strategy_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown strategy 'magic'"):
        make_strategy("magic", None, None)


def test_normalisation_rejects_nonsense():
    probs = normalise_logprobs(np.array([-1.0, -2.0, -np.inf]))
    assert probs.sum() == pytest.approx(1.0) and probs[2] == 0.0
    for bad in ([np.nan, -1.0], [np.inf, -1.0], [-np.inf, -np.inf], []):
        with pytest.raises(ScoringError):
            normalise_logprobs(np.array(bad))


def test_language_scorer_reports_a_failing_back_end(vocabulary):
    class NaNBackend:
        name = "nan"

        def option_logprobs(self, prefix, query, options):
            return np.full(len(options), np.nan)

    scorer = LanguageScorer(NaNBackend(), vocabulary.prompt)
    with pytest.raises(ScoringError, match="non-finite"):
        scorer.score("bring me a coke", [], ["find a coke can", "done"])


# -- the real thing: SayCan with a real language model ------------------------------------------
END_TO_END = {"instructions": [
    {"id": "e1", "family": "nl_single", "text": "Pick up the apple.",
     "goal": "holding(apple)"},
    {"id": "e2", "family": "structured", "text": "Find a coke can, pick it up and bring it to me.",
     "goal": "at(coke can, user)"},
    {"id": "e3", "family": "nl_verbs", "text": "Throw away the apple.",
     "init": {"robot_at": "close counter"}, "goal": "at(apple, trash can)"},
]}


def test_saycan_plans_real_tasks_with_a_real_language_model(vocabulary, test_scorer):
    tasks = parse_tasks(END_TO_END, vocabulary.kitchen)
    report = evaluate(tasks, kitchen=vocabulary.kitchen, skills=vocabulary.skills,
                      language_scorer=test_scorer, affordance_scorer=load_affordance(),
                      strategy="saycan", progress=False)
    for outcome in report.outcomes:
        assert outcome.success, outcome.to_dict()
        assert outcome.result.steps[-1].selected == "done"
        # every step's scores are proper distributions / probabilities
        for step in outcome.result.steps:
            assert np.nansum(step.llm) == pytest.approx(1.0)
            assert np.array_equal(np.isnan(step.llm), step.pruned)   # NaN: not scored
            assert np.all((step.affordance >= 0) & (step.affordance <= 1))
    assert report.summary_line() == "plan success: 3/3 (100.0%)"


def test_pruning_never_changes_a_saycan_choice(vocabulary, test_scorer):
    """The language model scores only the skills that can run: on real tasks every step
    chooses as with every skill scored, and the scored skills keep their probability ratios."""
    tasks = parse_tasks(END_TO_END, vocabulary.kitchen)
    runs = {prune: evaluate(tasks, kitchen=vocabulary.kitchen, skills=vocabulary.skills,
                            language_scorer=test_scorer, affordance_scorer=load_affordance(),
                            strategy_options={"prune": prune}, progress=False)
            for prune in (True, False)}
    pruned_steps = 0
    for fast, full in zip(runs[True].outcomes, runs[False].outcomes):
        assert [s.selected for s in fast.result.steps] == [s.selected for s in full.result.steps]
        for a, b in zip(fast.result.steps, full.result.steps):
            assert b.pruned is None and a.pruned is not None
            np.testing.assert_array_equal(a.pruned, b.affordance == 0)
            kept = ~a.pruned
            np.testing.assert_allclose(a.llm[kept], b.llm[kept] / b.llm[kept].sum(), rtol=1e-3)
            pruned_steps += int(a.pruned.any())
    assert pruned_steps > 0


def test_pruned_language_is_asked_only_for_runnable_skills(vocabulary):
    asked = []

    class Recording(ScriptedLanguage):
        def score(self, instruction, history, skills, min_state_revision=0, scene=""):
            asked.append(list(skills))
            return super().score(instruction, history, skills, min_state_revision, scene)
    script = ["find a sponge", "pick up the sponge", "done"]
    planner, _ = make_planner(vocabulary, Recording(script))
    result = planner.run("hold the sponge")
    assert result.plan == script
    first = result.steps[0]
    assert asked[0] == [s for s, a in zip(first.skills, first.affordance) if a > 0]
    assert "pick up the sponge" not in asked[0] and "put down the sponge" not in asked[0]
    assert np.isnan(first.llm[first.skills.index("pick up the sponge")])
    assert first.to_dict()["pruned"] == int(first.pruned.sum())
    assert all(name in asked[0] for name, *_ in first.top(5))   # pruned ones are not listed


def test_failed_skill_is_retried_within_the_failure_budget(vocabulary):
    """With max_failures, a failed skill does not end the plan: the loop re-scores from the new
    state (here the same pick, which then succeeds, like a missed grasp tried again)."""

    class FlakyExecutor:
        def __init__(self, inner):
            self.inner, self.failed = inner, False

        def execute(self, skill, timeout_s=0.0):
            if skill.startswith("pick up") and not self.failed:
                self.failed = True
                return ExecutionResult(False, "grasp missed")
            return self.inner.execute(skill, timeout_s)

    script = ["find a sponge", "pick up the sponge", "done"]
    for budget, state in ((0, "failed"), (1, "succeeded")):
        world = SymbolicWorld(vocabulary.kitchen)
        affordance = LocalAffordance(load_affordance(), world, vocabulary.skills)
        planner = Planner(vocabulary.skills,
                          make_strategy("saycan", ScriptedLanguage(script), affordance),
                          FlakyExecutor(WorldExecutor(world, vocabulary.skills)),
                          max_failures=budget)
        result = planner.run("hold the sponge")
        assert result.state == state, (budget, result.message)
        assert [s.success for s in result.steps][:2] == [True, False]
    assert result.plan == script


def test_a_failure_is_evidence_against_an_uncertain_affordance(vocabulary):
    """A pick the value function rates 0.08 (the object is elsewhere) fails once: SayCan then
    goes to find the object instead of grasping at air until the failure budget runs out; a
    certain affordance keeps its retry."""

    class RatedAffordance:             # a value function's uncertain rating of the pick
        def __init__(self, inner, pick):
            self.inner, self.pick = inner, pick

        def score(self, instruction, history, skills, min_state_revision=0, scene=""):
            probs, raw = self.inner.score(instruction, history, skills, min_state_revision)
            probs = np.array([self.pick if s == "pick up the sponge" else p
                              for s, p in zip(skills, probs)])
            return probs, raw

    def insists_on_the_pick(skills):
        return [0.95 if s == "pick up the sponge" else 0.04 if s == "find a sponge"
                else 0.01 / (len(skills) - 2) for s in skills]

    for rating, second in ((0.08, "find a sponge"), (1.0, "pick up the sponge")):
        world = SymbolicWorld(vocabulary.kitchen)
        affordance = RatedAffordance(LocalAffordance(load_affordance(), world,
                                                     vocabulary.skills), rating)
        planner = Planner(vocabulary.skills,
                          make_strategy("saycan", ScriptedLanguage([], insists_on_the_pick),
                                        affordance),
                          WorldExecutor(world, vocabulary.skills), max_failures=2, max_steps=2)
        result = planner.run("hold the sponge")
        assert [s.selected for s in result.steps] == ["pick up the sponge", second], rating
        assert not result.steps[0].success


# -- injected faults (issue 23) ---------------------------------------------------------------
def test_injected_faults_fail_before_the_skill_runs_and_are_seeded(vocabulary):
    from saycan_ros.planning.faults import FaultInjectingExecutor
    world = SymbolicWorld(vocabulary.kitchen)
    always = FaultInjectingExecutor(WorldExecutor(world, vocabulary.skills), rate=1.0)
    before = world.snapshot()
    outcome = always.execute("find a sponge")
    assert not outcome.success and "injected fault" in outcome.message
    assert world.snapshot() == before and always.injected == 1          # nothing happened
    never = FaultInjectingExecutor(WorldExecutor(world, vocabulary.skills), rate=0.0)
    assert never.execute("find a sponge").success and never.injected == 0

    def pattern(seed):
        inner = WorldExecutor(SymbolicWorld(vocabulary.kitchen), vocabulary.skills)
        faulty = FaultInjectingExecutor(inner, rate=0.3, seed=seed)
        return [faulty.execute("go to the table").success for _ in range(200)]
    assert pattern(4) == pattern(4) != pattern(5)
    assert 40 <= pattern(4).count(False) <= 80                          # about 30% of 200


@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan"), "often", None])
def test_fault_rate_is_checked(bad):
    from saycan_ros.planning.faults import check_fault_rate
    with pytest.raises(ValueError, match="fault rate must be"):
        check_fault_rate(bad)


def test_a_plan_recovers_from_injected_faults_by_choosing_again(vocabulary, test_scorer):
    """With 30% of executions failing and the failures tolerated, the real model re-chooses
    after each fault (the world is unchanged) and the plan still reaches its goal."""
    tasks = parse_tasks({"instructions": [
        {"id": "f1", "family": "nl_single", "text": "Pick up the apple.",
         "goal": "holding(apple)"}]}, vocabulary.kitchen)
    report = evaluate(tasks, kitchen=vocabulary.kitchen, skills=vocabulary.skills,
                      language_scorer=test_scorer, affordance_scorer=load_affordance(None),
                      max_steps=12, max_failures=12, fault_rate=0.3, seed=3, progress=False)
    outcome = report.outcomes[0]
    failed = [s for s in outcome.result.steps if not s.success]
    assert failed and all("injected fault" in s.message for s in failed)   # faults happened
    assert outcome.result.plan == ["find an apple", "pick up the apple", "done"]
    assert outcome.execution_success


@pytest.mark.parametrize("script, rejects, state", [
    (["done"], True, "rejected"),                     # stop first: the model's "I can't"
    (["done"], False, "succeeded"),                   # (without refusals: as before)
    (["find a sponge", "done"], True, "succeeded"),
])
def test_done_as_the_first_step_ends_the_plan_rejected_when_refusing(
        vocabulary, script, rejects, state):
    from saycan_ros.planning.local import WorldExecutor
    from saycan_ros.planning.planner import IDLE_DONE_REASON
    world = SymbolicWorld(vocabulary.kitchen)
    planner = Planner(vocabulary.skills,
                      make_strategy("saycan", ScriptedLanguage(script),
                                    LocalAffordance(load_affordance(), world, vocabulary.skills)),
                      WorldExecutor(world, vocabulary.skills), done_first_rejects=rejects)
    result = planner.run("Open the window.")
    assert result.state == state
    if state == "rejected":
        assert result.plan == [] and result.message == IDLE_DONE_REASON
    else:
        assert result.plan == script
