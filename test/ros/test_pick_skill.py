"""The pick_skill executor node (learned BC policy) and the affordance node's learned pick
value function over real DDS, against a kitchen_sim subprocess (the robot).

The pick node and the affordance node run in this process (their own rclpy context), the
simulator in a child process: camera/image_raw, joint_states, servo twists, gripper and arm
trajectory commands all cross DDS. The models are the real ones (``models/`` or
``$SAYCAN_MODELS_DIR``); without weights the module is skipped. ROS_DOMAIN_ID 90..99,
discovery on localhost only.
"""
import os

os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
DOMAIN_ID = int(os.environ.get("SAYCAN_PICK_TEST_DOMAIN_ID") or 90 + os.getpid() % 10)

import threading  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

rclpy = pytest.importorskip("rclpy", reason="rclpy (ros-kilted-rclpy) is not installed")

from sim_graph import ROUTER_MARGIN_S, WIND_DOWN_S, SimGraph, running  # noqa: E402

from saycan_ros.skills.pick.policy import learned_pick_available, learned_value_available  # noqa: E402
from saycan_ros.robot.cameras import HEAD_CAMERA_SIZE  # noqa: E402

if not (learned_pick_available() and learned_value_available()):
    pytest.skip("no trained pick policy / value weights (models/bc_pick.pt, value_pick.pt)",
                allow_module_level=True)

from rclpy.parameter import Parameter  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402

from saycan_ros.planning.checker import TimeoutProbe, check_skill_executor  # noqa: E402
from saycan_ros.core.kitchen import load_kitchen  # noqa: E402
from saycan_ros.ros.nodes.affordance_node import AffordanceNode  # noqa: E402
from saycan_ros.ros.nodes.common import AFFORDANCE_SERVICE, call_service  # noqa: E402
from saycan_ros.ros.nodes.pick_skill_node import PickSkillNode  # noqa: E402
from saycan_ros.ros.nodes.routing import RoutingExecutor  # noqa: E402
from saycan_ros.planning.skill_registry import load_registry  # noqa: E402
from saycan_ros.core.skills import load_skills  # noqa: E402
from saycan_ros.srv import ExecuteSkill, SkillScore  # noqa: E402

pytestmark = pytest.mark.timeout(180)
#: An easy, uncluttered pick for the policy: a can alone on the far counter.
EASY = {"robot_at": "far counter", "objects": {"coke can": "far counter"},
        "absent": sorted(o for o, at in load_kitchen().default_scene().items()
                         if at == "far counter" and o != "coke can")}


class Graph(SimGraph):
    def __init__(self, tmp: Path):
        super().__init__(tmp, DOMAIN_ID, "pick_test_client")
        self.pick = PickSkillNode(context=self.context)
        self.affordance = AffordanceNode(context=self.context, parameter_overrides=[
            Parameter("affordance_file", value="affordance_sim.yaml")])
        self.spin(self.pick, self.affordance)
        self.skills = load_skills(load_kitchen())
        self.router = RoutingExecutor(self.client, load_registry(None, self.skills),
                                      timeout_s=ROUTER_MARGIN_S)
        self.pick_client = self.client.create_client(ExecuteSkill, "/pick_skill")
        self.cancel_client = self.client.create_client(Trigger, "/pick_skill/cancel")
        self.score_client = self.client.create_client(SkillScore, AFFORDANCE_SERVICE)
        self.joint_log: list[tuple[float, tuple]] = []
        self.client.create_subscription(JointState, "/joint_states", self._on_joints, 10)

    def _on_joints(self, msg):
        self.joint_log.append((time.monotonic(), tuple(msg.position)))
        del self.joint_log[:-200]

    def score(self, skills, revision=0):
        return call_service(self.client, self.score_client, SkillScore.Request(
            instruction="test", skills=list(skills), min_state_revision=revision), 30, "score")

    def ready(self) -> bool:
        return self.pick.sensors_ready() and bool(self.joint_log)

    def arm_still(self, seconds=0.5) -> bool:
        """The arm joints did not move over at least ``seconds`` and five joint states (on a
        loaded machine the in-process simulator publishes them slower than its 50 Hz)."""
        start = time.monotonic()
        time.sleep(seconds)
        deadline = start + 20.0
        while len([t for t, _ in self.joint_log if t >= start]) < 5 and time.monotonic() < deadline:
            time.sleep(0.05)
        recent = [p for t, p in self.joint_log if t >= start]
        assert len(recent) >= 5, "no joint states"
        spread = np.ptp(np.array([p[:3] for p in recent]), axis=0)
        return bool(np.all(spread < 1e-6))


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    yield from running(Graph(tmp_path_factory.mktemp("pick_skill")))


