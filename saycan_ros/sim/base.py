"""A differential-drive base: velocity commands in, a pose out, no driving through things."""
from __future__ import annotations

import math
from dataclasses import dataclass

from saycan_ros.sim.floorplan import FloorPlan


@dataclass(frozen=True)
class BaseLimits:
    max_linear: float = 0.8        # m/s
    max_angular: float = 1.5       # rad/s
    linear_accel: float = 1.0      # m/s^2
    angular_accel: float = 3.0     # rad/s^2
    radius: float = 0.3            # footprint (a disc), m


def _clamp(value: float, limit: float) -> float:
    return max(-limit, min(limit, value))


def wrap_angle(angle: float) -> float:
    return math.atan2(math.sin(angle), math.cos(angle))


class DiffDriveBase:
    """Integrates (v, w) commands with speed and acceleration limits on a floor plan.

    A step that would make the footprint overlap a wall or furniture is not taken and the
    base stops there, like a bumper stop; it can still turn in place or back away.
    """

    def __init__(self, limits: BaseLimits | None = None):
        self.limits = limits or BaseLimits()
        self.x = self.y = self.yaw = 0.0
        self.v = self.w = 0.0            # current velocities (after limits)
        self.cmd_v = self.cmd_w = 0.0    # commanded velocities
        self.bumped = False

    def place(self, x: float, y: float, yaw: float) -> None:
        self.x, self.y, self.yaw = x, y, wrap_angle(yaw)
        self.v = self.w = self.cmd_v = self.cmd_w = 0.0
        self.bumped = False

    def command(self, linear: float, angular: float) -> None:
        """Set the commanded velocity; non-finite values stop the base."""
        if not (math.isfinite(linear) and math.isfinite(angular)):
            linear = angular = 0.0
        self.cmd_v = _clamp(linear, self.limits.max_linear)
        self.cmd_w = _clamp(angular, self.limits.max_angular)

    def step(self, dt: float, plan: FloorPlan) -> None:
        lim = self.limits
        self.v += _clamp(self.cmd_v - self.v, lim.linear_accel * dt)
        self.w += _clamp(self.cmd_w - self.w, lim.angular_accel * dt)
        if self.v == 0.0 and self.w == 0.0:
            return
        yaw = self.yaw + self.w * dt
        mid = self.yaw + 0.5 * self.w * dt     # midpoint integration: exact enough for arcs
        x = self.x + self.v * math.cos(mid) * dt
        y = self.y + self.v * math.sin(mid) * dt
        self.yaw = wrap_angle(yaw)
        if self.v != 0.0 and plan.collides(x, y, lim.radius):
            self.v = 0.0
            self.bumped = True
            return
        self.x, self.y = x, y
        self.bumped = False

    @property
    def pose(self) -> tuple[float, float, float]:
        return self.x, self.y, self.yaw
