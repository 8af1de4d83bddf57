"""The end-effector view from a real head camera over DDS: the ee_view node crops a full-resolution
frame as the simulator renders its view (the ROS-free crop: test/unit/test_ee_view.py), against a
kitchen_sim subprocess that publishes a 384-px head camera and its own view; a pick_skill node
whose view topic is silent fails the pick cleanly.
ROS_DOMAIN_ID 64 (``SAYCAN_EE_VIEW_TEST_DOMAIN_ID``), discovery on localhost only."""
import os

os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
DOMAIN_ID = int(os.environ.get("SAYCAN_EE_VIEW_TEST_DOMAIN_ID") or 64)

import time  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from saycan_ros.robot.cameras import EE_VIEW_SIZE, HEAD_CAMERA_SIZE  # noqa: E402

FINE = 4 * HEAD_CAMERA_SIZE          # the "real" head camera: 384 px over the same field of view


rclpy = pytest.importorskip("rclpy", reason="rclpy (ros-kilted-rclpy) is not installed")


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    from rclpy.qos import qos_profile_sensor_data
    from sensor_msgs.msg import Image
    from sim_graph import SimGraph, running

    from saycan_ros.ros.nodes.ee_view_node import EEViewNode
    from saycan_ros.ros.nodes.pick_skill_node import PickSkillNode
    from saycan_ros.skills.pick.policy import learned_pick_available

    class Graph(SimGraph):
        def __init__(self, tmp):
            super().__init__(tmp, DOMAIN_ID, "ee_view_test_client",
                             ("-p", f"camera_width:={FINE}", "-p", f"camera_height:={FINE}",
                              "-p", "ee_view_camera:=crop"))
            # The node's output on its own topic, beside the simulator's rendered view.
            self.node = EEViewNode(context=self.context, cli_args=[
                "--ros-args", "-r", "camera/ee_view/image_raw:=cropped/image_raw",
                "-r", "camera/ee_view/camera_info:=cropped/camera_info"])
            # A pick node whose end-effector view topic stays silent (remapped to nowhere).
            self.pick = None
            if learned_pick_available():
                self.pick = PickSkillNode(context=self.context, cli_args=[
                    "--ros-args", "-r", "camera/ee_view/image_raw:=silent/image_raw",
                    "-p", "sensor_timeout_s:=0.5"])
            self.frames: dict[str, dict] = {"cropped": {}, "rendered": {}}
            for key, topic in (("cropped", "cropped/image_raw"),
                               ("rendered", "camera/ee_view/image_raw")):
                self.client.create_subscription(Image, topic, lambda m, key=key: self.keep(key, m),
                                                qos_profile_sensor_data)
            self.spin(*[n for n in (self.node, self.pick) if n is not None])

        def keep(self, key, msg):
            stamp = (msg.header.stamp.sec, msg.header.stamp.nanosec)
            self.frames[key][stamp] = np.frombuffer(bytes(msg.data), np.uint8).reshape(
                msg.height, msg.width, 3)

        def ready(self):
            return self.node.published > 0

    yield from running(Graph(tmp_path_factory.mktemp("ee_view")))


def test_ee_view_node_crops_the_head_camera_like_the_simulator_renders(graph):
    graph.reset({"robot_at": "table"}, seed=2)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        both = sorted(set(graph.frames["cropped"]) & set(graph.frames["rendered"]))
        if len(both) >= 5:
            break
        time.sleep(0.1)
    assert len(both) >= 5, "no frames of the same stamp from the node and the simulator"
    for stamp in both[-5:]:
        cropped, rendered = graph.frames["cropped"][stamp], graph.frames["rendered"][stamp]
        assert cropped.shape == rendered.shape == (EE_VIEW_SIZE, EE_VIEW_SIZE, 3)
        assert np.abs(cropped.astype(int) - rendered).mean() < 6


def test_pick_fails_cleanly_without_the_end_effector_view(graph):
    """A policy that takes the view, on a robot whose view topic is silent: the skill fails
    with the topic named, and the arm is left stopped."""
    from saycan_ros.ros.nodes.common import call_service
    from saycan_ros.srv import ExecuteSkill
    if graph.pick is None or not graph.pick.policy.ee_view:
        pytest.skip("the pick policy takes no end-effector view")
    graph.reset({"robot_at": "far counter"}, seed=3)
    client = graph.client.create_client(ExecuteSkill, "/pick_skill")
    reply = call_service(graph.client, client, ExecuteSkill.Request(
        skill="pick up the coke can", timeout_s=20.0), 30, "pick")
    assert not reply.success and "lost the camera (camera/ee_view/image_raw)" in reply.message
    assert graph.pick.actions_taken == 0 and graph.state()["holding"] == ""


def test_ee_view_node_rejects_joint_names_it_cannot_use(graph):
    from rclpy.parameter import Parameter

    from saycan_ros.ros.nodes.ee_view_node import EEViewNode
    with pytest.raises(ValueError, match="joint_names must name the lift, yaw and extend"):
        EEViewNode(context=graph.context, parameter_overrides=[
            Parameter("joint_names", value=["arm_lift_joint", "arm_yaw_joint"])])


def test_kitchen_sim_starts_without_the_view_on_a_camera_it_does_not_have(graph):
    """A misspelt ``ee_view_camera``: the simulator node is made, with its head camera and
    without the view (rather than a crash of the robot's whole simulation)."""
    from rclpy.parameter import Parameter

    from saycan_ros.ros.nodes.kitchen_sim_node import KitchenSimNode
    node = KitchenSimNode(context=graph.context, parameter_overrides=[
        Parameter("ee_view_camera", value="elbow")])
    try:
        assert node.ee_camera is None and node.camera is not None
    finally:
        node.destroy_node()
