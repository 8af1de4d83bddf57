"""Skill success on random starts in the simulator: ``saycan eval-skill navigate|place``.

The evaluations run the same controllers as the ``navigate_skill`` and ``place_skill`` nodes
(:class:`saycan_ros.skills.navigation.Navigator`,
:class:`saycan_ros.skills.place.controller.PlaceController`) on the
simulator core (no ROS), closing the loop at the nodes' control rate on what the nodes see
(odometry pose, laser scan, occupancy grid, joint positions) and judging success on the
simulator's ground truth.

- navigate: the robot starts at a random collision-free pose (random heading) anywhere in the
  kitchen, and drives to a location; success = the navigator reports success and the robot is
  at that location (the simulator's test: within 0.4 m and 0.6 rad of its approach pose).
- place: the robot stands at a surface (with start-pose noise, the arm at a random pose above
  it) holding a random object, with 1-3 other objects on the surface; success = the object
  rests on that surface and the hand is empty and back home. Also counted: placements where
  no free spot was seen (a full trash can: put where there is most room) and placements
  within 8 cm of another object.

Other skills plug in with :func:`register_skill_evaluator` (e.g. ``pick``); ``register``
adds the ``eval-skill`` sub-command to the ``saycan`` parser. The last line printed is
``skill <name>: success K/N (P%)``.
"""
from __future__ import annotations

import argparse
import importlib
import math
import sys
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from saycan_ros.cli.common import write_json
from saycan_ros.robot.arm import JOINT_NAMES
from saycan_ros.worlds.closed_loop import CONTROL_PERIOD_S, drive, place_in_sim


# -- reports ---------------------------------------------------------------------------------------
@dataclass
class SkillEvalReport:
    """Successes per group (a location, an object...) and what failed, for one skill."""
    skill: str
    groups: dict[str, list[int]] = field(default_factory=dict)   # group -> [successes, episodes]
    failures: list[dict] = field(default_factory=list)
    extra: dict = field(default_factory=dict)
    seconds: float = 0.0

    def add(self, group: str, success: bool, **details) -> None:
        counts = self.groups.setdefault(group, [0, 0])
        counts[0] += int(bool(success))
        counts[1] += 1
        if not success:
            self.failures.append({"group": group, **details})

    @property
    def successes(self) -> int:
        return sum(c[0] for c in self.groups.values())

    @property
    def episodes(self) -> int:
        return sum(c[1] for c in self.groups.values())

    @property
    def rate(self) -> float:
        return self.successes / self.episodes if self.episodes else 0.0

    def summary_line(self) -> str:
        return (f"skill {self.skill}: success {self.successes}/{self.episodes} "
                f"({100.0 * self.rate:.1f}%)")

    def table(self) -> str:
        width = max([len(g) for g in self.groups] + [8])
        lines = [f"{'group':<{width}}  success"]
        for group, (k, n) in self.groups.items():
            lines.append(f"{group:<{width}}  {k}/{n} ({100.0 * k / max(n, 1):.1f}%)")
        for key, value in self.extra.items():
            lines.append(f"{key}: {value}")
        for failure in self.failures[:10]:
            lines.append("  failed: " + ", ".join(f"{k}={v}" for k, v in failure.items()))
        lines.append(f"({self.episodes} episodes in {self.seconds:.1f} s)")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {"skill": self.skill, "successes": self.successes, "episodes": self.episodes,
                "rate": self.rate,
                "groups": {g: {"successes": k, "episodes": n} for g, (k, n) in self.groups.items()},
                "failures": self.failures, "extra": self.extra, "seconds": self.seconds}


# -- navigation ------------------------------------------------------------------------------------
def random_free_pose(world, rng: np.random.Generator, clearance: float = 0.05):
    """A uniformly random pose where the base's footprint is ``clearance`` clear of everything."""
    radius = world.base.limits.radius + clearance
    for _ in range(10000):
        x = rng.uniform(radius, world.plan.width - radius)
        y = rng.uniform(radius, world.plan.depth - radius)
        if not world.plan.collides(x, y, radius):
            return float(x), float(y), float(rng.uniform(-math.pi, math.pi))
    raise RuntimeError("no free pose found in the kitchen")


