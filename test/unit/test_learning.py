"""The learned pick skill and its affordance (saycan_ros/learning, models/*.pt): the shipped
weights load and act in the simulator, the value function tells possible picks from impossible
ones, the calibration math, and that the skill text really conditions the network (FiLM)."""
from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from saycan_ros.learning import models_dir, resolve_output  # noqa: E402
from saycan_ros.learning import data as D  # noqa: E402
from saycan_ros.learning.modeling_value import (Calibration, auroc,  # noqa: E402
                                                expected_calibration_error, fit_calibration)

BC = models_dir() / "bc_pick.pt"
VALUE = models_dir() / "value_pick.pt"
#: A feasible start (not in any training or evaluation seed range) the shipped policy picks.
SUCCESS_SPEC = D.StartSpec(seed=4242, object="coke can", location="table")


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def policy():
    from saycan_ros.learning.factory import make_policy
    return make_policy("bc_pick")


@pytest.fixture(scope="module")
def value():
    from saycan_ros.learning.factory import make_value
    return make_value("value_pick")


@pytest.fixture(scope="module")
def env(policy):
    """The pick env, with the end-effector view when the shipped policy takes one."""
    size, zoom, camera = D.ee_view_of(policy)
    return D.make_pick_env(ee_view=size, ee_view_zoom=zoom, ee_camera=camera)


def views(obs, n=1):
    """The policy's extra inputs: ``ee_images`` and ``start_images``, ``n`` copies of the
    observation's end-effector view and start frame."""
    extra = {"start_images": np.stack([obs["start_image"]] * n)}
    if "ee_image" in obs:
        extra["ee_images"] = np.stack([obs["ee_image"]] * n)
    return extra


def run_episode(env, policy, spec):
    obs, info = D.reset_to(env, spec)
    actions = []
    for _ in range(D.MAX_STEPS):
        action = policy.act(obs)
        actions.append(action)
        obs, reward, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            break
    return np.array(actions), info, reward


# -- the shipped files ---------------------------------------------------------------------------
@pytest.mark.parametrize("path", [BC, VALUE], ids=["bc", "value"])
def test_weights_are_small_and_recorded(path):
    assert path.is_file(), f"missing {path}: run `saycan train ...`"
    assert path.stat().st_size < 4e6
    record = json.loads(path.with_suffix(".json").read_text())
    assert record["weights"] == path.name and "seed" in record and "config" in record
    assert record["training"]["total_seconds"] > 0
    if path == VALUE:
        assert record["v_max"] > record["v_min"]
        assert record["metrics"]["calibration_fit"]["n"] > 0


# -- policy ---------------------------------------------------------------------------------------
def test_policy_runs_a_real_episode_with_valid_actions(env, policy):
    actions, info, reward = run_episode(env, policy, D.StartSpec(seed=4243, object="sponge"))
    assert actions.shape[1] == 5 and np.all(np.isfinite(actions))
    assert np.all(np.abs(actions) <= 1.0)
    assert set(np.unique(actions[:, 3:])) <= {-1.0, 1.0}          # gripper, terminate: discrete
    assert env.action_space.contains(actions[0])
    assert 1 <= info["steps"] <= D.MAX_STEPS and reward in (0.0, 1.0)


def test_policy_picks_up_the_object(env, policy):
    actions, info, reward = run_episode(env, policy, SUCCESS_SPEC)
    assert info["success"] and reward == 1.0, info
    assert info["world"]["holding"] == "coke can"


def test_batched_policy_matches_single_calls(env, policy):
    obs, _ = D.reset_to(env, SUCCESS_SPEC)
    skills = ["pick up the coke can", "pick up the apple"]
    batch = policy(np.stack([obs["image"]] * 2), np.stack([obs["state"]] * 2), skills,
                   **views(obs, 2))
    for i, skill in enumerate(skills):
        single = policy.act(dict(obs, skill=skill))
        np.testing.assert_allclose(batch[i], single, atol=1e-5)


def test_film_conditioning_changes_outputs_with_the_text(env, policy):
    obs, _ = D.reset_to(env, D.StartSpec(seed=4244, object="apple", location="table"))
    net = policy.net
    texts = ["pick up the apple", "pick up the sponge"]
    emb = torch.as_tensor(policy.embeddings(texts))
    img, _, _, ee = policy.tensors(obs["image"][None], obs["state"][None], texts[:1], **views(obs))
    with torch.no_grad():
        film = net.encoder.film(net.text_norm(emb))
        features = net.encoder(img.repeat(2, 1, 1, 1), net.text_norm(emb))
        out = net(img.repeat(2, 1, 1, 1), torch.as_tensor(obs["state"][None]).repeat(2, 1), emb,
                  None if ee is None else ee.repeat(2, 1, 1, 1))
    assert film.abs().max() > 0.05                                  # FiLM is in use, not identity
    assert not torch.allclose(film[0], film[1], atol=1e-3)           # ... and differs per text
    assert (features[0] - features[1]).abs().max() > 1e-2            # visual features modulated
    assert (out["delta"][0] - out["delta"][1]).abs().max() > 1e-2     # actions follow the text


# -- value / affordance -------------------------------------------------------------------------
def start_affordance(env, value, spec):
    obs, _ = D.reset_to(env, spec)
    return float(value.affordance(obs["image"][None], obs["state"][None], [obs["skill"]])[0])


OBJECTS = ["apple", "coke can", "sponge", "orange", "water bottle", "energy bar"]


#: The mean a dozen impossible starts must stay under. An absent object is the value function's
#: weak spot (a look-alike stands where it would be): since the user's stand joined the pick
#: places (data version 7) it rates one 0.27 on average over 180 held-out starts (0.22 before;
#: `saycan eval-value`), and these twelve 0.42; a value that ignored the object would give ~0.9.
IMPOSSIBLE_MEAN = {"absent": 0.5}


