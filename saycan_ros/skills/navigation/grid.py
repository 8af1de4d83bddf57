"""The global planner of the navigation executor: a costmap from an occupancy grid, and A*.

ROS-free. A :class:`GridMap` is what ``nav_msgs/OccupancyGrid`` carries (cells row-major, row
index along +y of the map, origin at the corner of cell (0, 0)). The :class:`CostMap` turns it
into what Nav2's costmap layers give a planner: *lethal* cells, where the robot's centre may
not be (closer to an obstacle than the robot's radius plus a safety margin), and an
*inflation* cost that decays away from obstacles, so that paths keep their distance where
there is room. :class:`GlobalPlanner` runs A* over it (8-connected), then shortcuts the cell
path to its corners where the straight line keeps the clearance the cell path had.

Only numpy is needed (no OpenCV or SciPy): the clearance of each cell is computed by shifting
the obstacle mask over the disc of offsets it matters within.
"""
from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

Point = tuple[float, float]


class MapError(ValueError):
    """An occupancy grid that cannot be planned on."""


@dataclass(frozen=True)
class GridMap:
    """An occupancy grid in the map frame (nav_msgs/OccupancyGrid's content)."""
    data: np.ndarray                 # (rows, cols) int: -1 unknown, 0..100 occupancy
    resolution: float                # metres per cell
    origin: Point = (0.0, 0.0)       # map coordinates of the corner of cell (0, 0)
    frame_id: str = "map"

    def __post_init__(self) -> None:
        data = np.asarray(self.data)
        if data.ndim != 2 or data.size == 0:
            raise MapError(f"occupancy grid must be a non-empty 2-D array, got shape {data.shape}")
        if not (math.isfinite(self.resolution) and self.resolution > 0):
            raise MapError(f"map resolution must be > 0, got {self.resolution}")
        if not all(math.isfinite(v) for v in self.origin):
            raise MapError(f"map origin must be finite, got {self.origin}")
        object.__setattr__(self, "data", data.astype(np.int16, copy=False))

    @classmethod
    def from_message_fields(cls, data: Sequence[int], width: int, height: int, resolution: float,
                            origin_x: float, origin_y: float, origin_yaw: float = 0.0,
                            frame_id: str = "map") -> "GridMap":
        """From the fields of a nav_msgs/OccupancyGrid (the origin may not be rotated)."""
        if abs(origin_yaw) > 1e-6:
            raise MapError(f"maps with a rotated origin are not supported (yaw {origin_yaw:g})")
        if width * height != len(data):
            raise MapError(f"map of {width}x{height} cells carries {len(data)} values")
        grid = np.frombuffer(bytes(np.asarray(data, dtype=np.int8).tobytes()), dtype=np.int8)
        return cls(grid.reshape(height, width), float(resolution),
                   (float(origin_x), float(origin_y)), frame_id)

    @property
    def shape(self) -> tuple[int, int]:
        return self.data.shape

    def cell(self, x: float, y: float) -> tuple[int, int]:
        """(row, col) of a map point; may be outside the grid."""
        return (int(math.floor((y - self.origin[1]) / self.resolution)),
                int(math.floor((x - self.origin[0]) / self.resolution)))

    def inside(self, row: int, col: int) -> bool:
        rows, cols = self.data.shape
        return 0 <= row < rows and 0 <= col < cols

    def center(self, row: int, col: int) -> Point:
        return (self.origin[0] + (col + 0.5) * self.resolution,
                self.origin[1] + (row + 0.5) * self.resolution)


@dataclass(frozen=True)
class CostParams:
    robot_radius: float = 0.3        # footprint (a disc), m
    safety_margin: float = 0.05      # lethal closer than robot_radius + this, m
    inflation_radius: float = 0.7    # cost decays to nothing this far from obstacles, m
    cost_scaling: float = 6.0        # exp(-scaling * (clearance - lethal distance)), per m
    inflation_weight: float = 4.0    # extra cost per metre right at the lethal boundary
    occupied_threshold: int = 65     # occupancy >= this is an obstacle (map_server's 0.65)
    allow_unknown: bool = False      # plan through unknown (-1) cells


