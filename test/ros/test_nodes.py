"""The SayCan node graph over DDS: a real plan with a real language model, and every bad input
the nodes must survive (each answered with a clear message, nothing half-done executed)."""
import math
import time

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
from rclpy.node import Node  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402

from saycan_ros.ros.commander import SayCanCommander  # noqa: E402
from saycan_ros.planning.language import LanguageScorer  # noqa: E402
from saycan_ros.ros.nodes.affordance_node import AffordanceNode  # noqa: E402
from saycan_ros.ros.nodes.common import call_service  # noqa: E402
from saycan_ros.ros.nodes.llm_scorer_node import LlmScorerNode  # noqa: E402
from saycan_ros.ros.nodes.planner_node import PlannerNode  # noqa: E402
from saycan_ros.ros.nodes.skill_executor_node import SkillExecutorNode  # noqa: E402
from saycan_ros.srv import ExecuteSkill, SkillScore  # noqa: E402
from ros_fixtures import graph_on, remapped, spinning  # noqa: E402


@pytest.fixture(scope="module")
def ros():
    with spinning(8) as executor:
        yield executor


@pytest.fixture(scope="module")
def graph(ros, test_scorer):
    nodes = [LlmScorerNode(scorer=test_scorer), AffordanceNode(), SkillExecutorNode(),
             PlannerNode(parameter_overrides=[Parameter("max_steps", value=8)])]
    with graph_on(ros, nodes, SayCanCommander()) as commander:
        yield commander


def run(commander, text, init=None, timeout=120):
    commander.reset_world(init)
    commander.send_instruction(text)
    deadline = time.monotonic() + timeout
    while not commander.is_task_complete():
        assert time.monotonic() < deadline, f"no result for {text!r}"
        time.sleep(0.05)
    return commander.get_result()


def test_a_plan_runs_over_dds_with_a_real_language_model(graph):
    result = run(graph, "Pick up the apple.")
    assert result["state"] == "succeeded", result
    assert result["plan"] == ["find an apple", "pick up the apple", "done"]
    world = graph.world_state()
    assert world["holding"] == "apple" and world["robot_at"] == "far counter"
    # one SkillScores message per step, probabilities that make sense
    assert [m.step for m in graph.scores] == [1, 2, 3]
    assert [m.selected for m in graph.scores] == ["find an apple", "pick up the apple", "done"]
    for msg in graph.scores:
        assert len(msg.skills) == len(msg.llm) == len(msg.affordance) == len(msg.combined) == 51
        # skills that cannot run are pruned: not scored (llm NaN), combined 0
        pruned = np.asarray(msg.pruned, dtype=bool)
        assert len(pruned) == 51 and pruned.any()
        np.testing.assert_array_equal(pruned, np.asarray(msg.affordance) == 0)
        np.testing.assert_array_equal(np.isnan(msg.llm), pruned)
        assert np.nansum(msg.llm) == pytest.approx(1.0)
        assert np.allclose(msg.combined, np.nan_to_num(np.multiply(msg.llm, msg.affordance)))
    states = [s.state for s in graph.statuses]
    assert states[0] == "planning" and states[-1] == "succeeded" and "executing" in states


@pytest.mark.parametrize("text, reason", [
    ("", "instruction is empty"),
    ("   \n\t ", "instruction is empty"),
    ("please " * 400, "the limit is 2000"),
])
def test_bad_instructions_are_rejected(graph, text, reason):
    result = run(graph, text, timeout=10)
    assert result["state"] == "rejected" and reason in result["message"]


def follow(commander, text, init=None, timeout=120, **goal):
    """The FollowInstruction action, nav2_simple_commander style: send, poll, result."""
    commander.reset_world(init)
    accepted = commander.followInstruction(text, **goal)
    deadline = time.monotonic() + timeout
    while not commander.isTaskComplete():
        assert time.monotonic() < deadline, f"no result for {text!r}"
        time.sleep(0.05)
    return accepted, commander.getResult()


