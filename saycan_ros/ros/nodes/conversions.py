"""Translations between ROS messages and the ROS-free core's types."""
from __future__ import annotations

import math

import numpy as np
from geometry_msgs.msg import Pose, Twist, TwistStamped

from saycan_ros.core.kitchen import GRIPPER
from saycan_ros.msg import SkillScores, WorldState
from saycan_ros.planning.planner import StepRecord
from saycan_ros.core.world import WorldSnapshot


def stamped_twist(node, frame_id: str, twist: Twist | None = None) -> TwistStamped:
    """``twist`` (zero: a stop) stamped now in ``frame_id``, for servo and stamped cmd_vel."""
    msg = TwistStamped(twist=twist if twist is not None else Twist())
    msg.header.stamp = node.get_clock().now().to_msg()
    msg.header.frame_id = frame_id
    return msg


def planar_pose(x: float, y: float, yaw: float) -> Pose:
    """A geometry_msgs/Pose on the floor: (x, y, 0), rotated by ``yaw`` about z."""
    pose = Pose()
    pose.position.x, pose.position.y = float(x), float(y)
    pose.orientation.z, pose.orientation.w = math.sin(yaw / 2.0), math.cos(yaw / 2.0)
    return pose


def planar_of(pose: Pose) -> tuple[float, float, float]:
    """(x, y, yaw about z) of a Pose; the inverse of :func:`planar_pose`."""
    q = pose.orientation
    yaw = math.atan2(2.0 * (q.w * q.z + q.x * q.y), 1.0 - 2.0 * (q.y * q.y + q.z * q.z))
    return float(pose.position.x), float(pose.position.y), yaw


def snapshot_to_msg(snapshot: WorldSnapshot, stamp, frame_id: str = "map") -> WorldState:
    msg = WorldState()
    msg.header.stamp = stamp
    msg.header.frame_id = frame_id
    msg.revision = int(snapshot.revision)
    msg.robot_location = snapshot.robot_at or ""
    x, y, theta = snapshot.robot_pose
    msg.robot_pose = planar_pose(x, y, theta)
    msg.holding = snapshot.holding or ""
    msg.objects = list(snapshot.objects)
    msg.object_locations = list(snapshot.objects.values())
    return msg


def msg_to_snapshot(msg: WorldState) -> WorldSnapshot:
    """The snapshot a WorldState describes; raises ValueError on an inconsistent message."""
    if len(msg.objects) != len(msg.object_locations):
        raise ValueError(f"world state lists {len(msg.objects)} objects but "
                         f"{len(msg.object_locations)} locations")
    pose = planar_of(msg.robot_pose)
    if not all(math.isfinite(v) for v in pose):
        raise ValueError(f"world state has a non-finite robot pose {pose}")
    objects = dict(zip(msg.objects, msg.object_locations))
    holding = msg.holding or None
    if holding is not None and objects.get(holding) != GRIPPER:
        raise ValueError(f"world state says it holds {holding!r} but lists it at "
                         f"{objects.get(holding)!r}")
    return WorldSnapshot(int(msg.revision), msg.robot_location or None, pose, holding, objects)


def record_to_msg(record: StepRecord, instruction: str, strategy: str, stamp) -> SkillScores:
    msg = SkillScores()
    msg.header.stamp = stamp
    msg.header.frame_id = "map"
    msg.instruction = instruction
    msg.step = int(record.step)
    msg.skills = list(record.skills)
    msg.llm = np.asarray(record.llm, dtype=np.float64).tolist()
    msg.affordance = np.asarray(record.affordance, dtype=np.float64).tolist()
    msg.combined = np.asarray(record.combined, dtype=np.float64).tolist()
    msg.selected = record.selected
    msg.strategy = strategy
    return msg


def image_to_rgb(msg) -> np.ndarray | None:
    """An ``rgb8`` / ``bgr8`` ``sensor_msgs/Image`` as an HxWx3 RGB array (row padding dropped),
    or None for another encoding or a size that does not match its data."""
    if msg.encoding not in ("rgb8", "bgr8"):
        return None
    data = np.frombuffer(bytes(msg.data), dtype=np.uint8)
    try:
        image = data.reshape(msg.height, msg.step)[:, :msg.width * 3].reshape(
            msg.height, msg.width, 3)
    except ValueError:
        return None
    return np.ascontiguousarray(image[:, :, ::-1] if msg.encoding == "bgr8" else image)