class CostMap:
    """Lethal cells and traversal costs of a grid for a disc robot."""

    def __init__(self, grid: GridMap, params: CostParams | None = None):
        self.grid = grid
        self.params = p = params or CostParams()
        data = grid.data
        occupied = data >= p.occupied_threshold
        if not p.allow_unknown:
            occupied |= data < 0
        self.occupied = occupied
        res = grid.resolution
        reach = max(p.inflation_radius, p.robot_radius + p.safety_margin) + res
        self.clearance = _clearance(occupied, res, reach)      # metres to the nearest obstacle
        self.lethal_distance = p.robot_radius + p.safety_margin
        self.lethal = self.clearance < self.lethal_distance
        excess = np.maximum(self.clearance - self.lethal_distance, 0.0)
        inflation = p.inflation_weight * np.exp(-p.cost_scaling * excess)
        inflation[self.clearance >= p.inflation_radius] = 0.0
        self.cost = 1.0 + inflation                               # per metre travelled
        self.dynamic = np.zeros_like(occupied)                    # obstacles marked from sensors

    def mark_obstacles(self, points: Sequence[Point], radius: float | None = None) -> int:
        """Make cells near sensed obstacle points lethal for later plans; returns cells marked."""
        if radius is None:
            radius = self.lethal_distance
        res = self.grid.resolution
        k = int(math.ceil(radius / res))
        marked = 0
        rows, cols = self.grid.shape
        for x, y in points:
            r0, c0 = self.grid.cell(x, y)
            for dr in range(-k, k + 1):
                for dc in range(-k, k + 1):
                    r, c = r0 + dr, c0 + dc
                    if 0 <= r < rows and 0 <= c < cols and math.hypot(dr, dc) * res <= radius:
                        if not self.dynamic[r, c]:
                            self.dynamic[r, c] = True
                            marked += 1
        return marked

    def clear_dynamic(self) -> None:
        self.dynamic[:] = False

    def blocked(self) -> np.ndarray:
        return self.lethal | self.dynamic

    def clearance_at(self, x: float, y: float) -> float:
        r, c = self.grid.cell(x, y)
        if not self.grid.inside(r, c):
            return 0.0
        return float(self.clearance[r, c])

    def is_lethal(self, x: float, y: float) -> bool:
        r, c = self.grid.cell(x, y)
        return not self.grid.inside(r, c) or bool(self.lethal[r, c] or self.dynamic[r, c])

    def near_obstacles(self, points: np.ndarray, tolerance: float = 0.0) -> np.ndarray:
        """Vectorised :meth:`is_occupied` over (N, 2) map points."""
        points = np.asarray(points, dtype=np.float64).reshape(-1, 2)
        g = self.grid
        rows = np.floor((points[:, 1] - g.origin[1]) / g.resolution).astype(int)
        cols = np.floor((points[:, 0] - g.origin[0]) / g.resolution).astype(int)
        r_max, c_max = g.shape
        inside = (rows >= 0) & (rows < r_max) & (cols >= 0) & (cols < c_max)
        out = np.ones(len(points), dtype=bool)
        r, c = rows[inside], cols[inside]
        out[inside] = self.occupied[r, c] | (self.clearance[r, c] <= tolerance)
        return out

    def is_occupied(self, x: float, y: float, tolerance: float = 0.0) -> bool:
        """Whether an obstacle of the map lies within ``tolerance`` of (x, y) (off-map: yes)."""
        r, c = self.grid.cell(x, y)
        if not self.grid.inside(r, c):
            return True
        return bool(self.occupied[r, c]) or self.clearance[r, c] <= tolerance


def _clearance(occupied: np.ndarray, resolution: float, reach: float) -> np.ndarray:
    """Distance (m) from each cell's centre to the nearest occupied cell's edge, capped at reach.

    Cell centres are ``resolution`` apart; an occupied cell's obstacle may reach half a cell
    toward its neighbour, so the distance between centres is reduced by half a cell.
    """
    rows, cols = occupied.shape
    k = int(math.ceil(reach / resolution))
    best = np.full((rows, cols), reach, dtype=np.float64)
    padded = np.zeros((rows + 2 * k, cols + 2 * k), dtype=bool)
    padded[k:k + rows, k:k + cols] = occupied
    # Offsets sorted by distance: each one can only lower cells not yet lowered by a closer one.
    offsets = sorted(((dr, dc) for dr in range(-k, k + 1) for dc in range(-k, k + 1)
                      if math.hypot(dr, dc) * resolution <= reach + resolution),
                     key=lambda o: math.hypot(*o))
    for dr, dc in offsets:
        d = max(math.hypot(dr, dc) * resolution - 0.5 * resolution, 0.0)
        if d >= reach:
            break
        shifted = padded[k + dr:k + dr + rows, k + dc:k + dc + cols]
        np.minimum(best, np.where(shifted, d, reach), out=best)
    best[occupied] = 0.0
    return best


@dataclass
class PlanResult:
    """A global plan: waypoints (map frame) from start to goal, and its length."""
    waypoints: list[Point]
    length: float
    expanded: int = 0

    @property
    def ok(self) -> bool:
        return bool(self.waypoints)


@dataclass
class PlanFailure(Exception):
    """Why there is no plan (Nav2's planner error codes, by name)."""
    code: str                      # start_occupied | goal_occupied | no_valid_path | outside_map
    message: str
    extra: dict = field(default_factory=dict)

    def __str__(self) -> str:
        return self.message


_D = math.sqrt(2)
_STEPS = ((-1, 0, 1.0), (1, 0, 1.0), (0, -1, 1.0), (0, 1, 1.0),
          (-1, -1, _D), (-1, 1, _D), (1, -1, _D), (1, 1, _D))


