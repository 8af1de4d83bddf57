"""Asking for help: the conformal threshold's math, the policies, the calibration file, and the
planner asking a person (scripted sources, symbolic world)."""
import json

import numpy as np
import pytest

from saycan_ros.core.tasks import parse_tasks
from saycan_ros.core.world import SymbolicWorld
from saycan_ros.evaluation.calibrate import CalibratingPerson, OfferEverything
from saycan_ros.evaluation.plans import SimulatedPerson, evaluate
from saycan_ros.planning.affordance import load_affordance
from saycan_ros.planning.asking import (Answer, Calibration, ConformalAsk, NoAnswer, Question,
                                        ThresholdAsk, conformal_threshold, coverage,
                                        make_ask_policy, prediction_set, step_probabilities,
                                        step_score)
from saycan_ros.planning.local import LocalAffordance, WorldExecutor
from saycan_ros.planning.planner import Planner
from saycan_ros.strategies.registry import make_strategy


def test_conformal_threshold_on_a_known_case():
    scores = [0.05 * i for i in range(1, 20)]          # 0.05 .. 0.95, n = 19
    # rank ceil(20 * 0.9) = 18 -> the 18th smallest score
    assert conformal_threshold(scores, 0.1) == pytest.approx(0.90)
    # rank ceil(20 * 0.5) = 10
    assert conformal_threshold(scores, 0.5) == pytest.approx(0.50)
    # rank ceil(20 * 0.99) = 20 > n: every skill goes in the set
    assert conformal_threshold(scores, 0.01) == 1.0
    assert coverage(scores, 0.5) == pytest.approx(10 / 19)
    for bad in (0.0, 1.0, -0.1):
        with pytest.raises(ValueError, match="epsilon"):
            conformal_threshold(scores, bad)
    with pytest.raises(ValueError, match="no calibration"):
        conformal_threshold([], 0.1)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        conformal_threshold([0.2, 1.5], 0.1)


def test_coverage_holds_on_exchangeable_data():
    """Split conformal: over calibration sets and fresh draws from their distribution, the set
    holds the right label with probability 1 - epsilon; with n = 99 calibration scores the
    rank is ceil(100 * 0.85) = 85, so the expected coverage is exactly 85/100."""
    rng = np.random.default_rng(0)
    covered = [coverage(rng.beta(0.5, 4.0, size=1000),
                        conformal_threshold(rng.beta(0.5, 4.0, size=99), 0.15))
               for _ in range(400)]
    assert 0.84 <= float(np.mean(covered)) <= 0.86


def test_sets_and_policies():
    p = step_probabilities(np.array([0.4, 0.35, 0.2, 0.0, np.nan]))
    assert p.sum() == pytest.approx(1.0) and p[3] == 0.0 and p[4] == 0.0
    assert prediction_set(p, 0.7) == [0, 1]                   # p >= 0.3
    assert ConformalAsk(0.7).options(p) == [0, 1]
    assert ConformalAsk(0.6).options(p) == [0]                # only p[0] >= 0.4: act on it
    assert ConformalAsk(0.2).options(p) == [0, 1, 2]          # none >= 0.8: the likeliest
    assert ThresholdAsk(0.5).options(p) == [0, 1, 2]
    assert ThresholdAsk(0.3).options(p) == []
    assert step_score(0.6) == pytest.approx(0.4) and step_score(1.0 + 1e-12) == 0.0
    with pytest.raises(ValueError, match="probability"):
        step_score(1.5)
    assert step_probabilities(np.zeros(4)) == pytest.approx(np.full(4, 0.25))
    assert OfferEverything().options(p) == [0, 1, 2]
    q = Question(1, ("go to the close counter", "go to the far counter"), (0.5, 0.4))
    assert q.text == ("Which do you mean? 1) go to the close counter 2) go to the far counter "
                      "3) something else")


