"""Regression tests over DDS for the defects a fault and fuzz probe of the graph found (issue 25):
cancels that were acknowledged and lost, a cancel that could not interrupt a hung scorer, node
loss noticed only by a timeout, a world lost when its node restarted, services that blocked each
other, YAML alias bombs, NUL bytes, and readiness that trusted a dead node's services."""
import json
import os
import signal
import sys
import subprocess
import threading
import time
import uuid

import pytest

rclpy = pytest.importorskip("rclpy")
from rclpy.node import Node  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from std_msgs.msg import String  # noqa: E402

from saycan_ros.evaluation.fuzz import fuzz_reset_requests  # noqa: E402
from saycan_ros.planning.planner import PlannerError  # noqa: E402
from saycan_ros.stack import TEST_MODEL  # noqa: E402
from saycan_ros.ros.commander import SayCanCommander  # noqa: E402
from saycan_ros.ros.nodes.affordance_node import AffordanceNode  # noqa: E402
from saycan_ros.ros.nodes.common import (ServiceCallError, WatchedClient,  # noqa: E402
                                         call_service)
from saycan_ros.ros.nodes.llm_scorer_node import LlmScorerNode  # noqa: E402
from saycan_ros.ros.nodes.planner_node import PlannerNode, ServiceScoreSource  # noqa: E402
from saycan_ros.ros.nodes.skill_executor_node import SkillExecutorNode  # noqa: E402
from saycan_ros.srv import ExecuteSkill, GetWorldState, ResetWorld, SkillScore  # noqa: E402
from ros_fixtures import Spinner, remapped, spinning  # noqa: E402

NAMES = ("/saycan/instruction", "/saycan/status", "/saycan/result", "/saycan/skill_scores",
         "/saycan/skill_markers", "/saycan/llm/score", "/saycan/affordance/score",
         "/saycan/execute", "/saycan/world/reset", "/saycan/world/state", "/saycan/world_state",
         "/saycan/cancel", "/saycan/follow_instruction")


def isolated(prefix: str) -> list[str]:
    """``--ros-args -r`` rules moving every name of the graph under ``prefix``."""
    return remapped(prefix, *NAMES)


@pytest.fixture(scope="module")
def ros():
    with spinning(10) as executor:
        yield executor


class Graph(Spinner):
    """A graph's nodes and its commander on an executor of their own (see Spinner)."""

    def __init__(self, nodes, commander):
        super().__init__(list(nodes) + [commander], threads=10)
        self.commander = commander


def wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        time.sleep(0.01)


def wait_result(commander, timeout=120):
    wait_for(commander.is_task_complete, timeout, "the plan's result")
    return commander.get_result()


def wait_subscribed(commander, timeout=30):
    wait_for(lambda: commander.instruction_pub.get_subscription_count() > 0, timeout,
             "the planner's subscription")


class DispatchLog:
    """Spies on the planner node: when each skill was sent to the executor, and when each
    cancel was acknowledged (True returned to the caller)."""

    def __init__(self, planner: PlannerNode):
        self.dispatched, self.acknowledged = [], []
        execute, cancel = planner.executor_client.execute, planner._cancel_plan

        def spy_execute(skill, timeout_s=0.0):
            self.dispatched.append((time.monotonic(), skill))
            return execute(skill, timeout_s)

        def spy_cancel():
            answer = cancel()
            if answer:
                self.acknowledged.append(time.monotonic())
            return answer

        planner.executor_client.execute = spy_execute
        planner._cancel_plan = spy_cancel


# -- 1, 11: a cancel holds from the moment it is acknowledged ------------------------------------
@pytest.fixture(scope="module")
def graph(ros, test_scorer):
    args = isolated("/f25")
    planner = PlannerNode(cli_args=args, parameter_overrides=[Parameter("max_steps", value=8)])
    executor = SkillExecutorNode(cli_args=args)
    # skills that take a while, as a real robot's do: the plan still runs after the longest
    # delay below however fast the scoring (a symbolic plan of four skills took < 1.5 s)
    executor.world = SlowWorld(executor.world, 0.5)
    nodes = [LlmScorerNode(scorer=test_scorer, cli_args=args), AffordanceNode(cli_args=args),
             executor, planner]
    graph = Graph(nodes, SayCanCommander(name="f25_commander", cli_args=args))
    graph.planner, graph.log = planner, DispatchLog(planner)
    graph.commander.wait_until_ready(60)
    yield graph
    graph.close()


