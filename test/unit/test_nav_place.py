"""The navigation and place executors on the simulator core (ROS-free): planner, controller,
obstacle stops, unreachable goals, free-spot perception, and a few evaluation episodes."""
import math

import numpy as np
import pytest

from saycan_ros.core.kitchen import load_kitchen
from saycan_ros.skills.navigation import (ERROR_CODES, GlobalPlanner, CostMap, GridMap, Navigator, NavParams,
                                          NavStatus, PlanFailure, ScanData)
from saycan_ros.skills.place.controller import (ArmModel, CameraModel, PlaceController, PlaceParams,
                                                candidate_spots, location_at, visible_free)
from saycan_ros.sim.floorplan import FloorPlan
from saycan_ros.sim.floorplan import MAP_RESOLUTION as RESOLUTION
from saycan_ros.worlds.closed_loop import drive
from saycan_ros.cli.eval_skill import (SKILL_EVALUATORS, evaluate_navigation,
                                       evaluate_place, register)


@pytest.fixture(scope="module")
def kitchen():
    return load_kitchen()


@pytest.fixture(scope="module")
def grid(kitchen):
    return GridMap(FloorPlan(kitchen).occupancy_grid(RESOLUTION), RESOLUTION)


# -- the global planner ----------------------------------------------------------------------------
def test_plans_keep_clear_of_obstacles(kitchen, grid):
    costmap = CostMap(grid)
    planner = GlobalPlanner(costmap)
    plan = FloorPlan(kitchen)
    for a in kitchen.locations.values():
        for b in kitchen.locations.values():
            result = planner.plan(a.approach, b.approach)
            assert result.waypoints[0] == a.approach and result.waypoints[-1] == b.approach
            assert result.length >= math.dist(a.approach, b.approach) - 1e-9
            for p, q in zip(result.waypoints, result.waypoints[1:]):   # the robot fits everywhere
                for t in np.linspace(0, 1, 20):
                    x, y = p[0] + t * (q[0] - p[0]), p[1] + t * (q[1] - p[1])
                    assert not plan.collides(x, y, 0.3), (a.name, b.name, x, y)


def test_unreachable_goals_fail_with_a_reason(grid):
    planner = GlobalPlanner(CostMap(grid))
    with pytest.raises(PlanFailure) as err:
        planner.plan((3.8, 2.1), (3.8, 3.0))                # inside the table
    assert err.value.code == "goal_occupied"
    with pytest.raises(PlanFailure) as err:
        planner.plan((3.8, 2.1), (20.0, 1.0))
    assert err.value.code == "outside_map"
    walled = grid.data.copy()
    walled[:, 40] = 100                                     # a wall across the room at x = 2 m
    with pytest.raises(PlanFailure) as err:
        GlobalPlanner(CostMap(GridMap(walled, RESOLUTION))).plan((3.8, 2.1), (1.2, 1.8))
    assert err.value.code == "no_valid_path"


def test_navigator_aborts_at_once_on_unreachable_goal(grid):
    navigator = Navigator(grid)
    result = navigator.start((3.8, 3.0, 0.0), (3.8, 2.1, 0.0), 0.0)
    assert result is not None and result.status == NavStatus.ABORTED
    assert result.error_code != 0 and "obstacle" in result.error_msg
    step = navigator.update((3.8, 2.1, 0.0), None, 0.1)
    assert (step.linear, step.angular) == (0.0, 0.0)


# -- driving in the simulator ----------------------------------------------------------------------
def _world(kitchen, pose):
    from saycan_ros.sim.world import KitchenWorld
    world = KitchenWorld(kitchen, cmd_timeout=0.5, seed=0)
    world.reset_scene(pose, {})
    return world


def test_drive_reaches_the_goal_with_feedback(kitchen, grid):
    from saycan_ros.sim.scan import LaserScanner
    world = _world(kitchen, (4.0, 1.0, math.pi))
    feedback = []
    navigator = Navigator(grid)
    paths = []
    navigator.on_path = paths.append
    goal = kitchen.location("user")
    result = drive(world, navigator, (*goal.approach, goal.yaw), LaserScanner(world.plan),
                   on_step=lambda w: feedback.append(navigator._goal and navigator.status))
    assert result.success, result.error_msg
    assert world.robot_location == "user" and paths
    assert abs(world.base.v) < 1e-6 and abs(world.base.w) < 1e-6


