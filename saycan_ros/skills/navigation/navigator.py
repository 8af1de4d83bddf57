"""A navigation executor with Nav2's NavigateToPose semantics, free of ROS.

One goal at a time: a pose in the map frame. ``start()`` plans on the costmap (failing at once
when the goal is unreachable); every ``update(pose, scan, now)`` returns the velocity command
and the feedback (current pose, navigation time, estimated time remaining, number of
recoveries, distance remaining: NavigateToPose's feedback fields); the goal ends SUCCEEDED,
ABORTED (with an error code and message, like NavigateToPose's result) or CANCELED.

Behaviour, the way Nav2's default behaviour tree does it:

- an obstacle the map does not explain on the path ahead stops the robot (collision monitor);
  if it is still there after ``obstacle_wait_s`` it is marked on the costmap and the path is
  replanned around it (a recovery); with no way around, the goal aborts;
- a progress checker aborts a robot that does not move ``progress_radius`` within
  ``progress_timeout_s`` after ``max_recoveries`` replanning attempts (a stuck robot backs up a
  little first, like the backup behaviour);
- the path is replanned every ``replan_period_s`` from where the robot is.

The same class drives the ``navigate_skill`` node (poses from /odom and tf, scans from /scan,
the map from /map) and the ROS-free evaluation on the simulator core.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum
from typing import Callable

import numpy as np

from saycan_ros.skills.navigation.controller import (FollowerParams, MonitorParams,
                                                     ObstacleMonitor, PathFollower, Pose,
                                                     ScanData)
from saycan_ros.skills.navigation.grid import CostMap, CostParams, GlobalPlanner, GridMap, PlanFailure


class NavStatus(str, Enum):
    IDLE = "idle"
    ACTIVE = "active"
    SUCCEEDED = "succeeded"
    ABORTED = "aborted"
    CANCELED = "canceled"


#: Error codes of the result (names after Nav2's planner/controller error codes).
ERROR_CODES = {
    "none": 0,
    "unknown": 9000,
    "no_map": 9100,
    "outside_map": 9101,
    "start_occupied": 9102,
    "goal_occupied": 9103,
    "no_valid_path": 9104,
    "blocked": 9200,
    "no_progress": 9201,
    "no_odometry": 9202,
    "no_scan": 9203,
}


@dataclass(frozen=True)
class NavParams:
    follower: FollowerParams = FollowerParams()
    monitor: MonitorParams = MonitorParams()
    costmap: CostParams = CostParams()
    obstacle_wait_s: float = 2.0         # stand still this long before replanning around it
    max_recoveries: int = 4              # replans around obstacles / backups when stuck
    progress_radius: float = 0.2         # the robot must move this far ...
    progress_timeout_s: float = 8.0      # ... within this long (while driving toward the goal)
    replan_period_s: float = 0.0         # > 0: replan from the current pose this often
    backup_distance: float = 0.15        # backup behaviour when stuck, m
    backup_speed: float = 0.1            # m/s
    # Without a current scan the collision monitor is blind: with require_scan the base does not
    # drive forward on a missing scan (update(scan=None)); it waits, then aborts (Nav2's
    # collision monitor likewise stops when a source times out).
    require_scan: bool = False
    scan_wait_s: float = 2.0


@dataclass
class NavFeedback:
    current_pose: Pose
    navigation_time: float
    estimated_time_remaining: float
    number_of_recoveries: int
    distance_remaining: float
    # following | rotating | waiting_for_obstacle | waiting_for_scan | backing_up | replanned |
    # arrived | aborted
    state: str = "following"

    def to_dict(self) -> dict:
        return {"current_pose": [round(v, 4) for v in self.current_pose],
                "navigation_time": round(self.navigation_time, 3),
                "estimated_time_remaining": round(self.estimated_time_remaining, 3),
                "number_of_recoveries": self.number_of_recoveries,
                "distance_remaining": round(self.distance_remaining, 4), "state": self.state}


@dataclass
class NavResult:
    status: NavStatus
    error_code: int = 0
    error_msg: str = ""

    @property
    def success(self) -> bool:
        return self.status == NavStatus.SUCCEEDED


@dataclass
class NavStep:
    linear: float
    angular: float
    feedback: NavFeedback | None
    result: NavResult | None = None    # set when the goal has ended


@dataclass
class _Goal:
    pose: Pose
    started: float
    follower: PathFollower | None = None
    path: list = field(default_factory=list)
    recoveries: int = 0
    blocked_since: float | None = None
    scan_missing_since: float | None = None
    progress_pose: Pose | None = None
    progress_time: float = 0.0
    last_plan: float = 0.0
    backup_from: Pose | None = None


class Navigator:
    """Plans and follows one goal at a time (see the module docstring)."""

    def __init__(self, grid: GridMap | None = None, params: NavParams | None = None,
                 on_path: Callable[[list], None] | None = None):
        self.params = params or NavParams()
        self.monitor = ObstacleMonitor(self.params.monitor)
        self.costmap: CostMap | None = None
        self.planner: GlobalPlanner | None = None
        self.on_path = on_path              # called with every new global path (for /plan)
        self.status = NavStatus.IDLE
        self.result: NavResult | None = None
        self._goal: _Goal | None = None
        self._cancel = False
        if grid is not None:
            self.set_map(grid)

    # -- map ---------------------------------------------------------------------------------------
    def set_map(self, grid: GridMap) -> None:
        self.costmap = CostMap(grid, self.params.costmap)
        self.planner = GlobalPlanner(self.costmap)

    def plan(self, start: tuple[float, float], goal: tuple[float, float]):
        """A global plan (raises PlanFailure), without starting a goal."""
        if self.planner is None:
            raise PlanFailure("no_map", "no map to plan on")
        return self.planner.plan(start, goal)

    # -- goals -------------------------------------------------------------------------------------
    @property
    def active(self) -> bool:
        return self.status == NavStatus.ACTIVE

    def start(self, goal: Pose, pose: Pose, now: float) -> NavResult | None:
        """Accept a goal (x, y, yaw in the map frame) from the robot's pose. Returns the result
        at once when the goal cannot even be planned for (ABORTED), else None."""
        self._cancel = False
        self._goal = _Goal(tuple(map(float, goal)), now, progress_pose=pose, progress_time=now)
        self.status = NavStatus.ACTIVE
        self.result = None
        if self.costmap is not None:
            self.costmap.clear_dynamic()
        failure = self._replan(pose, now)
        if failure is not None:
            return self._finish(NavStatus.ABORTED, failure.code, failure.message)
        return None

    def cancel(self) -> None:
        self._cancel = True

    def _replan(self, pose: Pose, now: float) -> PlanFailure | None:
        goal = self._goal
        try:
            plan = self.plan((pose[0], pose[1]), (goal.pose[0], goal.pose[1]))
        except PlanFailure as exc:
            return exc
        goal.path = plan.waypoints
        goal.follower = PathFollower(plan.waypoints, goal.pose[2], self.params.follower)
        goal.last_plan = now
        if self.on_path is not None:
            self.on_path(list(plan.waypoints))
        return None

    def _finish(self, status: NavStatus, code: str = "none", message: str = "") -> NavResult:
        self.status = status
        self.result = NavResult(status, ERROR_CODES.get(code, ERROR_CODES["unknown"]), message)
        return self.result

    def _feedback(self, pose: Pose, now: float, state: str) -> NavFeedback:
        goal = self._goal
        remaining = goal.follower.remaining(pose[0], pose[1]) if goal.follower else math.inf
        speed = max(0.1, 0.7 * self.params.follower.max_linear)
        return NavFeedback(tuple(pose), now - goal.started, remaining / speed, goal.recoveries,
                           remaining, state)

    def update(self, pose: Pose | None, scan: ScanData | None, now: float) -> NavStep:
        """One control cycle: the (linear, angular) command, feedback, and the result once the
        goal has ended (the command is then zero)."""
        goal = self._goal
        if self.status != NavStatus.ACTIVE or goal is None:
            return NavStep(0.0, 0.0, None, self.result)
        if self._cancel:
            return NavStep(0.0, 0.0, None, self._finish(NavStatus.CANCELED, "none", "canceled"))
        if pose is None:
            return NavStep(0.0, 0.0, None, self._finish(NavStatus.ABORTED, "no_odometry",
                                                        "no odometry"))
        p = self.params
        # Periodic replanning from where the robot is (not during the final turn).
        if (p.replan_period_s > 0 and now - goal.last_plan >= p.replan_period_s
                and goal.follower is not None and not goal.follower.xy_reached
                and goal.backup_from is None):
            failure = self._replan(pose, now)
            if failure is not None:
                return self._abort(failure.code, failure.message, pose, now)

        # Backup behaviour (after being stuck): straight back a little, then replan.
        if goal.backup_from is not None:
            moved = math.hypot(pose[0] - goal.backup_from[0], pose[1] - goal.backup_from[1])
            if moved < p.backup_distance and now - goal.progress_time < 3.0:
                return NavStep(-p.backup_speed, 0.0, self._feedback(pose, now, "backing_up"))
            goal.backup_from = None
            goal.progress_pose, goal.progress_time = pose, now
            failure = self._replan(pose, now)
            if failure is not None:
                return self._abort(failure.code, failure.message, pose, now)

        command = goal.follower.command(pose)
        if command.done:
            fb = self._feedback(pose, now, "arrived")
            return NavStep(0.0, 0.0, fb, self._finish(NavStatus.SUCCEEDED, "none", "goal reached"))

        # Collision monitor: unmapped obstacles on the path ahead stop the robot.
        if scan is None and command.linear > 0.0 and p.require_scan:
            if goal.scan_missing_since is None:
                goal.scan_missing_since = now
            if now - goal.scan_missing_since >= p.scan_wait_s:
                return self._abort("no_scan", f"no current laser scan for {p.scan_wait_s:g} s: "
                                              f"not driving without obstacle detection", pose, now)
            goal.progress_time = now            # waiting is not a lack of progress
            return NavStep(0.0, 0.0, self._feedback(pose, now, "waiting_for_scan"))
        if scan is not None:
            goal.scan_missing_since = None
        if scan is not None and command.linear > 0.0:
            ahead = goal.follower.path_ahead(pose[0], pose[1],
                                             self.monitor.lookahead(command.linear))
            points = self.monitor.unmapped(scan.points(pose, max_range=3.0), self.costmap)
            blocking = self.monitor.blocking(points, ahead)
            if len(blocking):
                if goal.blocked_since is None:
                    goal.blocked_since = now
                if now - goal.blocked_since >= p.obstacle_wait_s:
                    return self._around(blocking, pose, now)
                goal.progress_time = now            # waiting is not a lack of progress
                return NavStep(0.0, 0.0, self._feedback(pose, now, "waiting_for_obstacle"))
        goal.blocked_since = None

        # Progress checker (only while translating toward the goal).
        if command.linear == 0.0:            # turning on the spot is progress enough
            goal.progress_pose, goal.progress_time = pose, now
        elif math.hypot(pose[0] - goal.progress_pose[0],
                        pose[1] - goal.progress_pose[1]) >= p.progress_radius:
            goal.progress_pose, goal.progress_time = pose, now
        elif now - goal.progress_time > p.progress_timeout_s:
            if goal.recoveries >= p.max_recoveries:
                return self._abort("no_progress", f"no progress for {p.progress_timeout_s:g} s "
                                                  f"after {goal.recoveries} recoveries", pose, now)
            goal.recoveries += 1
            goal.backup_from = pose
            goal.progress_time = now
            return NavStep(-p.backup_speed, 0.0, self._feedback(pose, now, "backing_up"))
        state = "rotating" if command.linear == 0.0 else "following"
        return NavStep(command.linear, command.angular, self._feedback(pose, now, state))

    def _around(self, blocking: np.ndarray, pose: Pose, now: float) -> NavStep:
        goal = self._goal
        p = self.params
        if goal.recoveries >= p.max_recoveries:
            return self._abort("blocked", f"path blocked by an obstacle at ({blocking[0][0]:.2f}, "
                                          f"{blocking[0][1]:.2f}) after {goal.recoveries} "
                                          f"recoveries", pose, now)
        goal.recoveries += 1
        self.costmap.mark_obstacles([tuple(q) for q in blocking])
        goal.blocked_since = None
        failure = self._replan(pose, now)
        if failure is not None:
            return self._abort("blocked", f"path blocked by an obstacle at ({blocking[0][0]:.2f}, "
                                          f"{blocking[0][1]:.2f}) and no way around it "
                                          f"({failure.message})", pose, now)
        return NavStep(0.0, 0.0, self._feedback(pose, now, "replanned"))

    def _abort(self, code: str, message: str, pose: Pose, now: float) -> NavStep:
        fb = self._feedback(pose, now, "aborted")
        return NavStep(0.0, 0.0, fb, self._finish(NavStatus.ABORTED, code, message))
