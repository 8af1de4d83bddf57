"""Scripted experts for picking and placing, acting step by step in the normalised action
space of :mod:`saycan_ros.sim.control`.

They read the ground truth (privileged information) and decide every action from the current
state alone, so they recover from whatever the last action did: that is what lets them drive
through injected noise and label demonstrations for behaviour cloning. On an impossible start
they terminate at once, which is the right answer for a value function to learn.
"""
from __future__ import annotations

import math

import numpy as np

from saycan_ros.core.kitchen import GRIPPER
from saycan_ros.sim.control import STEP_M
from saycan_ros.sim.world import FLOOR, GRASP_FORWARD, GRASP_SLACK, KitchenWorld

ALIGN_M = 0.012          # horizontal error at which the gripper may descend (grasps allow ~0.025)
CLOSE_ALONG_M = 0.75 * GRASP_FORWARD   # at grasp height, close when off by at most this along
CLOSE_ACROSS_M = GRASP_SLACK            # the arm and this across the fingers (what still holds)
HOVER_M = 0.05           # clearance above an object's top while aligning
CLOSE_ABOVE_M = 0.01     # the hand closes once its fingertips are this close above the grasp height
OPEN_MARGIN_M = 0.01     # ... and only when open at least this much wider than the object
LIFT_M = 0.08            # a picked object counts as lifted this far above its surface
OPEN, CLOSE = -1.0, 1.0


def _toward(error: np.ndarray) -> np.ndarray:
    """Proportional step toward ``error`` (metres) in normalised action units."""
    return np.clip(np.asarray(error) / STEP_M, -1.0, 1.0)


def lifted(world: KitchenWorld, name: str, margin: float = 0.0) -> bool:
    """Whether ``name`` is held at least LIFT_M (+ margin) above the surface under it."""
    if world.held != name:
        return False
    obj = world.objects[name]
    surface = world.plan.surface_at(obj.x, obj.y)
    height = world.plan.furniture[surface].height if surface else 0.0
    return obj.z >= height + LIFT_M + margin


class PickExpert:
    """Pick up ``target`` from the surface in front of the robot, then lift it."""

    def __init__(self, world: KitchenWorld, target: str, noise: float = 0.0, seed: int | None = None,
                 undershoot: float = 0.0):
        self.world, self.target, self.noise = world, target, noise
        self.rng = np.random.default_rng(seed)
        # Aim the descent this far below the grasp height (never below the surface): the hand
        # still closes once within 1 cm above it, so an imitating policy whose last descent
        # steps come out a little short still ends well inside the closing band.
        self.undershoot = undershoot

    def feasible(self) -> bool:
        w = self.world
        if self.target not in w.present:
            return False
        if w.held is not None:
            return w.held == self.target
        obj = w.objects[self.target]
        return obj.location not in (FLOOR, GRIPPER) and w.reachable(self.target)

    def clean_action(self) -> np.ndarray:
        w = self.world
        if not self.feasible() or lifted(w, self.target, margin=0.04):
            return np.array([0.0, 0.0, 0.0, CLOSE if w.held else OPEN, 1.0])
        ee = np.array(w.arm.ee)
        if w.held == self.target:                      # grasped: lift straight up
            return np.array([0.0, 0.0, 1.0, CLOSE, -1.0])
        obj = w.objects[self.target]
        error = np.array(w.to_base(obj.x, obj.y)) - ee[:2]
        distance = float(np.hypot(*error))
        top = obj.z + obj.shape.height
        grasp_z = obj.z + 0.35 * obj.shape.height
        closing = w.arm.gripper_target < min(w.arm.opening, obj.shape.width) - 0.01
        if closing and (distance <= 2 * ALIGN_M or self._around_target()):
            return np.array([*_toward(error), 0.0, CLOSE, -1.0])     # let the fingers close
        if w.arm.opening < obj.shape.width + OPEN_MARGIN_M:   # a missed grasp or a half-open hand
            dz = max(top + HOVER_M - ee[2], 0.0) if w.arm.opening < obj.shape.width else 0.0
            return np.array([*_toward(error), *_toward([dz]), OPEN, -1.0])
        if ee[2] <= grasp_z + CLOSE_ABOVE_M and self._around_target():
            # Low and around it: close rather than re-align a grasp that would already hold. The
            # hand hides the object from the camera here; labels that flip on millimetres left
            # the policy hovering undecided (the orange, before: p(close) ~0.4 for 30 steps).
            return np.array([*_toward(error), 0.0, CLOSE, -1.0])
        if distance > ALIGN_M:
            # Align above the object; far off, first rise clear of everything on the surface.
            dz = max(top + HOVER_M - ee[2], 0.0) if distance > 0.03 else 0.0
            return np.array([*_toward(error), *_toward([dz]), OPEN, -1.0])
        if ee[2] > grasp_z + CLOSE_ABOVE_M:            # aligned: descend around it
            aim = max(grasp_z - self.undershoot, obj.z + 0.005) if self.undershoot else grasp_z
            return np.array([*_toward(error), *_toward([aim - ee[2]]), OPEN, -1.0])
        return np.array([*_toward(error), 0.0, CLOSE, -1.0])

    def _around_target(self) -> bool:
        """Whether closing the fingers now would hold the target (with a margin along the arm)."""
        along, across = self.world.finger_offset(self.target)
        return abs(along) <= CLOSE_ALONG_M and abs(across) <= CLOSE_ACROSS_M

    def act(self) -> np.ndarray:
        return perturb(self.clean_action(), self.noise, self.rng)