def test_calibration_file_round_trip_and_checks(tmp_path):
    cal = Calibration([0.1, 0.2, 0.3], [0.15, 0.5], "m", {"seed": 1})
    path = tmp_path / "c.json"
    cal.save(path)
    back = Calibration.load(path)
    assert back.scores == [0.1, 0.2, 0.3] and back.heldout == [0.15, 0.5] and back.model == "m"
    assert back.heldout_coverage(0.5) == pytest.approx(0.5)        # q = 0.2
    policy = make_ask_policy({"epsilon": 0.5, "calibration": str(path)}, "m")
    assert isinstance(policy, ConformalAsk) and policy.q == pytest.approx(0.2)
    with pytest.raises(ValueError, match="calibrates 'm'.*saycan calibrate"):
        make_ask_policy({"epsilon": 0.5, "calibration": str(path)}, "other")
    assert make_ask_policy({}) is None
    assert isinstance(make_ask_policy({"threshold": 0.6}), ThresholdAsk)
    path.write_text(json.dumps({"format": 1, "scores": [2.0], "heldout": []}))
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):
        Calibration.load(path)
    path.write_text("{not json")
    with pytest.raises(ValueError, match="not a calibration file"):
        Calibration.load(path)
    path.write_text("[0.1, 0.2]")
    with pytest.raises(ValueError, match="holds a JSON object, not list"):
        Calibration.load(path)
    path.write_text(json.dumps({"format": 1, "scores": [0.1], "heldout": [], "data": [1]}))
    with pytest.raises(ValueError, match="data must be an object"):
        Calibration.load(path)
    path.write_text(json.dumps({"format": 1, "scores": "0.5", "heldout": []}))
    with pytest.raises(ValueError, match="lists of numbers"):
        Calibration.load(path)
    path.write_text(json.dumps({"format": 1, "scores": [float("nan")], "heldout": []}))
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):
        Calibration.load(path)


def test_saycan_run_asks_with_the_calibration_of_the_model_that_scores():
    """The planner node cannot see the scorer's model: `saycan run --ask` hands it the file
    made for that model, and each model with a shipped adapter ships one."""
    import argparse
    from saycan_ros.cli.run import node_params
    from saycan_ros.llm.config import DEFAULT_MODEL
    from saycan_ros.planning.asking import CALIBRATION_FILES, default_calibration
    assert DEFAULT_MODEL in CALIBRATION_FILES
    for model in CALIBRATION_FILES:
        args = argparse.Namespace(world="symbolic", seed=0, strategy="saycan", max_steps=20,
                                  model=model, ask=0.15, answer_timeout=60.0)
        planner = node_params(args)["planner"]
        assert planner["ask_epsilon"] == 0.15
        assert planner["ask_calibration_file"] == str(default_calibration(model))
        assert Calibration.load(planner["ask_calibration_file"]).model.startswith(model + "+")
    args.ask = 0.0
    assert "ask_calibration_file" not in node_params(args)["planner"]


class TwoReadings:
    """A language model torn between two skills at the first step, then following a script."""

    def __init__(self, first, script):
        self.first, self.script = first, script

    def score(self, instruction, history, skills, min_state_revision=0, scene=""):
        if not history:
            probs = np.array([0.45 if s in self.first else 0.1 / (len(skills) - 2)
                              for s in skills])
        else:
            target = self.script[min(len(history) - 1, len(self.script) - 1)]
            probs = np.array([0.9 if s == target else 0.1 / (len(skills) - 1) for s in skills])
        return probs, np.log(probs)


def _planner(vocabulary, language, world, **kwargs):
    affordance = LocalAffordance(load_affordance(), world, vocabulary.skills)
    return Planner(vocabulary.skills, make_strategy("saycan", language, affordance),
                   WorldExecutor(world, vocabulary.skills), **kwargs)