@pytest.mark.parametrize("delay_s", [0.0, 0.005, 0.05, 0.3, 0.8, 1.5])
def test_an_acknowledged_cancel_holds_and_no_skill_starts_after_it(graph, delay_s):
    commander, log = graph.commander, graph.log
    commander.reset_world(None)
    before = commander.world_state()["revision"]
    log.dispatched.clear()
    log.acknowledged.clear()
    commander.send_instruction("Bring me the sponge.")
    time.sleep(delay_s)
    # The first cancels may come before the planner has the instruction ("no plan is
    # running"): cancel until one is acknowledged or the plan has ended.
    while not log.acknowledged and not commander.is_task_complete():
        commander.cancel_task()
    result = wait_result(commander)
    assert log.acknowledged, "the plan ended before any cancel was acknowledged"
    acked = log.acknowledged[0]
    assert result["state"] == "cancelled", result
    late = [skill for at, skill in log.dispatched if at > acked]
    assert late == [], f"skills started after the cancel was acknowledged: {late}"
    executed = len([at for at, _ in log.dispatched if at <= acked])
    world = commander.world_state()
    assert world["revision"] - before <= executed     # only skills started before it moved it


def test_a_cancel_when_nothing_runs_says_so(graph):
    assert graph.commander.cancel_task() == "no plan is running"


def test_a_cancel_while_an_ended_plan_publishes_its_end_says_nothing_runs(graph):
    """Between a plan's terminal status and the release of the planner, a cancel has nothing
    to cancel (CI once saw 'cancelling' there, from the plan a test before had ended)."""
    node = graph.planner
    assert node._busy.acquire(timeout=30)
    node._cancel.set()                          # the ended plan had been cancelled
    node._finishing = True
    try:
        assert graph.commander.cancel_task() == "no plan is running"
    finally:
        node._finishing = False
        node._busy.release()


def test_the_next_instruction_right_after_a_terminal_status_is_accepted(graph):
    """The planner is free when it says the plan has ended (busy was released after)."""
    commander = graph.commander
    commander.reset_world(None)
    sent = []

    def on_status(msg):
        if msg.state in ("succeeded", "failed", "cancelled") and not sent:
            sent.append(msg.state)        # at once, from the status callback
            commander.instruction_pub.publish(String(data="Pick up the orange."))

    commander.on_status = on_status
    try:
        commander.send_instruction("Pick up the apple.")
        wait_for(lambda: sent, 120, "the first plan's end")
        commander.track_instruction("Pick up the orange.")
        result = wait_result(commander)
    finally:
        commander.on_status = None
    assert result["state"] != "rejected", result            # not "busy": it was planned
    assert result["instruction"] == "Pick up the orange." and result["steps"], result


def test_a_cancel_during_a_skill_is_cancelled_not_failed(graph):
    """A skill that ends because of the cancel (navigation, here any skill) reports the plan
    cancelled."""
    commander, planner = graph.commander, graph.planner
    execute = planner.executor_client.execute

    def slow_execute(skill, timeout_s=0.0):
        planner._cancel.wait(10)          # a skill that runs until it is cancelled
        from saycan_ros.planning.planner import ExecutionResult
        return ExecutionResult(False, "cancelled")

    planner.executor_client.execute = slow_execute
    try:
        commander.reset_world(None)
        commander.send_instruction("Bring me the sponge.")
        wait_for(lambda: any(s.state == "executing" for s in commander.statuses), 60,
                 "the first skill")
        assert commander.cancel_task().startswith("cancelling")
        result = wait_result(commander, 30)
    finally:
        planner.executor_client.execute = execute
    assert result["state"] == "cancelled", result


