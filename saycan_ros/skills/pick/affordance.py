"""The learned pick affordance: the calibrated value function of the BC pick policy
(``saycan_ros.learning``), listed as ``learned_pick`` in
:data:`saycan_ros.planning.affordance.AFFORDANCE_MODELS` (imported when a configuration names it).

    pick: {type: learned_pick}                       # config/affordance_sim.yaml
    pick: {type: learned_pick, weights: /path/value_pick.pt}

It reads the robot's sensors, not the symbolic state: ``AffordanceContext.observation`` must be

    {"image": HxWx3 uint8 RGB head-camera frame (resized to the network's input size),
     "state": [ee x, ee y, ee z (base frame, m), gripper opening 0..1, holding 0/1]}

(the pick env's observation; a bare image array is accepted, the state then defaults to the
arm's home pose with the hand as the symbolic state says). All pick candidates of one call are
scored in one batched forward pass: one image and state, one text embedding per skill.
torch and the weights load when the model is built, not on import.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from saycan_ros.planning.affordance import AffordanceContext, AffordanceModel
from saycan_ros.core.config import ConfigError

#: The arm's home pose in the pick env's state convention (where skills start after tucking).
HOME_STATE = (0.4, 0.0, 1.15, 1.0, 0.0)


def observation_arrays(observation, holding: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(image (H,W,3) uint8, state (5,) float32) from an affordance observation."""
    if isinstance(observation, dict):
        image = observation.get("image")
        state = observation.get("state")
    else:
        image, state = observation, None
    if image is None:
        raise ValueError("learned_pick: the observation has no camera image")
    image = np.asarray(image)
    if image.ndim != 3 or image.shape[2] != 3:
        raise ValueError(f"learned_pick: expected an HxWx3 RGB image, got shape {image.shape}")
    if image.dtype != np.uint8:
        image = np.clip(image * (255.0 if image.max() <= 1.0 else 1.0), 0, 255).astype(np.uint8)
    if state is None:
        state = list(HOME_STATE)
        if holding:
            state[3], state[4] = 0.6, 1.0
    state = np.asarray(state, dtype=np.float32).reshape(5)
    return np.ascontiguousarray(image), state


class LearnedPickAffordance(AffordanceModel):
    """p(pick succeeds) = clamp((V(s, "pick up the X") - v_min) / (v_max - v_min), 0, 1)."""

    def __init__(self, weights: str = "", v_min: float | None = None, v_max: float | None = None,
                 threads: int = 1):
        from saycan_ros.learning.factory import make_value
        from saycan_ros.learning.modeling_value import Calibration
        try:
            self.value = make_value("value_pick", weights=weights or None)
        except FileNotFoundError as exc:
            raise ConfigError(f"learned_pick: no weights: {exc}") from None
        if v_min is not None or v_max is not None:    # an explicit override of the fitted ones
            cal = self.value.calibration
            self.value.calibration = Calibration(cal.v_min if v_min is None else float(v_min),
                                                 cal.v_max if v_max is None else float(v_max))
        if not self.value.calibration.v_max > self.value.calibration.v_min:
            raise ConfigError("learned_pick: need v_max > v_min")
        import torch
        if threads:
            torch.set_num_threads(int(threads))
        self.calls = 0               # batched forward passes so far (tests check one per call)

    def evaluate(self, skills: Sequence, context: AffordanceContext):
        if not skills:
            return np.zeros(0), np.zeros(0)
        if context.observation is None:
            raise ValueError("learned_pick needs AffordanceContext.observation "
                             "(dict(image=..., state=...)) from the robot's camera")
        image, state = observation_arrays(context.observation,
                                          holding=context.state.holding is not None)
        n = len(skills)
        texts = [s.text for s in skills]
        raw = self.value.raw(np.broadcast_to(image, (n, *image.shape)),
                             np.broadcast_to(state, (n, 5)), texts)
        self.calls += 1
        return self.value.calibration(raw), raw