def evaluate_navigation(episodes: int = 50, seed: int = 0, locations: Sequence[str] | None = None,
                        kitchen=None, control_period: float = CONTROL_PERIOD_S,
                        progress: Callable[[str], None] | None = None) -> SkillEvalReport:
    """``episodes`` random starts per location; see the module docstring."""
    from saycan_ros.core.kitchen import load_kitchen
    from saycan_ros.skills.navigation import GridMap, Navigator
    from saycan_ros.sim.floorplan import MAP_RESOLUTION
    from saycan_ros.sim.scan import LaserScanner
    from saycan_ros.sim.world import KitchenWorld

    started = time.perf_counter()
    kitchen = kitchen or load_kitchen()
    world = KitchenWorld(kitchen, cmd_timeout=0.5, seed=seed)
    scanner = LaserScanner(world.plan)
    grid = GridMap(world.plan.occupancy_grid(MAP_RESOLUTION), MAP_RESOLUTION)   # what /map carries
    navigator = Navigator(grid)
    rng = np.random.default_rng(seed)
    names = list(locations or kitchen.locations)
    report = SkillEvalReport("navigate")
    times = []
    for name in names:
        kitchen.location(name)
    for episode in range(episodes):
        for name in names:
            loc = kitchen.location(name)
            start = random_free_pose(world, rng)
            world.reset_scene(start, {}, seed=int(rng.integers(2 ** 31)))
            t0 = world.time
            result = drive(world, navigator, (*loc.approach, loc.yaw), scanner, control_period)
            ok = result.success and world.robot_location == name
            times.append(world.time - t0)
            report.add(name, ok, start=[round(v, 3) for v in start],
                       message=result.error_msg or result.status.value,
                       at=world.robot_location or "-")
        if progress is not None:
            progress(f"episode {episode + 1}/{episodes}: {report.successes}/{report.episodes}")
    report.extra["mean_drive_time_s"] = round(float(np.mean(times)), 2) if times else 0.0
    report.seconds = time.perf_counter() - started
    return report


# -- place -----------------------------------------------------------------------------------------
PLACE_LOCATIONS = ("close counter", "far counter", "table", "trash can", "user")


def evaluate_place(episodes: int = 250, seed: int = 0, locations: Sequence[str] | None = None,
                   kitchen=None, control_period: float = CONTROL_PERIOD_S, use_camera: bool = True,
                   random_arm: bool = True,
                   progress: Callable[[str], None] | None = None) -> SkillEvalReport:
    """``episodes`` random place starts, spread over the surfaces; see the module docstring."""
    from saycan_ros.core.kitchen import GRIPPER, load_kitchen
    from saycan_ros.skills.place.controller import PlaceController
    from saycan_ros.sim.camera import Camera
    from saycan_ros.sim.world import KitchenWorld

    started = time.perf_counter()
    kitchen = kitchen or load_kitchen()
    world = KitchenWorld(kitchen, cmd_timeout=0.5, seed=seed)
    camera = Camera(world) if use_camera else None      # kitchen_sim's default size
    controller = PlaceController(kitchen)
    rng = np.random.default_rng(seed)
    names = list(locations or PLACE_LOCATIONS)
    objects = list(kitchen.objects)
    report = SkillEvalReport("place")
    crowded = least_crowded = 0
    for episode in range(episodes):
        name = names[episode % len(names)]
        order = rng.permutation(len(objects))
        target = objects[order[0]]
        count = int(rng.integers(1, 4))
        others = {objects[i]: name for i in order[1:1 + count]}
        world.reset_scene(name, others, holding=target, seed=int(rng.integers(2 ** 31)),
                          pose_noise=(0.03, 0.05))
        if random_arm:     # the arm anywhere above the surface, not only folded home
            lift, yaw, extend = JOINT_NAMES[:3]
            world.command_arm_trajectory([{lift: rng.uniform(1.0, 1.25),
                                           yaw: rng.uniform(-0.6, 0.6),
                                           extend: rng.uniform(0.3, 0.8)}])
            world.step(150)
        command = place_in_sim(world, controller, control_period, camera=camera)
        if command.success and "least crowded" in command.message:
            least_crowded += 1
        obj = world.objects[target]
        ok = (command.success and world.held is None and obj.location == name)
        near = min((math.hypot(obj.x - world.objects[o].x, obj.y - world.objects[o].y)
                    for o in others), default=math.inf)
        if ok and near < 0.08:
            crowded += 1
        report.add(name, ok, object=target, message=command.message,
                   ended=GRIPPER if world.held == target else obj.location)
        if progress is not None and (episode + 1) % 25 == 0:
            progress(f"episode {episode + 1}/{episodes}: {report.successes}/{report.episodes}")
    report.extra["no_free_spot_seen_placed_at_least_crowded"] = least_crowded
    report.extra["placed_within_8cm_of_another_object"] = crowded
    report.seconds = time.perf_counter() - started
    return report


