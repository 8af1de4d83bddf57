"""The go-to affordance measured along the path the navigation executor would drive.

``path_distance``: the paper's distance formula, ``clamp((d_max - d) / (d_max - d_min), 0, 1)``,
with ``d`` the length of the global plan from the robot's pose to the location's approach
pose on the occupancy grid (the same planner and costmap as the ``navigate_skill`` node), not
the straight-line distance. Unreachable (no path, or nowhere to go: the object is absent or in
the gripper) scores 0 with a raw value of inf.

The grid is the kitchen's floor plan rasterised like ``/map`` (kitchen_sim's), unless a node
supplies the map it receives with :meth:`PathDistanceAffordance.set_map`. Plans are cached
per (start cell, goal), so scoring is deterministic and a batch equals one-by-one calls.

Listed as ``path_distance`` in :data:`saycan_ros.planning.affordance.AFFORDANCE_MODELS`.
"""
from __future__ import annotations

import math
import threading


from saycan_ros.planning.affordance import DistanceAffordance
from saycan_ros.core.config import ConfigError
from saycan_ros.skills.navigation.grid import CostMap, CostParams, GlobalPlanner, GridMap, PlanFailure

MAP_RESOLUTION = 0.05          # kitchen_sim's /map resolution


class PathDistanceAffordance(DistanceAffordance):
    name = "path_distance"

    def __init__(self, d_min: float = 0.0, d_max: float = 100.0, robot_radius: float = 0.3,
                 safety_margin: float = 0.05, resolution: float = MAP_RESOLUTION,
                 cache_size: int = 4096):
        super().__init__(d_min, d_max)
        if not (robot_radius > 0 and safety_margin >= 0 and resolution > 0):
            raise ConfigError("path_distance affordance: robot_radius and resolution must be > 0")
        self.cost_params = CostParams(robot_radius=float(robot_radius),
                                      safety_margin=float(safety_margin))
        self.resolution = float(resolution)
        self.cache_size = int(cache_size)
        self._planner: GlobalPlanner | None = None
        self._kitchen_key = None
        self._cache: dict = {}
        self._lock = threading.Lock()

    # -- the map -----------------------------------------------------------------------------
    def set_map(self, grid: GridMap) -> None:
        """Plan on this grid (e.g. the /map a node receives) instead of the floor plan."""
        with self._lock:
            self._planner = GlobalPlanner(CostMap(grid, self.cost_params))
            self._kitchen_key = "map"
            self._cache.clear()

    def _planner_for(self, kitchen) -> GlobalPlanner:
        if self._kitchen_key == "map" and self._planner is not None:
            return self._planner
        key = id(kitchen), kitchen.source, kitchen.size
        if self._planner is None or self._kitchen_key != key:
            from saycan_ros.sim.floorplan import FloorPlan   # the kitchen's boxes (numpy only)
            grid = FloorPlan(kitchen).occupancy_grid(self.resolution)
            self._planner = GlobalPlanner(CostMap(GridMap(grid, self.resolution),
                                                  self.cost_params))
            self._kitchen_key = key
            self._cache.clear()
        return self._planner

    def path_length(self, kitchen, start: tuple[float, float], goal: tuple[float, float]) -> float:
        """Length of the global plan (inf when there is none)."""
        with self._lock:
            planner = self._planner_for(kitchen)
            cell = planner.costmap.grid.cell(*start)
            key = (cell, tuple(goal))
            if key not in self._cache:
                try:
                    # From the cell's centre: the same answer for every start in the cell.
                    centre = planner.costmap.grid.center(*cell)
                    if planner.costmap.grid.inside(*cell) and planner.costmap.occupied[cell]:
                        centre = tuple(start)
                    length = planner.plan(centre, goal).length
                except PlanFailure:
                    length = math.inf
                if len(self._cache) >= self.cache_size:
                    self._cache.clear()
                self._cache[key] = length
            return self._cache[key]

    def distance(self, kitchen, start, goal) -> float:  # DistanceAffordance's hook
        return self.path_length(kitchen, start, goal)
