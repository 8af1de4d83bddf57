"""A cylindrical arm (lift, yaw, telescoping extension) with a parallel gripper.

The end effector (the point between the fingertips) moves in Cartesian space in front of the
base, as MoveIt Servo would move it; joint positions follow by inverse kinematics, which for
this arm is exact and unique. Joint trajectories are followed point by point at joint speed
limits. Everything is in the base frame (x forward, z up), metres and radians.
"""
from __future__ import annotations

import math

from saycan_ros.robot.arm import HOME, JOINT_NAMES, ArmLimits  # noqa: F401 - the description


def _clip(value: float, bounds: tuple[float, float]) -> float:
    return min(max(value, bounds[0]), bounds[1])


class Arm:
    def __init__(self, limits: ArmLimits | None = None):
        self.limits = limits or ArmLimits()
        self.twist = (0.0, 0.0, 0.0)        # commanded end-effector velocity
        self.gripper_target = HOME[3]
        self.waypoints: list[tuple[float, ...]] = []   # remaining joint trajectory points
        self.home()

    def home(self) -> None:
        self.lift, self.yaw, self.extend, self.opening = HOME
        self.gripper_target = HOME[3]
        self.stop()

    def stop(self) -> None:
        self.twist = (0.0, 0.0, 0.0)
        self.waypoints = []

    # -- commands -------------------------------------------------------------------------------
    def command_twist(self, vx: float, vy: float, vz: float) -> None:
        """End-effector velocity in the base frame; cancels a running trajectory."""
        v = (vx, vy, vz)
        if not all(math.isfinite(c) for c in v):
            v = (0.0, 0.0, 0.0)
        speed = math.sqrt(v[0] ** 2 + v[1] ** 2 + v[2] ** 2)
        if speed > self.limits.max_speed:
            v = tuple(c * self.limits.max_speed / speed for c in v)
        self.twist = v
        self.waypoints = []

    def command_gripper(self, opening: float) -> None:
        if math.isfinite(opening):
            self.gripper_target = _clip(opening, self.limits.gripper)

    def command_trajectory(self, points: list[dict[str, float]]) -> None:
        """Points as {joint name: position}; joints a point leaves out keep their target."""
        current = list(self.joint_positions)
        self.waypoints = []
        for point in points:
            for i, name in enumerate(JOINT_NAMES):
                if name in point and math.isfinite(point[name]):
                    current[i] = _clip(point[name], self.limits.bounds[i])
            self.waypoints.append(tuple(current))
        self.twist = (0.0, 0.0, 0.0)

    # -- state ---------------------------------------------------------------------------------
    @property
    def ee(self) -> tuple[float, float, float]:
        return (self.extend * math.cos(self.yaw), self.extend * math.sin(self.yaw), self.lift)

    @property
    def joint_positions(self) -> tuple[float, float, float, float]:
        return (self.lift, self.yaw, self.extend, self.opening)

    def set_ee(self, x: float, y: float, z: float) -> None:
        """Move the end effector to the nearest reachable point of (x, y, z)."""
        lim = self.limits
        self.yaw = _clip(math.atan2(y, x), lim.yaw)
        self.extend = _clip(math.hypot(x, y), lim.extend)
        self.lift = _clip(z, lim.lift)

    @property
    def moving(self) -> bool:
        return bool(self.waypoints) or self.twist != (0.0, 0.0, 0.0)

    # -- simulation ------------------------------------------------------------------------------
    def step(self, dt: float) -> None:
        if self.waypoints:
            self._follow(dt)
        elif self.twist != (0.0, 0.0, 0.0):
            x, y, z = self.ee
            self.set_ee(x + self.twist[0] * dt, y + self.twist[1] * dt, z + self.twist[2] * dt)
        step = self.limits.joint_speed[3] * dt
        self.opening += max(-step, min(step, self.gripper_target - self.opening))

    def _follow(self, dt: float) -> None:
        target = self.waypoints[0]
        joints = list(self.joint_positions)
        for i in range(3):
            step = self.limits.joint_speed[i] * dt
            joints[i] += max(-step, min(step, target[i] - joints[i]))
        self.lift, self.yaw, self.extend = joints[:3]
        self.gripper_target = target[3]
        if all(abs(target[i] - joints[i]) < 1e-6 for i in range(3)):
            self.waypoints.pop(0)
