"""Episodes for learning: expert demonstrations with noise injection (DART) for behaviour
cloning, batched rollouts of a policy (DAgger relabelling, value-function data, evaluation),
and the start states they begin from. Everything is cached as ``.npz`` under
``<cache_dir>/data`` (outside the repository), keyed by a fingerprint of what produced it.

Seed ranges (env seeds), kept apart so that nothing is evaluated on what it was trained on:

=====================  ==========================================
10_000_000 + i         BC demonstrations
11_000_000 + ...       BC DAgger rounds
20_000_000 + i         value-function training rollouts
30_000_000 + i         value-function calibration rollouts (fits v_min / v_max)
900_000_000 + ...      evaluation (``saycan eval-skill pick``, ``saycan eval-value``)
=====================  ==========================================
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from saycan_ros.learning import PICK_TEMPLATE, cache_dir
from saycan_ros.learning._config_util import fingerprint
from saycan_ros.robot.cameras import EE_VIEW_ZOOM, HEAD_CAMERA_SIZE

DATA_VERSION = 7                      # bump when rendering or the expert change (5: close rule;
# 6: the end-effector view black beyond the head frame; 7: the user's stand a pick location)
MAX_STEPS = 50
#: Other objects beside the target at its location (the task scenes hold up to 7 in all). One
#: default for demonstrations, rollouts and evaluations: a start re-created with another range
#: is another scene.
SCENE_DISTRACTORS = (1, 6)
#: Why a pick start is impossible. The env's own reasons, plus "away": the robot stands where
#: no pick location is (the trash can, the middle of the floor): the object is not in view.
PICK_REASONS = ("absent", "holding", "out_of_reach", "away", "holding_target")
EVAL_SEED_BASE = 900_000_000

#: policy(images (B,H,W,3) uint8, states (B,5) float32, skills list[str]) -> actions (B,5);
#: a policy with an ``ee_view`` attribute > 0 is also given ``ee_images=`` (B,S,S,3) uint8, the
#: end-effector views (``sim.camera.EEViewCamera``) of that side, at its ``ee_view_zoom``; one
#: with a true ``start_frame`` attribute also ``start_images=`` (B,H,W,3) uint8, each episode's
#: first head camera frame
PolicyFn = Callable[[np.ndarray, np.ndarray, Sequence[str]], np.ndarray]


def data_dir() -> Path:
    path = cache_dir() / "data"
    path.mkdir(parents=True, exist_ok=True)
    return path


def pick_objects() -> list[str]:
    from saycan_ros.core.kitchen import load_kitchen
    return list(load_kitchen().objects)


def pick_skill(obj: str) -> str:
    return PICK_TEMPLATE.format(object=obj)


def make_pick_env(image_size: int = HEAD_CAMERA_SIZE,
                  distractors: tuple[int, int] = SCENE_DISTRACTORS, ee_view: int = 0,
                  ee_view_zoom: float = EE_VIEW_ZOOM, ee_camera: str = "crop",
                  elsewhere: float = 0.0):
    from saycan_ros.sim.envs import KitchenSkillEnv
    return KitchenSkillEnv("pick", image_size=image_size, distractors=tuple(distractors),
                           ee_view=ee_view, ee_view_zoom=ee_view_zoom, ee_camera=ee_camera,
                           elsewhere=elsewhere)


def ee_view_of(policy) -> tuple[int, float, str]:
    """(side, zoom, camera) of the end-effector view a policy takes; side 0: none."""
    return (int(getattr(policy, "ee_view", 0) or 0), float(getattr(policy, "ee_view_zoom", EE_VIEW_ZOOM)),
            str(getattr(policy, "ee_camera", "crop")))


def call_policy(policy: PolicyFn, obs: Sequence[dict]) -> np.ndarray:
    """One batched policy call on pick-env observations."""
    images = np.stack([o["image"] for o in obs])
    states = np.stack([o["state"] for o in obs]).astype(np.float32)
    skills = [o["skill"] for o in obs]
    extra = {"ee_images": np.stack([o["ee_image"] for o in obs])} if ee_view_of(policy)[0] else {}
    if getattr(policy, "start_frame", False):
        extra["start_images"] = np.stack([o["start_image"] for o in obs])
    return np.asarray(policy(images, states, skills, **extra), dtype=np.float32)


@dataclass(frozen=True)
class StartSpec:
    """One start state of the pick env: the seed decides everything the fields leave open."""
    seed: int
    object: str | None = None
    location: str | None = None
    reason: str = ""           # "" feasible, else one of PICK_REASONS

    @property
    def feasible(self) -> bool:
        return not self.reason


def reset_to(env, spec: StartSpec):
    """Reset ``env`` (a pick KitchenSkillEnv) to ``spec``; returns (obs, info)."""
    options = {"object": spec.object, "location": spec.location,
               "infeasible": spec.reason or False}
    if spec.reason != "away":
        return env.reset(seed=spec.seed, options=options)
    options["infeasible"] = "absent"
    obs, info = env.reset(seed=spec.seed, options=options)
    rng = np.random.default_rng([spec.seed, 7])
    w = env.world
    others = [n for n in w.present]
    if rng.integers(2) == 0:
        where = "trash can"
        robot_at, placements = where, {n: where for n in others}
    else:                    # the open floor west of the table, facing anywhere
        where = ""
        robot_at = (2.2 + rng.uniform(-0.2, 0.2), 3.8 + rng.uniform(-0.2, 0.2),
                    rng.uniform(-np.pi, np.pi))
        placements = {n: w.objects[n].location for n in others}
    w.reset_scene(robot_at, placements, seed=int(rng.integers(2 ** 31)), pose_noise=(0.03, 0.05))
    env.episode.update(location=where or "floor", infeasible_reason="away", feasible=False)
    info = dict(info, location=where or "floor", infeasible_reason="away", feasible=False)
    return env._observation(), info


def feasible_starts(objects: Sequence[str], per_object: int, seed_base: int) -> list[StartSpec]:
    """``per_object`` feasible starts for each object, interleaved (object-balanced)."""
    return [StartSpec(seed_base + k * len(objects) + i, obj)
            for k in range(per_object) for i, obj in enumerate(objects)]


def mixed_starts(n: int, seed_base: int, feasible_fraction: float = 0.5,
                 reasons: Sequence[str] = PICK_REASONS) -> list[StartSpec]:
    """``n`` starts: a ``feasible_fraction`` of feasible ones, the rest impossible for one of
    ``reasons`` (equally often); objects uniformly at random. Deterministic in ``seed_base``."""
    objects = pick_objects()
    rng = np.random.default_rng(seed_base)
    specs = []
    for i in range(n):
        obj = objects[int(rng.integers(len(objects)))]
        reason = "" if rng.random() < feasible_fraction else reasons[int(rng.integers(len(reasons)))]
        specs.append(StartSpec(seed_base + i, obj, None, reason))
    return specs


def target_offset(world, target: str) -> np.ndarray:
    """The target's grasp point minus the end effector, base frame (m): the auxiliary label."""
    obj = world.objects[target]
    bx, by = world.to_base(obj.x, obj.y)
    x, y, z = world.arm.ee
    return np.array([bx - x, by - y, obj.z + 0.35 * obj.shape.height - z], np.float32)


