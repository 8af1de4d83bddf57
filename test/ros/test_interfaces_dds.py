"""The generated saycan_ros interfaces over real DDS, between two processes.

A child process (sys.executable) serves saycan_ros/srv/SkillScore and publishes
saycan_ros/msg/SkillScores and WorldState; this process calls the service and
receives the messages, and checks every value exactly. This proves the rosidl
build (generated Python, C typesupport, Fast DDS typesupport) end to end.

DDS stays on this machine: ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST in both
processes, and one ROS_DOMAIN_ID (SAYCAN_TEST_DOMAIN_ID, else ROS_DOMAIN_ID, else 57).
Topic and service names carry a per-run token, so parallel runs in the same
domain cannot answer each other.
"""

import os

# Before rclpy is imported anywhere in this process: DDS must never leave the machine.
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
os.environ.setdefault("ROS_DOMAIN_ID", "57")
# Both processes use this domain: SAYCAN_TEST_DOMAIN_ID if set, else the session's ROS_DOMAIN_ID.
TEST_DOMAIN_ID = int(os.environ.get("SAYCAN_TEST_DOMAIN_ID") or os.environ["ROS_DOMAIN_ID"])

import subprocess  # noqa: E402
import sys  # noqa: E402
import textwrap  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402

import pytest  # noqa: E402

rclpy = pytest.importorskip("rclpy", reason="rclpy (ros-kilted-rclpy) is not installed")

from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy  # noqa: E402

from saycan_ros.action import FollowInstruction  # noqa: E402
from saycan_ros.msg import PlanStatus, SkillScores, WorldState  # noqa: E402
from saycan_ros.srv import ExecuteSkill, ResetWorld, SkillScore  # noqa: E402

SKILLS = ["pick up the sponge", "go to the table", "done"]
INSTRUCTION = "I spilled my coke, can you bring me something to clean it up?"
HISTORY = ["find a sponge"]
BIG_REVISION = 2**40 + 7  # needs the full uint64

SERVER = textwrap.dedent(
    """
    import os, sys
    assert os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST"
    import rclpy
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from saycan_ros.msg import SkillScores, WorldState
    from saycan_ros.srv import SkillScore

    prefix = sys.argv[1]
    rclpy.init(domain_id=int(os.environ["ROS_DOMAIN_ID"]))
    node = rclpy.create_node("dds_test_server_" + prefix.rsplit("_", 1)[-1])
    latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL)
    scores_pub = node.create_publisher(SkillScores, prefix + "/scores", latched)
    world_pub = node.create_publisher(WorldState, prefix + "/world", latched)

    def handle(request, response):
        raw = [float(len(s)) for s in request.skills]
        total = sum(raw)
        response.raw = raw
        response.scores = [r / total for r in raw]
        response.success = True
        response.message = "%s|%d|%d" % (request.instruction, len(request.history),
                                         request.min_state_revision)
        msg = SkillScores()
        msg.header.frame_id = "map"
        msg.instruction = request.instruction
        msg.step = len(request.history)
        msg.skills = list(request.skills)
        msg.llm = list(response.scores)
        msg.affordance = [1.0 / (i + 1) for i in range(len(raw))]
        msg.combined = [a * b for a, b in zip(msg.llm, msg.affordance)]
        msg.selected = request.skills[max(range(len(raw)), key=lambda i: msg.combined[i])]
        msg.strategy = "length"
        scores_pub.publish(msg)
        world = WorldState()
        world.header.frame_id = "map"
        world.revision = request.min_state_revision
        world.robot_location = "table"
        world.robot_pose.position.x, world.robot_pose.position.y = 1.5, -2.25
        world.robot_pose.orientation.z, world.robot_pose.orientation.w = 0.6, 0.8
        world.holding = "sponge"
        world.objects = ["sponge", "coke"]
        world.object_locations = ["gripper", "table"]
        world_pub.publish(world)
        return response

    node.create_service(SkillScore, prefix + "/score", handle)
    print("READY", flush=True)
    try:
        rclpy.spin(node)
    except (KeyboardInterrupt, rclpy.executors.ExternalShutdownException):
        pass
    """
)


def test_generated_types_construct():
    """All interfaces import and carry the fields the nodes rely on."""
    msg = SkillScores(skills=["a", "b"], llm=[0.25, 0.75], selected="b")
    assert list(msg.llm) == [0.25, 0.75] and msg.selected == "b"
    world = WorldState(revision=BIG_REVISION, holding="sponge")
    world.robot_pose.orientation.w = 1.0
    status = PlanStatus(state=PlanStatus.STATE_EXECUTING)
    assert status.state == "executing" and PlanStatus.STATE_REJECTED == "rejected"
    goal = FollowInstruction.Goal(instruction="Bring me a coke.", max_steps=5)
    assert goal.strategy == "" and goal.max_steps == 5
    assert FollowInstruction.Result().final_state.robot_location == ""
    assert list(FollowInstruction.Feedback(top_scores=[0.5]).top_scores) == [0.5]
    assert world.revision == BIG_REVISION
    status = PlanStatus(state="executing", step=3, plan=["find a sponge"])
    assert status.step == 3 and list(status.plan) == ["find a sponge"]
    assert hasattr(SkillScore.Request(), "min_state_revision")
    assert hasattr(SkillScore.Response(), "raw")
    req = ExecuteSkill.Request(skill="pick up the sponge", timeout_s=2.0)
    assert req.skill == "pick up the sponge"
    assert hasattr(ExecuteSkill.Response(), "state_revision")
    assert ResetWorld.Request(init="{}", seed=-1).seed == -1
    assert hasattr(ResetWorld.Response(), "state_revision")


