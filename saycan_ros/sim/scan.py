"""A planar laser scanner ray-cast against the floor plan's boxes (slab method, vectorised)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from saycan_ros.sim.floorplan import FloorPlan


@dataclass(frozen=True)
class LaserSpec:
    x: float = 0.2                    # mount in the base frame, m
    angle_min: float = -math.pi
    angle_max: float = math.pi
    beams: int = 360
    range_min: float = 0.05
    range_max: float = 10.0

    @property
    def angle_increment(self) -> float:
        return (self.angle_max - self.angle_min) / self.beams


class LaserScanner:
    def __init__(self, plan: FloorPlan, spec: LaserSpec | None = None):
        self.spec = spec or LaserSpec()
        s = self.spec
        self.angles = s.angle_min + s.angle_increment * np.arange(s.beams)
        self.extents = plan.extents

    def scan(self, x: float, y: float, yaw: float) -> np.ndarray:
        """Ranges (float32, one per beam) from a base at (x, y, yaw); inf where nothing is hit."""
        s = self.spec
        ox, oy = x + s.x * math.cos(yaw), y + s.x * math.sin(yaw)
        theta = self.angles + yaw
        dx, dy = np.cos(theta)[:, None], np.sin(theta)[:, None]
        e = self.extents[None, :, :]
        with np.errstate(divide="ignore", invalid="ignore"):
            inv_x, inv_y = 1.0 / dx, 1.0 / dy
            tx0, tx1 = (e[..., 0] - ox) * inv_x, (e[..., 2] - ox) * inv_x
            ty0, ty1 = (e[..., 1] - oy) * inv_y, (e[..., 3] - oy) * inv_y
        t_near = np.maximum(np.minimum(tx0, tx1), np.minimum(ty0, ty1))
        t_far = np.minimum(np.maximum(tx0, tx1), np.maximum(ty0, ty1))
        hit = (t_far >= t_near) & (t_far > 0)
        # Inside a box (t_near < 0) would mean the laser is in a wall: report the exit distance.
        t = np.where(hit, np.where(t_near > 0, t_near, t_far), np.inf)
        ranges = np.nan_to_num(t.min(axis=1), nan=np.inf, posinf=np.inf)
        ranges = np.where(ranges > s.range_max, np.inf, ranges)
        return np.maximum(ranges, s.range_min).astype(np.float32)