def image_points(env, target: str) -> np.ndarray:
    """Pixel (u, v) of the target's centre and of the fingertips in the head camera image,
    continuous coordinates (0..width), and with an end-effector view the target's (u, v) in it
    (as last rendered; clipped to the view): the auxiliary keypoint labels (privileged,
    training only)."""
    w, cam = env.world, env.camera
    obj = w.objects[target]
    centre = [obj.x, obj.y, obj.z + 0.5 * obj.shape.height]
    uv = np.clip(_pixels(cam, np.array([centre, w.ee_world()])), -cam.width, 2 * cam.width)
    ee_cam = getattr(env, "ee_camera", None)
    if ee_cam is not None:
        uv = np.vstack([uv, np.clip(_pixels(ee_cam, np.array([centre])), 0, ee_cam.width)])
    return uv.astype(np.float32).reshape(-1)


def _pixels(cam, points: np.ndarray) -> np.ndarray:
    rotation, position = cam.pose()
    c = (points - position) @ rotation
    z = np.maximum(c[:, 2:3], cam.near)
    return c[:, :2] * (cam.f / z) + (cam.cx, cam.cy)


# -- demonstrations ------------------------------------------------------------------------------
#: Episodes rendered per task when demonstrations are collected in several processes.
DEMO_CHUNK = 100


