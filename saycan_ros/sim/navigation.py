"""Scripted driving for the simulated base: A* on the inflated occupancy grid, then a
pure-pursuit follower that ends by turning to the goal heading.

Used by the simulator's skill executor and the rendered demo episode; the ROS stack's own
navigation talks to the simulator through /cmd_vel like to any robot.
"""
from __future__ import annotations

import heapq
import math

import cv2
import numpy as np

from saycan_ros.sim.base import wrap_angle
from saycan_ros.sim.floorplan import FloorPlan

RESOLUTION = 0.05


class GridPlanner:
    def __init__(self, plan: FloorPlan, robot_radius: float, margin: float = 0.04):
        self.grid = plan.occupancy_grid(RESOLUTION) > 0
        cells = int(math.ceil((robot_radius + margin) / RESOLUTION))
        kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * cells + 1, 2 * cells + 1))
        self.blocked = cv2.dilate(self.grid.astype(np.uint8), kernel) > 0

    def _cell(self, x: float, y: float) -> tuple[int, int]:
        rows, cols = self.blocked.shape
        return (min(max(int(y / RESOLUTION), 0), rows - 1),
                min(max(int(x / RESOLUTION), 0), cols - 1))

    def free(self, x: float, y: float) -> bool:
        return not self.blocked[self._cell(x, y)]

    def plan(self, start: tuple[float, float], goal: tuple[float, float]) -> list[tuple[float, float]] | None:
        """Waypoints from start to goal (map frame), shortcut to the corners; None if no path."""
        s, g = self._cell(*start), self._cell(*goal)
        blocked = self.blocked.copy()
        blocked[s] = blocked[g] = False          # start and goal may touch the inflation
        rows, cols = blocked.shape
        steps = [(-1, 0, 1.0), (1, 0, 1.0), (0, -1, 1.0), (0, 1, 1.0),
                 (-1, -1, 1.414), (-1, 1, 1.414), (1, -1, 1.414), (1, 1, 1.414)]
        came: dict[tuple[int, int], tuple[int, int]] = {s: s}
        cost = {s: 0.0}
        queue = [(0.0, s)]
        while queue:
            _, cell = heapq.heappop(queue)
            if cell == g:
                break
            for dr, dc, step in steps:
                nxt = (cell[0] + dr, cell[1] + dc)
                if not (0 <= nxt[0] < rows and 0 <= nxt[1] < cols) or blocked[nxt]:
                    continue
                new = cost[cell] + step
                if new < cost.get(nxt, math.inf):
                    cost[nxt], came[nxt] = new, cell
                    heapq.heappush(queue, (new + math.hypot(nxt[0] - g[0], nxt[1] - g[1]), nxt))
        if g not in came:
            return None
        cells = [g]
        while cells[-1] != s:
            cells.append(came[cells[-1]])
        cells.reverse()
        points = [((c + 0.5) * RESOLUTION, (r + 0.5) * RESOLUTION) for r, c in cells]
        points[0], points[-1] = start, goal
        return self._shortcut(points, blocked)

    def _shortcut(self, points, blocked) -> list[tuple[float, float]]:
        out = [points[0]]
        i = 0
        while i < len(points) - 1:
            j = len(points) - 1
            while j > i + 1 and not self._line_free(points[i], points[j], blocked):
                j -= 1
            out.append(points[j])
            i = j
        return out

    def _line_free(self, a, b, blocked) -> bool:
        n = max(2, int(math.hypot(b[0] - a[0], b[1] - a[1]) / (RESOLUTION / 2)))
        for t in np.linspace(0.0, 1.0, n):
            if blocked[self._cell(a[0] + t * (b[0] - a[0]), a[1] + t * (b[1] - a[1]))]:
                return False
        return True


class PathFollower:
    """(v, w) commands along waypoints, then a turn on the spot to the goal heading."""

    def __init__(self, waypoints, goal_yaw: float, max_v: float = 0.6, max_w: float = 1.2,
                 tolerance: float = 0.02, yaw_tolerance: float = 0.015):
        self.waypoints = list(waypoints)
        self.goal_yaw = goal_yaw
        self.max_v, self.max_w = max_v, max_w
        self.tolerance, self.yaw_tolerance = tolerance, yaw_tolerance
        self.index = 1

    def command(self, x: float, y: float, yaw: float) -> tuple[float, float, bool]:
        """(linear, angular, done) for the current pose."""
        while self.index < len(self.waypoints):
            wx, wy = self.waypoints[self.index]
            last = self.index == len(self.waypoints) - 1
            dist = math.hypot(wx - x, wy - y)
            if dist > (self.tolerance if last else 0.15):
                heading = wrap_angle(math.atan2(wy - y, wx - x) - yaw)
                w = max(-self.max_w, min(self.max_w, 2.5 * heading))
                # Turn first when the waypoint is well off the nose; slow down near the goal.
                v = 0.0 if abs(heading) > 0.6 else min(self.max_v, 1.2 * dist if last else self.max_v)
                return v * math.cos(heading), w, False
            self.index += 1
        error = wrap_angle(self.goal_yaw - yaw)
        if abs(error) > self.yaw_tolerance:
            return 0.0, max(-self.max_w, min(self.max_w, 2.5 * error)), False
        return 0.0, 0.0, True
