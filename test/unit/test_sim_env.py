"""The gymnasium environments and the scripted experts that will label demonstrations."""
from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from saycan_ros.robot.cameras import HEAD_CAMERA_SIZE
from saycan_ros.sim.envs import (ENV_IDS, MAX_STEPS, PICK_INFEASIBLE, PICK_LOCATIONS,
                                 PLACE_INFEASIBLE, KitchenSkillEnv)

EXPERT_EPISODES = 100


def run_expert(env, seed: int, noise: float = 0.0, options=None):
    """One episode of the scripted expert; returns (final info, total reward, steps)."""
    env.reset(seed=seed, options=options)
    expert = env.expert(noise=noise, seed=seed)
    total, info = 0.0, {}
    for step in range(1, MAX_STEPS + 1):
        _, reward, terminated, truncated, info = env.step(expert.act())
        total += reward
        if terminated or truncated:
            return info, total, step
    raise AssertionError("the episode did not end within the step limit")


@pytest.fixture(scope="module")
def pick_env():
    return KitchenSkillEnv("pick")


@pytest.fixture(scope="module")
def place_env():
    return KitchenSkillEnv("place")


@pytest.mark.parametrize("code", [
    # what a gymnasium user writes: the package import registers the ids ...
    "import gymnasium as gym, saycan_ros.sim; env = gym.make('SayCanKitchen-Pick-v0')",
    # ... or gymnasium 1.x's module-prefixed id, with no project import at all
    "import gymnasium as gym; env = gym.make('saycan_ros.sim:SayCanKitchen-Place-v0')",
], ids=["import-saycan_ros.sim", "module-prefixed-id"])
def test_gym_make_finds_the_environments_in_a_fresh_interpreter(code):
    import subprocess
    import sys
    check = code + "; env.reset(seed=0); print(type(env.unwrapped).__name__)"
    proc = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "KitchenSkillEnv"


@pytest.mark.parametrize("task", sorted(ENV_IDS))
def test_check_env_passes(task):
    """gymnasium's env_checker finds nothing: its warnings count as failures here."""
    env = gym.make(ENV_IDS[task])              # registered on import of saycan_ros.sim
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env.unwrapped, skip_render_check=False)
    env.close()


def test_observation_carries_skill_and_state(pick_env):
    obs, info = pick_env.reset(seed=1, options={"skill": "pick up the 7up can", "location": "table"})
    assert obs["skill"] == info["skill"] == "pick up the 7up can"
    assert info["object"] == "7up can" and info["location"] == "table" and info["feasible"]
    assert obs["image"].shape == (HEAD_CAMERA_SIZE, HEAD_CAMERA_SIZE, 3)
    assert obs["image"].dtype == np.uint8
    assert obs["state"].shape == (5,) and obs["state"][3] == pytest.approx(1.0)   # open, empty
    assert obs["state"][4] == 0.0
    assert obs in pick_env.observation_space
    with pytest.raises(ValueError):
        pick_env.reset(options={"skill": "put down the 7up can"})
    with pytest.raises(ValueError):
        pick_env.reset(options={"infeasible": "on the moon"})


def test_end_effector_view_is_a_finer_crop_of_the_head_camera_at_the_fingertips():
    """``ee_view``: the observation also holds the end-effector view, which is the crop of a
    head camera ``zoom`` times finer around the fingertips, wherever the arm goes."""
    from saycan_ros.sim.camera import Camera
    env = KitchenSkillEnv("pick", ee_view=48, ee_view_zoom=2.0)
    check_env(env, skip_render_check=True)
    obs, _ = env.reset(seed=3, options={"object": "energy bar", "location": "table"})
    assert obs["ee_image"].shape == (48, 48, 3) and obs in env.observation_space
    view, finer = env.ee_camera, Camera(env.world, 2 * HEAD_CAMERA_SIZE, 2 * HEAD_CAMERA_SIZE)
    expert = env.expert()
    origins = set()
    for _ in range(12):
        rotation, position = view.pose()
        c = (np.asarray(env.world.ee_world()) - position) @ rotation
        assert np.abs(c[:2] * view.f / c[2] + (view.cx, view.cy) - 24).max() <= 0.5   # centred
        x0, y0 = int(HEAD_CAMERA_SIZE - view.cx), int(HEAD_CAMERA_SIZE - view.cy)
        crop = finer.render()[y0:y0 + 48, x0:x0 + 48]
        assert crop.shape == (48, 48, 3)
        differs = (np.abs(crop.astype(int) - obs["ee_image"]).max(axis=2) > 0).mean()
        assert differs < 0.01                        # anti-aliased edges at most
        origins.add((x0, y0))
        obs, *_ = env.step(expert.clean_action())
    assert len(origins) > 6                          # the crop followed the gripper
    assert "ee_image" not in KitchenSkillEnv("pick").reset(seed=3)[0]
    with pytest.raises(ValueError, match="zoom"):
        KitchenSkillEnv("pick", ee_view=48, ee_view_zoom=0.5)


