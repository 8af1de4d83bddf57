"""The simulated executor with the learned pick policy and the learned pick affordance from the
simulator's camera (``saycan eval --world sim``), without ROS. Real weights
(``models/`` or ``$SAYCAN_MODELS_DIR``), real forward passes; skipped without weights."""
import numpy as np
import pytest

from saycan_ros.core.kitchen import load_kitchen
from saycan_ros.skills.pick.policy import (gripper_opening, learned_pick_available,
                                           learned_value_available, policy_state, sim_eval_setup,
                                           twist_of)
from saycan_ros.robot.arm import HOME
from saycan_ros.robot.cameras import HEAD_CAMERA_SIZE
from saycan_ros.sim.arm import Arm
from saycan_ros.sim.control import STEP_M
from saycan_ros.core.skills import load_skills
from saycan_ros.stack import make_world

EASY = {"robot_at": "far counter", "objects": {"coke can": "far counter"},
        "absent": sorted(o for o, at in load_kitchen().default_scene().items()
                         if at == "far counter" and o != "coke can")}


@pytest.fixture(scope="module")
def kitchen():
    return load_kitchen()


def test_policy_state_matches_the_env_convention():
    arm = Arm()
    state = policy_state(arm.joint_positions, holding=False)
    assert state.dtype == np.float32
    assert state.tolist() == pytest.approx([*arm.ee, 1.0, 0.0])
    arm.set_ee(0.7, 0.2, 0.9)
    arm.opening = 0.05
    assert policy_state(arm.joint_positions, True).tolist() == pytest.approx([0.7, 0.2, 0.9, 0.5, 1.0])
    assert gripper_opening(-1.0) == pytest.approx(0.10) and gripper_opening(1.0) == 0.0
    assert twist_of([1.0, -0.5, 0.0, 0, 0]).tolist() == pytest.approx([STEP_M / 0.2, -STEP_M / 0.4, 0])
    assert HOME[3] == pytest.approx(0.10)


def test_expert_stays_the_default_and_symbolic_takes_no_options(kitchen):
    world = make_world("sim", kitchen, EASY)
    assert world.pick_mode == "expert" and world.policy is None
    with pytest.raises(ValueError):
        make_world("symbolic", kitchen, EASY, pick="learned")
    with pytest.raises(ValueError):
        make_world("sim", kitchen, EASY, pick="magic")
    with pytest.raises(ValueError):
        make_world("nodes", kitchen, EASY)


needs_weights = pytest.mark.skipif(not (learned_pick_available() and learned_value_available()),
                                   reason="no trained pick policy / value weights")


@needs_weights
def test_eval_setup_picks_learned_parts_when_trained():
    assert sim_eval_setup() == ("learned", "affordance_sim.yaml")
    assert sim_eval_setup("expert") == ("expert", "")
    assert sim_eval_setup("learned", "affordance.yaml") == ("learned", "affordance.yaml")


@needs_weights
def test_learned_pick_in_the_simulated_kitchen(kitchen):
    skills = load_skills(kitchen)
    world = make_world("sim", kitchen, EASY, seed=1, pick="learned")
    assert world.pick_mode == "learned"
    obs = world.observation()
    assert obs["image"].shape == (HEAD_CAMERA_SIZE, HEAD_CAMERA_SIZE, 3)
    assert obs["image"].dtype == np.uint8
    assert obs["state"][4] == 0.0
    size = world.policy.ee_view                  # the end-effector view, if the policy takes one
    assert ("ee_image" in obs) == bool(size)
    if size:
        assert obs["ee_image"].shape == (size, size, 3)
    outcome = world.execute(skills.get("pick up the coke can"))
    assert outcome.success, outcome.message
    assert world.holding == "coke can" and world.snapshot().objects["coke can"] == "gripper"
    again = world.execute(skills.get("pick up the coke can"))
    assert not again.success and "already holding" in again.message


@needs_weights
def test_learned_pick_fails_when_the_object_is_not_there(kitchen):
    skills = load_skills(kitchen)
    world = make_world("sim", kitchen, {**EASY, "absent": [*EASY["absent"], "sponge"]}, seed=2,
                       pick="learned")
    outcome = world.execute(skills.get("pick up the sponge"))
    assert not outcome.success and "failed to pick up the sponge" in outcome.message
    assert world.holding != "sponge"


@needs_weights
def test_local_affordance_scores_picks_from_the_sim_camera(kitchen):
    from saycan_ros.planning.affordance import load_affordance
    from saycan_ros.planning.local import LocalAffordance
    skills = load_skills(kitchen)
    scorer = load_affordance(sim_eval_setup()[1])
    model = scorer.models["pick"]
    picks = ["pick up the coke can", "pick up the sponge", "pick up the apple"]
    here = make_world("sim", kitchen, EASY, seed=3, pick="learned")
    full = make_world("sim", kitchen, {**EASY, "holding": "sponge"}, seed=3, pick="learned")
    calls = model.calls
    p_here, _ = LocalAffordance(scorer, here, skills).score("x", [], picks)
    p_full, _ = LocalAffordance(scorer, full, skills).score("x", [], picks)
    assert model.calls == calls + 2                     # one batched pass per call
    assert p_here[0] > 0.5 and p_here[0] > p_here[1]
    assert p_full[0] < p_here[0] - 0.3


def test_task_init_as_reset_json(kitchen):
    import json
    from saycan_ros.core.tasks import init_to_json
    from saycan_ros.core.tasks import TaskInit
    init = TaskInit.from_mapping({"robot_at": "table", "objects": {"apple": "user"},
                                  "absent": ["sponge"]}, kitchen)
    assert json.loads(init_to_json(init)) == {"robot_at": "table", "objects": {"apple": "user"},
                                              "absent": ["sponge"]}
    assert init_to_json(None) == "" and json.loads(init_to_json({"holding": "apple"})) == {
        "holding": "apple"}


def test_only_learned_models_make_the_world_observe(kitchen):
    from saycan_ros.planning.affordance import load_affordance
    from saycan_ros.planning.local import LocalAffordance, needs_observation
    skills = load_skills(kitchen)
    world = make_world("sim", kitchen, EASY)
    calls = []
    world.observation = lambda: calls.append(1) or {}
    scorer = load_affordance()                       # symbolic: never looks
    assert not needs_observation(scorer)
    probs, _ = LocalAffordance(scorer, world, skills).score("x", [], ["pick up the coke can"])
    assert probs.tolist() == [1.0] and calls == []