def test_the_answer_decides_what_runs(vocabulary):
    language = TwoReadings({"go to the close counter", "go to the far counter"}, ["done"])
    asked = []

    def person(question):
        asked.append(question)
        return Answer(question.options.index("go to the far counter"))

    world = SymbolicWorld(vocabulary.kitchen)
    result = _planner(vocabulary, language, world, ask_policy=ConformalAsk(0.7),
                      ask=person).run("go to the counter")
    assert len(asked) == 1
    assert set(asked[0].options) == {"go to the close counter", "go to the far counter"}
    assert result.state == "succeeded" and result.plan == ["go to the far counter", "done"]
    assert world.robot_at == "far counter"
    record = result.steps[0].to_dict()
    assert record["question"]["options"] == list(asked[0].options)
    assert record["answer"] == {"choice": asked[0].options.index("go to the far counter")}


def test_no_answer_fails_the_plan_and_runs_nothing(vocabulary):
    language = TwoReadings({"go to the close counter", "go to the far counter"}, ["done"])

    def nobody(question):
        raise NoAnswer("no answer within 30 s")

    world = SymbolicWorld(vocabulary.kitchen)
    start = world.snapshot()
    result = _planner(vocabulary, language, world, ask_policy=ConformalAsk(0.7),
                      ask=nobody).run("go to the counter")
    assert result.state == "failed" and "no answer" in result.message
    assert "Which do you mean?" in result.message and result.plan == []
    assert world.snapshot() == start


def test_something_else_takes_the_likeliest_skill_not_offered(vocabulary):
    language = TwoReadings({"go to the close counter", "go to the far counter"}, ["done"])
    world = SymbolicWorld(vocabulary.kitchen)
    result = _planner(vocabulary, language, world, ask_policy=ConformalAsk(0.7),
                      ask=lambda q: Answer(None), max_steps=1).run("go to the counter")
    assert result.steps[0].selected not in ("go to the close counter", "go to the far counter")


def test_ask_policy_and_person_come_together(vocabulary):
    with pytest.raises(ValueError, match="come together"):
        _planner(vocabulary, TwoReadings(set(), ["done"]), SymbolicWorld(vocabulary.kitchen),
                 ask_policy=ConformalAsk(0.5))


def test_simulated_person_answers_from_the_goal(vocabulary):
    task = parse_tasks({"instructions": [
        {"id": "a", "family": "ambiguous", "text": "Go to the counter.",
         "goal": "robot_at(far counter)"}]}, vocabulary.kitchen)[0]
    world = SymbolicWorld(vocabulary.kitchen)
    person = SimulatedPerson(task, world, vocabulary.skills, vocabulary.kitchen)
    q = Question(1, ("go to the close counter", "go to the far counter"), (0.5, 0.4))
    assert person(q).choice == 1
    assert person(Question(1, ("go to the close counter", "done"), (0.5, 0.4))).choice is None
    cal = CalibratingPerson(task, world, vocabulary.skills, vocabulary.kitchen)
    assert cal(q).choice == 1 and cal.right_probabilities == [0.4]


def test_eval_asks_and_reports_help(vocabulary):
    """An ambiguous task: never asking picks the close counter (wrong); asking succeeds."""
    tasks = parse_tasks({"instructions": [
        {"id": "a", "family": "ambiguous", "text": "Go to the counter.",
         "goal": "robot_at(far counter)"}]}, vocabulary.kitchen)

    class Scorer:
        def score(self, instruction, history, skills, scene=""):
            if history:
                probs = np.array([0.9 if s == "done" else 0.1 / (len(skills) - 1)
                                  for s in skills])
            else:
                probs = np.array([0.46 if s == "go to the close counter" else
                                  0.44 if s == "go to the far counter" else
                                  0.1 / (len(skills) - 2) for s in skills])
            return probs, np.log(probs)

    kwargs = dict(kitchen=vocabulary.kitchen, skills=vocabulary.skills, language_scorer=Scorer(),
                  affordance_scorer=load_affordance(), progress=False)
    never = evaluate(tasks, **kwargs)
    asking = evaluate(tasks, ask_policy=ConformalAsk(0.7), **kwargs)
    assert never.total() == (0, 1) and asking.total() == (1, 1)
    assert never.help_line().startswith("asked for help: 0/1 tasks (0.0%)")
    assert asking.help_line() == "asked for help: 1/1 tasks (100.0%), 1 questions (1.00 per task)"
    assert asking.to_dict()["asked"] == 1


