"""Gymnasium environments of the simulated kitchen, one per skill kind.

``SayCanKitchen-Pick-v0``: the robot stands at a surface; "pick up the <object>".
``SayCanKitchen-Place-v0``: the robot stands at a surface holding an object; "put down the <object>".

The skill text is part of the observation, so one environment serves every object.
Observation: ``image`` (head camera, RGB uint8), ``state`` ([ee x, ee y, ee z] in the base
frame in metres, gripper opening 0..1, holding 0/1) and ``skill``; with ``ee_view`` also
``ee_image``, the end-effector view (:class:`~saycan_ros.sim.camera.EEViewCamera`); and
``start_image``, the head camera frame of the episode's first observation (what a skill saw
when it started: a policy with ``start_frame`` takes it). Action: see
:mod:`saycan_ros.sim.control`. Sparse reward: 1.0 at the end of a successful episode, else 0;
at most 50 actions (the SayCan paper's evaluation protocol).

``elsewhere``: the share of pick starts whose other shelves are stocked too (the objects that
are neither at the location nor in the hand, spread over the other pick locations, as in a task
scene, where the head camera sees them in the background); 0 (the default) keeps the rest of the
kitchen empty.

Reset options: ``object``, ``location``, ``skill`` (a skill text instead of object), and
``infeasible``: False (default: the env's ``infeasible_prob``), True (a random impossible
start) or one of the reasons below, so that value functions see what cannot be done.
"""
from __future__ import annotations

import string
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from saycan_ros.core.kitchen import Kitchen, load_kitchen
from saycan_ros.robot.cameras import EE_VIEW_ZOOM, HEAD_CAMERA_SIZE
from saycan_ros.sim import ENV_IDS
from saycan_ros.sim.camera import Camera, make_ee_camera
from saycan_ros.sim.control import ACTION_SIZE, apply_action
from saycan_ros.sim.expert import PickExpert, PlaceExpert, free_spot, lifted
from saycan_ros.sim.world import KitchenWorld

PICK_INFEASIBLE = ("absent", "holding", "out_of_reach", "holding_target")
PLACE_INFEASIBLE = ("not_holding", "holding_other", "away")
#: Where the pick env lays out its scenes: the three surfaces and the user's stand (what the
#: person hands over or leaves there is picked from it).
PICK_LOCATIONS = ("close counter", "far counter", "table", "user")
#: The shelves ``elsewhere`` stocks: the stand stays the person's, not storage.
STOCK_LOCATIONS = ("close counter", "far counter", "table")
PLACE_LOCATIONS = ("close counter", "far counter", "table", "trash can", "user")
MAX_STEPS = 50
SKILL_CHARSET = string.ascii_lowercase + string.digits + " -'"


