"""Two robots side by side: two SayCan graphs under /robot1 and /robot2 in one DDS domain, each
planning its own instruction on its own world, with no crosstalk (the stack's names are
relative to the node's namespace)."""
import threading
import time

import pytest

rclpy = pytest.importorskip("rclpy")
from rclpy.executors import MultiThreadedExecutor  # noqa: E402

from saycan_ros.msg import PlanStatus  # noqa: E402
from saycan_ros.ros.commander import SayCanCommander  # noqa: E402
from saycan_ros.ros.nodes.affordance_node import AffordanceNode  # noqa: E402
from saycan_ros.ros.nodes.llm_scorer_node import LlmScorerNode  # noqa: E402
from saycan_ros.ros.nodes.planner_node import PlannerNode  # noqa: E402
from saycan_ros.ros.nodes.skill_executor_node import SkillExecutorNode  # noqa: E402

ROBOTS = {"robot1": ("Go to the trash can.", "trash can"),
          "robot2": ("Go to the far counter.", "far counter")}


def test_two_namespaced_graphs_plan_their_own_instructions(test_scorer):
    context = rclpy.Context()
    rclpy.init(context=context)
    executor = MultiThreadedExecutor(num_threads=8, context=context)
    nodes, users, heard = [], {}, {ns: [] for ns in ROBOTS}
    for ns in ROBOTS:
        kw = {"namespace": ns, "context": context}
        nodes += [LlmScorerNode(scorer=test_scorer, **kw), AffordanceNode(**kw),
                  SkillExecutorNode(**kw), PlannerNode(**kw)]
        users[ns] = SayCanCommander(name=f"user_{ns}", **kw)
        # an unfiltered listener on the robot's status topic (the commander keeps only its own)
        listener = rclpy.create_node("listener", **kw)
        listener.create_subscription(PlanStatus, "saycan/status",
                                     lambda msg, ns=ns: heard[ns].append(msg.instruction), 10)
        nodes.append(listener)
    for node in nodes + list(users.values()):
        executor.add_node(node)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    try:
        for ns, user in users.items():
            user.wait_until_ready(60)
            assert user.resolve_topic_name("saycan/instruction") == f"/{ns}/saycan/instruction"
        for ns, (text, _) in ROBOTS.items():       # both plans run at the same time
            users[ns].send_instruction(text)
        deadline = time.monotonic() + 180
        while not all(u.is_task_complete() for u in users.values()):
            assert time.monotonic() < deadline, "no result from both robots"
            time.sleep(0.05)
        for ns, (text, place) in ROBOTS.items():
            result = users[ns].get_result()
            assert result["state"] == "succeeded" and result["instruction"] == text, result
            assert result["plan"] == [f"go to the {place}", "done"], result
            assert users[ns].world_state()["robot_at"] == place     # its own world moved
            # every status on its topic was about its own instruction (or the idle one)
            assert set(heard[ns]) <= {"", text} and text in heard[ns], heard[ns]
            assert users[ns].scores and {m.instruction for m in users[ns].scores} == {text}
    finally:
        executor.shutdown(timeout_sec=2)
        for node in nodes + list(users.values()):
            node.destroy_node()
        rclpy.shutdown(context=context)
