"""``navigate_skill``: executes go-to skills ("find an apple", "go to the table", "bring it to
you") by driving the base to the location's approach pose in the ``map`` frame.

Serves ExecuteSkill at ``/navigate_skill`` and std_srvs/Trigger at ``/navigate_skill/cancel``
(see :mod:`saycan_ros.ros.nodes.skill_server`). Two back ends (parameter ``backend``):

- ``builtin``: :class:`saycan_ros.skills.navigation.Navigator` (A* on ``/map``, pure pursuit on ``/odom`` and
  tf ``map -> odom``, obstacle stops from ``/scan``) driving ``/cmd_vel``; publishes the global
  plan on ``~/plan`` (nav_msgs/Path) and NavigateToPose-style feedback on ``~/feedback``
  (std_msgs/String, JSON: current_pose, navigation_time, estimated_time_remaining,
  number_of_recoveries, distance_remaining).
- ``nav2``: sends a ``nav2_msgs/action/NavigateToPose`` goal to a running Nav2 stack
  (``nav2_action``, default ``navigate_to_pose``), relays its feedback, cancels it on
  cancel/timeout. Needs ``nav2_msgs``.

``find <object>`` goes to where the world state (``/saycan/world_state``) says the object is.
"""
from __future__ import annotations

import json
import math
import threading
import time

import numpy as np
from geometry_msgs.msg import PoseStamped, Twist, TwistStamped
from nav_msgs.msg import OccupancyGrid, Odometry, Path
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import LaserScan
from std_msgs.msg import String

from saycan_ros.core.kitchen import GRIPPER
from saycan_ros.skills.navigation import (CostParams, FollowerParams, GridMap, MapError,
                                          MonitorParams, Navigator, NavParams, ScanData)
from saycan_ros.ros.nodes.common import LATCHED_QOS, spin_node
from saycan_ros.ros.nodes.conversions import stamped_twist
from saycan_ros.ros.nodes.skill_server import (OdomPose, SkillCancelled, SkillJob, SkillServerNode,
                                               TransformCache, pose2d_from_matrix)
from saycan_ros.core.skills import Skill

DEFAULTS = {
    "backend": "builtin",            # builtin | nav2
    "nav2_action": "navigate_to_pose",
    "nav2_behavior_tree": "",        # "" = the bt_navigator's default tree
    "nav2_server_timeout_s": 5.0,
    "map_frame": "map",
    "base_frame": "base_link",
    "cmd_vel_stamped": False,        # cmd_vel as TwistStamped (ros2_control diff_drive since
                                     # Jazzy; frame base_frame) instead of Twist (Gazebo bridges)
    "max_linear_speed": 0.6,         # m/s
    "max_angular_speed": 1.2,        # rad/s
    "xy_goal_tolerance": 0.03,       # m
    "yaw_goal_tolerance": 0.03,      # rad
    "robot_radius": 0.3,             # m
    "safety_margin": 0.05,           # m, lethal closer than robot_radius + this
    "inflation_radius": 0.7,         # m
    "obstacle_corridor": 0.33,       # m, half-width of the stop zone along the path
    "obstacle_wait_s": 2.0,          # stand still before replanning around an obstacle
    "max_recoveries": 4,
    "progress_timeout_s": 8.0,
    "map_timeout_s": 5.0,            # wait this long for /map and /odom before failing
    "sensor_timeout_s": 1.0,         # odometry older than this stops the robot
    "scan_timeout_s": 0.5,           # a scan older than this is no scan ...
    "require_scan": True,            # ... and without one the base does not drive forward
    "scan_wait_s": 2.0,              # (it waits this long for one, then the goal fails)
    "laser_x": 0.2,                  # base_link -> laser when tf does not say (m)
}


def yaw_quaternion(yaw: float) -> tuple[float, float, float, float]:
    return 0.0, 0.0, math.sin(yaw / 2), math.cos(yaw / 2)


