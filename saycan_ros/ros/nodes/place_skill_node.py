"""``place_skill``: executes "put down the <object>" with a scripted Cartesian motion.

Serves ExecuteSkill at ``/place_skill`` and std_srvs/Trigger at ``/place_skill/cancel`` (see
:mod:`saycan_ros.ros.nodes.skill_server`). The motion is
:class:`saycan_ros.skills.place.controller.PlaceController`: swing the arm aside and look at the surface
with the head camera for a free spot, carry the object over it, lower it until it rests on the
surface, open the gripper, rise and fold the arm home.

Robot I/O (standard topics, remap for another robot): ``joint_states`` (arm joints and finger
opening), ``odom`` and tf (``map -> odom``, ``base_link -> camera optical frame``),
``camera/image_raw`` + ``camera/camera_info`` in; ``servo_node/delta_twist_cmds``
(TwistStamped in ``base_link``), ``gripper_controller/commands`` (Float64MultiArray, opening in
metres) and ``arm_controller/joint_trajectory`` out. On failure, timeout or cancel the arm is
held where it is (zero twist) and the gripper is left as it is: a held object stays held.
"""
from __future__ import annotations

import time

from builtin_interfaces.msg import Duration
from nav_msgs.msg import Odometry
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import CameraInfo, Image, JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from saycan_ros.ros.nodes.conversions import image_to_rgb, stamped_twist
from saycan_ros.ros.nodes.common import spin_node
from saycan_ros.ros.sensor_cache import SensorCache
from saycan_ros.ros.nodes.skill_server import OdomPose, SkillJob, SkillServerNode, TransformCache
from saycan_ros.skills.place.controller import ArmModel, CameraModel, PlaceController, PlaceParams
from saycan_ros.robot.arm import JOINT_NAMES
from saycan_ros.core.skills import Skill

DEFAULTS = {
    "default_timeout_s": 60.0,
    "map_frame": "map",
    "base_frame": "base_link",
    "use_camera": True,              # look for a free spot (else: the best reachable spot)
    "joint_names": list(JOINT_NAMES),   # saycan_ros.robot.arm
    "sensor_timeout_s": 1.0,
    "image_delay_s": 0.25,           # an image this long after the arm stopped moving aside
    "trajectory_time_s": 2.0,        # time_from_start of trajectory points
}


class PlaceSkillNode(SkillServerNode):
    def __init__(self, **kwargs):
        super().__init__("place_skill", DEFAULTS, **kwargs)

    def configure(self) -> None:
        p = self.params
        names = self.arm_joint_names()
        self.arm = ArmModel(joint_names=tuple(names))
        self.controller = PlaceController(self.kitchen, self.arm, PlaceParams())
        self.tf = TransformCache()
        self.tf.subscribe(self.sensor_input)
        self.odom = OdomPose(self.tf, p["map_frame"])
        self.sensors = SensorCache()       # "image" (array, frame_id), "camera_info", joints
        sensors = self.sensor_input
        sensors.subscribe(Odometry, "odom", self.odom.on_odom, 10)
        sensors.subscribe(JointState, "joint_states", self._on_joints, 10)
        if p["use_camera"]:
            sensors.subscribe(Image, "camera/image_raw", self._on_image, qos_profile_sensor_data)
            sensors.subscribe(CameraInfo, "camera/camera_info", self._on_info,
                              qos_profile_sensor_data)
        self.create_arm_publishers()

    # -- sensors ---------------------------------------------------------------------------------
    def _on_joints(self, msg: JointState) -> None:
        self.sensors.put_joints(msg.name, msg.position)

    def _on_image(self, msg: Image) -> None:
        image = image_to_rgb(msg)
        if image is not None:
            self.sensors.put("image", (image, msg.header.frame_id))

    def _on_info(self, msg: CameraInfo) -> None:
        self.sensors.put("camera_info", msg)

    def joints(self) -> tuple[float, float, float, float] | None:
        return self.sensors.joints(self.arm.joint_names, float(self.params["sensor_timeout_s"]))

    def camera_view(self, since: float):
        """(image, CameraModel) of an image received after ``since``, or (None, None)."""
        image = self.sensors.get("image", since=since)
        info = self.sensors.get("camera_info")
        if image is None or info is None:
            return None, None
        m = self.tf.lookup(self.params["base_frame"], image[1])
        if m is None:
            return None, None
        k = info.k
        camera = CameraModel(float(k[0]), float(k[4]), float(k[2]), float(k[5]), int(info.width),
                             int(info.height), m[:3, :3].copy(), m[:3, 3].copy())
        return image[0], camera

    # -- commands --------------------------------------------------------------------------------
    def _send(self, command) -> None:
        if command.twist is not None:
            msg = stamped_twist(self, self.params["base_frame"])
            msg.twist.linear.x, msg.twist.linear.y, msg.twist.linear.z = map(float, command.twist)
            self.twist_pub.publish(msg)
        if command.gripper is not None:
            self.gripper_pub.publish(Float64MultiArray(data=[float(command.gripper)]))
        if command.trajectory is not None:
            msg = JointTrajectory()
            msg.header.stamp = self.get_clock().now().to_msg()
            msg.joint_names = list(command.trajectory)
            seconds = float(self.params["trajectory_time_s"])
            msg.points = [JointTrajectoryPoint(
                positions=[float(v) for v in command.trajectory.values()],
                time_from_start=Duration(sec=int(seconds), nanosec=int(seconds % 1 * 1e9)))]
            self.trajectory_pub.publish(msg)

    def run_skill(self, skill: Skill, job: SkillJob) -> tuple[bool, str]:
        deadline = time.monotonic() + float(self.params["sensor_timeout_s"]) + 1.0
        while (self.joints() is None or self.odom.pose() is None) and time.monotonic() < deadline:
            job.sleep(0.05)
        joints, pose = self.joints(), self.odom.pose()
        if joints is None or pose is None:
            return False, f"cannot {skill.text}: no " + ("joint states" if joints is None
                                                         else "odometry")
        final = self.controller.start(joints, pose, time.monotonic(),
                                      look=bool(self.params["use_camera"]))
        if final is not None:
            return False, f"cannot {skill.text}: {final.message}"
        want_since = None
        period = self.control_period
        while True:
            job.check()
            joints, pose = self.joints(), self.odom.pose()
            if joints is None or pose is None:
                return False, "lost " + ("joint states" if joints is None else "odometry")
            image = camera = None
            if want_since is not None:
                image, camera = self.camera_view(want_since + float(self.params["image_delay_s"]))
            command = self.controller.update(joints, pose, time.monotonic(), image=image,
                                             camera=camera)
            want_since = (want_since or time.monotonic()) if command.want_image else None
            self.send_command(job, lambda: self._send(command))
            if command.done:
                return command.success, command.message
            job.sleep(period)

    def stop_robot(self) -> None:
        self.twist_pub.publish(stamped_twist(self, self.params["base_frame"]))


def main(args=None) -> None:
    spin_node(PlaceSkillNode, args)


if __name__ == "__main__":
    main()