# -- 2, 3: a hung scorer, a dead one -----------------------------------------------------------
class HungScorer(Node):
    """A SkillScore server that takes the request and never answers in time (a stuck model)."""

    def __init__(self, service, cli_args=None):
        super().__init__("hung_scorer", cli_args=cli_args)
        from rclpy.callback_groups import ReentrantCallbackGroup
        from saycan_ros.ros.nodes.common import announce_alive
        self.release = threading.Event()
        self.create_service(SkillScore, service, self.on_score,
                            callback_group=ReentrantCallbackGroup())
        self.alive = announce_alive(self, service)

    def on_score(self, request, response):
        self.release.wait(120)
        return response


def test_a_cancel_ends_a_plan_that_waits_on_a_hung_scorer_at_once(ros):
    args = isolated("/f25hung")
    hung = HungScorer("/f25hung/saycan/llm/score")
    planner = PlannerNode(cli_args=args,
                          parameter_overrides=[Parameter("score_timeout_s", value=60.0)])
    graph = Graph([hung, AffordanceNode(cli_args=args), SkillExecutorNode(cli_args=args), planner],
                  SayCanCommander(name="f25hung_commander", cli_args=args))
    try:
        wait_subscribed(graph.commander)
        graph.commander.send_instruction("Bring me the sponge.")
        wait_for(lambda: any(s.state == "planning" for s in graph.commander.statuses), 30,
                 "planning")
        time.sleep(1.0)                                   # the scorer holds the request
        assert graph.commander.cancel_task().startswith("cancelling")
        result = wait_result(graph.commander, 20)         # not the 60 s score timeout
        assert result["state"] == "cancelled", result     # not failed by the score timeout
    finally:
        hung.release.set()
        graph.close()


def _node_process(module, params, log_path):
    args = [sys.executable, "-m", module, "--ros-args"]
    for key, value in params.items():
        args += ["-p", f"{key}:={value}"]
    return subprocess.Popen(args, stdout=open(log_path, "w"), stderr=subprocess.STDOUT,
                            env=dict(os.environ))


def test_a_killed_scorer_fails_the_plan_within_seconds_and_readiness_sees_it(ros, tmp_path):
    """SIGKILL of the language scorer mid-plan: the planner fails the plan by the scorer's
    liveliness (seconds), not by its 60 s timeout; the commander no longer calls the graph
    ready, although the dead node's services stay listed in the graph for ~20 s."""
    args = isolated("/f25kill")
    # the process's names under the same prefix (its own remap rules)
    scorer = subprocess.Popen(      # the small model: what is tested is its death
        [sys.executable, "-m", "saycan_ros.ros.nodes.llm_scorer_node", *args,
         "-p", f"model:={TEST_MODEL}"],
        stdout=open(tmp_path / "llm.log", "w"), stderr=subprocess.STDOUT, env=dict(os.environ))
    planner = PlannerNode(cli_args=args,
                          parameter_overrides=[Parameter("score_timeout_s", value=60.0)])
    graph = Graph([AffordanceNode(cli_args=args), SkillExecutorNode(cli_args=args), planner],
                  SayCanCommander(name="f25kill_commander", cli_args=args))
    try:
        graph.commander.wait_until_ready(120)
        graph.commander.send_instruction("Bring me the sponge.")
        wait_for(lambda: any(s.state == "executing" for s in graph.commander.statuses), 60,
                 "the first skill")
        scorer.send_signal(signal.SIGKILL)
        result = wait_result(graph.commander, 30)
        # by its liveliness ("is gone"), not by the 60 s score timeout; how soon: bench chaos
        assert result["state"] == "failed" and "is gone" in result["message"], result
        names = {n for n, _ in graph.commander.get_service_names_and_types()}
        with pytest.raises(TimeoutError, match="llm/score"):
            graph.commander.wait_until_ready(3)
        print(f"its service still listed: {'/f25kill/saycan/llm/score' in names}")
    finally:
        if scorer.poll() is None:
            scorer.kill()
        graph.close()


