"""The graph at run time: a node process that dies is named at once, with its exit code and its
last log line, instead of being found out by a timeout; a parameter change that a node cannot
honour while running is refused with the reason."""
import pytest

rclpy = pytest.importorskip("rclpy")

from saycan_ros.ros import graph  # noqa: E402
from saycan_ros.ros.commander import GraphDown, SayCanCommander  # noqa: E402


def test_a_node_that_dies_is_named_within_seconds(tmp_path):
    # a strategy the planner node does not run: it stops at start with a named error
    procs = graph.start_processes({"planner": {"strategy": "foo"}}, include=("planner",),
                                  log_dir=str(tmp_path))
    context = rclpy.Context()
    rclpy.init(context=context)
    commander = SayCanCommander(name="watching_user", context=context)
    try:
        assert graph.exited(procs) == ""            # just started: still running
        # GraphDown, not TimeoutError: the death was seen before the wait ran out
        with pytest.raises(GraphDown) as caught:
            commander.wait_until_ready(timeout_s=120, gone=lambda: graph.exited(procs))
        text = str(caught.value)
        assert "node 'planner' exited with code" in text and "foo" in text, text
        assert str(tmp_path / "planner.log") in text
    finally:
        commander.destroy_node()
        rclpy.shutdown(context=context)
        graph.stop_processes(procs)


def test_a_parameter_change_at_run_time_is_refused_with_the_reason():
    """The nodes read their parameters at start: `ros2 param set` on one (here through the
    parameter services over DDS, as the CLI does it) is refused, not accepted and ignored."""
    from rclpy.executors import MultiThreadedExecutor
    from rclpy.parameter import Parameter
    from rclpy.parameter_client import AsyncParameterClient

    from saycan_ros.ros.nodes.planner_node import PlannerNode

    context = rclpy.Context()
    rclpy.init(context=context)
    executor = MultiThreadedExecutor(num_threads=2, context=context)
    planner = PlannerNode(context=context)
    user = rclpy.create_node("param_user", context=context)
    executor.add_node(planner)
    executor.add_node(user)
    try:
        described = planner.describe_parameter("max_steps")
        assert described.read_only and "skills per instruction" in described.description
        client = AsyncParameterClient(user, "planner")
        assert client.wait_for_services(timeout_sec=30)
        future = client.set_parameters([Parameter("strategy", value="foo"),
                                        Parameter("max_steps", value=-5)])
        executor.spin_until_future_complete(future, timeout_sec=30)
        results = future.result().results
        assert [r.successful for r in results] == [False, False]
        assert all("read-only" in r.reason for r in results), [r.reason for r in results]
        assert planner.get_parameter("strategy").value == "saycan"
        assert planner.get_parameter("max_steps").value == 20
    finally:
        executor.shutdown()
        planner.destroy_node()
        user.destroy_node()
        rclpy.shutdown(context=context)