def test_skills_that_change_nothing_leave_the_distribution(vocabulary):
    """At the table: finding the orange (on the table) or going to the table changes nothing;
    their mass goes to the others."""
    from saycan_ros.planning.asking import changes_nothing, without_no_ops

    world = SymbolicWorld(vocabulary.kitchen)          # robot at the table
    skills = [vocabulary.skills.get(t) for t in (
        "find a coke can", "find an orange", "pick up the orange", "go to the table")]
    assert [changes_nothing(world, s) for s in skills] == [False, True, False, True]
    p = without_no_ops(np.array([0.1, 0.6, 0.2, 0.1]), skills, world)
    assert p == pytest.approx([1 / 3, 0.0, 2 / 3, 0.0])
    only = without_no_ops(np.array([0.0, 0.9, 0.0, 0.1]), skills, world)
    assert only == pytest.approx([0.0, 0.9, 0.0, 0.1])       # nothing else has mass: as is


def test_options_that_end_alike_are_one_option(vocabulary):
    """Going to the far counter or finding the coke can there ends in one place: not a reading
    to ask about; finds of two things there stay two (which thing is the question)."""
    from saycan_ros.planning.asking import distinct_outcomes

    world = SymbolicWorld(vocabulary.kitchen)
    assert world.objects["coke can"] == world.objects["pepsi can"] == "far counter"
    skills = [vocabulary.skills.get(t) for t in (
        "find a coke can", "go to the far counter", "find a pepsi can", "go to the trash can",
        "pick up the orange")]
    assert distinct_outcomes([1, 0, 3, 4], skills, world) == [1, 3, 4]
    assert distinct_outcomes([0, 1], skills, world) == [0]
    assert distinct_outcomes([0, 2, 1], skills, world) == [0, 2, 1]
    # in the planner: the set {find a coke can, go to the far counter} runs the likelier
    language = TwoReadings({"find a coke can", "go to the far counter"}, ["done"])
    asked = []
    result = _planner(vocabulary, language, world, ask_policy=ConformalAsk(0.7),
                      ask=lambda q: asked.append(q) or Answer(0), world_state=world.snapshot,
                      max_steps=1).run("get the coke")
    assert asked == [] and world.robot_at == "far counter"
    assert result.steps[0].selected in ("find a coke can", "go to the far counter")


def test_the_planner_acts_on_the_set_s_one_skill(vocabulary):
    """The model likes to find the orange it stands at: that changes nothing, so the set is the
    pick alone and the robot picks without asking."""
    language = TwoReadings({"find an orange", "pick up the orange"}, ["done"])
    world = SymbolicWorld(vocabulary.kitchen)
    asked = []
    result = _planner(vocabulary, language, world, ask_policy=ConformalAsk(0.7),
                      ask=lambda q: asked.append(q) or Answer(0), world_state=world.snapshot,
                      max_steps=1).run("take the orange")
    assert asked == [] and result.steps[0].selected == "pick up the orange"
    assert world.holding == "orange"


def test_simulated_person_names_what_the_goal_wants(vocabulary):
    """Both finds lead to the far counter (both begin a shortest plan): the person picks the
    one naming the goal's object."""
    task = parse_tasks({"instructions": [
        {"id": "a", "family": "ambiguous", "text": "Bring me the cola.",
         "goal": "at(pepsi can, user)"}]}, vocabulary.kitchen)[0]
    person = SimulatedPerson(task, SymbolicWorld(vocabulary.kitchen), vocabulary.skills,
                             vocabulary.kitchen)
    assert person(Question(1, ("find a coke can", "find a pepsi can"), (0.5, 0.4))).choice == 1
    calibrating = CalibratingPerson(task, SymbolicWorld(vocabulary.kitchen), vocabulary.skills,
                                    vocabulary.kitchen)
    assert calibrating(Question(1, ("find a coke can", "find a pepsi can"), (0.5, 0.4))).choice == 1
    assert calibrating.right_probabilities == [0.4]


