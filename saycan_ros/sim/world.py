"""The simulated kitchen: base, arm, gripper and objects stepped together (ROS-free).

Commands come in through ``command_*``; ``step()`` advances time by ``dt``. A grasp succeeds
only when the closing fingers reach an object standing between them, low enough; a released
object lands on the surface under the gripper or falls to the floor and stays there. The same
seed gives the same episode (object positions, lighting, colours).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from saycan_ros.core.kitchen import GRIPPER, Kitchen, load_kitchen
from saycan_ros.robot.arm import MAST, ArmLimits
from saycan_ros.sim.arm import Arm
from saycan_ros.sim.base import BaseLimits, DiffDriveBase, wrap_angle
from saycan_ros.sim.floorplan import FloorPlan
from saycan_ros.sim.objects import SimObject, Slot, make_objects, surface_slots
from saycan_ros.core.tasks import TaskInit

FLOOR = "floor"
GRASP_DEPTH = 0.7            # fingertips below this fraction of an object's height can hold it
GRASP_SLACK = 0.012          # how far off-centre (across the fingers) a grasp still works, m
GRASP_FORWARD = 0.03         # how far off-centre (along the arm) a grasp still works, m
FINGER = 0.012               # finger thickness, m
AT_LOCATION_M = 0.4          # the robot is "at" a location this close to its approach pose
AT_LOCATION_RAD = 0.6


@dataclass
class Appearance:
    """Per-episode lighting and colour noise, read by the cameras."""
    gain: float = 1.0
    bias: tuple[float, float, float] = (0.0, 0.0, 0.0)
    colours: dict[str, tuple[int, int, int]] = field(default_factory=dict)

    def lit(self, colour) -> tuple[int, int, int]:
        return tuple(int(min(255, max(0, c * self.gain + b))) for c, b in zip(colour, self.bias))


class KitchenWorld:
    def __init__(self, kitchen: Kitchen | None = None, dt: float = 0.02,
                 cmd_timeout: float | None = 0.5, seed: int = 0, randomize: bool = True,
                 base_limits: BaseLimits | None = None, arm_limits: ArmLimits | None = None):
        self.kitchen = kitchen or load_kitchen()
        self.plan = FloorPlan(self.kitchen)
        self.dt = dt
        self.cmd_timeout = cmd_timeout
        self.randomize = randomize
        self.base = DiffDriveBase(base_limits)
        self.arm = Arm(arm_limits)
        self.objects = make_objects(self.kitchen)
        self.present: dict[str, None] = {}   # an ordered set: same seed, same iteration order
        self.held: str | None = None
        self.appearance = Appearance()
        self.time = 0.0
        self.revision = 0
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self.events: list[str] = []          # grasp/release log of the episode, for people
        self._grip_offset = 0.0
        self._last_base_cmd = self._last_twist_cmd = -math.inf
        self._location = ""
        self._slots = {name: surface_slots(self.kitchen, name, self._slot_reach)
                       for name in self.kitchen.locations}
        self.reset()

    # -- episodes ------------------------------------------------------------------------------
    def reset(self, init: Any = None, seed: int | None = None) -> None:
        """Reset to a task's start state: ``init`` is a TaskInit, a mapping of its keys, or None."""
        if isinstance(init, Mapping):
            init = TaskInit.from_mapping(init, self.kitchen)
        if init is None:
            scene = self.kitchen.default_scene()
            robot_at, holding = self.kitchen.robot_start, None
        else:
            scene = dict(init.scene(self.kitchen))
            robot_at = init.robot_at or self.kitchen.robot_start
            holding = init.holding
        placements = {name: loc for name, loc in scene.items() if loc != GRIPPER}
        self.reset_scene(robot_at, placements, holding=holding, seed=seed)

    def reset_scene(self, robot_at: str | tuple[float, float, float],
                    placements: Mapping[str, str | tuple[float, float]], holding: str | None = None,
                    seed: int | None = None, out_of_reach: tuple[str, ...] = (),
                    pose_noise: tuple[float, float] = (0.0, 0.0)) -> None:
        """Lay out an episode.

        ``robot_at``: a location (its approach pose) or an (x, y, yaw) pose. ``placements``:
        object -> location (a random free slot the arm reaches from the approach pose, or one
        it does not for objects in ``out_of_reach``) or -> an (x, y) point on a surface.
        ``pose_noise``: (metres, radians) of uniform noise on the robot's start pose.
        """
        if seed is not None:
            self.seed = int(seed)
        self.rng = rng = np.random.default_rng(self.seed)
        if isinstance(robot_at, str):
            loc = self.kitchen.location(robot_at)
            pose = (*loc.approach, loc.yaw)
        else:
            pose = tuple(float(v) for v in robot_at)
        if pose_noise != (0.0, 0.0):
            n = rng.uniform(-1.0, 1.0, 3) * (pose_noise[0], pose_noise[0], pose_noise[1])
            pose = (pose[0] + n[0], pose[1] + n[1], pose[2] + n[2])
        self.base.place(*pose)
        self.arm.home()
        self.held = None
        self.present = dict.fromkeys([*placements, *([holding] if holding else [])])
        used: dict[str, set[int]] = {}
        for name, where in placements.items():
            obj = self.objects[name]
            if isinstance(where, str):
                slot = self._free_slot(where, used, reachable=name not in out_of_reach)
                x, y, location = slot.x, slot.y, where
            else:
                x, y = where
                location = self.plan.surface_at(x, y) or FLOOR
            obj.x, obj.y = x + rng.uniform(-0.015, 0.015), y + rng.uniform(-0.015, 0.015)
            obj.z = self._surface_height(location)
            obj.yaw = float(rng.uniform(-math.pi, math.pi))
            obj.location = location
        if holding:
            self._attach(self.objects[holding], offset=0.5 * self.objects[holding].shape.height)
        self.appearance = self._sample_appearance(rng)
        self.time = 0.0
        self._last_base_cmd = self._last_twist_cmd = -math.inf
        self.events = []
        self._location = self._compute_location()
        self.revision += 1

    def slots(self, location: str) -> list[Slot]:
        """Where objects may stand on a location's surface (see :func:`surface_slots`)."""
        return self._slots[location]

    def _free_slot(self, location: str, used: dict[str, set[int]], reachable: bool) -> Slot:
        slots = self._slots[location]
        taken = used.setdefault(location, set())
        choices = [i for i, s in enumerate(slots) if s.reachable == reachable and i not in taken]
        if not choices:   # a crowded or small surface: any free slot, then any slot at all
            choices = [i for i in range(len(slots)) if i not in taken] or list(range(len(slots)))
        index = int(self.rng.choice(choices))
        taken.add(index)
        return slots[index]

    def _sample_appearance(self, rng: np.random.Generator) -> Appearance:
        if not self.randomize:
            return Appearance(colours={n: o.colour for n, o in self.objects.items()})
        colours = {n: tuple(int(np.clip(c + rng.normal(0, 8), 0, 255)) for c in o.colour)
                   for n, o in self.objects.items()}
        return Appearance(gain=float(rng.uniform(0.8, 1.15)),
                          bias=tuple(float(b) for b in rng.uniform(-12, 12, 3)), colours=colours)

    # -- commands ------------------------------------------------------------------------------
    def command_base(self, linear: float, angular: float) -> None:
        self.base.command(linear, angular)
        self._last_base_cmd = self.time

    def command_ee_twist(self, vx: float, vy: float, vz: float) -> None:
        """End-effector velocity in the base frame (m/s)."""
        self.arm.command_twist(vx, vy, vz)
        self._last_twist_cmd = self.time

    def command_gripper(self, opening: float) -> None:
        self.arm.command_gripper(opening)

    def command_arm_trajectory(self, points: list[dict[str, float]]) -> None:
        self.arm.command_trajectory(points)

    # -- simulation ------------------------------------------------------------------------------
    def step(self, steps: int = 1) -> None:
        for _ in range(steps):
            self._step_once()

    def _step_once(self) -> None:
        dt = self.dt
        self.time += dt
        if self.cmd_timeout:   # watchdog: a command stream that stops, stops the robot
            if self.time - self._last_base_cmd > self.cmd_timeout:
                self.base.command(0.0, 0.0)
            if self.time - self._last_twist_cmd > self.cmd_timeout and not self.arm.waypoints:
                self.arm.twist = (0.0, 0.0, 0.0)
        self.base.step(dt, self.plan)
        opening_before = self.arm.opening
        self.arm.step(dt)
        ee = self.ee_world()
        self._keep_above_surfaces(ee)
        if self.held is None:
            if self.arm.opening < opening_before:
                self._try_grasp(opening_before)
        else:
            held = self.objects[self.held]
            if self.arm.opening > held.shape.width + 0.01:
                self._release(held)
            else:
                self.arm.opening = max(self.arm.opening, held.shape.width)
        if self.held is not None:
            held = self.objects[self.held]
            held.x, held.y, _ = ee = self.ee_world()
            held.z = ee[2] - self._grip_offset
            held.yaw = self.base.yaw + self.arm.yaw
        location = self._compute_location()
        if location != self._location:
            self._location = location
            self.revision += 1

    # -- geometry ------------------------------------------------------------------------------
    def ee_world(self) -> tuple[float, float, float]:
        """The end effector (between the fingertips) in the map frame."""
        x, y, z = self.arm.ee
        x += MAST[0]
        y += MAST[1]
        c, s = math.cos(self.base.yaw), math.sin(self.base.yaw)
        return self.base.x + c * x - s * y, self.base.y + s * x + c * y, z

    def to_base(self, x: float, y: float) -> tuple[float, float]:
        """A map-frame point in the base frame."""
        dx, dy = x - self.base.x, y - self.base.y
        c, s = math.cos(self.base.yaw), math.sin(self.base.yaw)
        return c * dx + s * dy, -s * dx + c * dy

    def arm_reaches(self, forward: float, left: float, margin: float = 0.0) -> bool:
        """Whether the gripper can be centred on a base-frame point with room to spare;
        ``margin`` (m) adds to that room (negative: accept points just beyond the limits)."""
        lim = self.arm.limits
        x, y = forward - MAST[0], left - MAST[1]
        r, yaw = math.hypot(x, y), math.atan2(y, x)
        return (lim.extend[0] + 0.08 + margin <= r <= lim.extend[1] - 0.06 - margin
                and abs(yaw) <= lim.yaw[1] - 0.1 - margin / max(r, 0.3))

    def _slot_reach(self, forward: float, left: float) -> bool | None:
        """Slots are clearly reachable or clearly not, so that the robot's start-pose noise
        cannot turn one into the other; borderline slots (None) are used only as a last resort."""
        if self.arm_reaches(forward, left, margin=0.05):
            return True
        return None if self.arm_reaches(forward, left, margin=-0.12) else False

    def reachable(self, name: str) -> bool:
        obj = self.objects[name]
        return self.arm_reaches(*self.to_base(obj.x, obj.y))

    def _surface_height(self, location: str) -> float:
        if location in self.plan.furniture:
            return self.plan.furniture[location].height
        return 0.0

    def _finger_frame(self, obj: SimObject, ee) -> tuple[float, float]:
        """An object's offset from the end effector: (along the arm, across the fingers)."""
        heading = self.base.yaw + self.arm.yaw
        dx, dy = obj.x - ee[0], obj.y - ee[1]
        c, s = math.cos(heading), math.sin(heading)
        return c * dx + s * dy, -s * dx + c * dy

    def _between_fingers(self, obj: SimObject, ee, opening: float) -> bool:
        along, across = self._finger_frame(obj, ee)
        room = opening / 2 - obj.shape.width / 2 + GRASP_SLACK
        return abs(along) <= GRASP_FORWARD and abs(across) <= room

    def finger_offset(self, name: str) -> tuple[float, float]:
        """``name``'s offset from the end effector (along the arm, across the fingers), m."""
        return self._finger_frame(self.objects[name], self.ee_world())

    def _keep_above_surfaces(self, ee) -> None:
        """Fingertips stop on a surface, or on top of an object they would hit."""
        floor = 0.0
        surface = self.plan.surface_at(ee[0], ee[1])
        if surface is not None:
            floor = self.plan.furniture[surface].height + 0.005
        if self.held is not None:
            floor += self._grip_offset
        else:
            reach = self.arm.opening / 2 + FINGER + 0.05
            for name in self.present:
                obj = self.objects[name]
                if abs(obj.x - ee[0]) > reach or abs(obj.y - ee[1]) > reach or obj.location == GRIPPER:
                    continue
                if self._between_fingers(obj, ee, self.arm.opening):
                    continue
                along, across = self._finger_frame(obj, ee)
                half = obj.shape.width / 2
                if abs(along) < half + FINGER and abs(across) < self.arm.opening / 2 + FINGER + half:
                    floor = max(floor, obj.z + obj.shape.height + 0.005)
        if self.arm.lift < floor:
            self.arm.lift = min(floor, self.arm.limits.lift[1])

    # -- grasping ------------------------------------------------------------------------------
    def _try_grasp(self, opening_before: float) -> None:
        ee = self.ee_world()
        best, best_dist = None, math.inf
        for name in self.present:
            obj = self.objects[name]
            if obj.location in (GRIPPER, FLOOR) or self.arm.opening > obj.shape.width:
                continue
            if opening_before < obj.shape.width:     # the fingers were already closer than it
                continue
            low_enough = obj.z <= ee[2] <= obj.z + GRASP_DEPTH * obj.shape.height
            if low_enough and self._between_fingers(obj, ee, opening_before):
                dist = math.hypot(obj.x - ee[0], obj.y - ee[1])
                if dist < best_dist:
                    best, best_dist = obj, dist
        if best is not None:
            self._attach(best, offset=ee[2] - best.z)
            self.events.append(f"{self.time:.2f}s grasped {best.name}")

    def _attach(self, obj: SimObject, offset: float) -> None:
        self.held = obj.name
        obj.location = GRIPPER
        self._grip_offset = max(0.0, offset)
        self.arm.opening = obj.shape.width
        self.arm.gripper_target = min(self.arm.gripper_target, obj.shape.width)
        x, y, z = self.ee_world()
        obj.x, obj.y, obj.z = x, y, z - self._grip_offset
        self.revision += 1

    def _release(self, obj: SimObject) -> None:
        location = self.plan.surface_at(obj.x, obj.y) or FLOOR
        obj.location = location
        obj.z = self._surface_height(location)
        self.held = None
        self.events.append(f"{self.time:.2f}s released {obj.name} on {location}")
        self.revision += 1

    # -- state -----------------------------------------------------------------------------------
    def _compute_location(self) -> str:
        b = self.base
        for name, loc in self.kitchen.locations.items():
            if (abs(b.x - loc.approach[0]) < AT_LOCATION_M and abs(b.y - loc.approach[1]) < AT_LOCATION_M
                    and math.hypot(b.x - loc.approach[0], b.y - loc.approach[1]) < AT_LOCATION_M
                    and abs(wrap_angle(b.yaw - loc.yaw)) < AT_LOCATION_RAD):
                return name
        return ""

    @property
    def robot_location(self) -> str:
        return self._location

    def scene(self) -> dict[str, str]:
        """Object -> location ("gripper", "floor" or a kitchen location) of present objects."""
        return {name: self.objects[name].location for name in self.kitchen.objects
                if name in self.present}

    def symbolic_state(self) -> dict[str, Any]:
        return {"robot_location": self._location, "holding": self.held or "",
                "objects": self.scene()}

    def state_dict(self) -> dict[str, Any]:
        """Everything an evaluator may want, JSON-serialisable."""
        ee = self.ee_world()
        return {
            "revision": self.revision, "time": round(self.time, 4), "seed": self.seed,
            "robot_location": self._location, "holding": self.held or "",
            "robot_pose": {"x": self.base.x, "y": self.base.y, "theta": self.base.yaw},
            "end_effector": {"x": ee[0], "y": ee[1], "z": ee[2], "opening": self.arm.opening},
            "objects": {name: {"location": o.location, "x": o.x, "y": o.y, "z": o.z,
                               "shape": o.shape.kind, "width": o.shape.width,
                               "height": o.shape.height}
                        for name, o in ((n, self.objects[n]) for n in self.kitchen.objects)
                        if name in self.present},
            "events": list(self.events),
        }

    def state_json(self) -> str:
        return json.dumps(self.state_dict(), sort_keys=True)