def test_the_action_gives_feedback_per_step_and_a_typed_result(graph):
    accepted, result = follow(graph, "Pick up the apple.")
    assert accepted and result["success"] and result["state"] == "succeeded", result
    assert result["plan"] == ["find an apple", "pick up the apple", "done"]
    assert result["final_state"]["holding"] == "apple"
    assert result["final_state"]["robot_at"] == "far counter"
    assert [s["selected"] for s in result["steps"]] == result["plan"]     # every step's scores
    # feedback: each skill when chosen, then when executed; the top scores best first
    chosen = [(f.step, f.skill, f.skill_done) for f in graph.feedback]
    assert chosen[:4] == [(1, "find an apple", False), (1, "find an apple", True),
                          (2, "pick up the apple", False), (2, "pick up the apple", True)]
    first = graph.feedback[0]
    assert first.top_skills[0] == "find an apple" and len(first.top_skills) == 5
    assert list(first.top_scores) == sorted(first.top_scores, reverse=True)
    assert graph.getFeedback() is graph.feedback[-1]


def test_an_impossible_request_is_refused_before_anything_moves(graph):
    """"I can't ...": the plan ends rejected with the reason, as the action's result and on
    the result topic; no skill ran, the world is as it was."""
    accepted, result = follow(graph, "Open the fridge.")        # (it resets the world)
    assert accepted and not result["success"] and result["state"] == "rejected", result
    assert result["message"].startswith("I can't open things"), result
    assert result["plan"] == [] and result["steps"] == []
    graph.reset_world(None)
    fresh = graph.world_state()
    for key in ("robot_at", "holding", "objects"):                # as it started: nothing moved
        assert result["final_state"][key] == fresh[key], key
    result = run(graph, "Bring me a banana.")
    assert result["state"] == "rejected" and result["message"] == \
        "I can't: there is no banana here", result


def test_each_step_is_drawn_above_the_robot_for_rviz(graph):
    from visualization_msgs.msg import MarkerArray
    texts = []
    sub = graph.create_subscription(MarkerArray, "/saycan/skill_markers",
                                    lambda m: texts.append(m.markers[0].text), 10)
    try:
        accepted, result = follow(graph, "Pick up the apple.")
        deadline = time.monotonic() + 5
        while len(texts) < len(result["steps"]) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        graph.destroy_subscription(sub)
    assert len(texts) == len(result["steps"]) == 3
    assert texts[0].splitlines()[:2] == ["Pick up the apple.", "step 1: find an apple"]
    assert "find an apple" in texts[0].splitlines()[2]          # the best skill, with its scores


@pytest.mark.parametrize("text, goal, reason", [
    ("", {}, "instruction is empty"),
    ("Bring me a coke.", {"strategy": "generative"}, "not served by the planner node"),
    ("Bring me a coke.", {"max_steps": 1000}, "max_steps 1000 is more than 100"),
])
def test_the_action_rejects_a_bad_goal_with_the_reason(graph, text, goal, reason):
    accepted, result = follow(graph, text, timeout=10, **goal)
    assert not accepted and result["state"] == "rejected" and not result["success"]
    assert reason in result["message"], result["message"]


def test_a_goal_with_its_own_step_limit_and_a_cancel_through_the_action(graph):
    accepted, result = follow(graph, "Bring me the sponge.", max_steps=1)
    assert accepted and result["state"] == "failed" and len(result["plan"]) == 1, result
    graph.reset_world(None)
    assert graph.followInstruction("Bring me the sponge.")
    deadline = time.monotonic() + 60
    while not graph.feedback:                       # the first skill is chosen
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert graph.cancelTask() == "cancelling"
    deadline = time.monotonic() + 60
    while not graph.isTaskComplete():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert graph.getResult()["state"] == "cancelled" and not graph.getResult()["success"]


