"""The kitchen's floor plan in the ``map`` frame: walls, furniture boxes, an occupancy grid.

Every location of the kitchen is a piece of furniture (an axis-aligned box standing on the
floor, its top the surface that objects rest on); the user's place is a small stand the person
holds things out over. Walls enclose the floor. The base, the laser and the cameras all use
these boxes, so what the robot bumps into, sees and scans is the same geometry.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from saycan_ros.core.kitchen import Kitchen

WALL_THICKNESS = 0.1
#: Cell size of the occupancy grid the simulator publishes on ``/map`` (m).
MAP_RESOLUTION = 0.05
WALL_HEIGHT = 2.0
#: Occupancy values of nav_msgs/OccupancyGrid.
FREE, OCCUPIED = 0, 100


@dataclass(frozen=True)
class Box:
    """An axis-aligned box on the floor: x/y extent in the map frame, top at ``height``."""
    name: str
    x0: float
    y0: float
    x1: float
    y1: float
    height: float

    def contains(self, x: float, y: float, margin: float = 0.0) -> bool:
        return (self.x0 - margin <= x <= self.x1 + margin
                and self.y0 - margin <= y <= self.y1 + margin)

    @property
    def center(self) -> tuple[float, float]:
        return (self.x0 + self.x1) / 2, (self.y0 + self.y1) / 2

    def corners(self, z: float) -> np.ndarray:
        """The four corners at height ``z``, counter-clockwise, shape (4, 3)."""
        return np.array([[self.x0, self.y0, z], [self.x1, self.y0, z],
                         [self.x1, self.y1, z], [self.x0, self.y1, z]])


class FloorPlan:
    """Walls and furniture of one kitchen, with the collision and surface look-ups."""

    def __init__(self, kitchen: Kitchen):
        self.kitchen = kitchen
        width, depth = kitchen.size
        t = WALL_THICKNESS
        self.width, self.depth = width, depth
        self.walls = (
            Box("wall_south", -t, -t, width + t, 0.0, WALL_HEIGHT),
            Box("wall_north", -t, depth, width + t, depth + t, WALL_HEIGHT),
            Box("wall_west", -t, 0.0, 0.0, depth, WALL_HEIGHT),
            Box("wall_east", width, 0.0, width + t, depth, WALL_HEIGHT),
        )
        self.furniture = {
            name: Box(name, loc.center[0] - loc.size[0] / 2, loc.center[1] - loc.size[1] / 2,
                      loc.center[0] + loc.size[0] / 2, loc.center[1] + loc.size[1] / 2,
                      loc.height)
            for name, loc in kitchen.locations.items()
        }
        self.boxes = self.walls + tuple(self.furniture.values())
        # (N, 4) array of x0, y0, x1, y1 for vectorised collision checks and ray casting.
        self.extents = np.array([[b.x0, b.y0, b.x1, b.y1] for b in self.boxes])

    def collides(self, x: float, y: float, radius: float) -> bool:
        """Whether a disc of ``radius`` at (x, y) overlaps a wall or a piece of furniture."""
        e = self.extents
        dx = np.maximum(np.maximum(e[:, 0] - x, x - e[:, 2]), 0.0)
        dy = np.maximum(np.maximum(e[:, 1] - y, y - e[:, 3]), 0.0)
        return bool(np.any(dx * dx + dy * dy < radius * radius))

    def surface_at(self, x: float, y: float) -> str | None:
        """The location whose top surface is under (x, y), or None over the floor."""
        for name, box in self.furniture.items():
            if box.contains(x, y):
                return name
        return None

    def occupancy_grid(self, resolution: float = 0.05) -> np.ndarray:
        """Occupancy values (int8, rows along +y from the map origin), walls and furniture."""
        cols = int(round(self.width / resolution))
        rows = int(round(self.depth / resolution))
        grid = np.full((rows, cols), FREE, dtype=np.int8)
        xs = (np.arange(cols) + 0.5) * resolution
        ys = (np.arange(rows) + 0.5) * resolution
        for box in self.furniture.values():
            grid[np.ix_((ys >= box.y0) & (ys <= box.y1), (xs >= box.x0) & (xs <= box.x1))] = OCCUPIED
        # The outermost cells hold the walls, so planners on the grid stay inside the room.
        grid[0, :] = grid[-1, :] = OCCUPIED
        grid[:, 0] = grid[:, -1] = OCCUPIED
        return grid
