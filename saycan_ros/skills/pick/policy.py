"""Running the learned pick policy on a robot (ROS-free; shared by the ``pick_skill`` node and
the simulated executor of ``saycan eval --world sim``).

The policy (``saycan_ros.learning``, ``make_policy("bc_pick")``) was trained in the pick gym
environment (:mod:`saycan_ros.sim.envs`): its observation is the head-camera image (square RGB),
the state ``[ee x, ee y, ee z (base frame, m), gripper opening 0..1, holding 0/1]`` and the skill
text; its action ``[dx, dy, dz, gripper, terminate]`` in [-1, 1] is one end-effector step of at
most :data:`STEP_M` per axis taken over :data:`STEP_S` seconds, the gripper command (-1 open ..
+1 closed) and a stop flag. This module turns robot sensors (joint states, a camera frame) into
that observation and an action into robot commands (a servo twist for :data:`STEP_S`, a gripper
opening), with the arm's geometry of :mod:`saycan_ros.sim.arm`.
"""
from __future__ import annotations

import math
import os
import threading
from pathlib import Path
from typing import Sequence

import numpy as np

from saycan_ros.robot.arm import MAST, ArmLimits
from saycan_ros.sim.control import STEP_M, SUBSTEPS

#: Seconds one policy action lasts in the pick env (SUBSTEPS simulator steps of 0.02 s).
STEP_S = SUBSTEPS * 0.02
#: At most this many actions per pick, as in the env (the paper's evaluation protocol).
MAX_ACTIONS = 50
GRIPPER_LIMITS = ArmLimits().gripper


def ee_from_joints(lift: float, yaw: float, extend: float,
                   mast: Sequence[float] = MAST) -> tuple[float, float, float]:
    """The end effector (between the fingertips) in the base frame, from the arm joints."""
    return (mast[0] + extend * math.cos(yaw), mast[1] + extend * math.sin(yaw), lift)


def policy_state(joints: Sequence[float], holding: bool,
                 gripper_limits: Sequence[float] = GRIPPER_LIMITS,
                 mast: Sequence[float] = (0.0, 0.0)) -> np.ndarray:
    """The env's state vector from ``joints`` = (lift, yaw, extend, gripper opening in m).

    The env's end effector is the arm's own (``Arm.ee``, measured from the mast), so ``mast``
    defaults to the origin."""
    lift, yaw, extend, opening = (float(j) for j in joints[:4])
    x, y, z = ee_from_joints(lift, yaw, extend, mast)
    low, high = gripper_limits
    return np.array([x, y, z, (opening - low) / (high - low), 1.0 if holding else 0.0],
                    dtype=np.float32)


def gripper_opening(command: float, gripper_limits: Sequence[float] = GRIPPER_LIMITS) -> float:
    """The finger opening (m) for a gripper action (-1 open .. +1 closed), as the env applies it."""
    low, high = gripper_limits
    return low + (high - low) * (1.0 - float(np.clip(command, -1.0, 1.0))) / 2.0


def twist_of(action: Sequence[float]) -> np.ndarray:
    """The end-effector velocity (m/s, base frame) that carries out an action's motion in STEP_S."""
    a = np.clip(np.nan_to_num(np.asarray(action, dtype=np.float64)[:3], nan=0.0), -1.0, 1.0)
    return a * STEP_M / STEP_S


def gripper_holds(opening: float, target: float | None,
                  gripper_limits: Sequence[float] = GRIPPER_LIMITS) -> bool:
    """From the gripper alone: fingers told to close but stopped part-way on something."""
    low, high = gripper_limits
    closing = target is None or target < opening - 0.002
    return closing and low + 0.005 < opening < high - 0.01


def as_image(image: np.ndarray) -> np.ndarray:
    """An HxWx3 uint8 RGB frame at the camera's size (the learned models resize it to their own
    input size: ``LoadedModel.tensors``)."""
    return np.ascontiguousarray(image, dtype=np.uint8)


# -- loading -------------------------------------------------------------------------------------
_CACHE: dict[tuple[str, str], object] = {}
_CACHE_LOCK = threading.Lock()


def pick_weights(weights: str = "") -> "os.PathLike":
    from saycan_ros.learning import resolve_model
    return resolve_model(weights or None, "bc_pick.pt")


def learned_pick_available(weights: str = "") -> bool:
    """Whether the BC pick policy's weights are there (``models/bc_pick.pt`` or
    ``$SAYCAN_MODELS_DIR/bc_pick.pt``, or ``weights``)."""
    try:
        return os.path.isfile(pick_weights(weights))
    except Exception:  # noqa: BLE001
        return False


def load_pick_policy(name: str = "bc_pick", weights: str = "", threads: int = 1):
    """The policy (cached per name and weights: load once, share between worlds)."""
    key = (name, str(pick_weights(weights)) if name == "bc_pick" else weights)
    with _CACHE_LOCK:
        if key not in _CACHE:
            import torch
            if threads:
                torch.set_num_threads(int(threads))
            from saycan_ros.learning.factory import make_policy
            _CACHE[key] = make_policy(name, weights=weights or None)
        return _CACHE[key]


def learned_value_available(weights: str = "") -> bool:
    """Whether the pick value function's weights (``value_pick.pt``) are there."""
    try:
        from saycan_ros.learning import resolve_model
        return os.path.isfile(resolve_model(weights or None, "value_pick.pt"))
    except Exception:  # noqa: BLE001
        return False


def learned_pick_unseen(kitchen, weights: str = "") -> list[str]:
    """The kitchen's objects the BC pick policy was never trained to pick (its record's
    ``skills``); all of them when the record is missing."""
    import json
    record = Path(pick_weights(weights)).with_suffix(".json")
    try:
        trained = set(json.loads(record.read_text(encoding="utf-8")).get("skills") or ())
    except (OSError, ValueError):
        trained = set()
    return [name for name in kitchen.objects if f"pick up the {name}" not in trained]


def sim_eval_setup(pick: str = "auto", affordance_file: str = "", kitchen=None
                   ) -> tuple[str, str]:
    """(pick mode, affordance file) of ``saycan eval --world sim``: the learned pick policy
    and the value-function affordances (``config/affordance_sim.yaml``) when their weights are
    there and were trained on every object of ``kitchen`` (``auto``), else the scripted
    expert and ``affordance_file`` (or the default)."""
    if pick == "auto":
        known = kitchen is None or not learned_pick_unseen(kitchen)
        pick = "learned" if learned_pick_available() and known else "expert"
    if not affordance_file and pick == "learned" and learned_value_available():
        affordance_file = "affordance_sim.yaml"
    return pick, affordance_file