@pytest.mark.parametrize("reason", D.PICK_REASONS)
def test_value_is_low_when_the_pick_is_impossible(env, value, reason):
    """Over a dozen starts (one value network is not right on every single image: an absent
    apple next to a look-alike grapefruit soda can score 0.6), impossible picks score low."""
    p = [start_affordance(env, value, D.StartSpec(seed=5000 + i, object=OBJECTS[i % 6],
                                                  reason=reason)) for i in range(12)]
    bar = IMPOSSIBLE_MEAN.get(reason, 0.35)
    assert np.mean(p) < bar and np.median(p) < bar - 0.05, np.round(p, 2)


def test_value_is_high_when_the_object_is_in_reach(env, value):
    p = [start_affordance(env, value, D.StartSpec(seed=5100 + i, object=OBJECTS[i % 6]))
         for i in range(12)]
    assert np.mean(p) > 0.65 and np.median(p) > 0.7, np.round(p, 2)


def kitchen_ratings(vocabulary) -> tuple[list[float], list[float]]:
    """The deployment scene, not the pick env's: every shelf stocked, the robot driven to one
    (three seeds); the learned pick affordances of what stands there and of what does not."""
    from saycan_ros.planning.affordance import AffordanceContext
    from saycan_ros.skills.pick.affordance import LearnedPickAffordance
    from saycan_ros.worlds.simulated import SimulatedKitchen
    affordance, sim = LearnedPickAffordance(), SimulatedKitchen(pick="expert")
    names = list(sim.kitchen.objects)
    picks = [vocabulary.skills.get(f"pick up the {o}") for o in names]
    here, elsewhere = [], []
    for seed in range(3):
        for shelf in ("close counter", "far counter", "table"):
            sim.reset(None, seed=seed)
            assert sim.drive_to(shelf).success
            context = AffordanceContext(sim.kitchen, sim.snapshot(), sim.observation())
            for name, p in zip(names, affordance.evaluate(picks, context)[0]):
                (here if sim.objects[name] == shelf else elsewhere).append(p)
    return here, elsewhere


def test_in_the_built_in_kitchen_objects_in_reach_outrank_those_on_other_shelves(vocabulary):
    """What stands where the robot is, is rated high on average and well above what stands on
    another shelf in the camera's view."""
    here, elsewhere = kitchen_ratings(vocabulary)
    assert np.mean(here) > 0.8, np.round(here, 2)
    assert np.mean(here) - np.mean(elsewhere) > 0.4, (np.mean(here), np.mean(elsewhere))


@pytest.mark.xfail(strict=True, reason="known regression of pick data version 7: in seed 2's "
                   "scene the value function rates the redbull can at the table 0.02 (the "
                   "version before 0.59), where 'done' can win after 'find' "
                   "(docs/learned_skills.md, known weak spots)")
def test_in_the_built_in_kitchen_no_object_in_reach_is_rated_near_zero(vocabulary):
    here, _ = kitchen_ratings(vocabulary)
    assert min(here) > 0.1, np.round(here, 2)


def test_what_the_person_leaves_at_their_stand_is_rated_pickable_and_picked(vocabulary):
    """The user's stand is a pick location (pick data version 7): an object handed back there
    is rated high, an object elsewhere low, and the learned policy takes it."""
    from saycan_ros.core.tasks import TaskInit
    from saycan_ros.planning.affordance import AffordanceContext
    from saycan_ros.skills.pick.affordance import LearnedPickAffordance
    from saycan_ros.worlds.simulated import SimulatedKitchen
    init = TaskInit.from_mapping({"robot_at": "user",
                                  "objects": {"orange": "user", "sponge": "user"}},
                                 vocabulary.kitchen)
    affordance, picked, here, elsewhere = LearnedPickAffordance(), [], [], []
    names = ["orange", "sponge", "apple", "coke can"]
    for seed in range(4):
        sim = SimulatedKitchen(vocabulary.kitchen, init=init, seed=seed, pick="learned")
        context = AffordanceContext(sim.kitchen, sim.snapshot(), sim.observation())
        p = affordance.evaluate([vocabulary.skills.get(f"pick up the {o}") for o in names],
                                context)[0]
        assert p[0] > 0.5, dict(zip(names, np.round(p, 2)))
        here += list(p[:2])
        elsewhere += list(p[2:])
        outcome = sim.execute(vocabulary.skills.get("pick up the orange"))
        picked.append(outcome.success)
        assert outcome.success or sim.snapshot().holding is None, outcome.message
    assert sum(picked) >= 3, picked     # seed 1: it closes on the sponge, and puts it back
    # the sponge is the weak one (0.27 in one of the four scenes)
    assert np.mean(here) - np.mean(elsewhere) > 0.4, (np.round(here, 2), np.round(elsewhere, 2))


def test_learned_pick_affordance_scores_all_candidates_in_one_pass(env, vocabulary):
    from saycan_ros.planning.affordance import (AFFORDANCE_MODELS, AffordanceContext, load_affordance,
                                                make_affordance_model)
    from saycan_ros.core.world import WorldSnapshot
    assert "learned_pick" in AFFORDANCE_MODELS
    model = make_affordance_model({"type": "learned_pick"})
    obs, info = D.reset_to(env, D.StartSpec(seed=5200, object="orange", location="table"))
    scene = info["world"]["objects"]
    picks = [s for s in vocabulary.skills if s.kind == "pick"]
    assert len(picks) == 15
    state = WorldSnapshot(0, "table", (0.0, 0.0, 0.0), None, scene)
    context = AffordanceContext(vocabulary.kitchen, state, {"image": obs["image"], "state": obs["state"]})
    probs, raws = model.evaluate(picks, context)
    assert model.calls == 1 and probs.shape == raws.shape == (15,)
    assert np.all((probs >= 0) & (probs <= 1))
    scorer = load_affordance("affordance_sim.yaml")                  # the config that uses it
    assert type(scorer.models["pick"]).__name__ == "LearnedPickAffordance"
    with pytest.raises(ValueError):
        model.evaluate(picks, AffordanceContext(vocabulary.kitchen, state, None))