def test_pick_succeeds_over_dds(graph):
    graph.reset(EASY, seed=1)
    assert graph.state()["holding"] == ""
    result = graph.router.execute("pick up the coke can", 90.0)     # routed to /pick_skill
    assert result.success, result.message
    assert result.message == "holding the coke can" and result.state_revision > 0
    state = graph.state()
    assert state["holding"] == "coke can"                             # the simulator agrees
    assert 1 <= graph.pick.actions_taken <= 50                        # the policy ran the loop
    assert graph.arm_still()                                          # tucked and at rest


def test_pick_when_holding_fails_without_moving(graph):
    graph.reset({"robot_at": "far counter", "holding": "sponge"})
    result = graph.router.execute("pick up the coke can", 30.0)
    assert not result.success and "already holding the sponge" in result.message
    assert graph.state()["holding"] == "sponge"


def test_pick_of_an_absent_object_fails(graph):
    graph.reset({**EASY, "absent": [*EASY["absent"], "sponge"]}, seed=2)
    result = graph.router.execute("pick up the sponge", 60.0)
    assert not result.success and "failed to pick up the sponge" in result.message
    assert graph.state()["holding"] != "sponge"


def test_cancel_leaves_the_arm_stopped(graph):
    graph.reset(EASY, seed=3)
    box = {}
    worker = threading.Thread(target=lambda: box.update(
        result=graph.router.execute("pick up the coke can", 60.0)))
    worker.start()
    time.sleep(1.5)                       # mid-reach
    assert graph.router.cancel()          # through /pick_skill/cancel
    worker.join(10)
    result = box["result"]
    assert not result.success and "cancelled" in result.message, result.message
    assert graph.arm_still()
    reply = call_service(graph.client, graph.cancel_client, Trigger.Request(), 5, "cancel")
    assert not reply.success and "no skill" in reply.message


def test_timeout_leaves_the_arm_stopped(graph):
    graph.reset(EASY, seed=4)
    result = graph.router.execute("pick up the coke can", 1.0)
    assert not result.success and "timed out after 1 s" in result.message, result.message
    assert graph.arm_still()
    assert graph.state()["holding"] == ""


def test_unknown_and_unrouted_skills_are_rejected(graph):
    result = graph.router.execute("pick up the moon", 5.0)
    assert not result.success and "unregistered skill" in result.message
    for text, expected in (("pick up the moon", "unknown skill"),
                           ("go to the table", "/navigate_skill"),
                           ("put down the apple", "/place_skill")):
        reply = call_service(graph.client, graph.pick_client,
                             ExecuteSkill.Request(skill=text, timeout_s=5.0), 10, "pick")
        assert not reply.success and expected in reply.message.lower(), (text, reply.message)


def test_pick_node_passes_the_executor_contract(graph):
    # Nothing on the counter: the first pick runs its 50 actions and fails (the form of the
    # result is what counts), so the hand stays empty and the timeout probe really runs.
    graph.reset({**EASY, "absent": [*EASY["absent"], "coke can"], "objects": {}}, seed=5)
    router = RoutingExecutor(graph.client, load_registry(None, graph.skills), timeout_s=120.0)
    results = check_skill_executor(router, ["pick up the coke can"],
                                   timeout_probe=TimeoutProbe("pick up the coke can", 1.0, WIND_DOWN_S),
                                   name="pick_skill")
    assert not results[0].success and "nothing in the gripper" in results[0].message


