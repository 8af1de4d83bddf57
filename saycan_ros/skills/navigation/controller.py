"""The local side of the navigation executor: following a global path, and stopping for
obstacles a laser sees.

ROS-free. :class:`PathFollower` is a pure-pursuit controller for a differential-drive base: it
turns on the spot toward the path when the path is well off its nose, slows down toward the
goal, and ends with a turn on the spot to the goal heading (Nav2's goal checker semantics:
the position tolerance is latched, then the heading is corrected). :class:`ObstacleMonitor`
finds laser points that the map does not explain and that lie on the path ahead (a collision
monitor's stop zone, swept along the path rather than a fixed polygon, so that furniture right
behind the goal does not stop the robot from arriving).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from saycan_ros.skills.navigation.grid import CostMap, Point

Pose = tuple[float, float, float]


def wrap_angle(angle: float) -> float:
    return math.atan2(math.sin(angle), math.cos(angle))


@dataclass(frozen=True)
class FollowerParams:
    max_linear: float = 0.6          # m/s
    max_angular: float = 1.2         # rad/s
    lookahead: float = 0.35          # pure pursuit lookahead along the path, m
    heading_gain: float = 2.5        # angular command per radian of heading error
    rotate_threshold: float = 0.6    # turn on the spot when the path is this far off the nose, rad
    approach_gain: float = 1.2       # linear speed per metre to the goal near the end
    xy_goal_tolerance: float = 0.03  # m
    yaw_goal_tolerance: float = 0.03  # rad
    final_approach: float = 0.3      # aim at the goal point itself within this distance, m


@dataclass
class FollowerCommand:
    linear: float
    angular: float
    done: bool
    distance_remaining: float


class PathFollower:
    """(v, w) commands along waypoints, then a turn on the spot to the goal heading."""

    def __init__(self, waypoints: Sequence[Point], goal_yaw: float,
                 params: FollowerParams | None = None):
        if len(waypoints) < 1:
            raise ValueError("a path needs at least one waypoint")
        self.params = params or FollowerParams()
        self.waypoints = [tuple(map(float, p)) for p in waypoints]
        if len(self.waypoints) == 1:
            self.waypoints.append(self.waypoints[0])
        self.goal_yaw = float(goal_yaw)
        self.segment = 0                 # index of the segment being followed
        self.xy_reached = False
        seg = [math.hypot(b[0] - a[0], b[1] - a[1])
               for a, b in zip(self.waypoints, self.waypoints[1:])]
        self._seg_len = seg
        self._after = [sum(seg[i + 1:]) for i in range(len(seg))]   # length after each segment

    @property
    def goal(self) -> Point:
        return self.waypoints[-1]

    def _project(self, x: float, y: float) -> tuple[int, float, float]:
        """(segment, t along it in metres, distance) of the closest path point at or after the
        current segment (progress never goes back)."""
        best = (self.segment, 0.0, math.inf)
        for i in range(self.segment, min(self.segment + 3, len(self._seg_len))):
            (ax, ay), (bx, by) = self.waypoints[i], self.waypoints[i + 1]
            length = self._seg_len[i]
            if length < 1e-9:
                t = 0.0
            else:
                t = ((x - ax) * (bx - ax) + (y - ay) * (by - ay)) / length
                t = min(max(t, 0.0), length)
            px = ax + (bx - ax) * (t / length if length > 1e-9 else 0.0)
            py = ay + (by - ay) * (t / length if length > 1e-9 else 0.0)
            d = math.hypot(x - px, y - py)
            if d < best[2] - 1e-9:
                best = (i, t, d)
        return best

    def remaining(self, x: float, y: float) -> float:
        """Distance left along the path from the robot's projection on it."""
        if self.xy_reached:
            return 0.0
        seg, t, d = self._project(x, y)
        return d + (self._seg_len[seg] - t) + self._after[seg]

    def point_ahead(self, seg: int, t: float, distance: float) -> Point:
        """The path point ``distance`` further along from (segment, t)."""
        left = distance
        while seg < len(self._seg_len):
            length = self._seg_len[seg]
            if t + left <= length or seg == len(self._seg_len) - 1:
                s = min(t + left, length)
                (ax, ay), (bx, by) = self.waypoints[seg], self.waypoints[seg + 1]
                f = s / length if length > 1e-9 else 1.0
                return ax + (bx - ax) * f, ay + (by - ay) * f
            left -= length - t
            seg, t = seg + 1, 0.0
        return self.goal

    def path_ahead(self, x: float, y: float, distance: float) -> list[Point]:
        """The path from the robot's projection to ``distance`` further along (polyline)."""
        seg, t, _ = self._project(x, y)
        (ax, ay), (bx, by) = self.waypoints[seg], self.waypoints[seg + 1]
        length = self._seg_len[seg]
        f = t / length if length > 1e-9 else 0.0
        points = [(ax + (bx - ax) * f, ay + (by - ay) * f)]
        left = distance
        s, tt = seg, t
        while s < len(self._seg_len) and left > 0:
            step = self._seg_len[s] - tt
            if step >= left:
                points.append(self.point_ahead(s, tt, left))
                break
            points.append(self.waypoints[s + 1])
            left -= step
            s, tt = s + 1, 0.0
        return points

    def command(self, pose: Pose) -> FollowerCommand:
        p = self.params
        x, y, yaw = pose
        gx, gy = self.goal
        to_goal = math.hypot(gx - x, gy - y)
        if not self.xy_reached and to_goal <= p.xy_goal_tolerance:
            self.xy_reached = True
        if self.xy_reached:
            error = wrap_angle(self.goal_yaw - yaw)
            if abs(error) <= p.yaw_goal_tolerance:
                return FollowerCommand(0.0, 0.0, True, 0.0)
            w = max(-p.max_angular, min(p.max_angular, p.heading_gain * error))
            if abs(w) < 0.15:                  # enough to overcome nothing but keep it moving
                w = math.copysign(0.15, error)
            return FollowerCommand(0.0, w, False, 0.0)
        seg, t, _ = self._project(x, y)
        self.segment = seg
        remaining = self.remaining(x, y)
        if to_goal <= p.final_approach or remaining <= p.final_approach:
            tx, ty = gx, gy
        else:
            tx, ty = self.point_ahead(seg, t, p.lookahead)
        heading = wrap_angle(math.atan2(ty - y, tx - x) - yaw)
        w = max(-p.max_angular, min(p.max_angular, p.heading_gain * heading))
        if abs(heading) > p.rotate_threshold:
            return FollowerCommand(0.0, w, False, remaining)
        v = min(p.max_linear, p.approach_gain * remaining)
        v *= max(0.0, math.cos(heading))
        return FollowerCommand(v, w, False, remaining)