def collect_demos(episodes: int, seed_base: int, noise: tuple[float, float],
                  distractors=SCENE_DISTRACTORS, image_size: int = HEAD_CAMERA_SIZE,
                  progress: bool = True, undershoot: float = 0.0, ee_view: int = 0,
                  ee_view_zoom: float = EE_VIEW_ZOOM, ee_camera: str = "crop",
                  workers: int = 1) -> dict:
    """Expert demonstrations with DART noise injection on object-balanced feasible starts
    (``ee_view`` > 0: with end-effector views of that side, ``ee_images``).

    ``workers`` > 1 renders chunks of episodes in that many processes. Every episode depends
    only on its seed and its noise level (drawn up front, in episode order), so the result is
    the same array for any number of workers."""
    from tqdm import tqdm

    rng = np.random.default_rng(seed_base)
    sigmas = [float(rng.uniform(*noise)) for _ in range(episodes)]
    scene = (image_size, tuple(distractors), ee_view, ee_view_zoom, ee_camera, undershoot)
    chunks = [(scene, seed_base, first, sigmas[first:first + DEMO_CHUNK])
              for first in range(0, episodes, DEMO_CHUNK)]
    bar = tqdm(total=episodes, desc="demos", disable=not progress, unit="ep", mininterval=2)
    parts = []
    if workers > 1 and len(chunks) > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor
        # fork (as torch's DataLoader workers do): the workers run no torch, and unlike spawn
        # it does not re-run the caller's script; a worker that dies raises BrokenProcessPool
        # here instead of hanging the pool
        methods = multiprocessing.get_all_start_methods()
        context = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
        with ProcessPoolExecutor(min(workers, len(chunks)), mp_context=context) as pool:
            for part in pool.map(_demo_chunk, chunks):
                parts.append(part)
                bar.update(len(part["ep_seed"]))
    else:
        for chunk in chunks:
            parts.append(_demo_chunk(chunk))
            bar.update(len(parts[-1]["ep_seed"]))
    bar.close()
    objects = pick_objects()
    out = {key: np.concatenate([part[key] for part in parts]) for key in parts[0]} if parts else {}
    return {**out, "skill_texts": np.asarray([pick_skill(o) for o in objects])}


def _demo_chunk(chunk) -> dict:
    """Render episodes ``first, first + 1, ...`` (one per noise level in ``sigmas``)."""
    from saycan_ros.sim.expert import PickExpert, perturb
    (image_size, distractors, ee_view, ee_view_zoom, ee_camera, undershoot), seed_base, first, \
        sigmas = chunk
    env = make_pick_env(image_size, distractors, ee_view, ee_view_zoom, ee_camera)
    objects = pick_objects()
    images, states, actions, skills, episode_ids, steps, aux, pix = [], [], [], [], [], [], [], []
    ee_images = []
    ep_info = {"seed": [], "object": [], "noise": [], "success": [], "length": []}
    for i, sigma in enumerate(sigmas, start=first):
        spec = StartSpec(seed_base + i, objects[i % len(objects)])
        obs, info = reset_to(env, spec)
        expert = PickExpert(env.world, spec.object, undershoot=undershoot)
        noise_rng = np.random.default_rng([spec.seed, 1])
        for t in range(MAX_STEPS):
            clean = expert.clean_action().astype(np.float32)
            images.append(obs["image"])
            if ee_view:
                ee_images.append(obs["ee_image"])
            states.append(obs["state"])
            actions.append(clean)
            aux.append(target_offset(env.world, spec.object))
            pix.append(image_points(env, spec.object))
            skills.append(objects.index(spec.object))
            episode_ids.append(i)
            steps.append(t)
            obs, _, terminated, truncated, info = env.step(perturb(clean, sigma, noise_rng))
            if terminated or truncated:
                break
        for key, value in (("seed", spec.seed), ("object", spec.object), ("noise", sigma),
                           ("success", bool(info["success"])), ("length", t + 1)):
            ep_info[key].append(value)
    return {"images": np.stack(images), "states": np.stack(states).astype(np.float32),
            "actions": np.stack(actions).astype(np.float32),
            "aux": np.stack(aux).astype(np.float32),
            "pix": np.stack(pix).astype(np.float32),
            "skill_index": np.asarray(skills, np.int16), "episode": np.asarray(episode_ids, np.int32),
            "step": np.asarray(steps, np.int16),
            "ep_seed": np.asarray(ep_info["seed"], np.int64),
            "ep_object": np.asarray(ep_info["object"]),
            "ep_noise": np.asarray(ep_info["noise"], np.float32),
            "ep_success": np.asarray(ep_info["success"], bool),
            "ep_length": np.asarray(ep_info["length"], np.int16),
            **({"ee_images": np.stack(ee_images)} if ee_view else {})}


