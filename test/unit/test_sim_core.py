"""The ROS-free simulator core: floor plan, base, arm, grasping, camera, laser, navigation."""
from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

from saycan_ros.core.kitchen import GRIPPER, load_kitchen
from saycan_ros.sim.bench import format_sim_result, run_sim_bench
from saycan_ros.sim.camera import Camera
from saycan_ros.sim.floorplan import OCCUPIED, FloorPlan
from saycan_ros.sim.render import TopDownRenderer
from saycan_ros.worlds.render import render_kitchen
from saycan_ros.sim.scan import LaserScanner
from saycan_ros.sim.world import FLOOR, KitchenWorld
from saycan_ros.core.tasks import TaskError


@pytest.fixture(scope="module")
def kitchen():
    return load_kitchen()


@pytest.fixture
def world(kitchen):
    return KitchenWorld(kitchen, seed=1, cmd_timeout=None)


def run_arm_to(world, x, y, z, steps=200):
    """Servo the end effector to a base-frame point (proportional, like a scripted operator)."""
    for _ in range(steps):
        ex, ey, ez = world.arm.ee
        error = np.array([x - ex, y - ey, z - ez])
        if np.abs(error).max() < 1e-3:
            break
        world.command_ee_twist(*(np.clip(error * 5.0, -0.3, 0.3)))
        world.step()
    world.command_ee_twist(0.0, 0.0, 0.0)


def settle_gripper(world, opening, steps=40):
    world.command_gripper(opening)
    world.step(steps)


def object_in_base(world, name):
    obj = world.objects[name]
    return (*world.to_base(obj.x, obj.y), obj.z)


# -- floor plan ----------------------------------------------------------------------------------
def test_floor_plan_keeps_approach_poses_free(kitchen):
    plan = FloorPlan(kitchen)
    for name, loc in kitchen.locations.items():
        assert not plan.collides(*loc.approach, 0.3), name
        assert plan.surface_at(*loc.center) == name
        assert plan.collides(*loc.center, 0.01)
    assert plan.surface_at(0.5 * plan.width, 0.1) is None
    grid = plan.occupancy_grid(0.05)
    assert grid.shape == (120, 160)
    table = kitchen.location("table")
    assert grid[int(table.center[1] / 0.05), int(table.center[0] / 0.05)] == OCCUPIED
    assert grid[int(2.0 / 0.05), int(2.0 / 0.05)] == 0


# -- base -----------------------------------------------------------------------------------------
def test_base_respects_speed_and_acceleration_limits(world):
    world.reset_scene((1.5, 4.0, 0.0), {})   # open floor, facing east
    world.command_base(5.0, 0.0)              # beyond the 0.8 m/s limit
    world.step(5)                             # 0.1 s at 1 m/s^2: 0.1 m/s
    assert world.base.v == pytest.approx(0.1)
    world.step(100)
    assert world.base.v == pytest.approx(0.8)
    assert world.base.x > 2.5 and world.base.y == pytest.approx(4.0)
    world.command_base(float("nan"), 1.0)     # malformed: stop
    assert (world.base.cmd_v, world.base.cmd_w) == (0.0, 0.0)
    world.step(50)
    assert world.base.v == 0.0


def test_base_does_not_drive_through_furniture(world):
    world.reset({"robot_at": "table"})        # facing the table, 0.5 m from its edge
    table = world.plan.furniture["table"]
    for _ in range(300):
        world.command_base(0.8, 0.0)
        world.step()
        assert not world.plan.collides(world.base.x, world.base.y, world.base.limits.radius)
    assert world.base.bumped and world.base.v == 0.0
    assert table.y0 - world.base.y == pytest.approx(world.base.limits.radius, abs=0.02)
    world.command_base(-0.3, 0.0)             # it can still back away
    world.step(50)
    assert table.y0 - world.base.y > world.base.limits.radius + 0.1


def test_watchdog_stops_base_and_arm(kitchen):
    world = KitchenWorld(kitchen, seed=0, cmd_timeout=0.5)
    world.reset_scene((1.5, 4.0, 0.0), {})
    world.command_base(0.5, 0.0)
    world.command_ee_twist(0.1, 0.0, 0.0)
    world.step(10)
    assert world.base.v > 0 and world.arm.moving
    world.step(int(0.5 / world.dt) + 30)      # timeout, then braking at 1 m/s^2
    assert world.base.v == 0.0 and not world.arm.moving
    x = world.base.x
    world.step(20)
    assert world.base.x == x


# -- arm ------------------------------------------------------------------------------------------
def test_arm_stays_in_its_workspace_and_follows_trajectories(world):
    lim = world.arm.limits
    world.arm.set_ee(5.0, 0.0, -3.0)
    assert world.arm.extend == lim.extend[1] and world.arm.lift == lim.lift[0]
    world.arm.set_ee(0.5, 5.0, 1.0)
    assert world.arm.yaw == lim.yaw[1]
    world.arm.set_ee(0.6, 0.1, 1.0)
    assert world.arm.ee == pytest.approx((0.6, 0.1, 1.0))
    world.command_arm_trajectory([{"arm_lift_joint": 1.2}, {"arm_yaw_joint": -0.3, "gripper_joint": 0.02}])
    world.step(200)
    assert world.arm.joint_positions == pytest.approx((1.2, -0.3, world.arm.extend, 0.02), abs=1e-6)
    world.command_arm_trajectory([{"arm_lift_joint": 9.0}])      # clamped to the limit
    world.step(200)
    assert world.arm.lift == lim.lift[1]