class _Obstacle:
    """A box the map does not have, seen by a scan (what a person in the way looks like)."""

    def __init__(self, x0, y0, x1, y1):
        self.box = (x0, y0, x1, y1)

    def scan(self, pose) -> ScanData:
        x, y, yaw = pose
        angles = np.linspace(-math.pi, math.pi, 720, endpoint=False)
        ranges = np.full(angles.size, np.inf)
        x0, y0, x1, y1 = self.box
        for i, a in enumerate(angles):
            dx, dy = math.cos(a + yaw), math.sin(a + yaw)
            for r in np.arange(0.05, 4.0, 0.01):
                px, py = x + r * dx, y + r * dy
                if x0 <= px <= x1 and y0 <= py <= y1:
                    ranges[i] = r
                    break
        return ScanData(ranges, -math.pi, 2 * math.pi / 720, 0.05, 10.0)


def test_stops_for_an_unmapped_obstacle_then_goes_around(grid):
    obstacle = _Obstacle(2.4, 4.0, 2.6, 4.4)       # on the way from (1.5, 4.2) to (3.5, 4.2)
    navigator = Navigator(grid, NavParams(obstacle_wait_s=1.0))
    pose = (1.5, 4.2, 0.0)
    assert navigator.start((3.5, 4.2, 0.0), pose, 0.0) is None
    step = navigator.update(pose, obstacle.scan(pose), 0.0)
    assert step.linear == 0.0 and step.angular == 0.0       # blocked: stands still
    assert step.feedback.state == "waiting_for_obstacle"
    step = navigator.update(pose, obstacle.scan(pose), 1.5)  # still there: replanned around it
    assert step.feedback.state == "replanned" and step.feedback.number_of_recoveries == 1
    path = navigator._goal.path
    assert all(not (2.3 <= x <= 2.7 and 3.9 <= y <= 4.5) for x, y in path)
    assert len(path) > 2


def test_does_not_drive_blind_without_a_current_scan(grid):
    open_floor = _Obstacle(-9.0, -9.0, -8.0, -8.0)          # a scan that sees nothing in the way
    pose = (1.5, 4.2, 0.0)
    blind = Navigator(grid)                                   # no laser expected: drives
    assert blind.start((3.5, 4.2, 0.0), pose, 0.0) is None
    assert blind.update(pose, None, 0.0).linear > 0.0
    navigator = Navigator(grid, NavParams(require_scan=True, scan_wait_s=1.0))
    assert navigator.start((3.5, 4.2, 0.0), pose, 0.0) is None
    step = navigator.update(pose, None, 0.0)
    assert (step.linear, step.angular) == (0.0, 0.0) and step.feedback.state == "waiting_for_scan"
    assert navigator.update(pose, open_floor.scan(pose), 0.5).linear > 0.0   # a scan came back
    assert navigator.update(pose, None, 0.6).linear == 0.0
    assert navigator.update(pose, None, 1.5).result is None  # waits 1 s from the new gap (0.6)
    step = navigator.update(pose, None, 1.7)
    assert step.result.status == NavStatus.ABORTED
    assert step.result.error_code == ERROR_CODES["no_scan"]
    assert "laser scan" in step.result.error_msg and (step.linear, step.angular) == (0.0, 0.0)


def test_blocked_without_a_way_around_aborts():
    room = np.zeros((120, 160), dtype=np.int8)
    room[0, :] = room[-1, :] = room[:, 0] = room[:, -1] = 100
    room[:, 49:51] = 100
    room[20:40, 49:51] = 0                         # a door at y = 1..2 m in a wall at x = 2.5
    navigator = Navigator(GridMap(room, RESOLUTION), NavParams(obstacle_wait_s=0.5,
                                                               max_recoveries=2))
    obstacle = _Obstacle(2.3, 0.9, 2.7, 2.1)                 # someone standing in the door
    pose = (1.5, 1.5, 0.0)
    assert navigator.start((3.5, 1.5, 0.0), pose, 0.0) is None
    result, t = None, 0.0
    while result is None and t < 10:
        step = navigator.update(pose, obstacle.scan(pose), t)
        assert step.linear == 0.0
        result, t = step.result, t + 0.25
    assert result is not None and result.status == NavStatus.ABORTED
    assert "blocked" in result.error_msg