@dataclass(frozen=True)
class ScanData:
    """A planar laser scan and where the laser sits on the base (x, y, yaw in base_link)."""
    ranges: np.ndarray
    angle_min: float
    angle_increment: float
    range_min: float = 0.0
    range_max: float = math.inf
    mount: Pose = (0.0, 0.0, 0.0)

    def points(self, pose: Pose, max_range: float = math.inf) -> np.ndarray:
        """Valid returns as (N, 2) map-frame points for a base at ``pose``."""
        r = np.asarray(self.ranges, dtype=np.float64)
        angles = self.angle_min + self.angle_increment * np.arange(r.size)
        ok = np.isfinite(r) & (r >= self.range_min) & (r <= min(self.range_max, max_range))
        r, angles = r[ok], angles[ok]
        mx, my, myaw = self.mount
        x, y, yaw = pose
        lx = mx + r * np.cos(angles + myaw)
        ly = my + r * np.sin(angles + myaw)
        c, s = math.cos(yaw), math.sin(yaw)
        return np.stack([x + c * lx - s * ly, y + s * lx + c * ly], axis=1)


@dataclass(frozen=True)
class MonitorParams:
    corridor: float = 0.33           # half-width of the stop zone around the path ahead, m
    min_lookahead: float = 0.45      # the stop zone reaches at least this far along the path, m
    stop_time: float = 1.0           # ... and this many seconds at the current speed
    map_tolerance: float = 0.1       # laser points this close to a mapped obstacle are the map


class ObstacleMonitor:
    """Unmapped laser points on the path ahead of the robot."""

    def __init__(self, params: MonitorParams | None = None):
        self.params = params or MonitorParams()

    def unmapped(self, points: np.ndarray, costmap: CostMap | None) -> np.ndarray:
        if costmap is None or len(points) == 0:
            return points
        return points[~costmap.near_obstacles(points, self.params.map_tolerance)]

    def blocking(self, points: np.ndarray, path: Sequence[Point]) -> np.ndarray:
        """The points within ``corridor`` of the polyline ``path``."""
        if len(points) == 0 or len(path) == 0:
            return points[:0]
        if len(path) == 1:
            path = [path[0], path[0]]
        best = np.full(len(points), np.inf)
        for a, b in zip(path, path[1:]):
            a, b = np.asarray(a), np.asarray(b)
            ab = b - a
            denom = float(ab @ ab)
            t = np.zeros(len(points)) if denom < 1e-12 else np.clip((points - a) @ ab / denom, 0, 1)
            closest = a + t[:, None] * ab
            best = np.minimum(best, np.hypot(*(points - closest).T))
        return points[best <= self.params.corridor]

    def lookahead(self, speed: float) -> float:
        p = self.params
        return max(p.min_lookahead, abs(speed) * p.stop_time + p.min_lookahead)