# -- the CLI ---------------------------------------------------------------------------------------
@dataclass
class SkillEvaluator:
    """``saycan eval-skill <name>``: ``run(args)`` returns a :class:`SkillEvalReport` (anything
    with ``table()`` and ``summary_line()``); ``add_arguments(parser)`` adds its options, which
    must not clash with another evaluator's. Either may be a ``"module:function"`` string,
    imported when needed (the pick evaluator's torch code loads only for ``eval-skill pick``)."""
    name: str
    run: Callable[[argparse.Namespace], SkillEvalReport] | str
    add_arguments: Callable[[argparse.ArgumentParser], None] | str | None = None
    help: str = ""

    def resolve(self) -> Callable[[argparse.Namespace], SkillEvalReport]:
        return _resolve(self.run)

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        if self.add_arguments is not None:
            _resolve(self.add_arguments)(parser)


def _resolve(entry):
    if isinstance(entry, str):
        module, _, attr = entry.partition(":")
        return getattr(importlib.import_module(module), attr)
    return entry


def _run_navigate(args) -> SkillEvalReport:
    locations = [s.strip() for s in args.locations.split(",") if s.strip()] or None
    return evaluate_navigation(episodes=args.episodes or 50, seed=args.seed, locations=locations,
                               progress=_progress(args))


def _run_place(args) -> SkillEvalReport:
    locations = [s.strip() for s in args.locations.split(",") if s.strip()] or None
    return evaluate_place(episodes=args.episodes or 250, seed=args.seed, locations=locations,
                          progress=_progress(args))


def _progress(args):
    if args.quiet:
        return None
    return lambda line: print(line, file=sys.stderr, flush=True)


#: Every ``saycan eval-skill`` evaluator: one table, complete whatever was imported before.
SKILL_EVALUATORS: dict[str, SkillEvaluator] = {e.name: e for e in (
    SkillEvaluator("navigate", _run_navigate,
                   help="drive to every location from random poses (episodes per location)"),
    SkillEvaluator("pick", "saycan_ros.cli.train:run_eval_skill_pick",
                   "saycan_ros.cli.train:pick_arguments",
                   help="the BC pick policy on fresh feasible starts (episodes per object, "
                        "default 20)"),
    SkillEvaluator("place", _run_place, help="put the held object down on a surface"),
)}


def cmd_eval_skill(args) -> int:
    evaluator = SKILL_EVALUATORS[args.skill]
    try:
        report = evaluator.resolve()(args)
    except (ValueError, KeyError) as exc:
        print(f"saycan eval-skill {args.skill}: {exc}", file=sys.stderr)
        return 2
    if args.json:
        write_json(args.json, report.to_dict() if hasattr(report, "to_dict") else {})
    print(report.table())
    print(report.summary_line())
    return 0


def register(subparsers) -> argparse.ArgumentParser:
    """Add ``eval-skill`` to the ``saycan`` command's sub-parsers."""
    parser = subparsers.add_parser(
        "eval-skill", help="skill success on random starts in the simulator",
        description="Runs a skill's executor on random starts in the simulator (no ROS); the "
                    "last line is 'skill NAME: success K/N (P%%)'. "
                    + " ".join(f"{e.name}: {e.help}." for e in SKILL_EVALUATORS.values() if e.help))
    parser.add_argument("skill", choices=sorted(SKILL_EVALUATORS))
    parser.add_argument("--episodes", type=int, default=0,
                        help="episodes (navigate: per location); 0 = the skill's default")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--locations", default="",
                        help="comma-separated locations (navigate, place); default: all")
    parser.add_argument("--json", help="write the report to this file")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    for evaluator in SKILL_EVALUATORS.values():
        evaluator.add_to(parser)
    parser.set_defaults(func=cmd_eval_skill)
    return parser
