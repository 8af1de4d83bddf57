"""``pick_skill``: executes "pick up the <object>" with the learned BC policy in closed loop.

Serves ExecuteSkill at ``/pick_skill`` and std_srvs/Trigger at ``/pick_skill/cancel`` (see
:mod:`saycan_ros.ros.nodes.skill_server`). The policy (``saycan_ros.learning``: a FiLM-conditioned
CNN over the head camera image, the arm state and the skill text, trained by behaviour cloning
in the pick gym env) loads once, at start-up; it runs on the skill's worker thread, never on the
service or sensor threads. Every cycle, as in the env it was trained in:

1. observe: the latest camera frame taken after the arm came to rest (and the end-effector
   view's, for a policy that takes one; the skill's first frame is kept for a policy that
   also looks at where things were before the arm moved over them), and the arm state from
   ``joint_states`` (end effector in ``base_link`` by the arm's kinematics, finger opening,
   whether something is held);
2. act: ``[dx, dy, dz, gripper, terminate]`` -> the gripper opening on
   ``gripper_controller/commands`` and an end-effector velocity on ``servo_node/delta_twist_cmds``
   for one step (``step_s``, 5 cm at most per axis), then a zero twist;
3. stop when the policy says so or after ``max_actions`` steps.

Then the arm is tucked home (``arm_controller/joint_trajectory``, the gripper kept as it is)
and the skill succeeds only if the object is actually held: by the robot's ground-truth
``saycan/world_state`` when a simulator publishes one (``holding_from: world_state``), else by
the gripper (fingers stopped part-way while closing). On failure, timeout or cancel the arm is
held where it is (zero twist), the gripper left as it is.

Robot I/O (standard topics, remap for another robot): ``camera/image_raw``,
``camera/ee_view/image_raw`` (only for a policy with an end-effector view: the wrist camera,
or the head camera cropped finer around the fingertips, whichever the policy was trained on, as
``kitchen_sim`` publishes it) and ``joint_states`` in;
``servo_node/delta_twist_cmds`` (TwistStamped in ``base_link``),
``gripper_controller/commands`` (Float64MultiArray, opening in m) and
``arm_controller/joint_trajectory`` out.
"""
from __future__ import annotations

import time

import numpy as np
from builtin_interfaces.msg import Duration
from geometry_msgs.msg import TwistStamped
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import Image, JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from saycan_ros.ros.nodes.conversions import image_to_rgb
from saycan_ros.ros.nodes.common import spin_node
from saycan_ros.ros.nodes.skill_server import SkillJob, SkillServerNode
from saycan_ros.ros.sensor_cache import SensorCache
from saycan_ros.skills.pick.policy import (GRIPPER_LIMITS, STEP_M, STEP_S, as_image, ee_from_joints,
                                           gripper_holds, gripper_opening, load_pick_policy,
                                           policy_state, twist_of)
from saycan_ros.robot.arm import HOME, JOINT_NAMES
from saycan_ros.core.skills import Skill

DEFAULTS = {
    "default_timeout_s": 60.0,
    "policy": "bc_pick",             # a name of saycan_ros.learning.factory.POLICIES
    "weights": "",                   # "" = models/bc_pick.pt (or $SAYCAN_MODELS_DIR/bc_pick.pt)
    "threads": 1,                    # torch threads of the policy
    "base_frame": "base_link",
    "joint_names": list(JOINT_NAMES),   # saycan_ros.robot.arm
    "max_actions": 50,               # as in the pick env
    "step_s": STEP_S,                # one action's duration (the env's)
    "max_step_s": 2 * STEP_S,        # keep moving this long at most to cover the action's distance
    "sensor_timeout_s": 1.0,         # joint states / camera older than this fail the skill
    "image_delay_s": 0.02,           # a frame received this long after the arm stopped
    "holding_from": "world_state",   # world_state (ground truth, when published) | gripper
    "home_before": True,             # start from the arm's home pose, gripper open (as the env)
    "tuck_after": True,              # fold the arm home after the attempt (keeps the grasp)
    "trajectory_time_s": 2.0,
    "tuck_timeout_s": 6.0,
    "settle_s": 0.3,
}


