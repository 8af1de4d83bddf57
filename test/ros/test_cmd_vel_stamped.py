"""cmd_vel as geometry_msgs/TwistStamped (``cmd_vel_stamped: true``, what ros2_control's
diff_drive_controller takes since Jazzy): the navigate skill publishes stamped twists in the
base frame and kitchen_sim drives on them, over DDS."""
import math
import threading
import time

import pytest

rclpy = pytest.importorskip("rclpy")
from geometry_msgs.msg import TwistStamped  # noqa: E402
from nav_msgs.msg import Odometry  # noqa: E402
from rclpy.executors import MultiThreadedExecutor  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402

from saycan_ros.ros.nodes.kitchen_sim_node import KitchenSimNode  # noqa: E402
from saycan_ros.ros.nodes.navigate_skill_node import NavigateSkillNode  # noqa: E402


def test_stamped_cmd_vel_drives_the_simulated_base():
    context = rclpy.Context()
    rclpy.init(context=context)
    stamped = [Parameter("cmd_vel_stamped", value=True)]
    sim = KitchenSimNode(context=context, parameter_overrides=stamped + [
        Parameter("camera_rate_hz", value=1.0), Parameter("init", value='{"robot_at": "table"}')])
    nav = NavigateSkillNode(context=context, parameter_overrides=stamped)
    probe = rclpy.create_node("stamped_probe", context=context)
    seen, odom = [], []
    probe.create_subscription(TwistStamped, "cmd_vel", seen.append, 10)
    probe.create_subscription(Odometry, "odom", odom.append, 10)
    executor = MultiThreadedExecutor(num_threads=4, context=context)
    for node in (sim, nav, probe):
        executor.add_node(node)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()

    def wait(condition, what, publish=None):
        end = time.monotonic() + 20
        while not condition():
            assert time.monotonic() < end, what
            if publish is not None:
                publish()
            time.sleep(0.05)

    try:
        wait(lambda: odom and probe.count_publishers("cmd_vel") and sim.count_subscribers("cmd_vel"),
             "no odometry or no cmd_vel match")
        start = odom[-1].pose.pose.position

        def moved():
            now = odom[-1].pose.pose.position
            return math.hypot(now.x - start.x, now.y - start.y) > 0.1

        # back away from the table on stamped commands until odometry shows the base moved
        wait(moved, "the base did not move on TwistStamped", lambda: nav.publish_velocity(-0.3, 0.0))
        nav.stop_robot()
        wait(lambda: seen[-1].twist.linear.x == 0.0, "the stop command never arrived")
        assert seen[-1].header.frame_id == "base_link"
    finally:
        executor.shutdown()
        for node in (sim, nav, probe):
            node.destroy_node()
        rclpy.shutdown(context=context)