class GlobalPlanner:
    """A* on a :class:`CostMap`; ``plan(start, goal)`` returns a :class:`PlanResult` or raises
    :class:`PlanFailure`."""

    def __init__(self, costmap: CostMap, start_escape_radius: float = 0.2):
        self.costmap = costmap
        # A robot may stand inside the lethal band of the map (localisation error, a bump): it
        # may leave it along free cells within this radius of where it stands.
        self.start_escape_radius = start_escape_radius

    def plan(self, start: Point, goal: Point) -> PlanResult:
        cm = self.costmap
        grid = cm.grid
        rows, cols = grid.shape
        s, g = grid.cell(*start), grid.cell(*goal)
        if not grid.inside(*g):
            raise PlanFailure("outside_map",
                              f"goal ({goal[0]:.2f}, {goal[1]:.2f}) is outside the map")
        if not grid.inside(*s):
            raise PlanFailure("outside_map",
                              f"start ({start[0]:.2f}, {start[1]:.2f}) is outside the map")
        blocked = cm.blocked()
        if cm.occupied[g] or blocked[g]:
            raise PlanFailure("goal_occupied", f"goal ({goal[0]:.2f}, {goal[1]:.2f}) is in or too "
                                               f"close to an obstacle")
        if cm.occupied[s]:
            raise PlanFailure("start_occupied", f"start ({start[0]:.2f}, {start[1]:.2f}) is inside "
                                                f"an obstacle")
        escape = set()
        if blocked[s]:
            k = int(math.ceil(self.start_escape_radius / grid.resolution))
            for dr in range(-k, k + 1):
                for dc in range(-k, k + 1):
                    r, c = s[0] + dr, s[1] + dc
                    if grid.inside(r, c) and not cm.occupied[r, c] and math.hypot(dr, dc) <= k:
                        escape.add(r * cols + c)
        flat_blocked = blocked.ravel().tolist()
        flat_cost = cm.cost.ravel().tolist()
        res = grid.resolution
        start_i, goal_i = s[0] * cols + s[1], g[0] * cols + g[1]
        gr, gc = g
        best = {start_i: 0.0}
        came = {start_i: start_i}
        queue = [(0.0, start_i)]
        closed = set()
        expanded = 0
        while queue:
            _, i = heapq.heappop(queue)
            if i in closed:
                continue
            if i == goal_i:
                break
            closed.add(i)
            expanded += 1
            r, c = divmod(i, cols)
            base = best[i]
            for dr, dc, step in _STEPS:
                nr, nc = r + dr, c + dc
                if nr < 0 or nr >= rows or nc < 0 or nc >= cols:
                    continue
                j = nr * cols + nc
                if flat_blocked[j] and j not in escape and j != goal_i:
                    continue
                new = base + step * res * 0.5 * (flat_cost[i] + flat_cost[j])
                if new < best.get(j, math.inf):
                    best[j] = new
                    came[j] = i
                    h = math.hypot(nr - gr, nc - gc) * res
                    heapq.heappush(queue, (new + h, j))
        if goal_i not in came:
            raise PlanFailure("no_valid_path", f"no path from ({start[0]:.2f}, {start[1]:.2f}) to "
                                               f"({goal[0]:.2f}, {goal[1]:.2f})",
                              {"expanded": expanded})
        cells = [goal_i]
        while cells[-1] != start_i:
            cells.append(came[cells[-1]])
        cells.reverse()
        points = [grid.center(*divmod(i, cols)) for i in cells]
        points[0], points[-1] = tuple(start), tuple(goal)
        waypoints = self._shortcut(points)
        return PlanResult(waypoints, path_length(waypoints), expanded)

    # -- smoothing -------------------------------------------------------------------------------
    def _clearance_along(self, a: Point, b: Point) -> float:
        grid = self.costmap.grid
        n = max(2, int(math.hypot(b[0] - a[0], b[1] - a[1]) / (grid.resolution / 2)) + 1)
        t = np.linspace(0.0, 1.0, n)
        xs = a[0] + t * (b[0] - a[0])
        ys = a[1] + t * (b[1] - a[1])
        rows = np.floor((ys - grid.origin[1]) / grid.resolution).astype(int)
        cols = np.floor((xs - grid.origin[0]) / grid.resolution).astype(int)
        r_max, c_max = grid.shape
        if rows.min() < 0 or cols.min() < 0 or rows.max() >= r_max or cols.max() >= c_max:
            return 0.0
        if self.costmap.dynamic[rows, cols].any():
            return 0.0
        return float(self.costmap.clearance[rows, cols].min())

    def _shortcut(self, points: list[Point]) -> list[Point]:
        """Greedy line-of-sight shortcuts that never come closer to obstacles than the cell path
        did (nor than the inflation radius where the cell path kept that far away)."""
        if len(points) <= 2:
            return list(points)
        cm = self.costmap
        keep = cm.params.inflation_radius
        clear = [cm.clearance_at(*p) for p in points]
        out = [points[0]]
        i = 0
        n = len(points)
        while i < n - 1:
            j = i + 1
            floor = min(clear[i], clear[j], keep)
            while j + 1 < n:
                candidate_floor = min(floor, clear[j + 1])
                if self._clearance_along(points[i], points[j + 1]) + 1e-9 < candidate_floor:
                    break
                floor = candidate_floor
                j += 1
            out.append(points[j])
            i = j
        return out


def path_length(points: Sequence[Point]) -> float:
    return float(sum(math.hypot(b[0] - a[0], b[1] - a[1]) for a, b in zip(points, points[1:])))
