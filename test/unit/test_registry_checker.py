"""The skill registry (routing, validation) and the contract checker, on the existing affordance
models, the path_distance model, and in-process executors. ROS-free."""
import math

import numpy as np
import pytest

from saycan_ros.planning.affordance import AFFORDANCE_MODELS, AffordanceContext, make_affordance_model
from saycan_ros.planning.checker import (ContractError, TimeoutProbe, check_affordance_model,
                                         check_skill_executor)
from saycan_ros.planning.planner import ExecutionResult
from saycan_ros.planning.skill_registry import (RegistryError, UnregisteredSkillError, load_registry,
                                                registry_from_dict)
from saycan_ros.core.tasks import TaskInit
from saycan_ros.core.world import SymbolicWorld


@pytest.fixture(scope="module")
def registry(vocabulary):
    return load_registry(None, vocabulary.skills)


@pytest.fixture(scope="module")
def contexts(vocabulary):
    world = SymbolicWorld(vocabulary.kitchen)
    out = []
    for init in (TaskInit(), TaskInit(robot_at="far counter", holding="apple"),
                 TaskInit(robot_at="user", absent=("sponge",)),
                 TaskInit(robot_at="trash can", objects={"coke can": "table"})):
        world.reset(init)
        out.append(AffordanceContext(vocabulary.kitchen, world.snapshot()))
    return out


# -- registry --------------------------------------------------------------------------------------
def test_builtin_registry_routes_every_family(registry, vocabulary):
    assert registry.route("go to the table") == "navigate_skill"
    assert registry.route("find a sponge") == "navigate_skill"
    assert registry.route("bring it to you") == "navigate_skill"
    assert registry.route("put down the apple") == "place_skill"
    assert registry.route("pick up the apple") == "pick_skill"
    assert registry.services() == ["navigate_skill", "pick_skill", "place_skill"]
    assert registry.families_of("navigate_skill") == ["find", "go_to", "bring"]
    for skill in vocabulary.skills:          # every skill has a route or is the planner's
        if skill.kind == "terminate":
            assert registry.entry_for(skill.text).executed_by_planner
        else:
            # relative: resolved in each node's namespace (two robots side by side)
            assert registry.route(skill.text) in ("navigate_skill", "pick_skill", "place_skill")


def test_registry_rejects_unregistered_skills(registry):
    for text in ("fly to the moon", "go to the moon", "", "GO TO THE TABLE"):
        with pytest.raises(UnregisteredSkillError, match="unregistered skill"):
            registry.route(text)
    with pytest.raises(RegistryError, match="planner ends the plan"):
        registry.route("done")


def _families(**override):
    base = {"find": {"executor": "nav", "affordance": {"type": "path_distance"}},
            "go_to": {"executor": "nav", "affordance": {"type": "path_distance"}},
            "bring": {"executor": "nav", "affordance": {"type": "path_distance"}},
            "pick": {"executor": "pick", "affordance": "symbolic_pick"},
            "place": {"executor": "/place", "affordance": {"type": "holding"}},
            "done": {"executor": "none", "affordance": {"type": "constant", "value": 0.1}}}
    base.update(override)
    return {"registry": {"families": {k: v for k, v in base.items() if v is not None}}}


@pytest.mark.parametrize("override, match", [
    ({"pick": None}, "without an executor: \\['pick'\\]"),
    ({"dance": {"executor": "dance", "affordance": "constant"}}, "not in the skill repertoire"),
    ({"pick": {"executor": "pick me!", "affordance": "symbolic_pick"}}, "ROS service name"),
    ({"pick": {"executor": "none", "affordance": "symbolic_pick"}}, "needs an executor"),
    ({"pick": {"executor": "pick", "affordance": {"type": "magic"}}}, "unknown affordance model"),
    ({"pick": {"executor": "pick", "affordance": {"value": 1}}}, "model spec"),
    ({"pick": {"executor": "pick", "affordance": "symbolic_pick", "retries": 3}}, "unknown keys"),
    ({"bring": {"executor": "nav", "affordance": {"type": "distance"}}}, "different affordance"),
])
def test_registry_validation_errors(vocabulary, override, match):
    with pytest.raises(RegistryError, match=match):
        registry_from_dict(_families(**override), vocabulary.skills)


def test_registry_keeps_relative_names(vocabulary):
    registry = registry_from_dict(_families(), vocabulary.skills)
    assert registry.route("go to the table") == "nav"          # resolved in the caller's namespace
    assert registry.route("put down the apple") == "/place"
    assert registry.services() == ["nav", "pick", "/place"]
    assert registry.families_of("/nav") == ["find", "go_to", "bring"]


def test_registry_affordance_scorer(registry, vocabulary, contexts):
    models = registry.affordance_models()
    assert models["navigate"]["type"] == "path_distance"
    assert models["pick"]["type"] == "symbolic_pick"
    scorer = registry.affordance_scorer()
    probs, raw = scorer.score(list(vocabulary.skills), [], contexts[0])
    assert probs.shape == (len(vocabulary.skills),) and np.all((probs >= 0) & (probs <= 1))


# -- affordance contract ---------------------------------------------------------------------------
MODELS = [({"type": "distance"}, ("navigate", "navigate_to_object")),
          ({"type": "symbolic_pick"}, ("pick",)),
          ({"type": "holding"}, ("place",)),
          ({"type": "constant", "value": 0.1}, ("terminate",)),
          ({"type": "path_distance"}, ("navigate", "navigate_to_object"))]