# -- calibration math -----------------------------------------------------------------------------
@pytest.mark.xfail(strict=True, reason="known weakness of the shipped value function: with a "
                   "lime soda, a green tea and four more objects on the table it gives the absent "
                   "water bottle 0.98, 7up can 0.91, redbull can 0.83, apple 0.56 (look-alikes); "
                   "the mean over absent objects is 0.44")
def test_absent_look_alikes_score_low_in_one_scene(env, vocabulary):
    from saycan_ros.planning.affordance import AffordanceContext, make_affordance_model
    from saycan_ros.core.world import WorldSnapshot
    model = make_affordance_model({"type": "learned_pick"})
    obs, info = D.reset_to(env, D.StartSpec(seed=5200, object="orange", location="table"))
    scene = info["world"]["objects"]
    picks = [s for s in vocabulary.skills if s.kind == "pick"]
    context = AffordanceContext(vocabulary.kitchen,
                                WorldSnapshot(0, "table", (0.0, 0.0, 0.0), None, scene),
                                {"image": obs["image"], "state": obs["state"]})
    probs, _ = model.evaluate(picks, context)
    absent = [p for s, p in zip(picks, probs) if s.object not in scene]
    assert np.mean(absent) < 0.2 and max(absent) < 0.5


def test_keypoint_gradients_stay_finite_on_a_one_hot_map():
    """A text-queried map sharp enough to put all its mass on one cell has a spread of 0; the
    gradient through it must stay finite (sqrt at 0 made the value's encoder training NaN)."""
    import torch
    from saycan_ros.learning.modeling_common import SpatialSoftmax
    torch.manual_seed(0)
    layer = SpatialSoftmax(8, 4, queries=1, text_dim=16)
    x = torch.zeros(2, 8, 6, 6)
    x[:, :, 2, 3] = 1.0
    layer.log_temperature.data.fill_(-12.0)             # the softmax is one-hot
    text = torch.ones(2, 16)
    layer.query.weight.data.fill_(1.0)                  # the query matches the one cell
    out = layer(x.requires_grad_(), text)
    (out.sum() + layer.match.sum()).backward()          # match: the value network's input
    grads = [x.grad, layer.query.weight.grad, layer.log_temperature.grad]
    assert all(torch.isfinite(g).all() for g in grads)


def test_calibration_formula():
    cal = Calibration(0.2, 0.5)                                      # the paper's constants
    np.testing.assert_allclose(cal([0.0, 0.2, 0.35, 0.5, 0.9]), [0.0, 0.0, 0.5, 1.0, 1.0])


def test_fit_calibration_recovers_a_linear_squash():
    rng = np.random.default_rng(0)
    p = rng.uniform(0, 1, 4000)
    y = rng.random(4000) < p
    raw = 0.3 + 0.4 * p                          # the truth squashed into [0.3, 0.7]
    cal, fit = fit_calibration(raw, y, "brier", grid=81)
    assert cal.v_min == pytest.approx(0.3, abs=0.03) and cal.v_max == pytest.approx(0.7, abs=0.03)
    assert fit["ece"] < 0.03


def test_ece_and_auroc():
    assert expected_calibration_error([0.9] * 10, [1] * 9 + [0]) == pytest.approx(0.0)
    assert expected_calibration_error([1.0, 0.0], [0, 1]) == pytest.approx(1.0)
    assert auroc([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1]) == pytest.approx(0.75)
    assert auroc([0.5, 0.5], [0, 1]) == pytest.approx(0.5)


def test_skill_result_line():
    from saycan_ros.cli.eval_skill import SkillEvalReport
    report = SkillEvalReport("pick", groups={"apple": [150, 150], "orange": [133, 150]})
    assert report.summary_line() == "skill pick: success 283/300 (94.3%)"


def test_cli_registers_its_commands():
    import argparse

    from saycan_ros.cli.train import register as register_cli
    from saycan_ros.cli.eval_skill import register as register_eval_skill
    parser = argparse.ArgumentParser(prog="saycan")
    sub = parser.add_subparsers(dest="command", required=True)
    register_cli(sub)
    register_eval_skill(sub)                                         # pick joins navigate, place
    args = parser.parse_args(["eval-skill", "pick", "--episodes", "3", "--seed", "1",
                              "--weights", "x.pt"])
    assert args.skill == "pick" and args.episodes == 3 and args.seed == 1 and args.weights == "x.pt"
    assert parser.parse_args(["train", "value", "--seed", "2"]).seed == 2
    assert parser.parse_args(["eval-value", "--episodes", "10"]).episodes == 10
    assert parser.parse_args(["eval-skill", "navigate"]).skill == "navigate"
    bad = parser.parse_args(["eval-value", "--elsewhere", "2"])
    with pytest.raises(SystemExit, match="elsewhere"):              # before any rollout
        bad.func(bad)