def test_an_instruction_during_a_plan_is_rejected_and_the_plan_finishes(graph):
    graph.reset_world(None)
    graph.send_instruction("Bring me the sponge.")
    deadline = time.monotonic() + 30
    while not any(s.state == "planning" for s in graph.statuses[-3:]):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    other = SayCanCommander(name="second_user")
    graph.executor.add_node(other)
    try:
        other.send_instruction("Pick up the orange.")
        deadline = time.monotonic() + 30
        while not other.is_task_complete():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert other.get_result()["state"] == "rejected"
        assert "busy" in other.get_result()["message"]
    finally:
        graph.executor.remove_node(other)
        other.destroy_node()
    deadline = time.monotonic() + 120
    while not graph.is_task_complete():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert graph.get_result()["state"] in ("succeeded", "failed")


def test_execute_refuses_an_unknown_skill(graph):
    before = graph.world_state()
    client = graph.create_client(ExecuteSkill, "/saycan/execute")
    for skill, timeout, reason in [("open the fridge", 0.0, "unknown skill"),
                                   ("", 0.0, "unknown skill"),
                                   ("find an apple", math.nan, "timeout_s")]:
        response = call_service(graph, client, ExecuteSkill.Request(skill=skill, timeout_s=timeout),
                                10, "execute")
        assert not response.success and reason in response.message
    assert graph.world_state() == before


def test_the_executor_injects_faults_when_asked_and_refuses_a_bad_rate(ros, graph):
    prefix = "/faulty"
    node = SkillExecutorNode(cli_args=remapped(prefix, "/saycan/execute", "/saycan/world/reset",
                                               "/saycan/world/state", "/saycan/world_state"),
                             parameter_overrides=[Parameter("fault_rate", value=1.0)])
    ros.add_node(node)
    try:
        client = graph.create_client(ExecuteSkill, prefix + "/saycan/execute")
        before = node.world.snapshot()
        response = call_service(graph, client, ExecuteSkill.Request(skill="find an apple"), 10,
                                "execute")
        assert not response.success and "injected fault" in response.message
        assert node.world.snapshot() == before and node.faults.injected == 1
    finally:
        ros.remove_node(node)
        node.destroy_node()
    with pytest.raises(ValueError, match="fault rate must be in"):
        SkillExecutorNode(parameter_overrides=[Parameter("fault_rate", value=1.5)])


def test_score_services_answer_bad_requests_with_messages(graph):
    llm = graph.create_client(SkillScore, "/saycan/llm/score")
    aff = graph.create_client(SkillScore, "/saycan/affordance/score")
    cases = [
        (llm, SkillScore.Request(instruction="bring me a coke", skills=[]), "no candidate"),
        (llm, SkillScore.Request(instruction=" ", skills=["done"]), "empty"),
        (llm, SkillScore.Request(instruction="x", skills=["done", ""]), "empty"),
        (llm, SkillScore.Request(instruction="x", skills=["done"], scene="Scene: " * 1000),
         "scene: at most"),
        (llm, SkillScore.Request(instruction="x", skills=["done"], scene="Scene:\x1b[31m robot"),
         "printable"),
        (llm, SkillScore.Request(instruction="x", skills=["launch the missiles"]),
         "unknown skill"),
        (llm, SkillScore.Request(instruction="x", skills=["done"], history=["rm -rf /"]),
         "unknown skill"),
        (llm, SkillScore.Request(instruction="x", skills=["done"], history=["done"] * 101),
         "history steps"),
        (aff, SkillScore.Request(instruction="x", skills=["done"] * 5000), "5000 candidates"),
        (aff, SkillScore.Request(instruction="x", skills=["done"], history=["done"] * 101),
         "history steps"),
        (aff, SkillScore.Request(instruction="x", skills=[]), "no candidate"),
        (aff, SkillScore.Request(instruction="x", skills=["fly to the moon"]), "unknown skill"),
        (aff, SkillScore.Request(instruction="x", skills=["done"], history=["dance"]),
         "unknown skill"),
        (aff, SkillScore.Request(instruction="x", skills=["done"], min_state_revision=10**9),
         "no world state"),
    ]
    for client, request, reason in cases:
        response = call_service(graph, client, request, 20, "score")
        assert not response.success and reason in response.message, response.message
    ok = call_service(graph, aff, SkillScore.Request(instruction="x",
                                                     skills=["done", "find an apple"]), 10, "aff")
    assert ok.success and ok.scores[0] == pytest.approx(0.1) and 0 < ok.scores[1] <= 1