# -- 4: the world survives a restart of its node -----------------------------------------------
def test_the_world_survives_a_restart_of_the_executor_and_revisions_never_go_back(
        ros, tmp_path):
    session = uuid.uuid4().hex
    args = isolated("/f25world")
    params = {"session": session, "state_file": str(tmp_path / "world.json")}
    client_node = rclpy.create_node("f25world_client")
    ros.add_node(client_node)
    execute = WatchedClient(client_node, ExecuteSkill, "/f25world/saycan/execute")
    state = client_node.create_client(GetWorldState, "/f25world/saycan/world/state")

    def start():
        cmd = [sys.executable, "-m", "saycan_ros.ros.nodes.skill_executor_node", *args]
        for key, value in params.items():
            cmd += ["-p", f"{key}:={value}"]
        proc = subprocess.Popen(cmd, stdout=open(tmp_path / "exec.log", "a"),
                                stderr=subprocess.STDOUT, env=dict(os.environ))
        wait_for(lambda: execute.alive, 60, "the executor")
        return proc

    proc = start()
    try:
        for skill in ("find an apple", "pick up the apple"):
            answer = execute.call(ExecuteSkill.Request(skill=skill), 10, "execute")
            assert answer.success, answer.message
        before = json.loads(call_service(client_node, state, GetWorldState.Request(), 10,
                                         "state").state_json)
        assert before["holding"] == "apple"
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        wait_for(lambda: execute.gone(), 10, "the executor's death")
        proc = start()
        after = json.loads(call_service(client_node, state, GetWorldState.Request(), 10,
                                        "state").state_json)
        assert after["holding"] == "apple" and after["robot_at"] == before["robot_at"]
        assert after["objects"] == before["objects"]
        assert after["revision"] > before["revision"]
        answer = execute.call(ExecuteSkill.Request(skill="put down the apple"), 10, "execute")
        assert answer.success and answer.state_revision > after["revision"]
    finally:
        proc.kill()
        ros.remove_node(client_node)
        client_node.destroy_node()
    # another session (a new launch) starts from the default scene
    fresh = SkillExecutorNode(cli_args=isolated("/f25fresh"), parameter_overrides=[
        Parameter("session", value="another"), Parameter("state_file",
                                                         value=str(tmp_path / "world.json"))])
    try:
        assert fresh.world.holding is None
    finally:
        fresh.destroy_node()


# -- 5: services that blocked each other ---------------------------------------------------------
@pytest.fixture()
def client(ros):
    node = rclpy.create_node(f"f25_client_{uuid.uuid4().hex[:6]}")
    ros.add_node(node)
    yield node
    ros.remove_node(node)
    node.destroy_node()