def test_train_overrides_parse_json_and_keep_plain_text():
    """``--set`` values are JSON where they parse and text otherwise: ``train.precision=fp32``
    used to die in the JSON parser (its first letter looked like ``false``)."""
    from saycan_ros.cli.train import _overrides
    assert _overrides(["train.steps=200", "train.precision=fp32", "data.noise=[0, 0.1]",
                       "train.oversample={\"box\": 2}", "model.coord_conv=false",
                       "train.lr=1e-3", "dagger.rounds=-1", 'data.name="tall"']) == {
        "train.steps": 200, "train.precision": "fp32", "data.noise": [0, 0.1],
        "train.oversample": {"box": 2}, "model.coord_conv": False, "train.lr": 1e-3,
        "dagger.rounds": -1, "data.name": "tall"}
    for bad in ("steps=3", "train.steps"):
        with pytest.raises(SystemExit, match="SECTION.KEY=VALUE"):
            _overrides([bad])


@pytest.mark.parametrize("command, setting, message", [
    ("bc", "trian.steps=3", "cannot set 'trian.steps'"),
    ("bc", "train.stepz=3", "unknown keys ['stepz']"),
    ("bc", "train.precision=fp16", "precision: expected one of"),
    ("value", "train.precision=bf16", "only fp32 is supported"),
    ("bc", "train.steps=abc", "bc.train.steps: expected an integer, got 'abc'"),
    ("bc", "train.threads=0", "threads: expected at least 1"),
    ("bc", "data.noise=[0.1]", "bc.data.noise: expected a list of 2"),
    ("bc", "model.channels=[16,\"a\"]", "expected a list of integers"),
    ("value", "model.coord_conv=1", "value.model.coord_conv: expected true or false"),
    ("value", "train.lr=0", "lr must be > 0"),
    ("value", "td.absent_fraction=0.1", "absent_fraction needs value.data.absent_relabels"),
    ("value", "td.absent_fraction=0.8", "initial_fraction + absent_fraction must stay under 1"),
    ("value", "data.absent_relabels=-1", "absent_relabels must be at least 0"),
    ("bc", "model.ee_view=8", "ee_view: expected 0 (off) or a side of at least 16 px"),
    ("bc", "model.ee_view_zoom=0.5", "ee_view_zoom: expected at least 1"),
    ("bc", "model.ee_camera=elbow", "ee_camera: expected one of ('crop', 'wrist')")])
def test_train_rejects_a_bad_setting_in_one_line_before_any_work(tmp_path, command, setting,
                                                                 message):
    from saycan_ros.cli.main import main
    with pytest.raises(SystemExit) as exit_:
        main(["train", command, "--out", str(tmp_path / "x.pt"), "--set", setting])
    assert str(exit_.value).startswith(f"saycan train {command}: ") and message in str(exit_.value)
    assert not list(tmp_path.iterdir())


