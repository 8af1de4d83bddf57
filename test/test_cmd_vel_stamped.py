"""cmd_vel as geometry_msgs/TwistStamped (``cmd_vel_stamped: true``, what ros2_control's
diff_drive_controller takes since Jazzy): the navigate skill publishes stamped twists in the
base frame and kitchen_sim drives on them, over DDS."""
import math
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
    try:
        end = time.monotonic() + 20
        while not (odom and probe.count_publishers("cmd_vel") and sim.count_subscribers("cmd_vel")):
            assert time.monotonic() < end, "no odometry or no cmd_vel match"
            executor.spin_once(timeout_sec=0.05)
        start = odom[-1].pose.pose.position
        end = time.monotonic() + 1.5
        while time.monotonic() < end:            # back away from the table
            nav.publish_velocity(-0.3, 0.0)
            executor.spin_once(timeout_sec=0.05)
        nav.stop_robot()
        end = time.monotonic() + 10
        while seen[-1].twist.linear.x != 0.0:                       # the stop arrives
            assert time.monotonic() < end, "the stop command never arrived"
            executor.spin_once(timeout_sec=0.05)
        assert seen[-1].header.frame_id == "base_link"
        moved = odom[-1].pose.pose.position
        assert math.hypot(moved.x - start.x, moved.y - start.y) > 0.1
    finally:
        executor.shutdown()
        for node in (sim, nav, probe):
            node.destroy_node()
        rclpy.shutdown(context=context)