def test_going_to_the_place_is_as_meant_as_finding_the_goal_s_thing_there(vocabulary):
    """The chips are in the trash, the coke is in hand and goes there too: ``go to the trash
    can`` is meant (it was not: only ``find the multigrain chips``, which the planner merges
    into the go-to, so 7% of the calibration steps had no right option). An offered skill that
    goes where a meant one goes stands for it (one skill per outcome is offered)."""
    from saycan_ros.evaluation.plans import intended_next_skills, meant_options
    task = parse_tasks({"instructions": [
        {"id": "t", "family": "long_horizon", "text": "Throw away the chips and the coke.",
         "goal": "and(at(multigrain chips, trash can), at(coke can, trash can))",
         "init": {"robot_at": "close counter", "holding": "coke can",
                  "objects": {"multigrain chips": "trash can"}}}]}, vocabulary.kitchen)[0]
    world = SymbolicWorld(vocabulary.kitchen, task.init)
    meant = intended_next_skills(task, world, vocabulary.skills, vocabulary.kitchen)
    assert "go to the trash can" in meant
    person = CalibratingPerson(task, world, vocabulary.skills, vocabulary.kitchen)
    assert person(Question(1, ("go to the table", "go to the trash can"), (0.6, 0.3))).choice == 1
    assert person.right_probabilities == [0.3]
    # the tea stands on the table, and going there is what is meant: its find stands for it
    tea = parse_tasks({"instructions": [
        {"id": "g", "family": "nl_single", "text": "Go to the table.",
         "goal": "robot_at(table)", "init": {"robot_at": "close counter"}}]},
        vocabulary.kitchen)[0]
    world = SymbolicWorld(vocabulary.kitchen, tea.init)
    meant = intended_next_skills(tea, world, vocabulary.skills, vocabulary.kitchen)
    assert meant == {"go to the table"}
    options = ("find a green tea", "go to the trash can")
    assert meant_options(options, meant, world, vocabulary.skills) == [0]
    assert SimulatedPerson(tea, world, vocabulary.skills, vocabulary.kitchen)(
        Question(1, options, (0.7, 0.2))).choice == 0
    assert meant_options(("go to the trash can",), meant, world, vocabulary.skills) == []


def test_calibration_runs_on_generated_plans(vocabulary, tmp_path):
    """saycan calibrate's core with a uniform language model (no model load): generated plans,
    split by plan, every step's score in [0, 1], a loadable file with its coverage."""
    from saycan_ros.evaluation.calibrate import calibrate

    class Uniform:
        def score(self, instruction, history, skills, scene=""):
            p = np.full(len(skills), 1.0 / len(skills))
            return p, np.log(p)

    cal = calibrate(vocabulary, Uniform(), load_affordance(), n=6, model_name="uniform",
                    progress=False, details=str(tmp_path / "steps.json.gz"))
    data = cal.to_dict()["data"]
    import gzip
    import json
    plans = json.load(gzip.open(tmp_path / "steps.json.gz"))
    # the details give back each split's scores: 1 - the likeliest right option's probability
    for split, scores in (("calibration", cal.scores), ("heldout", cal.heldout)):
        again = [1.0 - (step["probabilities"][step["right"][0]] if step["right"] else 0.0)
                 for plan in plans if plan["split"] == split for step in plan["steps"]]
        assert again == pytest.approx(scores, abs=1e-5)
    assert data["calibration_plans"] == 4 and data["heldout_plans"] == 2
    assert data["ambiguous_plans"] == 2 == sum(plan["family"] == "ambiguous" for plan in plans)
    assert len(cal.scores) + len(cal.heldout) == data["steps"] >= 6
    assert all(0.0 <= s <= 1.0 for s in cal.scores + cal.heldout)
    assert max(cal.scores) > 0.5        # a uniform model is never sure of the right step
    cal.save(tmp_path / "c.json")
    assert Calibration.load(tmp_path / "c.json").model == "uniform"
    assert set(data["plans_covered_at"]) == {"0.05", "0.1", "0.15", "0.2", "0.25"}
    assert set(data["heldout_coverage_over_splits"]) == set(data["plans_covered_at"])