class KitchenSkillEnv(gym.Env):
    metadata = {"render_modes": ["rgb_array"], "render_fps": 5}

    def __init__(self, task: str = "pick", image_size: int | tuple[int, int] = HEAD_CAMERA_SIZE,
                 max_steps: int = MAX_STEPS, infeasible_prob: float = 0.0,
                 distractors: tuple[int, int] = (1, 2), render_mode: str | None = None,
                 kitchen: Kitchen | None = None, ee_view: int = 0,
                 ee_view_zoom: float = EE_VIEW_ZOOM, ee_camera: str = "crop",
                 elsewhere: float = 0.0):
        if task not in ENV_IDS:
            raise ValueError(f"task must be one of {sorted(ENV_IDS)}, got {task!r}")
        self.task = task
        self.max_steps = int(max_steps)
        self.infeasible_prob = float(infeasible_prob)
        self.distractors = distractors
        if not 0.0 <= float(elsewhere) <= 1.0:
            raise ValueError(f"elsewhere must be in [0, 1], got {elsewhere!r}")
        self.elsewhere = float(elsewhere)
        self.render_mode = render_mode
        self.kitchen = kitchen or load_kitchen()
        self.world = KitchenWorld(self.kitchen, cmd_timeout=None)
        width, height = (image_size, image_size) if isinstance(image_size, int) else image_size
        self.camera = Camera(self.world, width, height)
        self.ee_camera = (make_ee_camera(self.world, ee_camera, int(ee_view), ee_view_zoom)
                          if ee_view else None)
        verb = "pick up the" if task == "pick" else "put down the"
        self.skills = {f"{verb} {name}": name for name in self.kitchen.objects}
        self.observation_space = spaces.Dict({
            "image": spaces.Box(0, 255, (height, width, 3), np.uint8),
            "state": spaces.Box(np.array([-1.5, -1.5, 0.0, 0.0, 0.0], np.float32),
                                np.array([1.5, 1.5, 2.0, 1.0, 1.0], np.float32), dtype=np.float32),
            "skill": spaces.Text(max_length=64, min_length=1, charset=SKILL_CHARSET),
            **({"ee_image": spaces.Box(0, 255, (int(ee_view), int(ee_view), 3), np.uint8)}
               if ee_view else {}),
            "start_image": spaces.Box(0, 255, (height, width, 3), np.uint8),
        })
        self.action_space = spaces.Box(-1.0, 1.0, (ACTION_SIZE,), np.float32)
        self.episode: dict[str, Any] = {}
        self.steps = 0
        #: The head frame of the episode's first observation; None: the next observation's
        #: (set it to None after changing the scene by hand).
        self.start_image: np.ndarray | None = None

    # -- episodes --------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        options = dict(options or {})
        rng = self.np_random
        target = options.get("object")
        if options.get("skill") is not None:
            if options["skill"] not in self.skills:
                raise ValueError(f"not a {self.task} skill: {options['skill']!r}")
            target = self.skills[options["skill"]]
        names = list(self.kitchen.objects)
        if target is None:
            target = names[int(rng.integers(len(names)))]
        self.kitchen.object(target)
        locations = PICK_LOCATIONS if self.task == "pick" else PLACE_LOCATIONS
        location = options.get("location") or locations[int(rng.integers(len(locations)))]
        self.kitchen.location(location)
        reason = self._infeasibility(options.get("infeasible", False), rng)
        if reason == "out_of_reach" and not self._has_unreachable_slot(location):
            if options.get("location"):
                raise ValueError(f"the arm reaches every slot at the {location}: "
                                 "no out-of-reach start there")
            location = self._draw_location_with_unreachable_slot(rng)
        others = [n for n in names if n != target]
        rng.shuffle(others)
        count = int(rng.integers(self.distractors[0], self.distractors[1] + 1))
        if self.task == "pick":   # a small surface (the user's stand): no more than it holds
            count = min(count, max(0, self._reachable_slots(location) - 1))
        distractors, spare = others[:count], others[count]
        world_seed = int(rng.integers(2 ** 31))
        if self.task == "pick":
            rest = self._stock_elsewhere(rng, location, others[count + 1:], target, spare, reason)
            self._reset_pick(target, location, distractors, spare, reason, world_seed, rest)
        else:
            self._reset_place(target, location, distractors, spare, reason, world_seed, rng)
        self.steps = 0
        self.start_image = None
        skill = f"{'pick up' if self.task == 'pick' else 'put down'} the {target}"
        self.episode.update(skill=skill, object=target, location=location,
                            infeasible_reason=reason or "", feasible=reason is None)
        return self._observation(), self._info(success=False)

    def set_scene(self, location: str, placements: dict[str, str], *, skill: str,
                  holding: str | None = None, seed: int = 0,
                  pose_noise: tuple[float, float] = (0.03, 0.05)) -> dict[str, Any]:
        """After :meth:`reset`, lay out a given scene (``placements``: object -> location, the
        robot at ``location``) and set the episode's instruction text to ``skill`` (free text:
        the BC NL baseline feeds the user's instruction); returns the first observation."""
        self.world.reset_scene(location, placements, holding=holding, seed=seed,
                               pose_noise=pose_noise)
        self.episode.update(skill=skill)
        self.start_image = None                 # the first frame of this scene
        self.steps = 0
        observation = self._observation()
        observation["skill"] = skill
        return observation

    def _infeasibility(self, option, rng) -> str | None:
        reasons = PICK_INFEASIBLE if self.task == "pick" else PLACE_INFEASIBLE
        if option is False or option is None:
            option = bool(rng.random() < self.infeasible_prob) if self.infeasible_prob else False
        if option is True:
            return reasons[int(rng.integers(len(reasons)))]
        if option is False:
            return None
        if option not in reasons:
            raise ValueError(f"infeasible must be a bool or one of {reasons}, got {option!r}")
        return option

    def _reachable_slots(self, location: str) -> int:
        return sum(slot.reachable is True for slot in self.world.slots(location))

    def _has_unreachable_slot(self, location: str) -> bool:
        return any(slot.reachable is False for slot in self.world.slots(location))

    def _draw_location_with_unreachable_slot(self, rng) -> str:
        choices = [loc for loc in PICK_LOCATIONS if self._has_unreachable_slot(loc)]
        return choices[int(rng.integers(len(choices)))]

    def _stock_elsewhere(self, rng, location, leftover, target, spare, reason) -> dict[str, str]:
        """With probability ``elsewhere``: object -> another pick location for the objects that
        are neither at ``location`` nor held (an absent target among them: seen, not reachable).
        Draws nothing when ``elsewhere`` is 0, so older seeds lay out the same scenes."""
        if not self.elsewhere or rng.random() >= self.elsewhere:
            return {}
        names = list(leftover) + ([spare] if reason != "holding" else [])
        if reason == "absent":
            names.append(target)
        shelves = [loc for loc in STOCK_LOCATIONS if loc != location]
        return {name: shelves[int(rng.integers(len(shelves)))] for name in names}

    def _reset_pick(self, target, location, distractors, spare, reason, seed,
                    elsewhere: dict[str, str] | None = None) -> None:
        # holding: another object is in the hand; holding_target: the target itself already is
        # (a pick asked for again after it succeeded).
        placements = {name: location for name in distractors}
        if reason not in ("absent", "holding_target"):
            placements = {target: location, **placements}
        placements.update(elsewhere or {})
        held = {"holding": spare, "holding_target": target}.get(reason)
        for attempt in range(20):   # the start pose noise can move a slot across the reach limit
            self.world.reset_scene(location, placements, holding=held, seed=seed + attempt,
                                   out_of_reach=(target,) if reason == "out_of_reach" else (),
                                   pose_noise=(0.03, 0.05))
            if reason in ("absent", "holding", "holding_target") or \
                    self.world.reachable(target) == (reason is None):
                break
        self.episode = {"spot": None}

    def _reset_place(self, target, location, distractors, spare, reason, seed, rng) -> None:
        placements = {name: location for name in distractors}
        holding = target
        if reason == "not_holding":
            holding = None
            placements[target] = self.kitchen.objects[target].default_location
        elif reason == "holding_other":
            holding = spare
        robot_at: Any = location
        if reason == "away":   # between places: what it lets go of falls to the floor
            robot_at = (2.2 + rng.uniform(-0.2, 0.2), 3.8 + rng.uniform(-0.2, 0.2),
                        rng.uniform(-np.pi, np.pi))
        self.world.reset_scene(robot_at, placements, holding=holding, seed=seed,
                               pose_noise=(0.03, 0.05))
        spot = None
        if self.world.robot_location in self.world.plan.furniture:
            spot = free_spot(self.world, self.world.robot_location, rng)
        self.episode = {"spot": spot, "surface": self.world.robot_location or None}

    # -- stepping -------------------------------------------------------------------------------
    def step(self, action):
        terminate = apply_action(self.world, action)
        self.steps += 1
        truncated = not terminate and self.steps >= self.max_steps
        done = terminate or truncated
        success = done and self.success()
        return (self._observation(), 1.0 if success else 0.0, terminate, truncated,
                self._info(success=success))

    def success(self) -> bool:
        """Whether the skill's effect holds now."""
        w, target = self.world, self.episode["object"]
        if not self.episode["feasible"]:
            return False
        if self.task == "pick":
            return lifted(w, target)
        obj = w.objects[target]
        return (w.held is None and target in w.present
                and obj.location == self.episode.get("location"))

    def expert(self, noise: float = 0.0, seed: int | None = None):
        """The scripted expert for this episode (privileged; call after reset)."""
        if self.task == "pick":
            return PickExpert(self.world, self.episode["object"], noise=noise, seed=seed)
        return PlaceExpert(self.world, self.episode["object"], spot=self.episode.get("spot"),
                           noise=noise, seed=seed)

    # -- observations ---------------------------------------------------------------------------
    def _observation(self) -> dict[str, Any]:
        w = self.world
        x, y, z = w.arm.ee
        opening = w.arm.opening / w.arm.limits.gripper[1]
        state = np.array([x, y, z, opening, 1.0 if w.held else 0.0], dtype=np.float32)
        image = self.camera.render().copy()
        if self.start_image is None:
            self.start_image = image
        obs = {"image": image, "state": state, "start_image": self.start_image.copy(),
               "skill": self.episode.get("skill", "") or next(iter(self.skills))}
        if self.ee_camera is not None:
            obs["ee_image"] = self.ee_camera.render().copy()
        return obs

    def _info(self, success: bool) -> dict[str, Any]:
        return {"skill": self.episode.get("skill", ""), "object": self.episode.get("object"),
                "location": self.episode.get("location"),
                "feasible": self.episode.get("feasible", True),
                "infeasible_reason": self.episode.get("infeasible_reason", ""),
                "success": success, "steps": self.steps,
                "world": self.world.symbolic_state()}

    def render(self):
        if self.render_mode == "rgb_array":
            return self.camera.render().copy()
        return None
