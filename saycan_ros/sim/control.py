"""The learning-facing action of the arm: one normalised end-effector step.

An action is ``[dx, dy, dz, gripper, terminate]`` in [-1, 1]: a Cartesian end-effector
displacement in the base frame of at most ``STEP_M`` per axis, the gripper opening
(-1 fully open, +1 fully closed) and a terminate flag (> 0 ends the episode). One action runs
``SUBSTEPS`` simulator steps with the end effector moving at constant velocity.
"""
from __future__ import annotations

import numpy as np

from saycan_ros.sim.world import KitchenWorld

STEP_M = 0.05
SUBSTEPS = 10
ACTION_SIZE = 5


def gripper_opening(world: KitchenWorld, command: float) -> float:
    low, high = world.arm.limits.gripper
    return low + (high - low) * (1.0 - float(np.clip(command, -1.0, 1.0))) / 2.0


def apply_action(world: KitchenWorld, action, on_step=None) -> bool:
    """Run one action on ``world``; returns whether it asked to terminate.
    ``on_step(world)`` is called after every simulator step (videos)."""
    a = np.nan_to_num(np.asarray(action, dtype=np.float64).reshape(ACTION_SIZE), nan=0.0)
    a = np.clip(a, -1.0, 1.0)
    duration = SUBSTEPS * world.dt
    velocity = a[:3] * STEP_M / duration
    world.command_gripper(gripper_opening(world, a[3]))
    for _ in range(SUBSTEPS):
        world.command_ee_twist(*velocity)
        world.step()
        if on_step is not None:
            on_step(world)
    world.command_ee_twist(0.0, 0.0, 0.0)
    return bool(a[4] > 0.0)