# -- grasping -------------------------------------------------------------------------------------
def test_grasp_lift_and_place_back(world):
    world.reset({"robot_at": "close counter"}, seed=4)
    x, y, z = object_in_base(world, "sponge")
    height = world.objects["sponge"].shape.height
    run_arm_to(world, x, y, z + height + 0.05)
    run_arm_to(world, x, y, z + 0.35 * height)
    settle_gripper(world, 0.0)
    assert world.held == "sponge" and world.objects["sponge"].location == GRIPPER
    assert world.arm.opening == pytest.approx(world.objects["sponge"].shape.width)
    run_arm_to(world, x - 0.1, y, z + 0.3)
    sponge = world.objects["sponge"]
    ee = world.ee_world()
    assert (sponge.x, sponge.y) == pytest.approx(ee[:2]) and sponge.z > z + 0.2
    settle_gripper(world, 0.1)                # released over the counter: rests on it
    assert world.held is None and sponge.location == "close counter" and sponge.z == pytest.approx(z)
    assert world.scene()["sponge"] == "close counter"


def test_grasp_fails_when_too_high_or_off_centre(world):
    world.reset({"robot_at": "close counter"}, seed=4)
    x, y, z = object_in_base(world, "sponge")
    height = world.objects["sponge"].shape.height
    run_arm_to(world, x, y, z + height + 0.03)      # above it: nothing between the fingers
    settle_gripper(world, 0.0)
    assert world.held is None
    settle_gripper(world, 0.1)
    run_arm_to(world, x + 0.06, y, z + 0.35 * height)   # lowered beside it
    settle_gripper(world, 0.0)
    assert world.held is None
    # Fingers that come down on top of an object stop there instead of passing through it.
    settle_gripper(world, 0.1)
    run_arm_to(world, x, y + 0.055, z + height + 0.05)
    run_arm_to(world, x, y + 0.055, z)
    assert world.arm.lift >= z + height


def test_released_over_the_floor_it_falls_and_stays(world):
    world.reset({"robot_at": "close counter", "holding": "apple"}, seed=2)
    assert world.held == "apple" and world.scene()["apple"] == GRIPPER
    run_arm_to(world, 0.4, 0.0, 0.6)          # over the floor between robot and counter
    settle_gripper(world, 0.1)
    apple = world.objects["apple"]
    assert world.held is None and apple.location == FLOOR and apple.z == 0.0
    settle_gripper(world, 0.0)                # the arm cannot reach down to the floor
    assert world.held is None and apple.location == FLOOR


def test_reset_from_task_init_and_errors(world):
    world.reset({"robot_at": "far counter", "holding": "sponge", "absent": ["apple"],
                 "objects": {"coke can": "table"}})
    scene = world.scene()
    assert world.robot_location == "far counter" and world.held == "sponge"
    assert "apple" not in scene and scene["coke can"] == "table" and scene["sponge"] == GRIPPER
    assert world.symbolic_state()["holding"] == "sponge"
    with pytest.raises(TaskError):
        world.reset({"robot_at": "the moon"})
    revision = world.revision
    world.reset(None)
    assert world.revision > revision and world.robot_location == world.kitchen.robot_start


def test_same_seed_same_episode(kitchen):
    a, b, c = (KitchenWorld(kitchen, seed=s) for s in (7, 7, 8))
    for w in (a, b, c):
        w.reset({"robot_at": "far counter"})
    pos = lambda w: [(o.x, o.y, o.yaw) for o in w.objects.values()]  # noqa: E731
    assert pos(a) == pos(b) and pos(a) != pos(c)
    images = [Camera(w).render().copy() for w in (a, b, c)]
    assert np.array_equal(images[0], images[1]) and not np.array_equal(images[0], images[2])


def test_distractors_stand_apart(world):
    for seed in range(5):
        world.reset({"robot_at": "far counter"}, seed=seed)
        on = [o for o in world.objects.values() if o.location == "far counter"]
        for i, a in enumerate(on):
            for b in on[i + 1:]:
                assert math.hypot(a.x - b.x, a.y - b.y) > 0.12, (a.name, b.name)


# -- sensors --------------------------------------------------------------------------------------
def test_camera_shows_objects_and_the_gripper(world):
    world.reset_scene("table", {"coke can": "table"}, seed=3)
    camera = Camera(world, 96, 72)
    image = camera.render().copy()
    assert image.shape == (72, 96, 3) and image.dtype == np.uint8
    world.reset_scene("table", {"orange": "table"}, seed=3)      # another object, same slot
    assert not np.array_equal(camera.render(), image)
    world.reset_scene("table", {"coke can": "table"}, seed=3)
    assert np.array_equal(camera.render(), image)
    settle_gripper(world, 0.0)                                   # the opening shows
    closed = camera.render().copy()
    assert not np.array_equal(closed, image)
    run_arm_to(world, *world.arm.ee[:2], 1.0)                    # and so does the height
    assert not np.array_equal(camera.render(), closed)