def _calls_side_by_side(node, client, requests, timeout):
    """Send every request at once; (answer, seconds) per request (None: no answer)."""
    out = [None] * len(requests)
    started = time.monotonic()

    def one(i, request):
        try:
            out[i] = (call_service(node, client, request, timeout, "call"),
                      time.monotonic() - started)
        except ServiceCallError:
            out[i] = (None, time.monotonic() - started)

    threads = [threading.Thread(target=one, args=(i, r)) for i, r in enumerate(requests)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def test_impossible_revisions_are_answered_at_once_and_block_nobody(graph, client):
    score = client.create_client(SkillScore, "/f25/saycan/affordance/score")
    impossible = SkillScore.Request(instruction="x", skills=["find an apple"],
                                    min_state_revision=10 ** 9)
    normal = SkillScore.Request(instruction="x", skills=["find an apple"])
    answers = _calls_side_by_side(client, score, [impossible] * 8 + [normal], 30)
    for answer, _ in answers[:8]:
        assert answer is not None and not answer.success
        assert "does not exist" in answer.message, answer.message
    answer, seconds = answers[8]
    assert answer.success, answer.message


def test_the_language_scorer_refuses_repeated_candidates(graph, client):
    score = client.create_client(SkillScore, "/f25/saycan/llm/score")
    request = SkillScore.Request(instruction="Bring me a coke.",
                                 skills=["find a coke can"] * 400)
    answer = call_service(client, score, request, 30, "llm")
    assert not answer.success and "repeated" in answer.message


class SlowWorld:
    """The executor's world with skills that take a while (a real base drives for seconds)."""

    def __init__(self, world, seconds):
        self.world, self.seconds = world, seconds

    def __getattr__(self, name):
        return getattr(self.world, name)

    def execute(self, skill):
        time.sleep(self.seconds)
        return self.world.execute(skill)


def test_a_second_execution_is_refused_while_one_runs_not_queued(ros, client):
    node = SkillExecutorNode(cli_args=isolated("/f25busy"))
    node.world = SlowWorld(node.world, 1.5)
    spinner = Spinner([node])
    try:
        execute = client.create_client(ExecuteSkill, "/f25busy/saycan/execute")
        state = client.create_client(GetWorldState, "/f25busy/saycan/world/state")
        # One answered call first: a service reports ready once it reads requests, but its
        # answers reach a new client only once the reply route has matched too (DDS); 20 calls
        # fired in that window can lose an answer (seen in CI: 1 run in 3)
        warm = call_service(client, execute, ExecuteSkill.Request(skill="no such skill"), 30,
                            "warm-up")
        assert not warm.success and "no such skill" in warm.message
        requests = [ExecuteSkill.Request(skill="go to the table")] * 20
        answers = _calls_side_by_side(client, execute, requests, 30)
        ran = [a for a, _ in answers if a is not None and a.success]
        busy = [a for a, s in answers if a is not None and not a.success]
        assert all(a is not None for a, _ in answers)            # every call answered
        assert len(ran) == 1 and len(busy) == 19
        assert all("busy" in a.message for a in busy)            # refused, not queued
        # the state service answers while a skill runs (the skill takes 1.5 s)
        worker = threading.Thread(target=call_service, args=(
            client, execute, ExecuteSkill.Request(skill="go to the far counter"), 30, "exec"))
        worker.start()
        time.sleep(0.3)
        call_service(client, state, GetWorldState.Request(), 10, "state")
        assert worker.is_alive(), "the state was answered only after the skill"
        worker.join()
    finally:
        spinner.close()


# -- 7: an unsigned field --------------------------------------------------------------------------
def test_a_negative_state_revision_is_a_clear_error_not_a_system_error(client):
    source = ServiceScoreSource(client, "/f25none/saycan/affordance/score", "affordance", 1.0,
                                None)
    with pytest.raises(PlannerError, match="min_state_revision must be in 0..2"):
        source.score("x", [], ["done"], min_state_revision=-1)


# -- 9, 10: inputs that took the executor down or ran a prefix ---------------------------------------
def test_a_yaml_alias_bomb_and_odd_values_are_refused_and_the_executor_lives(graph, client):
    reset = client.create_client(ResetWorld, "/f25/saycan/world/reset")
    for kind, fields, may_succeed, reason in fuzz_reset_requests():    # the valid one last
        answer = call_service(client, reset, ResetWorld.Request(**fields), 10, kind)
        assert answer.success == may_succeed and reason in answer.message, (kind, answer.message)
        assert len(answer.message) < 1000


def test_a_nul_byte_never_reaches_an_executor(graph, client):
    execute = client.create_client(ExecuteSkill, "/f25/saycan/execute")
    before = graph.commander.world_state()
    with pytest.raises(ServiceCallError, match="NUL byte"):
        call_service(client, execute, ExecuteSkill.Request(skill="go to the table\x00; rm -rf /"),
                     10, "execute")
    answer = call_service(client, execute, ExecuteSkill.Request(skill="go to the table\x01"), 10,
                          "execute")
    assert not answer.success and "control characters" in answer.message
    with pytest.raises(ValueError, match="NUL byte"):
        graph.commander.send_instruction("Bring me the sponge.\x00 and go to the moon")
    assert graph.commander.world_state() == before