def test_reset_refuses_a_bad_init(graph):
    with pytest.raises(ValueError, match="unknown object 'unicorn'"):
        graph.reset_world({"holding": "unicorn"})
    with pytest.raises(ValueError, match="unknown keys"):
        graph.reset_world({"teleport": True})


# -- broken or missing sources, on an isolated copy of the graph (names remapped) ---------------
class NaNBackend:
    name = "nan-backend"

    def option_logprobs(self, prefix, query, options):
        return np.full(len(options), np.nan)


class WrongLengthAffordance(Node):
    """A misbehaving SkillScore server: one score too few."""

    def __init__(self, service):
        super().__init__("wrong_length_affordance")
        self.create_service(SkillScore, service, self.on_score)

    def on_score(self, request, response):
        response.scores = [0.5] * (len(request.skills) - 1)
        response.raw = list(response.scores)
        response.success = True
        return response


class SceneRecorder:
    """A scorer whose prompt shows a scene line (with or without what objects are), recording
    the line it is given."""

    def __init__(self, inner, details):
        import dataclasses
        self.inner, self.scenes = inner, []
        self.prompt = dataclasses.replace(inner.prompt, scene=True, scene_details=details)

    def score(self, instruction, history, skills, scene=""):
        self.scenes.append(scene)
        return self.inner.score(instruction, history, skills, scene=scene)


def test_the_llm_scorer_shows_the_scene_line_its_prompt_was_trained_on(ros, graph, test_scorer):
    """The planner node sends the detailed line; a prompt trained without the details gets the
    plain line of the same state, and a plain line to a prompt that wants them is an error."""
    from saycan_ros.core.kitchen import load_kitchen
    from saycan_ros.planning.scene import scene_line
    kitchen = load_kitchen()
    state = ("table", "sponge", {"apple": "far counter", "coke can": "table"})
    plain, detailed = scene_line(kitchen, *state), scene_line(kitchen, *state, details=True)
    for details, sent, expected in [(False, detailed, plain), (True, plain, "trained with it")]:
        prefix = f"/scene_{details}"
        scorer = SceneRecorder(test_scorer, details)
        node = LlmScorerNode(scorer=scorer, cli_args=remapped(prefix, "/saycan/llm/score"))
        ros.add_node(node)
        try:
            client = graph.create_client(SkillScore, prefix + "/saycan/llm/score")
            response = call_service(graph, client, SkillScore.Request(
                instruction="Wipe the table.", skills=["done", "go to the table"], scene=sent),
                20, "score")
            if details:
                assert not response.success and expected in response.message
                assert sent not in scorer.scenes
            else:
                assert response.success, response.message
                assert scorer.scenes[-1] == plain and detailed not in scorer.scenes
                assert "(" not in plain and "(" in detailed
        finally:
            ros.remove_node(node)
            node.destroy_node()