def cached(kind: str, spec: dict, build: Callable[[], dict], refresh: bool = False,
           log: Callable[[str], None] = print) -> dict:
    """Load ``<data_dir>/<kind>_<fingerprint(spec)>.npz`` or build and save it."""
    key = fingerprint({"version": DATA_VERSION, **spec})
    path = data_dir() / f"{kind}_{key}.npz"
    if path.exists() and not refresh:
        t = time.time()
        with np.load(path, allow_pickle=False) as data:
            out = {k: data[k] for k in data.files}
        log(f"loaded cached {kind} from {path} ({time.time() - t:.1f} s)")
        return out
    out = build()
    tmp = path.with_suffix(".tmp.npz")
    np.savez(tmp, **out)
    tmp.rename(path)
    with open(path.with_suffix(".json"), "w", encoding="utf-8") as handle:
        json.dump(spec, handle, indent=1)
    log(f"cached {kind} to {path}")
    return out


# -- batched rollouts ----------------------------------------------------------------------------
@dataclass
class Rollouts:
    """Per episode: spec, success, length; per step (when recorded): the observation the
    action was chosen from, the executed action and (optionally) the expert's clean action."""
    specs: list[StartSpec]
    success: np.ndarray
    length: np.ndarray
    steps: dict | None = None
    locations: list[str] | None = None    # where each episode's scene was laid out

    def summary(self) -> dict:
        feas = np.array([s.feasible for s in self.specs])
        out = {"episodes": len(self.specs), "success": int(self.success.sum())}
        if feas.any():
            out["feasible_success_rate"] = float(self.success[feas].mean())
        return out


