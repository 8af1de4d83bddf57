"""The graph runtime watches its node processes: a node that dies is named at once, with its
exit code and its last log line, instead of being found out by a timeout."""
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
