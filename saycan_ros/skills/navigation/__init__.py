"""Navigation for the ``navigate_skill`` executor (ROS-free core): a costmap and A* global
planner on an occupancy grid (:mod:`.grid`), a pure-pursuit path follower and a laser obstacle
monitor (:mod:`.controller`), and a Nav2-style goal executor tying them together
(:mod:`.navigator`)."""
from saycan_ros.skills.navigation.controller import FollowerParams, MonitorParams, PathFollower, ScanData
from saycan_ros.skills.navigation.grid import (CostMap, CostParams, GlobalPlanner, GridMap, MapError,
                                               PlanFailure, PlanResult, path_length)
from saycan_ros.skills.navigation.navigator import (ERROR_CODES, NavFeedback, Navigator, NavParams, NavResult,
                                                    NavStatus, NavStep)

__all__ = ["CostMap", "CostParams", "ERROR_CODES", "FollowerParams", "GlobalPlanner", "GridMap",
           "MapError", "MonitorParams", "NavFeedback", "NavParams", "NavResult", "NavStatus",
           "NavStep", "Navigator", "PathFollower", "PlanFailure", "PlanResult", "ScanData",
           "path_length"]