def test_laser_scan_hits_the_table(world):
    world.reset({"robot_at": "table"})
    scanner = LaserScanner(world.plan)
    ranges = scanner.scan(*world.base.pose)
    ahead = int(np.argmin(np.abs(scanner.angles)))
    assert ranges[ahead] == pytest.approx(0.5 - scanner.spec.x, abs=1e-3)   # table edge
    behind = int(np.argmin(np.abs(np.abs(scanner.angles) - math.pi)))
    assert ranges[behind] == pytest.approx(world.base.y + scanner.spec.x, abs=1e-3)   # south wall
    assert np.all(np.isfinite(ranges))


# -- navigation, execution, rendering, benchmark --------------------------------------------------
def test_planner_connects_every_location(kitchen):
    """The navigator's global planner on the map the simulator publishes joins every pair of
    approach poses (no location is walled in by the furniture's inflation)."""
    from saycan_ros.sim.floorplan import MAP_RESOLUTION
    from saycan_ros.skills.navigation import CostMap, GlobalPlanner, GridMap
    grid = GridMap(FloorPlan(kitchen).occupancy_grid(MAP_RESOLUTION), MAP_RESOLUTION)
    planner = GlobalPlanner(CostMap(grid))
    names = list(kitchen.locations)
    for a in names:
        for b in names:
            if a != b:
                path = planner.plan(kitchen.location(a).approach, kitchen.location(b).approach)
                assert path.ok and len(path.waypoints) >= 2, (a, b)


def test_simulated_kitchen_executes_an_errand(kitchen):
    from saycan_ros.worlds.simulated import SimulatedKitchen
    from saycan_ros.core.skills import load_skills
    from saycan_ros.core.tasks import TaskInit
    from saycan_ros.core.world import SymbolicWorld

    skills = load_skills(kitchen)
    init = TaskInit.from_mapping({"robot_at": "table"}, kitchen)
    sim, oracle = SimulatedKitchen(kitchen, init=init, seed=0), SymbolicWorld(kitchen, init)
    for text in ["find a sponge", "pick up the sponge", "bring it to you", "put down the sponge"]:
        skill = skills.get(text)
        outcome, expected = sim.execute(skill), oracle.execute(skill)
        assert outcome.success == expected.success, (text, outcome.message)
    snap = sim.snapshot()
    assert snap.objects["sponge"] == "user" == oracle.snapshot().objects["sponge"]
    assert snap.robot_at == "user" and snap.holding is None
    failed = sim.execute(skills.get("put down the apple"))
    assert not failed.success and "holding nothing" in failed.message


def test_a_pick_that_grasps_the_wrong_object_puts_it_back(kitchen):
    """A policy that closes on the neighbour fails the skill and leaves the scene as it was:
    the plan can try the right object again instead of meeting a full hand."""
    from saycan_ros.core.skills import load_skills
    from saycan_ros.core.tasks import TaskInit
    from saycan_ros.sim.expert import PickExpert
    from saycan_ros.worlds.simulated import SimulatedKitchen

    init = TaskInit.from_mapping({"robot_at": "table",
                                  "objects": {"7up can": "table", "green tea": "table"}}, kitchen)
    sim = SimulatedKitchen(kitchen, init=init, seed=0)

    class GraspsTheTea:                 # the learned policy's interface, the expert's actions
        def __init__(self, world):
            self.expert = PickExpert(world, "green tea")

        def act(self, observation):
            return self.expert.act()

    sim.policy = GraspsTheTea(sim.world)
    outcome = sim.execute(load_skills(kitchen).get("pick up the 7up can"))
    assert not outcome.success and "took the green tea and put it back" in outcome.message
    snap = sim.snapshot()
    assert snap.holding is None and snap.objects["green tea"] == "table"


def test_render_kitchen_png(tmp_path):
    out = tmp_path / "kitchen.png"
    message = render_kitchen(out, seed=0)
    assert out.stat().st_size > 10_000 and str(out) in message
    with pytest.raises(ValueError):
        render_kitchen(tmp_path / "kitchen.gif")


def test_top_down_renderer_shape(world):
    image = TopDownRenderer(world).render("caption")
    assert image.ndim == 3 and image.shape[1] > image.shape[0] > 600


def test_bench_reports_steps_per_second(tmp_path, capsys):
    from saycan_ros.cli.main import main
    assert main(["bench", "sim", "--steps", "20", "--no-camera", "--json",
                 str(tmp_path / "sim.json")]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("sim: ")
    assert json.loads((tmp_path / "sim.json").read_text())["steps"] == 20
    result = run_sim_bench(steps=100)
    assert result["steps"] == 100 and result["steps_per_s"] > 0 and result["camera"]
    assert re.fullmatch(r"sim: \d+ steps/s", format_sim_result(result).splitlines()[-1])