class PlaceExpert:
    """Put ``target`` (held) down on the surface in front of the robot, at ``spot`` (x, y map)."""

    def __init__(self, world: KitchenWorld, target: str, spot: tuple[float, float] | None = None,
                 noise: float = 0.0, seed: int | None = None):
        self.world, self.target, self.noise = world, target, noise
        self.rng = np.random.default_rng(seed)
        self.spot = spot
        self.surface = world.robot_location if world.robot_location in world.plan.furniture else None

    def feasible(self) -> bool:
        w = self.world
        if w.held != self.target:
            return self.placed()
        return self.surface is not None and self.spot is not None

    def placed(self) -> bool:
        obj = self.world.objects.get(self.target)
        return (self.world.held is None and obj is not None and self.target in self.world.present
                and self.surface is not None and obj.location == self.surface)

    def clean_action(self) -> np.ndarray:
        w = self.world
        ee = np.array(w.arm.ee)
        if self.placed():                              # back off upwards, then done
            obj = w.objects[self.target]
            clear = obj.z + obj.shape.height + HOVER_M
            if ee[2] < clear - 0.01:
                return np.array([0.0, 0.0, *_toward([clear - ee[2]]), OPEN, -1.0])
            return np.array([0.0, 0.0, 0.0, OPEN, 1.0])
        if not self.feasible():
            return np.array([0.0, 0.0, 0.0, CLOSE if w.held else OPEN, 1.0])
        obj = w.objects[self.target]
        height = w.plan.furniture[self.surface].height
        bottom = obj.z
        error = np.array(w.to_base(*self.spot)) - ee[:2]
        offset = ee[2] - bottom                          # fingertips above the object's bottom
        if np.hypot(*error) > 0.02:                      # carry it over the spot, clear of things
            dz = max(height + 0.2 + offset - ee[2], 0.0)
            return np.array([*_toward(error), *_toward([dz]), CLOSE, -1.0])
        if bottom > height + 0.01:                       # lower it onto the surface
            return np.array([*_toward(error), *_toward([height + 0.005 - bottom]), CLOSE, -1.0])
        return np.array([0.0, 0.0, 0.0, OPEN, -1.0])    # let go

    def act(self) -> np.ndarray:
        return perturb(self.clean_action(), self.noise, self.rng)


def perturb(action: np.ndarray, noise: float, rng: np.random.Generator) -> np.ndarray:
    """The executed action: Gaussian noise of std ``noise`` on the motion and gripper channels
    (clipped to the action range). Terminating actions are not perturbed: ending is a decision."""
    out = action.astype(np.float32)
    if noise > 0.0 and out[4] <= 0.0:           # the final (terminating) action is a stop
        out[:4] += rng.normal(0.0, noise, 4)
    return np.clip(out, -1.0, 1.0)


def free_spot(world: KitchenWorld, location: str, rng: np.random.Generator,
              clearance: float = 0.12) -> tuple[float, float] | None:
    """A reachable point on ``location``'s surface at least ``clearance`` from every object."""
    slots = [s for s in world.slots(location) if s.reachable]
    order = rng.permutation(len(slots))
    for i in order:
        s = slots[i]
        if all(math.hypot(s.x - o.x, s.y - o.y) >= clearance
               for n, o in world.objects.items() if n in world.present and o.location == location):
            return s.x, s.y
    return None