def rollout(policy: PolicyFn, specs: Sequence[StartSpec], n_envs: int = 16, record: bool = False,
            expert_labels: bool = False, noise: tuple[float, float] = (0.0, 0.0),
            image_size: int | None = None, distractors=SCENE_DISTRACTORS, progress: bool = True,
            desc: str = "rollouts", undershoot: float = 0.0, elsewhere: float = 0.0) -> Rollouts:
    """Run ``policy`` from every start in ``specs``, ``n_envs`` episodes at a time with one
    batched policy call per step. ``noise``: per-episode DART noise std range on the executed
    action (DAgger data collection); evaluation uses none. ``image_size``: the camera's;
    default the policy's own (``policy.image_size``), else the head camera's. ``elsewhere``:
    the share of starts with the other shelves stocked too (see ``KitchenSkillEnv``)."""
    from tqdm import tqdm

    from saycan_ros.sim.expert import PickExpert, perturb
    specs = list(specs)
    image_size = int(image_size or getattr(policy, "image_size", HEAD_CAMERA_SIZE))
    ee_view, ee_zoom, ee_camera = ee_view_of(policy)
    n_envs = max(1, min(n_envs, len(specs)))
    envs = [make_pick_env(image_size, distractors, ee_view, ee_zoom, ee_camera, elsewhere)
            for _ in range(n_envs)]
    success = np.zeros(len(specs), bool)
    length = np.zeros(len(specs), np.int16)
    locations = [""] * len(specs)
    rec: dict[str, list] = {k: [] for k in ("images", "ee_images", "states", "skills", "actions",
                                            "labels", "aux", "pix", "episode", "step")}
    slots: list[dict | None] = [None] * n_envs
    queue = iter(range(len(specs)))
    bar = tqdm(total=len(specs), desc=desc, disable=not progress, unit="ep", mininterval=2)

    def start(k: int) -> None:
        i = next(queue, None)
        if i is None:
            slots[k] = None
            return
        env = envs[k]
        obs, info = reset_to(env, specs[i])
        locations[i] = str(info.get("location", ""))
        rng = np.random.default_rng([specs[i].seed, 2])
        slots[k] = {"i": i, "obs": obs, "t": 0, "rng": rng, "sigma": float(rng.uniform(*noise)),
                    "expert": (PickExpert(env.world, env.episode["object"], undershoot=undershoot)
                               if expert_labels else None)}

    for k in range(n_envs):
        start(k)
    while any(s is not None for s in slots):
        active = [k for k in range(n_envs) if slots[k] is not None]
        obs_now = [slots[k]["obs"] for k in active]
        actions = call_policy(policy, obs_now)
        for j, k in enumerate(active):
            s, env = slots[k], envs[k]
            action = actions[j]
            if record:
                o = obs_now[j]
                rec["images"].append(o["image"])
                if ee_view:
                    rec["ee_images"].append(o["ee_image"])
                rec["states"].append(o["state"].astype(np.float32))
                rec["skills"].append(o["skill"])
                rec["actions"].append(action)
                rec["episode"].append(s["i"])
                rec["step"].append(s["t"])
                if expert_labels:
                    rec["labels"].append(s["expert"].clean_action().astype(np.float32))
                    rec["aux"].append(target_offset(env.world, s["expert"].target))
                    rec["pix"].append(image_points(env, s["expert"].target))
            executed = perturb(action, s["sigma"], s["rng"]) if s["sigma"] > 0 else action
            obs, _, terminated, truncated, info = env.step(executed)
            s["t"] += 1
            s["obs"] = obs
            if terminated or truncated:
                success[s["i"]] = bool(info["success"])
                length[s["i"]] = s["t"]
                bar.update(1)
                start(k)
    bar.close()
    steps = None
    if record:
        steps = {"images": np.stack(rec["images"]) if rec["images"]
                 else np.zeros((0, image_size, image_size, 3), np.uint8),
                 "states": np.asarray(rec["states"], np.float32).reshape(-1, 5),
                 "skills": np.asarray(rec["skills"]),
                 "actions": np.asarray(rec["actions"], np.float32).reshape(-1, 5),
                 "episode": np.asarray(rec["episode"], np.int32),
                 "step": np.asarray(rec["step"], np.int16)}
        if ee_view:
            steps["ee_images"] = (np.stack(rec["ee_images"]) if rec["ee_images"]
                                  else np.zeros((0, ee_view, ee_view, 3), np.uint8))
        if expert_labels:
            steps["labels"] = np.asarray(rec["labels"], np.float32).reshape(-1, 5)
            steps["aux"] = np.asarray(rec["aux"], np.float32).reshape(-1, 3)
            steps["pix"] = np.asarray(rec["pix"], np.float32).reshape(-1, 6 if ee_view else 4)
    return Rollouts(specs, success, length, steps, locations)


def specs_to_arrays(specs: Sequence[StartSpec]) -> dict:
    return {"spec_seed": np.asarray([s.seed for s in specs], np.int64),
            "spec_object": np.asarray([s.object or "" for s in specs]),
            "spec_location": np.asarray([s.location or "" for s in specs]),
            "spec_reason": np.asarray([s.reason for s in specs])}


def specs_from_arrays(data: dict) -> list[StartSpec]:
    return [StartSpec(int(seed), obj or None, loc or None, str(reason))
            for seed, obj, loc, reason in zip(data["spec_seed"], data["spec_object"],
                                              data["spec_location"], data["spec_reason"])]


def expert_policy_rollout_check(n: int = 30, seed_base: int = 0) -> float:
    """Success rate of the noiseless expert through :func:`reset_to` (sanity)."""
    from saycan_ros.sim.expert import PickExpert
    env = make_pick_env()
    ok = 0
    for spec in feasible_starts(pick_objects(), max(1, n // 15), seed_base):
        reset_to(env, spec)
        expert = PickExpert(env.world, spec.object)
        for _ in range(MAX_STEPS):
            _, _, te, tr, info = env.step(expert.act())
            if te or tr:
                break
        ok += bool(info["success"])
    return ok / max(1, (n // 15) * 15)