def test_cancel(grid):
    navigator = Navigator(grid)
    assert navigator.start((3.5, 4.2, 0.0), (1.5, 4.2, 0.0), 0.0) is None
    navigator.cancel()
    step = navigator.update((1.5, 4.2, 0.0), None, 0.1)
    assert step.result.status == NavStatus.CANCELED and (step.linear, step.angular) == (0.0, 0.0)


# -- place -----------------------------------------------------------------------------------------
def test_camera_model_matches_the_simulated_camera(kitchen):
    from saycan_ros.sim.camera import Camera
    from saycan_ros.sim.world import KitchenWorld
    camera = Camera(KitchenWorld(kitchen), 96, 96)
    m = camera.mount
    model = CameraModel.from_mount(m.x, m.z, m.pitch, m.hfov, 96, 96)
    assert np.allclose(model.rotation, camera.base_from_optical, atol=1e-9)
    assert model.fx == pytest.approx(camera.f)


def test_free_spots_avoid_objects_seen_by_the_camera(kitchen):
    from saycan_ros.sim.camera import Camera
    from saycan_ros.sim.world import KitchenWorld
    world = KitchenWorld(kitchen, cmd_timeout=None)
    camera = Camera(world, 96, 96)
    m = camera.mount
    model = CameraModel.from_mount(m.x, m.z, m.pitch, m.hfov, 96, 96)
    world.reset_scene("table", {"coke can": "table", "apple": "table", "energy bar": "table"},
                      holding="sponge", seed=4)
    controller = PlaceController(kitchen)
    world.command_arm_trajectory([controller.look_point()])
    world.step(150)
    surface = location_at(kitchen, world.base.pose)
    assert surface.name == "table"
    spots = candidate_spots(surface, world.base.pose, ArmModel(), PlaceParams())
    seen = visible_free(camera.render().copy(), model, world.base.pose, surface, spots)
    assert seen is not None and any(seen) and not all(seen)
    for (x, y), free in zip(spots, seen):
        gap = min(math.hypot(x - world.objects[o].x, y - world.objects[o].y)
                  for o in ("coke can", "apple", "energy bar"))
        if free:
            assert gap > 0.075, (x, y, gap)


def test_place_refuses_when_not_holding_or_away(kitchen):
    from saycan_ros.sim.world import KitchenWorld
    world = KitchenWorld(kitchen, cmd_timeout=None)
    controller = PlaceController(kitchen)
    world.reset_scene("table", {})
    final = controller.start(world.arm.joint_positions, world.base.pose, 0.0)
    assert final is not None and not final.success and "not holding" in final.message
    world.reset_scene((2.2, 3.8, 0.0), {}, holding="apple")
    final = controller.start(world.arm.joint_positions, world.base.pose, 0.0)
    assert final is not None and not final.success and "not at a surface" in final.message


# -- the evaluations -------------------------------------------------------------------------------
def test_navigation_evaluation_few_episodes(kitchen):
    report = evaluate_navigation(episodes=1, seed=3, kitchen=kitchen)
    assert report.episodes == len(kitchen.locations)
    assert report.successes == report.episodes, report.failures
    n = report.episodes
    assert report.summary_line() == f"skill navigate: success {n}/{n} (100.0%)"


def test_place_evaluation_few_episodes(kitchen):
    report = evaluate_place(episodes=15, seed=5, kitchen=kitchen)
    assert report.episodes == 15 and set(report.groups) == {
        "close counter", "far counter", "table", "trash can", "user"}
    assert report.successes == 15, report.failures


def test_eval_skill_cli(capsys):
    import argparse
    assert set(SKILL_EVALUATORS) == {"navigate", "pick", "place"}    # whatever was imported
    parser = argparse.ArgumentParser(prog="saycan")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["eval-skill", "place", "--episodes", "5", "--quiet",
                              "--locations", "table"])
    assert args.func(args) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-1] == "skill place: success 5/5 (100.0%)"
    with pytest.raises(SystemExit):
        parser.parse_args(["eval-skill", "juggle"])