def _pixels_of(camera, world, name: str) -> int:
    """How many pixels of ``camera``'s frame change when the object ``name`` is taken away."""
    obj = world.objects[name]
    with_it = camera.render().copy()
    obj.x += 20.0
    without = camera.render().copy()
    obj.x -= 20.0
    return int((np.abs(with_it.astype(int) - without).max(axis=2) > 0).sum())


def test_wrist_camera_rides_on_the_gripper_and_sees_past_the_link():
    """``ee_camera="wrist"``: the view comes from a camera fixed on the gripper (the fingertips
    stay at one pixel wherever the arm goes), and an energy bar lying along the arm, which the
    telescoping link hides from the head camera, fills much of it just before the grasp."""
    import math

    from saycan_ros.sim.camera import EEViewCamera, WristCamera
    from saycan_ros.sim.expert import CLOSE
    env = KitchenSkillEnv("pick", ee_view=48, ee_camera="wrist")
    check_env(env, skip_render_check=True)
    assert isinstance(env.ee_camera, WristCamera)
    crop = EEViewCamera(env.world, 48)
    for seed in range(200):
        env.reset(seed=seed, options={"object": "energy bar", "location": "table"})
        w = env.world
        bar = w.objects["energy bar"]
        bearing = math.atan2(bar.y - w.base.y, bar.x - w.base.x)
        if abs(math.sin(bar.yaw - bearing)) < 0.2:           # along the arm
            break
    expert, tips = env.expert(), set()
    for _ in range(60):
        rotation, position = env.ee_camera.pose()
        c = (np.asarray(w.ee_world()) - position) @ rotation
        tips.add(tuple(np.round(c[:2] * env.ee_camera.f / c[2], 6)))
        action = expert.clean_action()
        if action[3] == CLOSE:                               # about to close on it
            break
        env.step(action)
    assert len(tips) == 1                                    # rigid on the gripper
    wrist_px, crop_px = _pixels_of(env.ee_camera, w, "energy bar"), _pixels_of(crop, w, "energy bar")
    assert wrist_px > 0.2 * 48 * 48 and wrist_px > 5 * crop_px, (wrist_px, crop_px)
    with pytest.raises(ValueError, match="end-effector camera"):
        KitchenSkillEnv("pick", ee_view=48, ee_camera="elbow")


def test_same_seed_same_episode(pick_env):
    a, _ = pick_env.reset(seed=11)
    b, _ = pick_env.reset(seed=11)
    c, _ = pick_env.reset(seed=12)
    assert np.array_equal(a["image"], b["image"]) and a["skill"] == b["skill"]
    assert not np.array_equal(a["image"], c["image"])


def test_reward_is_sparse_and_episodes_are_capped(pick_env):
    pick_env.reset(seed=3)
    rewards = []
    for step in range(MAX_STEPS):
        _, reward, terminated, truncated, info = pick_env.step(np.zeros(5, np.float32))
        rewards.append(reward)
        if terminated or truncated:
            break
    assert truncated and not terminated and step == MAX_STEPS - 1 and info["steps"] == MAX_STEPS
    assert rewards == [0.0] * MAX_STEPS


def test_expert_picks_feasible_episodes(pick_env):
    successes = lengths = 0
    for seed in range(EXPERT_EPISODES):
        info, reward, steps = run_expert(pick_env, seed)
        successes += info["success"]
        assert reward == (1.0 if info["success"] else 0.0)
        lengths += steps
    rate = successes / EXPERT_EPISODES
    print(f"pick expert: {successes}/{EXPERT_EPISODES} = {rate:.0%}, "
          f"{lengths / EXPERT_EPISODES:.1f} actions per episode")
    assert rate >= 0.95


def test_expert_places_feasible_episodes(place_env):
    successes = sum(run_expert(place_env, seed)[0]["success"] for seed in range(50))
    print(f"place expert: {successes}/50")
    assert successes >= 48


def test_noisy_expert_keeps_recovering(pick_env):
    clean = pick_env.reset(seed=5) and pick_env.expert(noise=0.0).act()
    pick_env.reset(seed=5)
    noisy = pick_env.expert(noise=0.1, seed=0).act()
    assert not np.allclose(clean[:4], noisy[:4])
    successes = sum(run_expert(pick_env, seed, noise=0.1)[0]["success"] for seed in range(30))
    print(f"pick expert with noise 0.1: {successes}/30")
    assert successes >= 27