def _spin_until(executor, predicate, timeout, proc):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        if proc.poll() is not None:
            return predicate()
        executor.spin_once(timeout_sec=0.1)
    return predicate()


@pytest.mark.timeout(120)
def test_skill_score_service_and_topics_between_processes(tmp_path):
    token = uuid.uuid4().hex[:8]
    prefix = "/saycan_dds_test_" + token
    env = dict(os.environ)
    env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    env["ROS_DOMAIN_ID"] = str(TEST_DOMAIN_ID)
    env.pop("ROS_STATIC_PEERS", None)
    server_log = tmp_path / "server.log"
    context = rclpy.Context()
    node = executor = None
    with open(server_log, "w") as log:
        # cwd outside the source tree, so that ./saycan_ros cannot shadow the installed package.
        proc = subprocess.Popen(
            [sys.executable, "-c", SERVER, prefix],
            cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT,
        )
    try:
        rclpy.init(context=context, domain_id=TEST_DOMAIN_ID)
        node = rclpy.create_node("dds_test_client_" + token, context=context)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        latched = QoSProfile(
            depth=1,
            reliability=ReliabilityPolicy.RELIABLE,
            durability=DurabilityPolicy.TRANSIENT_LOCAL,
        )
        scores, worlds = [], []
        node.create_subscription(SkillScores, prefix + "/scores", scores.append, latched)
        node.create_subscription(WorldState, prefix + "/world", worlds.append, latched)
        client = node.create_client(SkillScore, prefix + "/score")

        ready = _spin_until(executor, client.service_is_ready, 60, proc)
        assert ready, "service never appeared; server exit=%s, log:\n%s" % (
            proc.poll(), server_log.read_text())

        request = SkillScore.Request(
            instruction=INSTRUCTION, history=HISTORY, skills=SKILLS,
            min_state_revision=BIG_REVISION)
        future = client.call_async(request)
        _spin_until(executor, future.done, 30, proc)
        assert future.done(), "no service response; server log:\n" + server_log.read_text()
        response = future.result()

        raw = [18.0, 15.0, 4.0]
        expected = [r / 37.0 for r in raw]
        assert [len(s) for s in SKILLS] == [18, 15, 4]
        assert list(response.raw) == raw
        assert list(response.scores) == expected
        assert response.success is True
        assert response.message == "%s|1|%d" % (INSTRUCTION, BIG_REVISION)

        got = _spin_until(executor, lambda: scores and worlds, 30, proc)
        assert got, "messages not received (scores=%d, worlds=%d); server log:\n%s" % (
            len(scores), len(worlds), server_log.read_text())
        msg = scores[0]
        assert msg.header.frame_id == "map"
        assert msg.instruction == INSTRUCTION
        assert msg.step == 1
        assert list(msg.skills) == SKILLS
        assert list(msg.llm) == expected
        assert list(msg.affordance) == [1.0, 0.5, 1.0 / 3.0]
        assert list(msg.combined) == [expected[0], expected[1] * 0.5, expected[2] / 3.0]
        assert msg.selected == "pick up the sponge"
        assert msg.strategy == "length"
        world = worlds[0]
        assert world.revision == BIG_REVISION
        pose = world.robot_pose
        assert (pose.position.x, pose.position.y, pose.orientation.z, pose.orientation.w) == (
            1.5, -2.25, 0.6, 0.8)
        assert world.robot_location == "table" and world.holding == "sponge"
        assert list(world.objects) == ["sponge", "coke"]
        assert list(world.object_locations) == ["gripper", "table"]
        assert proc.poll() is None, "server died:\n" + server_log.read_text()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        if executor is not None:
            executor.shutdown()
        if node is not None:
            node.destroy_node()
        if context.ok():
            rclpy.shutdown(context=context)


def test_plan_result_message_carries_what_to_dict_says():
    """saycan/result is typed (PlanResult with PlanStep[]); read back it is the core's dict."""
    import numpy as np
    from builtin_interfaces.msg import Time

    from saycan_ros.msg import PlanResult as PlanResultMsg
    from saycan_ros.planning.planner import PlanResult, StepRecord
    from saycan_ros.ros.nodes.conversions import plan_result_dict, plan_result_to_msg
    skills = [f"skill {i}" for i in range(7)]
    llm = np.linspace(0.05, 0.3, 7)
    steps = [StepRecord(1, skills, llm, np.ones(7), llm, "skill 6", True, "ok", 0.5),
             StepRecord(2, skills, llm[::-1], np.ones(7), llm[::-1], "skill 0", False,
                        "it slipped", 0.25, note="why")]
    result = PlanResult("Bring me a coke.", "saycan", "failed", "'skill 0' failed", steps)
    msg = plan_result_to_msg(result, Time(sec=1, nanosec=2))
    assert msg.state == PlanResultMsg.STATE_FAILED and len(msg.steps) == 2
    assert list(msg.steps[0].top_skills) == ["skill 6", "skill 5", "skill 4", "skill 3", "skill 2"]
    back, expected = plan_result_dict(msg), result.to_dict()
    assert back["plan"] == expected["plan"] == ["skill 6"]
    assert back["steps"][1]["note"] == "why" and "note" not in back["steps"][0]
    for got, want in zip(back["steps"], expected["steps"]):
        assert got.keys() == want.keys()
        assert [t["skill"] for t in got["top"]] == [t["skill"] for t in want["top"]]
        assert [t["llm"] for t in got["top"]] == pytest.approx([t["llm"] for t in want["top"]])