# -- the affordance node with the learned pick value function ----------------------------------
def test_affordance_node_scores_all_pick_candidates_in_one_batch(graph):
    revision = graph.reset(EASY, seed=6)
    model = graph.affordance.scorer.models["pick"]
    assert graph.affordance.observe and type(model).__name__ == "LearnedPickAffordance"
    picks = [s.text for s in graph.skills if s.kind == "pick"]
    others = ["go to the table", "done"]
    before = model.calls
    reply = graph.score(picks + others, revision)
    assert reply.success, reply.message
    assert model.calls == before + 1                      # one forward pass for all picks
    scores = dict(zip(picks + others, reply.scores))
    assert len(reply.scores) == len(picks) + 2 and all(0.0 <= s <= 1.0 for s in reply.scores)
    assert scores["done"] == pytest.approx(0.1)
    # The same observation scored straight through the model: the node's batch is that model.
    raw = dict(zip(picks + others, reply.raw))
    assert len({round(raw[p], 6) for p in picks}) > 1    # it depends on the skill text


def test_value_function_sees_what_is_in_front_of_the_robot(graph):
    """Averaged over three layouts (the value is not right on every single image: at seed 7
    the shipped model gives the can in view only 0.25, in-process as over DDS)."""
    picks = ["pick up the coke can", "pick up the sponge"]
    here, full = [], []
    for seed in (7, 8, 9):
        revision = graph.reset(EASY, seed=seed)                                # coke can in view
        here.append(graph.score(picks, revision).scores)
        revision = graph.reset({"robot_at": "far counter", "holding": "sponge"}, seed=seed)
        full.append(graph.score(picks, revision).scores)                       # hand full
    can_here, can_full = np.mean(here, axis=0), np.mean(full, axis=0)
    assert can_here[0] > 0.5, here
    assert can_full[0] < can_here[0] - 0.3, (full, here)
    assert can_here[1] < can_here[0], here                                     # sponge absent


def test_affordance_node_fails_cleanly_without_camera(graph):
    # A node told to observe on a topic nobody publishes: a clean failure, not a stale score.
    node = AffordanceNode(context=graph.context, cli_args=[
        "--ros-args", "-r", "__node:=affordance_blind", "-r", "camera/image_raw:=/nobody/image",
        "-r", f"{AFFORDANCE_SERVICE}:=/blind/score"],
        parameter_overrides=[Parameter("affordance_file", value="affordance_sim.yaml"),
                             Parameter("sensor_timeout_s", value=0.5)])
    graph.spinning.executor.add_node(node)
    try:
        client = graph.client.create_client(SkillScore, "/blind/score")
        reply = call_service(graph.client, client, SkillScore.Request(
            instruction="x", skills=["pick up the coke can"]), 20, "blind")
        assert not reply.success and "camera/image_raw" in reply.message, reply.message
    finally:
        graph.spinning.executor.remove_node(node)
        node.destroy_node()


# -- saycan eval --world nodes: the world behind the planner is the node graph ---------------
def test_node_graph_world_runs_an_errand(graph):
    from saycan_ros.ros.nodes.graph_world import NodeGraphWorld
    from saycan_ros.core.tasks import TaskInit
    kitchen = load_kitchen()
    other = 90 + (DOMAIN_ID - 90 + 5) % 10            # its own kitchen_sim, apart from `graph`
    world = NodeGraphWorld(kitchen, graph.skills, domain_id=other)
    try:
        init = TaskInit.from_mapping({**EASY, "robot_at": "table"}, kitchen)
        world.reset(init, seed=1)
        assert world.robot_at == "table" and world.holding is None
        assert world.object_location("coke can") == "far counter"
        for text in ("find a coke can", "pick up the coke can"):
            outcome = world.execute(graph.skills.get(text))
            assert outcome.success, (text, outcome.message)
        snap = world.snapshot()
        assert snap.robot_at == "far counter" and snap.holding == "coke can"
        obs = world.observation()
        assert obs["image"].shape == (HEAD_CAMERA_SIZE, HEAD_CAMERA_SIZE, 3)
        assert obs["state"][4] == 1.0
        done = world.execute(graph.skills.get("done"))
        assert done.success
    finally:
        world.close()