def test_train_bc_reproduces_its_weights_from_a_seed(tmp_path, monkeypatch):
    """The same seed gives the same weights (the second run reads the demonstrations back from
    the cache); another seed gives other weights. The record names the CPU and precision that a
    bit-equal reproduction needs (float results differ between CPU kinds)."""
    from saycan_ros.learning.modeling_bc import PickPolicy
    from saycan_ros.learning.modeling_common import cpu_model
    from saycan_ros.learning.train_bc import train_bc
    monkeypatch.setenv("SAYCAN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(torch, "set_num_threads", lambda n: None)   # keep the session's threads
    small = {"data.episodes": 3, "train.steps": 3, "train.warmup": 1, "train.batch_size": 8}
    nets = []
    for name, seed in (("a", 0), ("b", 0), ("c", 1)):
        train_bc(seed=seed, out=tmp_path / f"{name}.pt", overrides=small, progress=False,
                 log=lambda line: None)
        nets.append(PickPolicy.load(tmp_path / f"{name}.pt").net.state_dict())
    training = json.loads((tmp_path / "a.json").read_text())["training"]
    assert training["cpu"] == cpu_model() != ""
    assert training["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert training["precision"] in ("fp32", "bf16") and isinstance(training["native_bf16"], bool)
    assert nets[0].keys() == nets[1].keys() == nets[2].keys()
    assert all(torch.equal(nets[0][k], nets[1][k]) for k in nets[0])
    assert not all(torch.equal(nets[0][k], nets[2][k]) for k in nets[0])


def test_saycan_cli_has_the_learning_commands():
    from saycan_ros.cli.main import build_parser
    parser = build_parser()
    assert parser.parse_args(["train", "bc", "--seed", "3"]).seed == 3
    assert parser.parse_args(["eval-skill", "pick"]).skill == "pick"
    assert parser.parse_args(["eval-value"]).png == "docs/value_reliability.png"


def test_one_off_texts_stay_off_the_disk_cache(tmp_path, monkeypatch):
    """Generated steps and instructions are embedded in memory only: the disk cache holds the
    fixed texts (skill names), is read once per process, and so stays small and fast."""
    import json

    from saycan_ros.learning import text_encoder as te
    monkeypatch.setenv("SAYCAN_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(te, "_memory", {})
    monkeypatch.setattr(te, "_disk", None)
    fixed = te.embed_texts(["pick up the apple"])
    one_off = te.embed_texts(["grab me that red fruit over there"], use_cache=False)
    stored = json.loads((tmp_path / "text_embeddings.json").read_text())[te.ENCODER_NAME]
    assert list(stored) == ["pick up the apple"]
    assert fixed.shape == one_off.shape == (1, te.EMBED_DIM)
    assert abs(float((fixed @ fixed.T)[0, 0]) - 1.0) < 1e-5
    monkeypatch.setattr(te, "_memory", {})          # a new process: one read of the file
    monkeypatch.setattr(te, "_disk", None)
    reads = []
    load = te._load_disk_cache
    monkeypatch.setattr(te, "_load_disk_cache", lambda: reads.append(1) or load())
    te.embed_texts(["pick up the apple"])
    te.embed_texts(["pick up the apple", "pick up the orange"])
    assert len(reads) == 1


def test_grasp_decision_frames_are_where_the_expert_closes():
    """``bc.train.grasp_weight`` oversamples the frames where the close decision is made: each
    demonstration's first close is one of them, and none holds anything."""
    from saycan_ros.learning.train_bc import frame_weights, grasp_frames
    demos = D.collect_demos(6, seed_base=5, noise=(0.0, 0.0), progress=False, undershoot=0.015)
    texts = [str(t) for t in demos["skill_texts"]]
    index = torch.as_tensor(demos["skill_index"].astype(np.int64))
    states, aux, actions = demos["states"], demos["aux"], demos["actions"]
    mask = grasp_frames(texts, index, states, aux).numpy()
    closes = actions[:, 3] > 0
    first_close = closes & ~np.r_[False, closes[:-1] & (demos["episode"][1:] == demos["episode"][:-1])]
    assert first_close.sum() == 6 and mask[first_close].all()
    assert not mask[states[:, 4] > 0.5].any() and 0 < mask.mean() < 0.3
    weights = frame_weights(texts, index, {}, 4.0, states, aux).numpy()
    assert (weights[mask] == 4.0).all() and (weights[~mask] == 1.0).all()
    assert frame_weights(texts, index, {}) is None
    for bad in (0.0, -1.0, float("nan"), "4"):
        with pytest.raises(ValueError, match="grasp_weight"):
            frame_weights(texts, index, {}, bad, states, aux)


def test_fine_keypoints_refine_the_text_queried_map_to_twice_the_resolution():
    """``fine_keypoints``: the text-queried map lives at 48x48 (2-px cells), starts as the
    upsampled coarse map (the correction is zero-initialised), and its pixel read-out uses its
    own resolution while the other keypoints stay at 24x24."""
    import dataclasses

    from saycan_ros.learning.configuration_bc import BCConfig
    from saycan_ros.learning.modeling_bc import BCPolicyNet
    torch.manual_seed(0)
    cfg = dataclasses.replace(BCConfig.load(None).model, ee_view=0, start_frame=False)   # head camera alone
    coarse_net = BCPolicyNet(dataclasses.replace(cfg, fine_keypoints=0)).eval()
    fine_net = BCPolicyNet(dataclasses.replace(cfg, fine_keypoints=8)).eval()
    fine_net.load_state_dict(coarse_net.state_dict(), strict=False)
    images, states, text = torch.randn(3, 3, 96, 96), torch.randn(3, 5), torch.randn(3, 384)
    with torch.no_grad():
        coarse, fine = coarse_net(images, states, text), fine_net(images, states, text)
        _, _, widths = fine_net.encoder.keypoints.last
        assert widths[0] == 48 and (widths[1:] == 24).all()
        # Upsampling moves the expectation a little, never by more than a coarse cell (4 px).
        assert (coarse["pix"] - fine["pix"]).abs().max() < 4.0
        assert torch.equal(coarse["pix"][:, 2:], fine["pix"][:, 2:])      # the gripper keypoint
        fine_net.encoder.keypoints.fine_query.bias.fill_(0.5)             # a non-zero correction
        assert not torch.allclose(fine_net(images, states, text)["pix"][:, :2], fine["pix"][:, :2])
    with pytest.raises(ValueError, match="fine_keypoints"):
        BCPolicyNet(dataclasses.replace(cfg, fine_keypoints=8, text_queries=0))
    for bad in (-1, 2.5, "8", True):
        with pytest.raises(ValueError, match="fine_keypoints"):
            BCPolicyNet(dataclasses.replace(cfg, fine_keypoints=bad))


def test_value_encoder_must_match_the_policy_encoder_both_ways():
    """The value network starts from the policy's (frozen) encoder: a value config without the
    policy's fine keypoint layers, with layers the policy lacks, or for another camera size is
    rejected."""
    import dataclasses

    from saycan_ros.learning.configuration_value import ValueConfig
    from saycan_ros.learning.modeling_value import ValueNet
    from saycan_ros.learning.train_value import policy_encoder_weights
    from saycan_ros.learning.factory import make_policy
    policy = make_policy("bc_pick").net
    cfg = ValueConfig.load(None).model
    assert cfg.fine_keypoints == policy.cfg.fine_keypoints
    assert policy_encoder_weights(policy, ValueNet(cfg))
    for fine in (0, cfg.fine_keypoints + 4):
        with pytest.raises(ValueError, match="does not match the policy's encoder"):
            policy_encoder_weights(policy, ValueNet(dataclasses.replace(cfg, fine_keypoints=fine)))
    with pytest.raises(ValueError, match="does not match the policy's encoder"):
        policy_encoder_weights(policy, ValueNet(dataclasses.replace(
            cfg, start_frame=not cfg.start_frame)))           # the stem's input channels differ
    half = dataclasses.replace(cfg, image_size=cfg.image_size // 2)
    with pytest.raises(ValueError, match="image_size"):
        policy_encoder_weights(policy, ValueNet(half))


def test_bf16_training_keeps_keypoints_in_float32_and_rejects_unknown_precision():
    """Under bfloat16 autocast the convolutions run in bfloat16, the keypoint softmax (an
    expectation over the map, sub-pixel) in float32; a gradient step works; a typo is an error."""
    import dataclasses

    from saycan_ros.learning.configuration_bc import BCConfig
    from saycan_ros.learning.modeling_bc import BCPolicyNet, autocast, bc_loss
    torch.manual_seed(0)
    cfg = dataclasses.replace(BCConfig.load(None).model, image_size=64, ee_view=0, start_frame=False)
    net = BCPolicyNet(cfg)
    images, states, text = torch.randn(2, 3, 64, 64), torch.randn(2, 5), torch.randn(2, 384)
    with autocast("bf16"):
        out = net(images, states, text)
        stem = net.encoder.stem(torch.cat([images, torch.zeros(2, 2, 64, 64)], 1))
    assert stem.dtype == torch.bfloat16 and out["pix"].dtype == torch.float32
    kx, _, _ = net.encoder.keypoints.last
    assert kx.dtype == torch.float32
    actions = torch.tensor([[0.1, -0.2, 0.3, 1.0, -1.0]] * 2)
    loss, parts = bc_loss(out, actions, torch.zeros(2, 3), 1.0, torch.full((2, 4), 32.0))
    assert loss.dtype == torch.float32 and torch.isfinite(loss)
    loss.backward()
    assert net.encoder.stem[0].weight.grad.dtype == torch.float32
    with autocast("fp32"):
        assert net(images, states, text)["delta"].dtype == torch.float32
    with pytest.raises(ValueError, match="precision"):
        autocast("fp16")


def test_auto_precision_uses_bfloat16_only_where_the_cpu_has_it(monkeypatch):
    """``precision: auto`` (the shipped setting) trains in bfloat16 on a CPU with native
    bfloat16 and in float32 elsewhere, where emulated bfloat16 is an order of magnitude slower."""
    from saycan_ros.learning import modeling_common as mc
    for native, expected in ((True, "bf16"), (False, "fp32")):
        monkeypatch.setattr(mc, "native_bf16", lambda native=native: native)
        assert mc.resolve_precision("auto") == expected
        with mc.autocast("auto"):
            assert torch.is_autocast_enabled("cpu") == (expected == "bf16")
    assert mc.resolve_precision("bf16") == "bf16" and mc.resolve_precision("fp32") == "fp32"
    with pytest.raises(ValueError, match="precision"):
        mc.resolve_precision("float16")


def test_loaded_models_resize_camera_frames_to_their_input_size():
    """A frame of another size (a real camera, an old simulator setting) is resized to the
    network's ``image_size`` before the forward pass; frames of the right size pass unchanged."""
    import dataclasses

    from saycan_ros.learning.configuration_bc import BCConfig
    from saycan_ros.learning.modeling_bc import BCPolicyNet, PickPolicy
    from saycan_ros.learning.modeling_common import resize_images
    from saycan_ros.learning.text_encoder import EmbeddingTable
    cfg = dataclasses.replace(BCConfig.load(None).model, image_size=48, ee_view=0, start_frame=False)
    table = EmbeddingTable(["pick up the apple"], np.ones((1, 384), np.float32))
    policy = PickPolicy(BCPolicyNet(cfg), table)
    assert policy.image_size == 48
    frames = np.random.default_rng(0).integers(0, 255, (2, 72, 96, 3), dtype=np.uint8)
    img, _, _, _ = policy.tensors(frames, np.zeros((2, 5), np.float32), ["pick up the apple"] * 2)
    assert img.shape == (2, 3, 48, 48)
    assert policy(frames, np.zeros((2, 5), np.float32), ["pick up the apple"] * 2).shape == (2, 5)
    same = frames[:, :48, :48]
    assert resize_images(same, 48) is same
    flat = np.full((1, 96, 96, 3), 77, np.uint8)
    assert (resize_images(flat, 48) == 77).all()


def test_policy_with_an_end_effector_view_needs_and_uses_it():
    """``ee_view``: a second encoder over the end-effector view; its first keypoint is the
    third supervised pixel; without the view the policy refuses to act."""
    import dataclasses

    from saycan_ros.learning.configuration_bc import BCConfig
    from saycan_ros.learning.modeling_bc import BCPolicyNet, PickPolicy
    from saycan_ros.learning.text_encoder import EmbeddingTable
    torch.manual_seed(0)
    cfg = dataclasses.replace(BCConfig.load(None).model, ee_view=32, start_frame=False)
    table = EmbeddingTable(["pick up the apple"], np.ones((1, 384), np.float32))
    policy = PickPolicy(BCPolicyNet(cfg), table)
    assert policy.ee_view == 32 and D.ee_view_of(policy) == (32, cfg.ee_view_zoom, cfg.ee_camera)
    rng = np.random.default_rng(0)
    frames = rng.integers(0, 255, (2, 96, 96, 3), dtype=np.uint8)
    ee_frames = rng.integers(0, 255, (2, 48, 48, 3), dtype=np.uint8)     # resized to 32
    states, skills = np.zeros((2, 5), np.float32), ["pick up the apple"] * 2
    with pytest.raises(ValueError, match="end-effector view"):
        policy(frames, states, skills)
    assert policy(frames, states, skills, ee_images=ee_frames).shape == (2, 5)
    img, st, txt, ee = policy.tensors(frames, states, skills, ee_frames)
    assert ee.shape == (2, 3, 32, 32)
    with torch.no_grad():
        out = policy.net(img, st, txt, ee)
        other = policy.net(img, st, txt, ee.flip(-1))
    assert out["pix"].shape == (2, 6)
    assert (out["delta"] - other["delta"]).abs().max() > 1e-4        # the view reaches the heads


def test_policy_with_a_start_frame_needs_and_uses_it():
    """``start_frame``: the head frame from the skill's start is stacked with the current one
    (6 image channels); resized like it; without it, or of another shape, the policy refuses."""
    import dataclasses

    from saycan_ros.learning.configuration_bc import BCConfig
    from saycan_ros.learning.modeling_bc import BCPolicyNet, PickPolicy
    from saycan_ros.learning.text_encoder import EmbeddingTable
    torch.manual_seed(0)
    cfg = dataclasses.replace(BCConfig.load(None).model, ee_view=0, start_frame=True)
    table = EmbeddingTable(["pick up the apple"], np.ones((1, 384), np.float32))
    policy = PickPolicy(BCPolicyNet(cfg), table)
    assert policy.start_frame and policy.net.encoder.stem[0].in_channels == 6 + 2
    rng = np.random.default_rng(0)
    frames = rng.integers(0, 255, (2, 120, 120, 3), dtype=np.uint8)      # resized to 96
    starts = rng.integers(0, 255, (2, 120, 120, 3), dtype=np.uint8)
    states, skills = np.zeros((2, 5), np.float32), ["pick up the apple"] * 2
    with pytest.raises(ValueError, match="skill's start"):
        policy(frames, states, skills)
    with pytest.raises(ValueError, match="shape"):
        policy.tensors(frames, states, skills, start_images=starts[:1])      # one per frame
    img = policy.tensors(frames, states, skills, start_images=starts)[0]
    assert img.shape == (2, 6, 96, 96)
    np.testing.assert_allclose(img[:, :3], policy.tensors(frames, states, skills,
                                                          start_images=frames)[0][:, 3:])
    a = policy(frames, states, skills, start_images=starts)
    b = policy(frames, states, skills, start_images=frames)
    assert np.abs(a[:, :3] - b[:, :3]).max() > 1e-4                  # the start frame reaches the heads


def test_start_rows_and_env_start_image():
    """Frames sorted by (episode, step) find their episode's first frame; the pick env hands
    every observation of an episode the same start frame, renewed at reset."""
    from saycan_ros.learning.modeling_common import start_rows
    np.testing.assert_array_equal(start_rows([0, 1, 2, 0, 1, 0]), [0, 0, 0, 3, 3, 5])
    with pytest.raises(ValueError, match="sorted"):
        start_rows([1, 0])
    env = D.make_pick_env()
    obs, _ = D.reset_to(env, D.StartSpec(seed=4242, object="apple", location="table"))
    first = obs["image"]
    assert obs in env.observation_space and (obs["start_image"] == first).all()
    expert = env.expert()
    for _ in range(8):
        obs, *_ = env.step(expert.clean_action())
    assert (obs["start_image"] == first).all() and (obs["image"] != first).any()
    obs, _ = D.reset_to(env, D.StartSpec(seed=4243, object="sponge", location="close counter"))
    assert (obs["start_image"] == obs["image"]).all()


def test_demos_rendered_in_processes_equal_demos_rendered_in_one(monkeypatch):
    """Demonstrations split over worker processes are the same arrays, in the same order, as
    those rendered in one (each episode depends only on its seed and its up-front noise)."""
    monkeypatch.setattr(D, "DEMO_CHUNK", 2)                    # 3 chunks for 2 workers
    args = dict(noise=(0.0, 0.3), progress=False, ee_view=48, ee_camera="wrist")
    one = D.collect_demos(5, 777, **args)
    two = D.collect_demos(5, 777, workers=2, **args)
    assert sorted(one) == sorted(two)
    for key in one:
        np.testing.assert_array_equal(one[key], two[key], err_msg=key)
    assert list(one["ep_seed"]) == [777 + i for i in range(5)]
    assert len(set(one["ep_noise"].tolist())) == 5             # a noise level per episode


def test_demos_and_rollouts_carry_the_end_effector_view():
    """Demonstrations store the view and the target's pixel in it; a rollout hands a policy
    that declares ``ee_view`` the views of every active episode (the PolicyFn contract)."""
    demos = D.collect_demos(2, 4242, (0.0, 0.0), progress=False, ee_view=48)
    n = len(demos["images"])
    assert demos["ee_images"].shape == (n, 48, 48, 3) and demos["pix"].shape == (n, 6)
    last = np.flatnonzero(demos["episode"] == 0)[-1]           # the target is in the hand
    assert np.abs(demos["pix"][last, 4:] - 24).max() < 12
    assert "ee_images" not in D.collect_demos(1, 4242, (0.0, 0.0), progress=False)
    wrist = D.collect_demos(1, 4242, (0.0, 0.0), progress=False, ee_view=48, ee_camera="wrist")
    last = np.flatnonzero(wrist["episode"] == 0)[-1]           # between the fingers, in view
    assert not np.array_equal(wrist["ee_images"], demos["ee_images"][:len(wrist["ee_images"])])
    assert 8 < wrist["pix"][last, 4] < 40 and 4 < wrist["pix"][last, 5] < 44

    class Recorder:
        ee_view, ee_view_zoom, start_frame, calls = 48, 2.0, True, []

        def __call__(self, images, states, skills, ee_images, start_images):
            self.calls.append((len(images), ee_images.shape, (start_images == images).all()))
            return np.tile([0.0, 0.0, 0.0, -1.0, 1.0], (len(images), 1))   # stop at once

    roll = D.rollout(Recorder(), D.feasible_starts(["apple", "sponge"], 2, 4242), n_envs=3,
                     record=True, progress=False)
    assert Recorder.calls[0] == (3, (3, 48, 48, 3), True)     # first step: start = current
    assert roll.steps["ee_images"].shape == (4, 48, 48, 3)


def test_bad_image_size_and_value_precision_are_rejected_before_any_work():
    """A nonsense input size in a model config, and a value training precision that the value
    trainer does not apply, are clear errors rather than a broken network or a silent no-op."""
    import dataclasses

    from saycan_ros.learning.configuration_bc import BCConfig
    from saycan_ros.learning.modeling_bc import BCPolicyNet
    from saycan_ros.learning.train_value import train_value
    cfg = BCConfig.load(None).model
    for bad in (0, 8, 96.5, True, "96"):
        with pytest.raises(ValueError, match="image_size"):
            BCPolicyNet(dataclasses.replace(cfg, image_size=bad))
    with pytest.raises(ValueError, match="precision"):
        train_value(overrides={"train.precision": "bf16"}, progress=False)
    for bad in (1.5, -0.1, "half", True):
        with pytest.raises(ValueError, match="elsewhere"):
            train_value(overrides={"data.elsewhere": bad}, progress=False)


def test_absent_relabels_name_only_objects_that_are_not_where_the_robot_stands():
    """The value's free negatives: each text names an object that is not where the robot stands
    in the episode's own scene (its start re-created by a reset), never a feasible episode's
    target, ``per_episode`` per episode (every scene has more missing), all different, the same
    for the same seed."""
    from saycan_ros.learning.train_value import absent_relabels
    specs = D.mixed_starts(12, 777, 0.5)
    rollouts = D.specs_to_arrays(specs)
    episodes, texts = absent_relabels(rollouts, 3, (1, 6), 48, 0.5, seed=0)
    assert len(texts) == len(episodes) == 12 * 3        # a scene holds at most 7 objects
    env = D.make_pick_env(48, (1, 6), elsewhere=0.5)
    stocked_elsewhere = 0
    for e, spec in enumerate(specs):
        _, info = D.reset_to(env, spec)
        named = [t.removeprefix("pick up the ") for t, k in zip(texts, episodes) if k == e]
        assert len(set(named)) == len(named) == 3
        where = {n: env.world.objects[n].location for n in env.world.present}
        assert all(where.get(n) != info["location"] for n in named), (spec, named, where)
        assert set(named) <= set(D.pick_objects()) and env.world.held not in named
        assert not spec.feasible or spec.object not in named
        stocked_elsewhere += any(n in where for n in named)
    assert stocked_elsewhere > 0                        # objects on other shelves count too
    again = absent_relabels(rollouts, 3, (1, 6), 48, 0.5, seed=0)
    assert np.array_equal(again[0], episodes) and again[1] == texts


def test_augment_moves_content_by_the_returned_shift_and_leaves_the_input_alone():
    """Pad-and-crop moves a marked pixel by exactly the returned (du, dv), alike in every
    channel (current and start frame); brightness / contrast stay in [0, 1]; the uint8 input is
    not touched (the augmentation works in place on its own copy)."""
    from saycan_ros.learning.configuration_common import AugmentConfig
    from saycan_ros.learning.modeling_common import augment
    images = torch.zeros(16, 32, 32, 6, dtype=torch.uint8)
    images[:, 10, 20] = 255                        # (v, u) = (10, 20) in all six channels
    before = images.clone()
    x, shift = augment(images, AugmentConfig(shift=2, brightness=0.0, contrast=0.0),
                       torch.Generator().manual_seed(1), return_shift=True)
    assert torch.equal(images, before) and x.shape == (16, 6, 32, 32)
    for i in range(16):
        v, u = np.unravel_index(int(x[i, 0].argmax()), (32, 32))
        assert (u - 20, v - 10) == tuple(shift[i].int().tolist())
        assert torch.equal(x[i, 0], x[i, 5])
    assert len({tuple(s) for s in shift.tolist()}) > 3
    y = augment(images, AugmentConfig(shift=0, brightness=0.3, contrast=0.5),
                torch.Generator().manual_seed(2))
    assert 0.0 <= y.min() and y.max() <= 1.0 and not torch.equal(y, images.permute(0, 3, 1, 2) / 255.0)
    plain = augment(images, AugmentConfig(shift=0, brightness=0.0, contrast=0.0))
    assert torch.equal(plain, images.permute(0, 3, 1, 2).float() / 255.0)


def test_training_device_auto_follows_the_gpu_and_cuda_without_one_is_refused(monkeypatch):
    """``train.device``: auto is cuda only where torch sees a GPU; asking for cuda on a machine
    without one is a clear error before any work; an unknown device is refused by the config."""
    from saycan_ros.learning import modeling_common as mc
    from saycan_ros.learning.configuration_planner import PlannerTrainConfig
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert mc.resolve_device("auto") == "cpu" and mc.resolve_device("cpu") == "cpu"
    with pytest.raises(ValueError, match="no GPU"):
        mc.resolve_device("cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert mc.resolve_device("auto") == "cuda"
    with pytest.raises(ValueError, match="device"):
        mc.resolve_device("tpu")
    with pytest.raises(ValueError, match="device"):
        PlannerTrainConfig(device="gpu0")
    assert PlannerTrainConfig().device == "auto"


def test_training_attention_auto_is_eager_on_the_cpu_and_an_unknown_one_is_refused():
    """``train.attention``: the planner's training kernel (the function is the same, see
    test_planner_adapter's check of the loss); auto picks eager on the CPU, sdpa on a GPU."""
    from saycan_ros.learning.configuration_planner import PlannerTrainConfig, resolve_attention
    assert resolve_attention("auto", "cpu") == "eager" and resolve_attention("auto", "cuda") == "sdpa"
    assert resolve_attention("sdpa", "cpu") == "sdpa"
    with pytest.raises(ValueError, match="attention"):
        PlannerTrainConfig(attention="flash")
    assert PlannerTrainConfig().attention == "auto"


def test_a_training_output_with_a_folder_lands_where_it_says():
    """``--out build/run1/bc_pick.pt`` writes there; a bare name goes to the models folder."""
    from pathlib import Path
    assert resolve_output("build/run1/bc_pick.pt", "bc_pick.pt") == Path("build/run1/bc_pick.pt")
    assert resolve_output("bc_v2.pt", "bc_pick.pt") == models_dir() / "bc_v2.pt"
    assert resolve_output("", "value_pick.pt") == models_dir() / "value_pick.pt"