class PickSkillNode(SkillServerNode):
    def __init__(self, **kwargs):
        super().__init__("pick_skill", DEFAULTS, **kwargs)

    def configure(self) -> None:
        p = self.params
        names = self.arm_joint_names()
        if p["holding_from"] not in ("world_state", "gripper"):
            raise ValueError(f"holding_from must be world_state or gripper, got "
                             f"{p['holding_from']!r}")
        self.joint_names = tuple(names)
        started = time.monotonic()
        self.policy = load_pick_policy(p["policy"], p["weights"], int(p["threads"]))   # once
        self.get_logger().info(f"policy {p['policy']} loaded in {time.monotonic() - started:.2f} s")
        self.sensors = SensorCache()       # streams "image", "ee_image" and the joint states
        self._gripper_target: float | None = None
        self.actions_taken = 0             # of the last skill (tests, logs)
        self.sensor_input.subscribe(JointState, "joint_states", self._on_joints, 10)
        self.streams = {"image": "camera/image_raw"}
        if getattr(self.policy, "ee_view", 0):
            self.streams["ee_image"] = "camera/ee_view/image_raw"
            source = {"wrist": "the wrist camera"}.get(getattr(self.policy, "ee_camera", "crop"),
                                                       "a crop of the head camera")
            self.get_logger().info(f"end-effector view expected on camera/ee_view/image_raw: {source}")
        for key, topic in self.streams.items():
            self.sensor_input.subscribe(Image, topic, lambda msg, key=key: self._on_image(msg, key),
                                        qos_profile_sensor_data)
        self.create_arm_publishers()

    # -- sensors ---------------------------------------------------------------------------------
    def _on_joints(self, msg: JointState) -> None:
        self.sensors.put_joints(msg.name, msg.position)

    def _on_image(self, msg: Image, key: str = "image") -> None:
        image = image_to_rgb(msg)
        if image is not None:
            self.sensors.put(key, image)

    def sensors_ready(self) -> bool:
        """Joint states and a frame of every camera stream the policy takes have arrived."""
        return self.sensors.has(*self.streams) and self.joints() is not None

    def joints(self) -> tuple[float, float, float, float] | None:
        return self.sensors.joints(self.joint_names, float(self.params["sensor_timeout_s"]))

    def image_since(self, since: float, job: SkillJob, key: str = "image") -> np.ndarray | None:
        """The first frame of stream ``key`` received after ``since`` (waits up to
        sensor_timeout_s)."""
        return self.sensors.wait_since(key, since, float(self.params["sensor_timeout_s"]) + 0.2,
                                       check=job.check)

    def holding(self, skill_object: str | None = None) -> str | None:
        """What the hand holds: the world state's ground truth, or the gripper's guess."""
        if self.params["holding_from"] == "world_state" and self.world_state is not None:
            return self.world_state.holding or None
        joints = self.joints()
        if joints is not None and gripper_holds(joints[3], self._gripper_target, GRIPPER_LIMITS):
            return skill_object or "something"
        return None

    # -- commands --------------------------------------------------------------------------------
    def _twist(self, v=(0.0, 0.0, 0.0)) -> None:
        msg = TwistStamped()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.header.frame_id = self.params["base_frame"]
        msg.twist.linear.x, msg.twist.linear.y, msg.twist.linear.z = (float(c) for c in v)
        self.twist_pub.publish(msg)

    def _gripper(self, opening: float) -> None:
        self._gripper_target = float(opening)
        self.gripper_pub.publish(Float64MultiArray(data=[float(opening)]))

    def _trajectory(self, positions) -> None:
        msg = JointTrajectory()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.joint_names = list(self.joint_names)
        seconds = float(self.params["trajectory_time_s"])
        msg.points = [JointTrajectoryPoint(
            positions=[float(v) for v in positions],
            time_from_start=Duration(sec=int(seconds), nanosec=int(seconds % 1 * 1e9)))]
        self.trajectory_pub.publish(msg)

    def _move_home(self, job: SkillJob, gripper: float) -> bool:
        """Joint trajectory to the home pose with the gripper at ``gripper``; True when there."""
        target = (*HOME[:3], gripper)
        self._trajectory(target)
        deadline = time.monotonic() + float(self.params["tuck_timeout_s"])
        while time.monotonic() < deadline:
            job.sleep(self.control_period)
            joints = self.joints()
            if joints is not None and all(abs(a - b) < 0.01 for a, b in zip(joints[:3], target)):
                return True
        return False

    def _at_home(self, joints) -> bool:
        return (all(abs(a - b) < 0.02 for a, b in zip(joints[:3], HOME[:3]))
                and joints[3] > GRIPPER_LIMITS[1] - 0.005)

    def _step(self, action: np.ndarray, job: SkillJob) -> None:
        """Carry out one action: gripper command, then the end-effector motion, then rest."""
        self.send_command(job, lambda: self._gripper(gripper_opening(action[3], GRIPPER_LIMITS)))
        velocity = twist_of(action)
        joints = self.joints()
        start = np.array(ee_from_joints(*joints[:3])) if joints is not None else None
        wanted = np.clip(np.asarray(action[:3], float), -1.0, 1.0) * STEP_M
        distance = float(np.linalg.norm(wanted))
        step_s, max_step_s = float(self.params["step_s"]), float(self.params["max_step_s"])
        began = time.monotonic()
        moving = distance > 1e-3
        while True:
            elapsed = time.monotonic() - began
            if moving:
                joints = self.joints()
                covered = 0.0
                if joints is not None and start is not None:
                    covered = float(np.dot(np.array(ee_from_joints(*joints[:3])) - start,
                                           wanted / distance))
                if covered >= distance - 0.002 or elapsed >= max_step_s:
                    moving = False
                    self._twist()
                else:
                    self.send_command(job, lambda: self._twist(velocity))
            if not moving and elapsed >= step_s:
                break
            job.sleep(min(0.01, self.control_period))
        self._twist()

    def run_skill(self, skill: Skill, job: SkillJob) -> tuple[bool, str]:
        p = self.params
        self.actions_taken = 0
        if skill.object is None:
            return False, f"cannot {skill.text}: no object"
        deadline = time.monotonic() + float(p["sensor_timeout_s"]) + 1.0
        while self.joints() is None and time.monotonic() < deadline:
            job.sleep(0.05)
        if self.joints() is None:
            return False, f"cannot {skill.text}: no joint states"
        held = self.holding()
        if held is not None:
            return False, f"cannot {skill.text}: already holding the {held}"
        if p["home_before"] and not self._at_home(self.joints()):
            self._move_home(job, GRIPPER_LIMITS[1])
        rest = time.monotonic()
        terminated = False
        start = None
        for _ in range(int(p["max_actions"])):
            obs = {}
            for key, topic in self.streams.items():
                image = self.image_since(rest + float(p["image_delay_s"]), job, key)
                if image is None:
                    return False, f"lost the camera ({topic})"
                obs[key] = as_image(image)
            start = obs["image"] if start is None else start
            obs["start_image"] = start        # the first frame, before the arm moved over it
            joints = self.joints()
            if joints is None:
                return False, "lost the joint states"
            obs.update(state=policy_state(joints, self.holding(skill.object) is not None,
                                          GRIPPER_LIMITS),
                       skill=skill.text)
            action = np.asarray(self.policy.act(obs), dtype=np.float64)   # this worker thread
            self.actions_taken += 1
            if not np.all(np.isfinite(action)):
                return False, f"the policy returned a non-finite action {action.tolist()}"
            self._step(action, job)
            rest = time.monotonic()
            if action[4] > 0.0:
                terminated = True
                break
        if p["tuck_after"]:
            grip = self._gripper_target if self._gripper_target is not None else GRIPPER_LIMITS[1]
            self._move_home(job, grip)
        job.sleep(float(p["settle_s"]))          # the world state catches up with the grasp
        held = self.holding(skill.object)
        steps = f"{self.actions_taken} actions" + ("" if terminated else ", no stop")
        if held == skill.object:
            return True, f"holding the {skill.object}"
        got = f"holding the {held} instead" if held else "nothing in the gripper"
        return False, f"failed to pick up the {skill.object} ({steps}): {got}"

    def stop_robot(self) -> None:
        self._twist()


def main(args=None) -> None:
    spin_node(PickSkillNode, args)


if __name__ == "__main__":
    main()
