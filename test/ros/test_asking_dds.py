"""Asking for help over DDS: the planner's question on saycan/question, the answer on
saycan/answer deciding what runs next, an unanswered question failing the plan with nothing run,
and the answer service refusing what it cannot take."""
import time

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
from rclpy.parameter import Parameter  # noqa: E402

from saycan_ros.planning.asking import Calibration  # noqa: E402
from saycan_ros.ros.commander import SayCanCommander  # noqa: E402
from saycan_ros.ros.nodes.affordance_node import AffordanceNode  # noqa: E402
from saycan_ros.ros.nodes.llm_scorer_node import LlmScorerNode  # noqa: E402
from saycan_ros.ros.nodes.planner_node import PlannerNode  # noqa: E402
from saycan_ros.ros.nodes.skill_executor_node import SkillExecutorNode  # noqa: E402
from ros_fixtures import graph_on, remapped, spinning  # noqa: E402

COUNTERS = ("go to the close counter", "go to the far counter")
NAMES = ("/saycan/instruction", "/saycan/status", "/saycan/result", "/saycan/skill_scores",
         "/saycan/skill_markers", "/saycan/llm/score", "/saycan/affordance/score",
         "/saycan/execute", "/saycan/world/reset", "/saycan/world/state", "/saycan/world_state",
         "/saycan/cancel", "/saycan/follow_instruction", "/saycan/question", "/saycan/answer")


class TornBetweenCounters:
    """A language model that cannot tell the two counters apart at the first step, then is
    sure it is done."""

    def score(self, instruction, history, skills, scene=""):
        if history:
            raw = np.array([9.0 if s == "done" else 0.1 for s in skills])
        else:
            raw = np.array([4.5 if s in COUNTERS else 0.1 for s in skills])
        return raw / raw.sum(), np.log(raw / raw.sum())


@pytest.fixture(scope="module")
def ros():
    with spinning(8) as executor:
        yield executor


@pytest.fixture(scope="module")
def asking_graph(ros, tmp_path_factory):
    # 19 calibration plans scoring 0.7: at epsilon 0.15 the set holds skills with p >= 0.3
    path = tmp_path_factory.mktemp("calibration") / "calibration.json"
    Calibration([0.7] * 19, [0.7], "scripted").save(path)
    args = remapped("/ask", *NAMES)
    nodes = [LlmScorerNode(scorer=TornBetweenCounters(), cli_args=args),
             AffordanceNode(cli_args=args), SkillExecutorNode(cli_args=args),
             PlannerNode(cli_args=args, parameter_overrides=[
                 Parameter("ask_epsilon", value=0.15),
                 Parameter("ask_calibration_file", value=str(path)),
                 Parameter("answer_timeout_s", value=5.0)])]
    with graph_on(ros, nodes, SayCanCommander(name="asking_commander", cli_args=args)) as commander:
        yield commander


def _wait(condition, timeout=30, what=""):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_the_answer_decides_what_runs_next(asking_graph):
    commander = asking_graph
    commander.reset_world()
    commander.follow_instruction("Go to the counter.")
    _wait(lambda: commander.get_question() is not None, what="the question")
    question = commander.get_question()
    assert set(question["options"]) == set(COUNTERS)
    assert question["text"].startswith("Which do you mean? 1) ")
    # the action's feedback and the question topic are separate messages: either may come first
    _wait(lambda: any(f.state == "asking" for f in commander.feedback), what="asking feedback")
    far = question["options"].index("go to the far counter") + 1
    assert "go to the far counter" in commander.answer(far)
    _wait(commander.is_task_complete, what="the result")
    result = commander.get_result()
    assert result["state"] == "succeeded" and result["plan"] == ["go to the far counter", "done"]
    assert commander.world_state()["robot_at"] == "far counter"
    with pytest.raises(ValueError, match="no question is open"):
        commander.answer(1)


def test_an_unanswered_question_fails_the_plan_and_runs_nothing(asking_graph):
    commander = asking_graph
    commander.reset_world()
    before = commander.world_state()
    commander.follow_instruction("Go to the counter.")
    _wait(lambda: commander.get_question() is not None, what="the question")
    with pytest.raises(ValueError, match=r"choice 7 is not 0\.\.2"):
        commander.answer(7)
    _wait(commander.is_task_complete, timeout=20, what="the timeout")
    result = commander.get_result()
    assert result["state"] == "failed" and "no answer" in result["message"]
    assert "nobody answered within 5 s" in result["message"] and result["plan"] == []
    assert commander.world_state() == before


def test_a_bad_ask_setting_stops_the_planner_with_its_name(ros, tmp_path):
    with pytest.raises(ValueError, match="ask_epsilon must be 0"):
        PlannerNode(parameter_overrides=[Parameter("ask_epsilon", value=1.5)])
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    with pytest.raises(ValueError, match="ask_calibration_file: .*calibration format"):
        PlannerNode(parameter_overrides=[Parameter("ask_epsilon", value=0.1),
                                         Parameter("ask_calibration_file", value=str(bad))])