@pytest.mark.parametrize("case", ["llm_absent", "llm_nan", "affordance_wrong_length"])
def test_planner_reports_broken_sources_and_executes_nothing(ros, vocabulary, test_scorer,
                                                             case):
    prefix = f"/iso_{case}"
    names = ("/saycan/instruction", "/saycan/status", "/saycan/result", "/saycan/skill_scores",
             "/saycan/llm/score", "/saycan/affordance/score", "/saycan/execute",
             "/saycan/world/reset", "/saycan/world/state", "/saycan/world_state",
             "/saycan/cancel", "/saycan/follow_instruction")
    args = remapped(prefix, *names)
    nodes = [PlannerNode(cli_args=args, parameter_overrides=[
                 Parameter("score_timeout_s", value=3.0)]),
             SkillExecutorNode(cli_args=args)]
    if case != "llm_absent":  # llm_absent: nobody serves the language scorer
        backend = NaNBackend() if case == "llm_nan" else None
        scorer = LanguageScorer(backend, vocabulary.prompt) if backend else test_scorer
        nodes.append(LlmScorerNode(scorer=scorer, cli_args=args))
    if case == "affordance_wrong_length":
        nodes.append(WrongLengthAffordance(prefix + "/saycan/affordance/score"))
    else:
        nodes.append(AffordanceNode(cli_args=args))
    # the commander talks to the isolated graph through the same remapping
    commander = SayCanCommander(name=f"commander_{case}", cli_args=args)
    for node in nodes + [commander]:
        ros.add_node(node)
    try:
        _wait_for_subscriber(commander)
        before = commander.world_state()
        started = time.monotonic()
        commander.send_instruction("Bring me the sponge.")
        while not commander.is_task_complete():
            assert time.monotonic() - started < 30
            time.sleep(0.05)
        result = commander.get_result()
        assert result["state"] == "failed"
        expected = {"llm_absent": "not available", "llm_nan": "non-finite",
                    "affordance_wrong_length": "scores for 51 skills"}[case]
        assert expected in result["message"], result["message"]
        assert result["plan"] == []
        assert commander.world_state() == before  # nothing was executed
    finally:
        for node in nodes + [commander]:
            ros.remove_node(node)
            node.destroy_node()


def _wait_for_subscriber(commander, timeout=20):
    deadline = time.monotonic() + timeout
    while commander.instruction_pub.get_subscription_count() == 0:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(0.3)


def test_llm_scorer_parameters_are_the_llm_config():
    """Every language-model setting is an llm_scorer parameter with the same default."""
    import dataclasses

    from saycan_ros.llm.config import LLMConfig
    from saycan_ros.ros.nodes.llm_scorer_node import DEFAULTS
    assert {f.name: f.default for f in dataclasses.fields(LLMConfig)}.items() <= DEFAULTS.items()


