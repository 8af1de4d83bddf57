"""The kitchen_sim node over real DDS: it runs as a subprocess and this test talks to it.

One node serves the whole module (start-up costs seconds); tests run in file order and each
leaves the robot as the next expects (at rest, arm free). DDS stays on this machine
(ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST) in a domain of its own.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time

import pytest

rclpy = pytest.importorskip("rclpy")
from geometry_msgs.msg import Twist, TwistStamped  # noqa: E402
from nav_msgs.msg import OccupancyGrid, Odometry  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import CameraInfo, Image, JointState, LaserScan  # noqa: E402
from std_msgs.msg import Float64MultiArray  # noqa: E402
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint  # noqa: E402

from saycan_ros.core.kitchen import load_kitchen  # noqa: E402
from saycan_ros.robot.cameras import EE_VIEW_SIZE, HEAD_CAMERA_SIZE  # noqa: E402
from saycan_ros.sim.camera import WristCamera  # noqa: E402
from saycan_ros.sim.world import KitchenWorld  # noqa: E402

try:
    from saycan_ros.msg import WorldState
    from saycan_ros.srv import GetWorldState, ResetWorld
except ImportError:   # interfaces not built: the service tests skip
    WorldState = GetWorldState = ResetWorld = None
try:
    from tf2_msgs.msg import TFMessage
except ImportError:   # tf2_msgs is not among the PyPI ROS wheels
    TFMessage = None

DOMAIN_ID = 63
CMD_TIMEOUT_S = 0.3
LATCHED = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                     reliability=ReliabilityPolicy.RELIABLE)
needs_interfaces = pytest.mark.skipif(ResetWorld is None, reason="saycan_ros interfaces not built")


class Probe:
    """The test's side of DDS: the latest message of every topic, publishers, service calls."""

    def __init__(self):
        os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
        self.context = rclpy.Context()
        rclpy.init(context=self.context, domain_id=DOMAIN_ID)
        self.node = rclpy.create_node("kitchen_sim_probe", context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.latest: dict[str, object] = {}
        self.counts: dict[str, int] = {}
        topics = [("odom", Odometry, 10), ("joint_states", JointState, 10),
                  ("camera/image_raw", Image, 5), ("camera/camera_info", CameraInfo, 5),
                  ("camera/ee_view/image_raw", Image, 5),
                  ("camera/ee_view/camera_info", CameraInfo, 5),
                  ("scan", LaserScan, 5), ("map", OccupancyGrid, LATCHED)]
        if TFMessage is not None:
            topics += [("tf", TFMessage, 50), ("tf_static", TFMessage, LATCHED)]
        if WorldState is not None:
            topics.append(("saycan/world_state", WorldState, LATCHED))
        for topic, kind, qos in topics:
            self.node.create_subscription(kind, topic, self._keeper(topic), qos)
        self.cmd_vel = self.node.create_publisher(Twist, "cmd_vel", 10)
        self.servo = self.node.create_publisher(TwistStamped, "servo_node/delta_twist_cmds", 10)
        self.gripper = self.node.create_publisher(Float64MultiArray, "gripper_controller/commands", 10)
        self.trajectory = self.node.create_publisher(JointTrajectory, "arm_controller/joint_trajectory", 10)
        if ResetWorld is not None:
            self.reset_client = self.node.create_client(ResetWorld, "saycan/world/reset")
            self.state_client = self.node.create_client(GetWorldState, "saycan/world/state")

    def _keeper(self, topic):
        def keep(msg):
            self.latest[topic] = msg
            self.counts[topic] = self.counts.get(topic, 0) + 1
        return keep

    def spin(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.executor.spin_once(timeout_sec=0.02)

    def wait_for(self, predicate, timeout: float, what: str):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            self.executor.spin_once(timeout_sec=0.02)
            value = predicate()
            if value:
                return value
        raise AssertionError(f"timed out after {timeout} s waiting for {what}")

    def call(self, client, request, timeout: float = 5.0):
        assert client.wait_for_service(timeout_sec=timeout), f"{client.srv_name} not available"
        future = client.call_async(request)
        self.executor.spin_until_future_complete(future, timeout_sec=timeout)
        assert future.done(), f"{client.srv_name} did not answer"
        return future.result()

    def drive(self, linear: float, angular: float, seconds: float, rate: float = 20.0) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            msg = Twist()
            msg.linear.x, msg.angular.z = linear, angular
            self.cmd_vel.publish(msg)
            self.spin(1.0 / rate)

    def state(self) -> dict:
        return json.loads(self.call(self.state_client, GetWorldState.Request()).state_json)

    def close(self) -> None:
        self.executor.shutdown()
        self.node.destroy_node()
        rclpy.shutdown(context=self.context)


@pytest.fixture(scope="module")
def sim():
    env = dict(os.environ, ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST", ROS_DOMAIN_ID=str(DOMAIN_ID))
    proc = subprocess.Popen(
        [sys.executable, "-m", "saycan_ros.ros.nodes.kitchen_sim_node", "--ros-args",
         "-p", f"cmd_timeout_s:={CMD_TIMEOUT_S}", "-p", "camera_rate_hz:=10.0",
         # A parameter value is YAML: quote the JSON so that it stays a string.
         "-p", "seed:=3", "-p", "init:='{\"robot_at\": \"table\"}'"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    probe = Probe()
    try:
        probe.wait_for(lambda: proc.poll() is not None or ("odom" in probe.latest
                                                           and "camera/image_raw" in probe.latest),
                       timeout=15.0, what="the simulator's first odometry and image")
        assert proc.poll() is None, "the simulator exited at start-up"
        yield probe, proc
    finally:
        probe.close()
        proc.terminate()
        try:
            output, _ = proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            output, _ = proc.communicate()
        print(output[-3000:])


def _pose(odom: Odometry) -> tuple[float, float, float]:
    p, q = odom.pose.pose.position, odom.pose.pose.orientation
    return p.x, p.y, 2 * math.atan2(q.z, q.w)


def test_cmd_vel_moves_odom_and_tf(sim):
    probe, _ = sim
    x0, y0, yaw0 = _pose(probe.latest["odom"])
    tf_before = probe.counts.get("tf", 0)
    probe.drive(-0.3, 0.5, 1.5)       # back away from the table while turning
    x1, y1, yaw1 = _pose(probe.latest["odom"])
    assert math.hypot(x1 - x0, y1 - y0) > 0.1
    assert abs(math.atan2(math.sin(yaw1 - yaw0), math.cos(yaw1 - yaw0))) > 0.2
    assert probe.latest["odom"].header.frame_id == "odom"
    assert probe.latest["odom"].child_frame_id == "base_link"
    if TFMessage is None:
        pytest.skip("tf2_msgs not installed: /tf not checked (odometry was)")
    probe.spin(0.2)
    assert probe.counts["tf"] > tf_before
    base = [t for t in probe.latest["tf"].transforms if t.child_frame_id == "base_link"]
    assert base and base[0].header.frame_id == "odom"
    assert abs(base[0].transform.translation.x - x0) + abs(base[0].transform.translation.y - y0) > 0.1


def test_watchdog_stops_the_base(sim):
    probe, _ = sim
    probe.drive(0.0, 0.8, 0.6)
    assert abs(probe.latest["odom"].twist.twist.angular.z) > 0.3
    probe.wait_for(lambda: abs(probe.latest["odom"].twist.twist.angular.z) < 1e-9,
                   timeout=CMD_TIMEOUT_S + 1.5, what="the watchdog to stop the base")
    still = _pose(probe.latest["odom"])
    probe.spin(0.3)
    assert _pose(probe.latest["odom"]) == pytest.approx(still, abs=1e-6)


def test_camera_image_and_info_arrive(sim):
    probe, _ = sim
    count = probe.counts["camera/image_raw"]
    probe.wait_for(lambda: probe.counts["camera/image_raw"] > count, 2.0, "a new image")
    image = probe.latest["camera/image_raw"]
    size = HEAD_CAMERA_SIZE
    assert (image.width, image.height, image.encoding) == (size, size, "rgb8")
    assert len(image.data) == size * size * 3 and image.step == size * 3
    assert len(set(bytes(image.data))) > 10           # a picture, not a blank frame
    info = probe.wait_for(lambda: probe.latest.get("camera/camera_info"), 2.0, "camera_info")
    assert info.k[0] > 0 and info.header.frame_id == image.header.frame_id == "camera_optical_frame"
    # The end-effector view (the default: the wrist camera) in its own optical frame, which
    # tf_static hangs off the gripper where the simulator's camera sits.
    view = probe.wait_for(lambda: probe.latest.get("camera/ee_view/image_raw"), 2.0, "the ee view")
    assert (view.width, view.height, view.encoding) == (EE_VIEW_SIZE, EE_VIEW_SIZE, "rgb8")
    assert len(set(bytes(view.data))) > 10
    view_info = probe.wait_for(lambda: probe.latest.get("camera/ee_view/camera_info"), 2.0,
                               "the ee view's camera_info")
    wrist = WristCamera(KitchenWorld(load_kitchen()))
    assert view_info.header.frame_id == view.header.frame_id == "wrist_camera_optical_frame"
    assert view_info.k[0] == pytest.approx(wrist.f) and view_info.k[2] == pytest.approx(wrist.cx)
    if TFMessage is not None:
        static = probe.wait_for(lambda: probe.latest.get("tf_static"), 2.0, "tf_static")
        mount = {t.child_frame_id: t for t in static.transforms}["wrist_camera_link"]
        assert mount.header.frame_id == "gripper_link"
        assert (mount.transform.translation.x, mount.transform.translation.z) == pytest.approx(
            (-wrist.wrist.back, wrist.wrist.up))
        assert "wrist_camera_optical_frame" in {t.child_frame_id for t in static.transforms}
    scan = probe.wait_for(lambda: probe.latest.get("scan"), 2.0, "a laser scan")
    assert len(scan.ranges) == 360 and min(scan.ranges) > 0.0
    grid = probe.wait_for(lambda: probe.latest.get("map"), 2.0, "the map (transient local)")
    assert grid.info.width * grid.info.height == len(grid.data) and 100 in grid.data


def test_bad_commands_are_survived(sim):
    probe, proc = sim
    nan = float("nan")
    bad_twist = Twist()
    bad_twist.linear.x = nan
    huge = Twist()
    huge.linear.x, huge.angular.z = 1e9, -1e9
    wrong_frame = TwistStamped()
    wrong_frame.header.frame_id = "somewhere_else"
    wrong_frame.twist.linear.z = 0.2
    nan_servo = TwistStamped()
    nan_servo.twist.linear.x = nan

    def trajectory(names, *points):
        return JointTrajectory(joint_names=names,
                               points=[JointTrajectoryPoint(positions=p) for p in points])
    bad_trajectories = [trajectory(["elbow_joint"], [1.0]),          # unknown joint
                        trajectory(["arm_lift_joint"], [1.0, 2.0]),  # too many positions
                        trajectory(["arm_lift_joint"], [nan]),
                        trajectory(["arm_lift_joint"])]              # no points
    joints_before = list(probe.latest["joint_states"].position)
    for _ in range(3):
        probe.cmd_vel.publish(bad_twist)
        probe.servo.publish(wrong_frame)
        probe.servo.publish(nan_servo)
        for data in ([], [nan], [0.01, 0.02]):
            probe.gripper.publish(Float64MultiArray(data=data))
        for trajectory in bad_trajectories:
            probe.trajectory.publish(trajectory)
        probe.spin(0.1)
    probe.spin(0.3)
    assert proc.poll() is None, "the simulator died on bad commands"
    assert list(probe.latest["joint_states"].position) == pytest.approx(joints_before, abs=1e-9)
    probe.drive(huge.linear.x, huge.angular.z, 1.2)     # clamped to the limits, not obeyed
    twist = probe.latest["odom"].twist.twist
    assert abs(twist.linear.x) <= 0.8 + 1e-9 and abs(twist.angular.z) <= 1.5 + 1e-9
    assert math.isfinite(_pose(probe.latest["odom"])[0])
    assert proc.poll() is None


@needs_interfaces
def test_reset_rejects_bad_init(sim):
    probe, proc = sim
    for init in ('{"robot_at": "the moon"}', "[1, 2]", "{unclosed"):
        response = probe.call(probe.reset_client, ResetWorld.Request(init=init, seed=-1))
        assert not response.success and response.message
    assert proc.poll() is None


@needs_interfaces
def test_scripted_grasp_through_topics(sim):
    """Reset to a known scene, then pick the sponge with joint trajectories and the gripper."""
    probe, _ = sim
    response = probe.call(probe.reset_client,
                          ResetWorld.Request(init='{"robot_at": "close counter"}', seed=5))
    assert response.success, response.message
    probe.wait_for(lambda: probe.latest["saycan/world_state"].revision >= response.state_revision
                   and probe.latest["saycan/world_state"].robot_location == "close counter",
                   3.0, "the reset world state")
    state = probe.state()
    sponge = state["objects"]["sponge"]
    pose = state["robot_pose"]
    dx, dy = sponge["x"] - pose["x"], sponge["y"] - pose["y"]
    c, s = math.cos(pose["theta"]), math.sin(pose["theta"])
    x, y = c * dx + s * dy, -s * dx + c * dy          # the sponge in the base frame
    names = ["arm_lift_joint", "arm_yaw_joint", "arm_extend_joint", "gripper_joint"]
    above = [sponge["z"] + sponge["height"] + 0.05, math.atan2(y, x), math.hypot(x, y), 0.1]
    grasp = [sponge["z"] + 0.35 * sponge["height"]] + above[1:]
    probe.trajectory.publish(JointTrajectory(joint_names=names, points=[
        JointTrajectoryPoint(positions=above), JointTrajectoryPoint(positions=grasp)]))
    probe.wait_for(lambda: all(abs(a - b) < 1e-3 for a, b in
                               zip(probe.latest["joint_states"].position[:3], grasp[:3])),
                   8.0, "the arm to reach the grasp pose")
    probe.gripper.publish(Float64MultiArray(data=[0.0]))
    probe.wait_for(lambda: probe.latest["saycan/world_state"].holding == "sponge", 3.0,
                   "the sponge in the gripper")
    probe.trajectory.publish(JointTrajectory(joint_names=names[:1], points=[
        JointTrajectoryPoint(positions=[1.1])]))
    probe.wait_for(lambda: probe.latest["joint_states"].position[0] > 1.09, 5.0, "the lift")
    after = probe.state()
    assert after["holding"] == "sponge"
    assert after["objects"]["sponge"]["location"] == "gripper"
    assert after["objects"]["sponge"]["z"] > sponge["z"] + 0.1
    world_state = probe.latest["saycan/world_state"]
    assert dict(zip(world_state.objects, world_state.object_locations))["sponge"] == "gripper"