class NavigateSkillNode(SkillServerNode):
    def __init__(self, **kwargs):
        super().__init__("navigate_skill", DEFAULTS, **kwargs)

    # -- set-up ----------------------------------------------------------------------------------
    def configure(self) -> None:
        p = self.params
        if p["backend"] not in ("builtin", "nav2"):
            raise ValueError(f"backend must be builtin or nav2, got {p['backend']!r}")
        if not float(p["scan_timeout_s"]) > 0 or not float(p["scan_wait_s"]) >= 0:
            raise ValueError(f"scan_timeout_s must be > 0 and scan_wait_s >= 0, got "
                             f"{p['scan_timeout_s']} and {p['scan_wait_s']}")
        self.nav_params = NavParams(
            follower=FollowerParams(max_linear=float(p["max_linear_speed"]),
                                    max_angular=float(p["max_angular_speed"]),
                                    xy_goal_tolerance=float(p["xy_goal_tolerance"]),
                                    yaw_goal_tolerance=float(p["yaw_goal_tolerance"])),
            monitor=MonitorParams(corridor=float(p["obstacle_corridor"])),
            costmap=CostParams(robot_radius=float(p["robot_radius"]),
                               safety_margin=float(p["safety_margin"]),
                               inflation_radius=float(p["inflation_radius"])),
            obstacle_wait_s=float(p["obstacle_wait_s"]), max_recoveries=int(p["max_recoveries"]),
            progress_timeout_s=float(p["progress_timeout_s"]),
            require_scan=bool(p["require_scan"]), scan_wait_s=float(p["scan_wait_s"]))
        self.navigator = Navigator(params=self.nav_params, on_path=self._publish_path)
        self._map_lock = threading.Lock()
        self._grid: GridMap | None = None
        self._grid_pending = False
        self._scan: ScanData | None = None
        self._scan_time = 0.0
        self.tf = TransformCache()
        self.tf.subscribe(self.sensor_input)
        self.odom = OdomPose(self.tf, p["map_frame"])
        sensors = self.sensor_input
        sensors.subscribe(Odometry, "odom", self.odom.on_odom, 10)
        sensors.subscribe(LaserScan, "scan", self._on_scan, qos_profile_sensor_data)
        sensors.subscribe(OccupancyGrid, "map", self._on_map, LATCHED_QOS)
        self.cmd_pub = self.create_publisher(
            TwistStamped if self.params["cmd_vel_stamped"] else Twist, "cmd_vel", 10)
        self.path_pub = self.create_publisher(Path, "~/plan", LATCHED_QOS)
        self.feedback_pub = self.create_publisher(String, "~/feedback", 10)
        self._nav2 = None
        if p["backend"] == "nav2":
            self._make_nav2_client()

    def _make_nav2_client(self) -> None:
        try:
            from nav2_msgs.action import NavigateToPose
            from rclpy.action import ActionClient
        except ImportError as exc:
            raise RuntimeError(f"backend nav2 needs nav2_msgs ({exc}); use backend "
                               f"builtin") from None
        self._NavigateToPose = NavigateToPose
        self._nav2 = ActionClient(self, NavigateToPose, self.params["nav2_action"],
                                  callback_group=self.sensor_group)

    # -- sensors ---------------------------------------------------------------------------------
    def _on_map(self, msg: OccupancyGrid) -> None:
        q = msg.info.origin.orientation
        yaw = math.atan2(2.0 * (q.w * q.z + q.x * q.y), 1.0 - 2.0 * (q.y * q.y + q.z * q.z))
        try:
            grid = GridMap.from_message_fields(msg.data, msg.info.width, msg.info.height,
                                               msg.info.resolution, msg.info.origin.position.x,
                                               msg.info.origin.position.y, yaw,
                                               msg.header.frame_id or "map")
        except MapError as exc:
            self.get_logger().error(f"ignoring /map: {exc}")
            return
        with self._map_lock:
            self._grid, self._grid_pending = grid, True

    def _on_scan(self, msg: LaserScan) -> None:
        mount = (float(self.params["laser_x"]), 0.0, 0.0)
        m = self.tf.lookup(self.params["base_frame"], msg.header.frame_id)
        if m is not None:
            mount = pose2d_from_matrix(m)
        self._scan = ScanData(np.asarray(msg.ranges, dtype=np.float64), msg.angle_min,
                              msg.angle_increment, msg.range_min, msg.range_max, mount)
        self._scan_time = time.monotonic()

    def _publish_path(self, waypoints) -> None:
        msg = Path()
        msg.header.frame_id = self.params["map_frame"]
        msg.header.stamp = self.get_clock().now().to_msg()
        for x, y in waypoints:
            pose = PoseStamped()
            pose.header = msg.header
            pose.pose.position.x, pose.pose.position.y = float(x), float(y)
            pose.pose.orientation.w = 1.0
            msg.poses.append(pose)
        self.path_pub.publish(msg)

    # -- the skill -------------------------------------------------------------------------------
    def goal_for(self, skill: Skill) -> tuple[str, tuple[float, float, float]]:
        """(location, approach pose in the map frame) of a navigation skill; raises ValueError."""
        if skill.kind == "navigate":
            location = skill.location
        elif skill.kind == "navigate_to_object":
            state = self.world_state
            if state is None:
                raise ValueError(f"cannot {skill.text}: no world state says where the "
                                 f"{skill.object} is")
            where = dict(zip(state.objects, state.object_locations)).get(skill.object)
            if where in (None, "", GRIPPER) or where not in self.kitchen.locations:
                reason = "it is in the gripper" if where == GRIPPER else (
                    "it is not in the kitchen" if not where else f"it is on the {where}")
                raise ValueError(f"cannot {skill.text}: {reason}")
            location = where
        else:
            raise ValueError(f"{skill.text!r} is not a navigation skill")
        loc = self.kitchen.location(location)
        return location, (loc.approach[0], loc.approach[1], loc.yaw)

    def run_skill(self, skill: Skill, job: SkillJob) -> tuple[bool, str]:
        try:
            location, goal = self.goal_for(skill)
        except ValueError as exc:
            return False, str(exc)
        if self._nav2 is not None:
            return self._run_nav2(location, goal, job)
        return self._run_builtin(location, goal, job)

    def _wait_for_sensors(self, job: SkillJob) -> str | None:
        deadline = time.monotonic() + float(self.params["map_timeout_s"])
        while time.monotonic() < deadline:
            with self._map_lock:
                have_map = self._grid is not None
            if have_map and self.odom.age < float(self.params["sensor_timeout_s"]):
                return None
            job.sleep(0.05)
        with self._map_lock:
            have_map = self._grid is not None
        return "no map received on /map" if not have_map else "no odometry on /odom"

    def _run_builtin(self, location: str, goal, job: SkillJob) -> tuple[bool, str]:
        problem = self._wait_for_sensors(job)
        if problem is not None:
            return False, f"cannot go to the {location}: {problem}"
        with self._map_lock:
            if self._grid_pending:
                self.navigator.set_map(self._grid)
                self._grid_pending = False
        period = self.control_period
        result = self.navigator.start(goal, self.odom.pose(), time.monotonic())
        try:
            while result is None:
                job.check()
                now = time.monotonic()
                if self.odom.age > float(self.params["sensor_timeout_s"]):
                    self.stop_robot()
                    self.navigator.cancel()
                    return False, f"odometry lost on the way to the {location}"
                fresh = now - self._scan_time < float(self.params["scan_timeout_s"])
                scan = self._scan if fresh else None
                step = self.navigator.update(self.odom.pose(), scan, now)
                self.send_command(job, lambda: self.publish_velocity(float(step.linear),
                                                                     float(step.angular)))
                if step.feedback is not None:
                    job.feedback = step.feedback.to_dict()
                    self.feedback_pub.publish(String(data=json.dumps(job.feedback)))
                result = step.result
                if result is None:
                    job.sleep(period)
        finally:
            if self.navigator.active:
                self.navigator.cancel()
                self.navigator.update(None, None, time.monotonic())
        self.stop_robot()
        if result.success:
            return True, f"at the {location}"
        return False, f"navigation to the {location} failed: {result.error_msg} " \
                      f"(error {result.error_code})"

    def _run_nav2(self, location: str, goal, job: SkillJob) -> tuple[bool, str]:
        from action_msgs.msg import GoalStatus
        client = self._nav2
        if not client.wait_for_server(timeout_sec=float(self.params["nav2_server_timeout_s"])):
            return False, f"Nav2 action server {self.params['nav2_action']!r} is not available"
        request = self._NavigateToPose.Goal()
        request.pose.header.frame_id = self.params["map_frame"]
        request.pose.header.stamp = self.get_clock().now().to_msg()
        request.pose.pose.position.x, request.pose.pose.position.y = float(goal[0]), float(goal[1])
        q = request.pose.pose.orientation
        q.x, q.y, q.z, q.w = yaw_quaternion(goal[2])
        if hasattr(request, "behavior_tree"):
            request.behavior_tree = self.params["nav2_behavior_tree"]

        def on_feedback(message) -> None:
            fb = message.feedback
            pose = fb.current_pose.pose
            job.feedback = {
                "current_pose": [pose.position.x, pose.position.y],
                "navigation_time": fb.navigation_time.sec + fb.navigation_time.nanosec * 1e-9,
                "estimated_time_remaining": (fb.estimated_time_remaining.sec
                                             + fb.estimated_time_remaining.nanosec * 1e-9),
                "number_of_recoveries": int(fb.number_of_recoveries),
                "distance_remaining": float(fb.distance_remaining)}
            self.feedback_pub.publish(String(data=json.dumps(job.feedback)))

        sent = client.send_goal_async(request, feedback_callback=on_feedback)
        handle = None
        try:
            while not sent.done():
                job.sleep(0.05)
            handle = sent.result()
            if handle is None or not handle.accepted:
                return False, f"Nav2 rejected the goal to the {location}"
            result_future = handle.get_result_async()
            while not result_future.done():
                job.sleep(0.1)
        except SkillCancelled:               # cancel or timeout: stop Nav2's goal too
            deadline = time.monotonic() + 2.0
            while handle is None and not sent.done() and time.monotonic() < deadline:
                time.sleep(0.05)
            if handle is None and sent.done():
                handle = sent.result()
            if handle is not None and handle.accepted:
                cancel = handle.cancel_goal_async()
                while not cancel.done() and time.monotonic() < deadline + 2.0:
                    time.sleep(0.05)
            raise
        wrapped = result_future.result()
        status = wrapped.status
        detail = getattr(wrapped.result, "error_msg", "") or ""
        code = getattr(wrapped.result, "error_code", 0)
        if status == GoalStatus.STATUS_SUCCEEDED:
            return True, f"at the {location}"
        name = {GoalStatus.STATUS_ABORTED: "aborted", GoalStatus.STATUS_CANCELED: "canceled"}.get(
            status, f"status {status}")
        return False, f"Nav2 {name} the goal to the {location}" + (
            f": {detail} (error {code})" if detail or code else "")

    def stop_robot(self) -> None:
        self.publish_velocity(0.0, 0.0)

    def publish_velocity(self, linear: float, angular: float) -> None:
        """One base command on cmd_vel, stamped (in the base frame) or not, as configured."""
        twist = Twist()
        twist.linear.x, twist.angular.z = linear, angular
        if not self.params["cmd_vel_stamped"]:
            self.cmd_pub.publish(twist)
            return
        self.cmd_pub.publish(stamped_twist(self, self.params["base_frame"], twist))


def main(args=None) -> None:
    spin_node(NavigateSkillNode, args)


if __name__ == "__main__":
    main()