@pytest.mark.parametrize("reason", PICK_INFEASIBLE)
def test_infeasible_pick_starts(pick_env, reason):
    for seed in range(5):
        info, reward, steps = run_expert(pick_env, seed, options={"infeasible": reason})
        assert not info["feasible"] and info["infeasible_reason"] == reason
        assert steps == 1 and reward == 0.0          # the expert gives up at once
    pick_env.reset(seed=0, options={"infeasible": reason, "object": "sponge"})
    world = pick_env.world
    if reason == "absent":
        assert "sponge" not in world.present
    elif reason == "holding":
        assert world.held not in (None, "sponge")
    elif reason == "holding_target":
        assert world.held == "sponge" and world.objects["sponge"].location == "gripper"
    else:
        assert not world.reachable("sponge")


@pytest.mark.parametrize("reason", PLACE_INFEASIBLE)
def test_infeasible_place_starts(place_env, reason):
    for seed in range(5):
        info, reward, steps = run_expert(place_env, seed, options={"infeasible": reason})
        assert not info["feasible"] and info["infeasible_reason"] == reason
        assert steps == 1 and reward == 0.0


def test_a_stocked_kitchen_fills_the_other_shelves_and_leaves_the_local_scene_alone(pick_env):
    stocked = KitchenSkillEnv("pick", elsewhere=1.0)
    for seed in range(6):
        reason = ("absent", "holding", False)[seed % 3]
        _, info = stocked.reset(seed=seed, options={"infeasible": reason})
        here, target, world = info["location"], info["object"], stocked.world
        scene = {name: at for name, at in world.scene().items() if name != world.held}
        elsewhere = {name for name, at in scene.items() if at != here}
        assert elsewhere and {scene[n] for n in elsewhere} <= set(PICK_LOCATIONS) - {here}
        assert len(world.present) == len(stocked.kitchen.objects)   # nothing left out
        if reason == "absent":                 # seen on another shelf, still not pickable here
            assert target in elsewhere and not info["feasible"]
        _, plain_info = pick_env.reset(seed=seed, options={"infeasible": reason})
        local = {n: (o.x, o.y) for n, o in pick_env.world.objects.items()
                 if n in pick_env.world.present and o.location == here}
        assert plain_info["object"] == target and plain_info["location"] == here
        assert {n: (world.objects[n].x, world.objects[n].y) for n in local} == local
    with pytest.raises(ValueError, match="elsewhere"):
        KitchenSkillEnv("pick", elsewhere=1.5)


def test_infeasible_probability(pick_env):
    env = KitchenSkillEnv("pick", infeasible_prob=0.5)
    feasible = [env.reset(seed=s)[1]["feasible"] for s in range(40)]
    assert 5 < sum(feasible) < 35
    assert all(pick_env.reset(seed=s)[1]["feasible"] for s in range(10))


def _hand_beside(env, along: float, across: float):
    """Put the open hand at the target's grasp height, off by (along the arm, across the fingers)."""
    import math
    w = env.world
    target = env.episode["object"]
    obj = w.objects[target]
    bx, by = w.to_base(obj.x, obj.y)
    heading = math.atan2(by, bx)                   # the mast stands at the base origin
    c, s = math.cos(heading), math.sin(heading)
    w.arm.set_ee(bx - c * along + s * across, by - s * along - c * across,
                 obj.z + 0.35 * obj.shape.height)
    return w, target


def test_expert_closes_when_the_grasp_would_hold(pick_env):
    from saycan_ros.sim.expert import ALIGN_M, CLOSE_ACROSS_M, CLOSE_ALONG_M
    pick_env.reset(seed=3, options={"object": "coke can"})
    world, target = _hand_beside(pick_env, along=0.02, across=0.0)
    along, across = world.finger_offset(target)
    assert ALIGN_M < along <= CLOSE_ALONG_M and abs(across) < 1e-3   # off, yet around it
    expert = pick_env.expert()
    assert expert.clean_action()[3] > 0                        # close, don't re-align
    for _ in range(5):
        pick_env.step(expert.act())
    assert world.held == target                                # ... and the grasp holds

    pick_env.reset(seed=3, options={"object": "coke can"})
    world, target = _hand_beside(pick_env, along=0.0, across=CLOSE_ACROSS_M + 0.006)
    assert pick_env.expert().clean_action()[3] < 0             # would miss: keep open, re-align
