"""``ee_view``: the end-effector view for a crop-trained pick policy, from a real head camera.

The built-in ``kitchen_sim`` publishes ``camera/ee_view/image_raw`` itself. A policy trained on
the wrist camera (``model.ee_camera: wrist``, the shipped one) takes the robot's wrist camera,
remapped to that topic. For a policy trained on the crop (``ee_camera: crop``) on a Gazebo,
Isaac Sim or real robot with only a head camera, this node cuts the view out of the full-resolution
frame (:func:`saycan_ros.robot.ee_view.crop_ee_view`) around the point the fingertips project to, the
end effector taken from ``joint_states`` by the arm's kinematics and put in the camera's optical
frame by the camera mount parameters (``camera_x``, ``camera_z``, ``camera_pitch``: base frame,
m and rad, as ``kitchen_sim``'s tf publishes them).

In: ``camera/image_raw``, ``camera/camera_info``, ``joint_states``. Out:
``camera/ee_view/image_raw`` and ``camera/ee_view/camera_info`` (same stamp and optical frame
as the source frame, the view's own intrinsics). A frame that cannot be cropped (no intrinsics
or joint states yet, a bad encoding, the gripper behind the camera) is skipped with a
throttled warning.

Run: ``python -m saycan_ros.ros.nodes.ee_view_node --ros-args -r camera/image_raw:=/head/image``
"""
from __future__ import annotations


from rclpy.node import Node
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import CameraInfo, Image, JointState

from saycan_ros.robot.ee_view import crop_ee_view, ee_in_optical
from saycan_ros.ros.nodes.camera_msgs import pinhole_info, rgb_image
from saycan_ros.ros.nodes.common import declare_parameters, spin_node
from saycan_ros.ros.nodes.conversions import image_to_rgb
from saycan_ros.ros.sensor_cache import SensorCache
from saycan_ros.skills.pick.policy import ee_from_joints
from saycan_ros.robot.arm import JOINT_NAMES, MAST
from saycan_ros.robot.cameras import EE_VIEW_SIZE, EE_VIEW_ZOOM, CameraMount, view_focal

_MOUNT = CameraMount()
DEFAULTS = {
    "size": EE_VIEW_SIZE,            # the view's side in pixels (the policy's ee_view)
    "zoom": EE_VIEW_ZOOM,            # its focal length over the policy's 96-px head frame's
    "joint_names": list(JOINT_NAMES[:3]),   # lift, yaw, extend (saycan_ros.robot.arm)
    "camera_x": _MOUNT.x,            # the head camera in the base frame (m, rad below horizon)
    "camera_z": _MOUNT.z,
    "camera_pitch": _MOUNT.pitch,
    "warn_every_s": 2.0,
}


class EEViewNode(Node):
    def __init__(self, **kwargs):
        super().__init__("ee_view", **kwargs)
        p = declare_parameters(self, DEFAULTS)
        if int(p["size"]) < 8 or not float(p["zoom"]) > 0:
            raise ValueError(f"ee_view: size must be >= 8 px and zoom > 0, got {p['size']}, {p['zoom']}")
        if len(p["joint_names"]) != 3:
            raise ValueError(f"ee_view: joint_names must name the lift, yaw and extend joints, "
                             f"got {list(p['joint_names'])}")
        self.size = int(p["size"])
        self.mount = CameraMount(x=float(p["camera_x"]), z=float(p["camera_z"]),
                                 pitch=float(p["camera_pitch"]))
        self.focal = view_focal(float(p["zoom"]), self.mount)
        self.joint_names = list(p["joint_names"])
        self.warn_every = float(p["warn_every_s"])
        self.sensors = SensorCache()       # "camera_info" (K) and the joint states
        self.published = 0
        self.pub_image = self.create_publisher(Image, "camera/ee_view/image_raw", 5)
        self.pub_info = self.create_publisher(CameraInfo, "camera/ee_view/camera_info", 5)
        self.create_subscription(CameraInfo, "camera/camera_info", self._on_info, 5)
        self.create_subscription(JointState, "joint_states", self._on_joints, 10)
        self.create_subscription(Image, "camera/image_raw", self._on_image, qos_profile_sensor_data)

    def _on_info(self, msg: CameraInfo) -> None:
        self.sensors.put("camera_info", list(msg.k))

    def _on_joints(self, msg: JointState) -> None:
        self.sensors.put_joints(msg.name, msg.position)

    def _warn(self, text: str) -> None:
        self.get_logger().warning(text, throttle_duration_sec=self.warn_every)

    def _on_image(self, msg: Image) -> None:
        k = self.sensors.get("camera_info")
        if k is None:
            return self._warn("no camera/camera_info yet: frame skipped")
        joints = self.sensors.joints(self.joint_names)
        if joints is None:
            return self._warn(f"no joint states for {self.joint_names} yet: frame skipped")
        lift, yaw, extend = joints
        image = image_to_rgb(msg)
        if image is None:
            return self._warn(f"cannot read a camera frame of encoding {msg.encoding!r}: skipped")
        point = ee_in_optical(ee_from_joints(lift, yaw, extend, MAST), self.mount)
        try:
            view, (fx, fy, cx, cy) = crop_ee_view(image, k, point, self.size, self.focal)
        except ValueError as error:
            return self._warn(f"frame skipped: {error}")
        out = rgb_image(view, msg.header)
        info = pinhole_info(msg.header, self.size, self.size, (fx, fy, cx, cy))
        self.pub_image.publish(out)
        self.pub_info.publish(info)
        self.published += 1


def main(args=None) -> None:
    spin_node(EEViewNode, args)


if __name__ == "__main__":
    main()