@pytest.mark.parametrize("spec, kinds", MODELS, ids=[m[0]["type"] for m in MODELS])
def test_models_pass_the_affordance_contract(spec, kinds, vocabulary, contexts):
    assert "path_distance" in AFFORDANCE_MODELS
    check_affordance_model(make_affordance_model(spec), vocabulary.skills.of_kind(*kinds),
                           contexts, name=spec["type"])


def test_path_distance_is_distance_along_the_path(vocabulary, contexts):
    model = make_affordance_model({"type": "path_distance", "d_min": 0.0, "d_max": 10.0})
    straight = make_affordance_model({"type": "distance", "d_min": 0.0, "d_max": 10.0})
    skills = vocabulary.skills.of_kind("navigate")
    p, raw = model.evaluate(skills, contexts[1])          # from the far counter
    _, line = straight.evaluate(skills, contexts[1])
    assert np.all(raw >= line - 0.06)                     # a path is never shorter than the line
    assert raw[[s.location for s in skills].index("close counter")] > \
        line[[s.location for s in skills].index("close counter")] + 0.3   # around the table
    assert np.allclose(p, np.clip((10.0 - raw) / 10.0, 0, 1))
    # The object in the gripper: nowhere to go.
    p, raw = model.evaluate([vocabulary.skills.get("find an apple")], contexts[1])
    assert p[0] == 0.0 and math.isinf(raw[0])


def test_path_distance_unreachable_is_zero(vocabulary, contexts):
    from saycan_ros.skills.navigation import GridMap
    model = make_affordance_model({"type": "path_distance"})
    grid = np.zeros((120, 160), dtype=np.int8)
    grid[:, 40] = 100                                    # a wall across the kitchen at x = 2 m
    model.set_map(GridMap(grid, 0.05))
    skills = [vocabulary.skills.get("go to the close counter"),
              vocabulary.skills.get("go to the table")]
    p, raw = model.evaluate(skills, contexts[0])          # the robot at the table (x 3.8)
    assert p[0] == 0.0 and math.isinf(raw[0])             # the close counter is behind the wall
    assert p[1] > 0.9


class _Broken:
    def __init__(self, kind):
        self.kind, self.calls = kind, 0

    def evaluate(self, skills, context):
        self.calls += 1
        n = len(skills)
        if self.kind == "range":
            return np.full(n, 1.5), np.zeros(n)
        if self.kind == "nan":
            return np.full(n, np.nan), np.zeros(n)
        if self.kind == "shape":
            return np.zeros(n + 1), np.zeros(n + 1)
        if self.kind == "random":
            return np.random.default_rng(self.calls).random(n), np.zeros(n)
        if self.kind == "batch":                        # depends on the batch size
            return np.full(n, 1.0 / max(n, 1)), np.zeros(n)
        if self.kind == "terminate":                    # done scored by the state
            return np.full(n, float(context.state.holding is None)), np.zeros(n)
        raise AssertionError(self.kind)


@pytest.mark.parametrize("kind, match", [("range", "outside \\[0, 1\\]"), ("nan", "non-finite"),
                                         ("shape", "shape"), ("random", "not deterministic"),
                                         ("batch", "one-by-one"),
                                         ("terminate", "in different states")])
def test_checker_catches_broken_models(kind, match, vocabulary, contexts):
    with pytest.raises(ContractError, match=match):
        check_affordance_model(_Broken(kind), list(vocabulary.skills), contexts)


# -- executor contract -----------------------------------------------------------------------------
class WorldExecutor:
    """The symbolic world behind the SkillExecutor protocol, with a slow skill for timeouts."""

    def __init__(self, vocabulary, slow=(), honour_timeout=True):
        self.world = SymbolicWorld(vocabulary.kitchen)
        self.skills = vocabulary.skills
        self.slow, self.honour_timeout = set(slow), honour_timeout

    def execute(self, skill, timeout_s=0.0):
        import time
        if not (isinstance(timeout_s, (int, float)) and math.isfinite(timeout_s)
                and timeout_s >= 0):
            return ExecutionResult(False, f"timeout_s must be >= 0, got {timeout_s}")
        if skill not in self.skills:
            return ExecutionResult(False, f"unknown skill {skill!r}")
        if skill in self.slow:
            wait = min(timeout_s, 3.0) if self.honour_timeout and timeout_s else 3.0
            time.sleep(wait)
            return ExecutionResult(False, f"timed out after {wait:g} s", wait, self.world.revision)
        outcome = self.world.execute(self.skills.get(skill))
        return ExecutionResult(outcome.success, outcome.message, 0.0, self.world.revision)


def test_executor_contract_in_process(vocabulary):
    executor = WorldExecutor(vocabulary, slow={"go to the far counter"})
    results = check_skill_executor(executor, ["go to the table", "pick up the orange"],
                                   timeout_probe=TimeoutProbe("go to the far counter", 0.5, 1.0))
    assert [r.success for r in results] == [True, True]


def test_checker_catches_broken_executors(vocabulary):
    class Accepting(WorldExecutor):
        def execute(self, skill, timeout_s=0.0):
            return ExecutionResult(True, "ok")

    class Raising(WorldExecutor):
        def execute(self, skill, timeout_s=0.0):
            raise KeyError(skill)

    with pytest.raises(ContractError, match="must be refused"):
        check_skill_executor(Accepting(vocabulary), ["go to the table"])
    with pytest.raises(ContractError, match="raised KeyError"):
        check_skill_executor(Raising(vocabulary))
    late = WorldExecutor(vocabulary, slow={"go to the far counter"}, honour_timeout=False)
    with pytest.raises(ContractError, match="more than the timeout"):
        check_skill_executor(late, timeout_probe=TimeoutProbe("go to the far counter", 0.5, 1.0))
