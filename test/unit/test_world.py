"""The symbolic world (saycan_ros/core/world.py) and the affordance scorer
(saycan_ros/planning/affordance.py)."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from saycan_ros.planning.affordance import (AffordanceContext, AffordanceScorer, affordance_from_dict,
                                            check_covers, load_affordance, make_affordance_model)
from saycan_ros.core.config import ConfigError
from saycan_ros.core.kitchen import GRIPPER, USER
from saycan_ros.core.skills import Skill, SkillSet
from saycan_ros.core.tasks import TaskInit
from saycan_ros.core.world import SymbolicWorld, WorldSnapshot, effect_holds, target_location

CONFIG = Path(__file__).resolve().parents[2] / "config"


@pytest.fixture()
def world(kitchen):
    return SymbolicWorld(kitchen)


def run(world, skills, *texts):
    """Execute skills that must succeed; returns the last outcome."""
    outcome = None
    for text in texts:
        outcome = world.execute(skills.get(text))
        assert outcome.success, (text, outcome.message)
    return outcome


def fail(world, skills, text):
    """Execute a skill that must fail and leave the state as it was; returns the message."""
    before = world.snapshot()
    outcome = world.execute(skills.get(text))
    assert not outcome.success, text
    assert world.snapshot() == before, f"{text!r} changed the state although it failed"
    return outcome.message


# -- the symbolic world ------------------------------------------------------------------------------
def test_default_state(world, kitchen):
    assert world.robot_at == kitchen.robot_start == "table"
    approach, yaw = kitchen.location("table").approach, kitchen.location("table").yaw
    assert world.robot_pose == (approach[0], approach[1], yaw)
    assert world.holding is None
    assert world.objects == kitchen.default_scene()
    assert len(world.objects) == 15
    assert world.object_location("apple") == "far counter"
    assert world.object_location("banana") is None


def test_find_goes_where_the_object_is(world, skills, kitchen):
    outcome = run(world, skills, "find an apple")
    assert world.robot_at == "far counter" and "far counter" in outcome.message
    far = kitchen.location("far counter")
    assert world.robot_pose == (far.approach[0], far.approach[1], far.yaw)
    run(world, skills, "find a water bottle")
    assert world.robot_at == "close counter"
    run(world, skills, "find a water bottle")          # already there: stays, still succeeds
    assert world.robot_at == "close counter"


def test_find_follows_a_moved_object(kitchen, skills):
    world = SymbolicWorld(kitchen, TaskInit(objects={"apple": "trash can"}))
    run(world, skills, "find an apple")
    assert world.robot_at == "trash can"


def test_find_fails_for_absent_or_held_objects(kitchen, skills):
    world = SymbolicWorld(kitchen, TaskInit(absent=("apple",), holding="sponge"))
    assert "not in the kitchen" in fail(world, skills, "find an apple")
    message = fail(world, skills, "find a sponge")
    assert "in the gripper" in message and "find a sponge" in message


@pytest.mark.parametrize("location", ["close counter", "far counter", "table", "trash can"])
def test_go_to(kitchen, skills, location):
    world = SymbolicWorld(kitchen, TaskInit(robot_at="user"))
    outcome = run(world, skills, f"go to the {location}")
    assert world.robot_at == location and location in outcome.message
    loc = kitchen.location(location)
    assert world.robot_pose == (loc.approach[0], loc.approach[1], loc.yaw)


def test_bring_it_to_you_goes_to_the_user(world, skills, kitchen):
    run(world, skills, "pick up the orange", "bring it to you")
    assert world.robot_at == USER and world.holding == "orange"
    user = kitchen.location(USER)
    assert world.robot_pose[:2] == user.approach
    assert world.object_location("orange") == GRIPPER   # carried, not yet delivered


def test_bring_it_to_you_with_an_empty_hand_just_moves(world, skills):
    run(world, skills, "bring it to you")
    assert world.robot_at == USER and world.holding is None


def test_pick_needs_the_object_where_the_robot_is(world, skills):
    message = fail(world, skills, "pick up the apple")
    assert "at the far counter" in message and "robot is at the table" in message
    run(world, skills, "find an apple", "pick up the apple")
    assert world.holding == "apple" and world.object_location("apple") == GRIPPER


def test_pick_needs_an_empty_hand(world, skills):
    run(world, skills, "pick up the orange")
    message = fail(world, skills, "pick up the green tea")
    assert "already holding the orange" in message
    assert world.object_location("green tea") == "table"


def test_pick_fails_for_an_absent_object(kitchen, skills):
    world = SymbolicWorld(kitchen, TaskInit(absent=("orange",)))
    assert "not in the kitchen" in fail(world, skills, "pick up the orange")


def test_put_down_needs_that_object_in_hand(world, skills):
    assert "holding nothing" in fail(world, skills, "put down the orange")
    run(world, skills, "pick up the orange")
    assert "holding orange" in fail(world, skills, "put down the apple")


def test_put_down_leaves_the_object_where_the_robot_stands(world, skills):
    outcome = run(world, skills, "pick up the orange", "go to the close counter",
                  "put down the orange")
    assert world.object_location("orange") == "close counter" and world.holding is None
    assert "close counter" in outcome.message


def test_put_down_at_the_user_delivers(world, skills):
    outcome = run(world, skills, "find a coke can", "pick up the coke can", "bring it to you",
                  "put down the coke can")
    assert world.object_location("coke can") == USER and world.holding is None
    assert "delivered to the user" in outcome.message
    run(world, skills, "go to the table", "find a coke can")   # find leads to the user now
    assert world.robot_at == USER


def test_put_down_at_the_trash_can_throws_away(world, skills):
    outcome = run(world, skills, "pick up the redbull can", "go to the trash can",
                  "put down the redbull can")
    assert world.object_location("redbull can") == "trash can"
    assert "trash can" in outcome.message


def test_done_changes_nothing(world, skills):
    before = world.snapshot()
    outcome = world.execute(skills.get("done"))
    assert outcome.success and outcome.message == "done"
    assert world.snapshot() == before


def test_unknown_skill_kind_fails_clearly(world):
    outcome = world.execute(Skill("juggle the apples", "juggle", "juggle"))
    assert not outcome.success and "juggle" in outcome.message


def test_revision_increments_on_every_change(world, skills):
    revisions = [world.revision]
    for text in ("find an apple", "pick up the apple", "bring it to you", "put down the apple"):
        run(world, skills, text)
        revisions.append(world.revision)
    assert all(b > a for a, b in zip(revisions, revisions[1:])), revisions
    last = world.revision
    fail(world, skills, "put down the apple")
    world.execute(skills.get("done"))
    assert world.revision == last
    run(world, skills, "go to the table")
    assert world.revision > last


def test_reset_with_init(world, skills, kitchen):
    run(world, skills, "pick up the orange", "go to the trash can", "put down the orange")
    before = world.revision
    world.reset(TaskInit(robot_at="close counter", holding="apple",
                         objects={"sponge": "table"}, absent=("coke can",)))
    assert world.revision > before
    assert world.robot_at == "close counter" and world.holding == "apple"
    assert world.object_location("apple") == GRIPPER
    assert world.object_location("sponge") == "table"
    assert world.object_location("coke can") is None
    assert world.object_location("orange") == "table"           # back to the default scene
    world.reset(TaskInit())
    assert world.robot_at == kitchen.robot_start and world.holding is None
    assert world.objects == kitchen.default_scene()


def test_snapshot_is_a_copy(world, skills):
    snap = world.snapshot()
    run(world, skills, "pick up the orange")
    assert snap.holding is None and snap.object_location("orange") == "table"
    assert isinstance(snap, WorldSnapshot)
    data = world.snapshot().to_dict()
    assert data["holding"] == "orange" and data["objects"]["orange"] == GRIPPER
    assert data["robot_at"] == "table" and len(data["robot_pose"]) == 3
    assert data["revision"] == world.revision


def test_target_location(world, skills, kitchen):
    assert target_location(world, skills.get("find an apple")) == "far counter"
    assert target_location(world, skills.get("go to the trash can")) == "trash can"
    assert target_location(world, skills.get("bring it to you")) == USER
    assert target_location(world, skills.get("pick up the apple")) is None
    assert target_location(world, skills.get("done")) is None
    run(world, skills, "pick up the orange")
    assert target_location(world.snapshot(), skills.get("find an orange")) is None   # held
    absent = SymbolicWorld(kitchen, TaskInit(absent=("apple",)))
    assert target_location(absent, skills.get("find an apple")) is None


def test_effect_holds(world, skills):
    assert effect_holds(world, skills.get("go to the table"))
    assert effect_holds(world, skills.get("find an orange"))        # the orange is here
    assert not effect_holds(world, skills.get("find an apple"))
    assert not effect_holds(world, skills.get("bring it to you"))
    assert not effect_holds(world, skills.get("pick up the orange"))
    assert not effect_holds(world, skills.get("done"))
    run(world, skills, "pick up the orange")
    assert effect_holds(world, skills.get("pick up the orange"))
    assert not effect_holds(world, skills.get("put down the orange"))
    assert not effect_holds(world, skills.get("find an orange"))     # held: nowhere to go
    run(world, skills, "bring it to you")
    assert effect_holds(world, skills.get("bring it to you"))
    run(world, skills, "put down the orange")
    assert effect_holds(world, skills.get("put down the orange"))
    assert not effect_holds(world, skills.get("pick up the orange"))
    run(world, skills, "go to the table")
    assert not effect_holds(world, skills.get("bring it to you"))


# -- affordances ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def config_models():
    data = yaml.safe_load((CONFIG / "affordance.yaml").read_text(encoding="utf-8"))
    return data["affordance"]


@pytest.fixture(scope="module")
def scorer():
    return load_affordance()


def scores(scorer, kitchen, skills, world, history=()):
    context = AffordanceContext(kitchen, world.snapshot())
    probs, raws = scorer.score(list(skills), [skills.get(t) for t in history], context)
    return ({s.text: p for s, p in zip(skills, probs)}, {s.text: r for s, r in zip(skills, raws)})


def test_load_affordance_matches_the_config(scorer, config_models):
    assert set(scorer.models) == {"navigate", "navigate_to_object", "pick", "place", "terminate"}
    assert scorer.completed_cap == config_models.get("completed_cap", 0.0)
    for kind in ("navigate", "navigate_to_object"):
        spec = config_models["models"][kind]
        assert spec["type"] == "distance"
        assert scorer.models[kind].d_min == spec["d_min"]
        assert scorer.models[kind].d_max == spec["d_max"]
    assert load_affordance(CONFIG / "affordance.yaml").models.keys() == scorer.models.keys()


def test_check_covers(scorer, kitchen, skills, world):
    check_covers(scorer, skills)
    partial = AffordanceScorer({k: m for k, m in scorer.models.items() if k != "place"})
    with pytest.raises(ConfigError, match=r"\['place'\]"):
        check_covers(partial, skills)
    with pytest.raises(ConfigError, match="no affordance model for skill kind 'place'"):
        partial.score([skills.get("put down the apple")], [],
                      AffordanceContext(kitchen, world.snapshot()))


def test_distance_values(scorer, kitchen, skills, world, config_models):
    probs, raws = scores(scorer, kitchen, skills, world)
    spec = config_models["models"]["navigate"]
    d_min, d_max = spec["d_min"], spec["d_max"]
    here = kitchen.location("table").approach
    for text, target in [("go to the far counter", "far counter"),
                         ("go to the close counter", "close counter"),
                         ("go to the trash can", "trash can"),
                         ("bring it to you", USER),
                         ("find an apple", "far counter"),
                         ("find a sponge", "close counter")]:
        d = math.dist(here, kitchen.location(target).approach)
        assert raws[text] == pytest.approx(d)
        assert probs[text] == pytest.approx(min(1, max(0, (d_max - d) / (d_max - d_min))))
    assert raws["go to the far counter"] == pytest.approx(3.5)    # (3.8, 2.1) -> (6.6, 4.2)
    assert raws["go to the table"] == 0 and probs["go to the table"] == 1.0
    assert probs["find an orange"] == 1.0                        # on the table, by the robot
    assert probs["go to the close counter"] > probs["go to the far counter"]  # nearer: higher


def test_distance_clamps_with_custom_bounds(kitchen, skills, world):
    scorer = affordance_from_dict({"models": {
        "navigate": {"type": "distance", "d_min": 1.0, "d_max": 3.0},
        "navigate_to_object": {"type": "distance", "d_min": 1.0, "d_max": 3.0},
        "pick": {"type": "symbolic_pick"}, "place": {"type": "holding"},
        "terminate": {"type": "constant", "value": 0.1}}})
    probs, raws = scores(scorer, kitchen, skills, world)
    assert probs["go to the table"] == 1.0                        # d = 0 < d_min
    assert probs["go to the far counter"] == 0.0                  # d = 3.5 > d_max
    d = raws["go to the close counter"]                           # about 2.62
    assert 1.0 < d < 3.0
    assert probs["go to the close counter"] == pytest.approx((3.0 - d) / 2.0)


def test_absent_or_held_object_cannot_be_found(scorer, kitchen, skills):
    world = SymbolicWorld(kitchen, TaskInit(absent=("apple",), holding="orange"))
    probs, raws = scores(scorer, kitchen, skills, world)
    assert probs["find an apple"] == 0.0 and math.isinf(raws["find an apple"])
    assert probs["find an orange"] == 0.0
    assert probs["find a coke can"] > 0.9


def test_pick_only_at_the_object_with_an_empty_hand(scorer, kitchen, skills, world):
    probs, _ = scores(scorer, kitchen, skills, world)
    pickable = {t for t, p in probs.items() if t.startswith("pick up") and p == 1.0}
    assert pickable == {"pick up the redbull can", "pick up the green tea",
                        "pick up the orange", "pick up the multigrain chips"}
    assert all(p == 0.0 for t, p in probs.items()
               if t.startswith("pick up") and t not in pickable)
    run(world, skills, "pick up the orange")
    probs, _ = scores(scorer, kitchen, skills, world)
    assert all(p == 0.0 for t, p in probs.items() if t.startswith("pick up"))
    absent = SymbolicWorld(kitchen, TaskInit(absent=("orange",)))
    assert scores(scorer, kitchen, skills, absent)[0]["pick up the orange"] == 0.0


def test_place_only_when_holding(scorer, kitchen, skills, world):
    probs, _ = scores(scorer, kitchen, skills, world)
    assert all(p == 0.0 for t, p in probs.items() if t.startswith("put down"))
    run(world, skills, "pick up the green tea")
    probs, _ = scores(scorer, kitchen, skills, world)
    placeable = {t for t, p in probs.items() if t.startswith("put down") and p == 1.0}
    assert placeable == {"put down the green tea"}
    assert all(p == 0.0 for t, p in probs.items() if t.startswith("put down") and
               t != "put down the green tea")


def test_done_is_constant(scorer, kitchen, skills, world):
    assert scores(scorer, kitchen, skills, world)[0]["done"] == pytest.approx(0.1)
    run(world, skills, "pick up the orange", "bring it to you", "put down the orange")
    assert scores(scorer, kitchen, skills, world, ["done"])[0]["done"] == pytest.approx(0.1)


def test_all_scores_are_probabilities(scorer, kitchen, skills, world):
    probs, raws = scores(scorer, kitchen, skills, world)
    values = np.array(list(probs.values()))
    assert values.shape == (51,) and np.all((values >= 0) & (values <= 1))


def test_completed_skills_are_capped_while_their_effect_holds(scorer, kitchen, skills, world):
    history = ["find an apple", "pick up the apple", "bring it to you"]
    run(world, skills, *history)
    probs, _ = scores(scorer, kitchen, skills, world, history)
    assert probs["bring it to you"] == scorer.completed_cap == 0.0   # at the user already
    assert probs["pick up the apple"] == 0.0
    assert probs["put down the apple"] == 1.0                        # not done yet
    run(world, skills, "put down the apple")
    history.append("put down the apple")
    probs, _ = scores(scorer, kitchen, skills, world, history)
    assert probs["put down the apple"] == 0.0
    assert probs["pick up the apple"] == 1.0     # the apple lies here again: pick is possible


def test_completed_skills_are_not_capped_once_their_effect_is_gone(scorer, kitchen, skills,
                                                                   world):
    history = ["pick up the orange", "bring it to you", "put down the orange", "go to the table"]
    run(world, skills, *history)
    probs, raws = scores(scorer, kitchen, skills, world, history)
    # "bring it to you" was done, but the robot has moved away: it is worth doing again
    d = raws["bring it to you"]
    assert d > 0 and probs["bring it to you"] == pytest.approx((100.0 - d) / 100.0)
    assert probs["go to the table"] == 0.0        # done and still true
    # "find an orange" was never run; its target is the user now
    assert probs["find an orange"] > 0.9
    # "pick up the orange" was done, but the orange lies at the user: not capped, yet 0 here
    run(world, skills, "find an orange")
    probs, _ = scores(scorer, kitchen, skills, world, history + ["find an orange"])
    assert probs["pick up the orange"] == 1.0


def test_nonzero_completed_cap(kitchen, skills, world):
    scorer = affordance_from_dict({"affordance": {"completed_cap": 0.05, "models": {
        "navigate": {"type": "distance"}, "navigate_to_object": {"type": "distance"},
        "pick": {"type": "symbolic_pick"}, "place": {"type": "holding"},
        "terminate": {"type": "constant", "value": 0.2}}}})
    probs, _ = scores(scorer, kitchen, skills, world, ["go to the table"])
    assert probs["go to the table"] == pytest.approx(0.05)
    assert probs["done"] == pytest.approx(0.2)


@pytest.mark.parametrize("spec, fragment", [
    ({"type": "teleport"}, "unknown affordance model 'teleport'"),
    ({"d_min": 0.0}, "needs a 'type'"),
    ("distance", "needs a 'type'"),
    ({"type": "distance", "d_min": 5.0, "d_max": 1.0}, "d_min < d_max"),
    ({"type": "distance", "d_min": -1.0, "d_max": 1.0}, "d_min < d_max"),
    ({"type": "distance", "d_max": float("inf")}, "d_min < d_max"),
    ({"type": "distance", "radius": 3}, "radius"),
    ({"type": "constant", "value": 1.5}, "constant affordance"),
    ({"type": "symbolic_pick", "threshold": 0.5}, "symbolic_pick"),
])
def test_bad_model_specs(spec, fragment):
    with pytest.raises(ConfigError) as info:
        make_affordance_model(spec)
    assert fragment in str(info.value)


def test_unknown_type_in_a_config_file(tmp_path):
    path = tmp_path / "affordance.yaml"
    path.write_text("affordance:\n  models:\n    pick: {type: learned_magic}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="unknown affordance model 'learned_magic'"):
        load_affordance(path)


@pytest.mark.parametrize("data, fragment", [
    ({"affordance": {}}, "'models'"),
    ({"affordance": {"models": ["distance"]}}, "'models'"),
    ({"affordance": {"completed_cap": 2.0, "models": {"pick": {"type": "symbolic_pick"}}}},
     "completed_cap"),
])
def test_bad_scorer_config(data, fragment):
    with pytest.raises(ConfigError, match=fragment):
        affordance_from_dict(data)


def test_scorer_rejects_values_outside_unit_interval(kitchen, skills, world):
    class Broken:
        def evaluate(self, batch, context):
            return np.full(len(batch), 1.5), np.zeros(len(batch))

    scorer = AffordanceScorer({"terminate": Broken()})
    with pytest.raises(ValueError, match="outside"):
        scorer.score([skills.get("done")], [], AffordanceContext(kitchen, world.snapshot()))


def test_empty_skill_list(scorer, kitchen, world):
    probs, raws = scorer.score([], [], AffordanceContext(kitchen, world.snapshot()))
    assert probs.shape == (0,) and raws.shape == (0,)
    check_covers(scorer, SkillSet(()))