def test_coverage_over_random_splits_is_one_minus_epsilon_on_exchangeable_scores():
    """The mean held-aside coverage over random plan splits is what split conformal promises:
    1 - epsilon (to within its spread) on exchangeable scores, here one step per plan."""
    from saycan_ros.evaluation.calibrate import _coverage_over_splits
    plans = [[float(u)] for u in np.random.default_rng(3).uniform(size=600)]
    for epsilon in (0.1, 0.15, 0.25):
        found = _coverage_over_splits(plans, 200, epsilon, seed=0)
        assert found["mean"] == pytest.approx(1 - epsilon, abs=0.01)
        assert 0.0 < found["sd"] < 0.05


def test_calibration_plans_hold_a_share_of_requests_with_several_readings(vocabulary):
    """A quarter of the calibration plans are ambiguous requests (the person means one
    reading); the clear ones are the usual mix's first, whatever the share."""
    from saycan_ros.evaluation.calibrate import calibration_tasks
    mixed = calibration_tasks(vocabulary, 8, progress=False)
    clear = calibration_tasks(vocabulary, 6, progress=False, ambiguous_share=0.0)
    assert [t.family for t in mixed[6:]] == ["ambiguous", "ambiguous"]
    assert [t.text for t in mixed[:6]] == [t.text for t in clear]
    assert "ambiguous" not in {t.family for t in clear}
    assert all(t.goal is not None for t in mixed)
    with pytest.raises(ValueError, match="ambiguous_share"):
        calibration_tasks(vocabulary, 8, progress=False, ambiguous_share=1.5)


def test_eval_counts_a_refused_impossible_request_and_nothing_else(vocabulary):
    """A task that expects ``rejected`` succeeds only when the plan is refused before any skill
    runs; a possible task that the refusal turns down fails."""
    from saycan_ros.planning.refusal import load_refusals
    tasks = parse_tasks({"instructions": [
        {"id": "i", "family": "no_skill", "text": "Open the fridge.", "expect": "rejected"},
        {"id": "p", "family": "nl_single", "text": "Go to the table.",
         "goal": "robot_at(table)"}]}, vocabulary.kitchen)

    class Scorer:                  # go to the table, then done
        def score(self, instruction, history, skills, scene=""):
            want = "done" if history else "go to the table"
            probs = np.array([0.9 if s == want else 0.1 / (len(skills) - 1) for s in skills])
            return probs, np.log(probs)

    kwargs = dict(kitchen=vocabulary.kitchen, skills=vocabulary.skills, language_scorer=Scorer(),
                  affordance_scorer=load_affordance(), progress=False)
    refusing = evaluate(tasks, refuse=load_refusals(vocabulary.kitchen).why_not, **kwargs)
    states = [(o.task.id, o.result.state, o.plan_success, o.execution_success)
              for o in refusing.outcomes]
    assert states == [("i", "rejected", True, True), ("p", "succeeded", True, True)]
    assert refusing.outcomes[0].result.plan == []
    acting = evaluate(tasks, **kwargs)                      # --no-refuse: it acts, and fails
    assert [o.plan_success for o in acting.outcomes] == [False, True]
    no = evaluate(tasks, refuse=lambda text: "I can't: test", **kwargs)
    assert [o.plan_success for o in no.outcomes] == [True, False]