def test_a_spoken_instruction_reaches_the_planner_and_runs(ros, graph, speech, whisper, tmp_path):
    """espeak-ng's "bring me the sponge" as an AudioClip -> speech_to_text -> the planner plans
    that text; a clip that cannot be used is answered on saycan/speech/status, nothing sent."""
    from std_msgs.msg import String

    from saycan_ros.msg import AudioClip
    from saycan_ros.ros.nodes.speech_to_text_node import (AUDIO_TOPIC, FILE_TOPIC,
                                                          SPEECH_STATUS_TOPIC, SpeechToTextNode)
    node = SpeechToTextNode(recogniser=whisper)
    probe = rclpy.create_node("speech_probe")
    said, heard = [], []
    probe.create_subscription(String, SPEECH_STATUS_TOPIC, lambda m: said.append(m.data), 10)
    probe.create_subscription(String, "saycan/instruction", lambda m: heard.append(m.data), 10)
    pub = probe.create_publisher(AudioClip, AUDIO_TOPIC, 5)
    for n in (node, probe):
        ros.add_node(n)
    try:
        deadline = time.monotonic() + 10
        while pub.get_subscription_count() < 1 or probe.count_publishers("saycan/instruction") < 2:
            assert time.monotonic() < deadline, "speech_to_text not connected"
            time.sleep(0.05)
        pub.publish(AudioClip(sample_rate=16000, channels=1, samples=[0] * 100))   # 6 ms
        pcm = (speech("bring me the sponge") * 32767).astype(np.int16)
        graph.track_instruction("Bring me the sponge.")
        graph.reset_world()
        pub.publish(AudioClip(sample_rate=16000, channels=1, samples=pcm.tolist()))
        deadline = time.monotonic() + 120
        while not graph.is_task_complete():
            assert time.monotonic() < deadline, (said, heard)
            time.sleep(0.05)
        result = graph.get_result()
        assert heard == ["Bring me the sponge."]
        assert said[0].startswith("error: clip: clip of 0.01 s is too short"), said
        assert said[1].startswith("heard: Bring me the sponge."), said
        assert result["instruction"] == "Bring me the sponge." and result["plan"], result
        assert graph.world_state()["objects"]["sponge"] == "user", result
        # a WAV file named on saycan/speech/file
        from saycan_ros.speech.synth import speak_to_wav
        path = speak_to_wav("throw away the coke can", tmp_path / "coke.wav")
        graph.track_instruction("Throw away the coke can.")
        file_pub = probe.create_publisher(String, FILE_TOPIC, 5)
        deadline = time.monotonic() + 10
        while file_pub.get_subscription_count() < 1:      # matched before it is sent
            assert time.monotonic() < deadline, "speech_to_text does not hear the file topic"
            time.sleep(0.05)
        file_pub.publish(String(data=str(path)))
        deadline = time.monotonic() + 120
        while not graph.is_task_complete():
            assert time.monotonic() < deadline, (said, heard)
            time.sleep(0.05)
        assert heard[-1] == "Throw away the coke can.", heard
        assert graph.world_state()["objects"]["coke can"] == "trash can", graph.get_result()
    finally:
        for n in (node, probe):
            ros.remove_node(n)
            n.destroy_node()


def test_speech_to_text_refuses_bad_parameters_and_reports_a_missing_file(ros, whisper, tmp_path):
    from std_msgs.msg import String

    from saycan_ros.ros.nodes.speech_to_text_node import (SPEECH_STATUS_QOS, SPEECH_STATUS_TOPIC,
                                                          SpeechToTextNode)
    with pytest.raises(ValueError, match="recogniser must be one of"):
        SpeechToTextNode(parameter_overrides=[Parameter("recogniser", value="siri")])
    with pytest.raises(ValueError, match="threads and beam_size"):
        SpeechToTextNode(recogniser=whisper, parameter_overrides=[Parameter("threads", value=0)])
    probe = rclpy.create_node("speech_status_probe")
    said = []
    probe.create_subscription(String, SPEECH_STATUS_TOPIC, lambda m: said.append(m.data),
                              SPEECH_STATUS_QOS)
    ros.add_node(probe)
    with pytest.raises(ValueError, match="audio_file_wait_s must be >= 0"):
        SpeechToTextNode(recogniser=whisper,
                         parameter_overrides=[Parameter("audio_file_wait_s", value=-1.0)])
    # the start-up file waits for a listener of the instruction topic (none in this
    # namespace), at most audio_file_wait_s, then says so and goes on
    missing = str(tmp_path / "nothing.wav")
    node = SpeechToTextNode(recogniser=whisper, namespace="nobody_listens",
                            parameter_overrides=[Parameter("audio_file", value=missing),
                                                 Parameter("audio_file_wait_s", value=1.0)])
    probe.create_subscription(String, "/nobody_listens/" + SPEECH_STATUS_TOPIC,
                              lambda m: said.append(m.data), SPEECH_STATUS_QOS)
    ros.add_node(node)
    try:
        deadline = time.monotonic() + 10
        while len(said) < 2:
            assert time.monotonic() < deadline, f"speech status: {said}"
            time.sleep(0.05)
        assert said[0].startswith("error: nobody listens on saycan/instruction after 1 s"), said
        assert said[1:] == [f"error: file {missing!r}: no audio file {missing!r}"]
        assert node.heard == []
    finally:
        for n in (node, probe):
            ros.remove_node(n)
            n.destroy_node()
