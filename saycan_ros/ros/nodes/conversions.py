"""Translations between ROS messages and the ROS-free core's types."""
from __future__ import annotations

import math

import numpy as np
from geometry_msgs.msg import Pose, Twist, TwistStamped
from visualization_msgs.msg import Marker, MarkerArray

from saycan_ros.core.kitchen import GRIPPER
from saycan_ros.msg import PlanResult as PlanResultMsg
from saycan_ros.msg import PlanStep, SkillScores, WorldState
from saycan_ros.planning.planner import PlanResult, StepRecord
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
    msg.pruned = [] if record.pruned is None else [bool(p) for p in record.pruned]
    msg.selected = record.selected
    msg.strategy = strategy
    return msg


def score_markers(record: StepRecord, instruction: str, stamp, frame_id: str = "base_link",
                  top_k: int = 3) -> MarkerArray:
    """RViz text beside the robot: the instruction, this step's choice and its best skills
    with their LLM, affordance and combined scores (``saycan/skill_markers``)."""
    lines = [instruction[:60], f"step {record.step}: {record.selected}"]
    lines += [f"{combined:.3f} = {llm:.2f} x {afford:.2f}  {skill}"
              for skill, llm, afford, combined in record.top(top_k)]
    marker = Marker(ns="saycan_scores", id=0, type=Marker.TEXT_VIEW_FACING, action=Marker.ADD,
                    text="\n".join(lines))
    marker.header.stamp = stamp
    marker.header.frame_id = frame_id
    marker.pose.position.z = 1.9          # above the robot's head
    marker.pose.orientation.w = 1.0
    marker.scale.z = 0.12                 # text height, m
    marker.color.r = marker.color.g = marker.color.b = marker.color.a = 1.0
    return MarkerArray(markers=[marker])


def plan_result_to_msg(result: PlanResult, stamp, top_k: int = 5) -> PlanResultMsg:
    """The whole plan as the typed message of ``saycan/result``."""
    msg = PlanResultMsg(instruction=result.instruction, strategy=result.strategy,
                        state=result.state, message=result.message, plan=list(result.plan))
    msg.header.stamp = stamp
    for record in result.steps:
        top = record.top(top_k)
        msg.steps.append(PlanStep(
            step=int(record.step), selected=record.selected, success=bool(record.success),
            message=record.message, seconds=float(record.seconds),
            top_skills=[t[0] for t in top], top_llm=[t[1] for t in top],
            top_affordance=[t[2] for t in top], top_combined=[t[3] for t in top],
            note=record.note))
    return msg


def plan_result_dict(msg: PlanResultMsg) -> dict:
    """A ``saycan/result`` message as the dict of :meth:`PlanResult.to_dict` (JSON-able)."""
    steps = []
    for s in msg.steps:
        step = {"step": int(s.step), "selected": s.selected, "success": bool(s.success),
                "message": s.message, "seconds": round(float(s.seconds), 4),
                "top": [{"skill": k, "llm": float(l), "affordance": float(a), "combined": float(c)}
                        for k, l, a, c in zip(s.top_skills, s.top_llm, s.top_affordance,
                                              s.top_combined)]}
        if s.note:
            step["note"] = s.note
        steps.append(step)
    return {"instruction": msg.instruction, "strategy": msg.strategy, "state": msg.state,
            "message": msg.message, "plan": list(msg.plan), "steps": steps}


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
