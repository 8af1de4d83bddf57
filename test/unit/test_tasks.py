"""Task files (config/tasks.yaml, config/tasks_extra.yaml), their parser and the goal checker.

Every task must be solvable: a breadth-first search over the symbolic world
(:mod:`saycan_ros.core.solver`, also the oracle of the report's failure attribution) finds a plan of
at most 19 skills (plus ``done``: the planner's 20 steps) that reaches the goal, and the goal
does not already hold at the start.
"""
from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
import yaml

from saycan_ros.core.kitchen import GRIPPER, load_kitchen
from saycan_ros.core.solver import MAX_PLAN_SKILLS, find_plan, goal_terms, solve
from saycan_ros.core.tasks import (FAMILIES, MAX_INSTRUCTION_CHARS, GoalExpr, Task, TaskError,
                                   TaskInit, load_tasks, parse_goal, parse_tasks)
from saycan_ros.core.world import SymbolicWorld

DEMO = "I spilled my coke, can you bring me something to clean it up?"
# The checkout's own files (not whatever config dir an installed saycan_ros resolves to).
CONFIG = Path(__file__).resolve().parents[2] / "config"


@pytest.fixture(scope="module")
def public_tasks(kitchen):
    return load_tasks(CONFIG / "tasks.yaml", kitchen)


@pytest.fixture(scope="module")
def extra_tasks(kitchen):
    return load_tasks(CONFIG / "tasks_extra.yaml", kitchen)


def replay(task: Task, plan: list[str], kitchen, skills) -> SymbolicWorld:
    world = SymbolicWorld(kitchen, task.init)
    for text in plan + ["done"]:
        outcome = world.execute(skills.get(text))
        assert outcome.success, f"{task.id}: {text!r} failed on replay: {outcome.message}"
    return world


def _norm(text: str) -> str:
    return re.sub(r"[^a-z0-9 ]", "", " ".join(text.lower().split()))


def check_task_file_shape(tasks, id_pattern: str, families, min_tasks: int,
                          min_per_family: int = 10) -> None:
    """Enough tasks, unique ids matching ``id_pattern``, exactly ``families``, each well covered
    (shared by the test sets and the development set)."""
    assert len(tasks) >= min_tasks
    ids = [t.id for t in tasks]
    assert len(ids) == len(set(ids)), [i for i, n in Counter(ids).items() if n > 1]
    assert all(re.fullmatch(id_pattern, i) for i in ids), ids
    counts = Counter(t.family for t in tasks)
    assert set(counts) == set(families), counts
    for family in families:
        assert counts[family] >= min_per_family, (family, counts[family])


# -- the public task set ---------------------------------------------------------------------------
def test_public_file_has_enough_tasks_of_every_family(public_tasks):
    check_task_file_shape(public_tasks, r"t\d{3}", FAMILIES, min_tasks=100)


def test_public_texts_do_not_copy_the_prompt(public_tasks):
    prompt = yaml.safe_load((CONFIG / "prompt.yaml").read_text(encoding="utf-8"))
    examples = {_norm(e["instruction"]) for e in prompt["examples"]}
    examples.add(_norm(DEMO))
    copied = [t.id for t in public_tasks if _norm(t.text) in examples]
    assert not copied, f"tasks copying a prompt example or the demo: {copied}"


def test_public_texts_are_distinct(public_tasks):
    """A text may repeat only with a different start state (embodiment)."""
    seen = Counter((t.text, repr(t.init.to_mapping())) for t in public_tasks)
    assert all(n == 1 for n in seen.values()), [k for k, n in seen.items() if n > 1]


def test_embodiment_tasks_vary_the_start(public_tasks):
    emb = [t.init for t in public_tasks if t.family == "embodiment"]
    assert sum(i.holding is not None for i in emb) >= 5
    assert sum(bool(i.absent) for i in emb) >= 3
    assert sum(i.robot_at is not None for i in emb) >= 8
    assert sum(bool(i.objects) for i in emb) >= 2


def test_init_states_are_varied(public_tasks):
    inits = [t.init for t in public_tasks]
    assert len({i.robot_at for i in inits}) >= 5      # every location plus the default
    assert sum(i.holding is not None for i in inits) >= 8
    assert sum(bool(i.objects) for i in inits) >= 8
    assert sum(bool(i.absent) for i in inits) >= 4


def check_solvable(tasks, kitchen, skills) -> dict[str, int]:
    """Every task is not yet done at its start and reached by the solver's plan within
    MAX_PLAN_SKILLS skills (replayed); returns each task's plan length."""
    problems, lengths = [], {}
    for task in tasks:
        start = SymbolicWorld(kitchen, task.init)
        if task.goal.holds(start):
            problems.append(f"{task.id}: goal already holds at the start")
            continue
        plan = find_plan(task, kitchen, skills)
        if plan is None:
            problems.append(f"{task.id}: no plan within {MAX_PLAN_SKILLS} skills")
            continue
        if not task.goal.holds(replay(task, plan, kitchen, skills)):
            problems.append(f"{task.id}: plan {plan} does not reach the goal")
            continue
        lengths[task.id] = len(plan)
    assert not problems, "\n".join(problems)
    return lengths


def test_every_public_task_is_solvable_and_not_trivial(public_tasks, kitchen, skills):
    lengths = check_solvable(public_tasks, kitchen, skills)
    by_id = {t.id: t for t in public_tasks}
    # the families keep their character
    for tid, n in lengths.items():
        if by_id[tid].family == "nl_single":
            assert n <= 2, (tid, n)
    long = [n for tid, n in lengths.items() if by_id[tid].family == "long_horizon"]
    assert min(long) >= 7 and sum(n >= 10 for n in long) >= 8, long


def test_solver_finds_shortest_plans(public_tasks, kitchen, skills):
    by_id = {t.id: t for t in public_tasks}
    assert solve(by_id["t016"], kitchen, skills) == [  # the orange is on the table, by the robot
        "pick up the orange", "bring it to you", "put down the orange"]
    assert solve(by_id["t091"], kitchen, skills) == find_plan(by_id["t091"], kitchen, skills)
    assert solve(by_id["t067"], kitchen, skills) == ["put down the coke can"]
    assert solve(by_id["t070"], kitchen, skills)[0] == "put down the orange"
    unsolvable = Task("u1", "embodiment", "Bring me an apple.", TaskInit(absent=("apple",)),
                      parse_goal("at(apple, user)", load_kitchen()))
    assert solve(unsolvable, kitchen, skills) is None
    assert find_plan(unsolvable, kitchen, skills) is None
    assert len(solve(by_id["t096"], kitchen, skills)) == 15     # 4 objects off the table


def test_goal_terms(kitchen):
    terms = goal_terms(parse_goal("and(or(at(apple, user), at(orange, user)), "
                                  "not(at(sponge, user)), robot_at(table))", kitchen))
    assert terms == [frozenset({"apple"}), frozenset({"orange"})]
    terms = goal_terms(parse_goal("atleast(2, at(coke can, user), at(pepsi can, user), "
                                  "holding(apple))", kitchen))
    assert sorted(map(sorted, terms)) == [["apple", "coke can"], ["apple", "pepsi can"],
                                          ["coke can", "pepsi can"]]


# -- the extra task set ----------------------------------------------------------------------------
def test_extra_file_loads(extra_tasks, public_tasks):
    counts = Counter(t.family for t in extra_tasks)
    assert counts == {"multilingual": 12, "negation": 8}
    ids = [t.id for t in extra_tasks]
    assert len(ids) == len(set(ids))
    assert not set(ids) & {t.id for t in public_tasks}
    multilingual = [t.text for t in extra_tasks if t.family == "multilingual"]
    assert any(re.search(r"[\u4e00-\u9fff]", t) for t in multilingual)      # Chinese
    assert any(re.search(r"[áéíóúñ¿¡]", t) for t in multilingual)          # Spanish/French
    negation = [t for t in extra_tasks if t.family == "negation"]
    assert all("not(" in t.goal.text for t in negation)


def test_every_extra_task_is_solvable_and_not_trivial(extra_tasks, kitchen, skills):
    check_solvable(extra_tasks, kitchen, skills)


# -- parser errors -----------------------------------------------------------------------------------
def _doc(**changes) -> dict:
    """Three valid tasks; ``changes`` replace keys of the second (None removes the key)."""
    items = [
        {"id": "a1", "family": "nl_single", "text": "Pick up the apple.", "goal": "holding(apple)"},
        {"id": "a2", "family": "nl_nouns", "text": "Bring me a fruit.",
         "init": {"robot_at": "close counter"}, "goal": "or(at(apple, user), at(orange, user))"},
        {"id": "a3", "family": "nl_verbs", "text": "Throw away the sponge.",
         "goal": "at(sponge, trash can)"},
    ]
    for key, value in changes.items():
        if value is None:
            items[1].pop(key, None)
        else:
            items[1][key] = value
    return {"instructions": items}


def _error(data, kitchen) -> str:
    with pytest.raises(TaskError) as info:
        parse_tasks(data, kitchen, "tasks_under_test.yaml")
    return str(info.value)


def test_valid_document_parses(kitchen):
    tasks = parse_tasks(_doc(), kitchen, "x.yaml")
    assert [t.id for t in tasks] == ["a1", "a2", "a3"]
    assert tasks[1].init.robot_at == "close counter"
    assert tasks[0].init == TaskInit()


@pytest.mark.parametrize("changes, fragments", [
    ({"colour": "red"}, ["unknown keys", "colour"]),
    ({"goal": None}, ["missing 'goal'"]),
    ({"text": None}, ["missing 'text'"]),
    ({"family": None}, ["missing 'family'"]),
    ({"family": "Nouns"}, ["family", "lower-case"]),
    ({"init": {"robot_at": "garage"}}, ["init", "unknown location 'garage'"]),
    ({"init": {"holding": "banana"}}, ["init", "unknown object 'banana'"]),
    ({"init": {"objects": {"banana": "table"}}}, ["init", "unknown object 'banana'"]),
    ({"init": {"objects": {"apple": "garage"}}}, ["init", "unknown location 'garage'"]),
    ({"init": {"absent": ["banana"]}}, ["init", "unknown object 'banana'"]),
    ({"init": {"absent": "apple"}}, ["absent", "list"]),
    ({"init": {"objects": ["apple"]}}, ["objects", "object -> location"]),
    ({"init": {"teleport": True}}, ["unknown keys", "teleport"]),
    ({"init": "table"}, ["init must be a mapping"]),
    ({"init": {"holding": "apple", "absent": ["apple"]}}, ["'apple'", "both held and absent"]),
    ({"goal": "at(banana, user)"}, ["unknown object 'banana'"]),
    ({"goal": "at(apple, garage)"}, ["unknown location 'garage'"]),
    ({"goal": "robot_at(garage)"}, ["unknown location 'garage'"]),
    ({"goal": "holding(banana)"}, ["unknown object 'banana'"]),
    ({"goal": "and(at(apple, user)"}, ["expected ')'"]),
    ({"goal": "at(apple, user))"}, ["unexpected text after the goal"]),
    ({"goal": "at apple, user)"}, ["expected '('"]),
    ({"goal": "near(apple, user)"}, ["unknown goal 'near'"]),
    ({"goal": "atleast(3, at(apple, user), at(orange, user))"}, ["atleast(3, ...)", "only 2"]),
    ({"goal": "atleast(two, at(apple, user))"}, ["whole number", "'two'"]),
    ({"goal": "not(at(apple, user), at(orange, user))"}, ["exactly one"]),
    ({"goal": "and()"}, ["expected a name"]),
    ({"goal": "at(apple, user, table)"}, ["expected ')'"]),
    ({"goal": "   "}, ["goal must be a non-empty string"]),
    ({"text": ""}, ["instruction is empty"]),
    ({"text": " \t\n "}, ["instruction is empty"]),
    ({"text": "x" * (MAX_INSTRUCTION_CHARS + 1)}, [f"limit is {MAX_INSTRUCTION_CHARS}"]),
    ({"text": 42}, ["instruction must be text"]),
])
def test_errors_name_the_task_and_position(kitchen, changes, fragments):
    message = _error(_doc(**changes), kitchen)
    assert "tasks_under_test.yaml" in message
    assert "instructions[1]" in message and "a2" in message, message
    for fragment in fragments:
        assert fragment in message, (fragment, message)


def test_text_at_the_limit_is_accepted(kitchen):
    tasks = parse_tasks(_doc(text="y" * MAX_INSTRUCTION_CHARS), kitchen)
    assert len(tasks[1].text) == MAX_INSTRUCTION_CHARS


def test_goal_error_says_where(kitchen):
    message = _error(_doc(goal="and(at(apple, user), at(banana, user))"), kitchen)
    assert "at character 24" in message


def test_missing_id_names_the_position(kitchen):
    message = _error(_doc(id=None), kitchen)
    assert "instructions[1]" in message and "missing 'id'" in message


def test_duplicate_id(kitchen):
    data = _doc(id="a1")
    message = _error(data, kitchen)
    assert "instructions[1]" in message and "a1" in message and "duplicate id" in message


def test_task_that_is_not_a_mapping(kitchen):
    data = _doc()
    data["instructions"][1] = "Pick up the apple."
    message = _error(data, kitchen)
    assert "instructions[1]" in message and "expected a mapping" in message


@pytest.mark.parametrize("data", [None, [], {"tasks": []}, {"instructions": []},
                                  {"instructions": {"id": "a1"}}])
def test_bad_top_level(kitchen, data):
    message = _error(data, kitchen)
    assert "tasks_under_test.yaml" in message and "instructions" in message


def test_malformed_yaml_file(kitchen, tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("instructions:\n- {id: a1, family: nl_single, text: [unclosed\n",
                    encoding="utf-8")
    with pytest.raises(TaskError) as info:
        load_tasks(path, kitchen)
    assert "broken.yaml" in str(info.value) and "invalid YAML" in str(info.value)


def test_missing_file(kitchen, tmp_path):
    with pytest.raises(TaskError, match="not found"):
        load_tasks(tmp_path / "nowhere.yaml", kitchen)


def test_load_from_a_path(kitchen, tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(_doc()), encoding="utf-8")
    assert [t.id for t in load_tasks(path, kitchen)] == ["a1", "a2", "a3"]
    assert len(load_tasks(str(CONFIG / "tasks.yaml"), kitchen)) >= 100


def test_error_in_a_loaded_file_names_the_file_and_task(kitchen, tmp_path):
    path = tmp_path / "bad_goal.yaml"
    path.write_text(yaml.safe_dump(_doc(goal="or(at(apple, user)")), encoding="utf-8")
    with pytest.raises(TaskError) as info:
        load_tasks(path, kitchen)
    message = str(info.value)
    assert "bad_goal.yaml" in message and "instructions[1] (id a2)" in message


@pytest.mark.parametrize("bad_id", ["", "   ", None])
def test_empty_id_is_rejected(kitchen, bad_id):
    """BUG (saycan_ros/core/tasks.py, parse_tasks): an id of "" / whitespace / null is accepted
    (``str(item.get("id", ""))`` turns null into the id "None"; an empty id passes because only
    a *missing* key is checked). Results and reports cannot name such a task."""
    data = _doc(id="x")
    data["instructions"][1]["id"] = bad_id
    try:
        tasks = parse_tasks(data, kitchen, "tasks_under_test.yaml")
    except TaskError as exc:
        assert "instructions[1]" in str(exc)
    else:
        pytest.fail(f"id {bad_id!r} accepted as {tasks[1].id!r}; expected a TaskError naming "
                    f"instructions[1]")


@pytest.mark.parametrize("init, obj", [
    ({"objects": {"apple": "table"}, "absent": ["apple"]}, "apple"),
    ({"holding": "orange", "objects": {"orange": "far counter"}}, "orange"),
])
def test_contradictory_init_is_rejected(kitchen, init, obj):
    """BUG (saycan_ros/core/tasks.py, TaskInit.from_mapping): like held+absent (rejected), an object
    both placed by ``objects`` and listed ``absent`` (or also ``holding``) is a contradiction, but
    it is accepted silently and one of the two is dropped by ``scene()``."""
    try:
        parse_tasks(_doc(init=init), kitchen, "tasks_under_test.yaml")
    except TaskError as exc:
        assert "instructions[1]" in str(exc) and "a2" in str(exc) and obj in str(exc)
    else:
        pytest.fail(f"contradictory init {init} accepted; expected a TaskError naming {obj!r}")


def test_init_none_means_nothing_held(kitchen):
    for holding in (None, "none", ""):
        init = TaskInit.from_mapping({"holding": holding}, kitchen)
        assert init.holding is None
    assert TaskInit.from_mapping(None, kitchen) == TaskInit()


def test_init_scene_and_round_trip(kitchen):
    init = TaskInit.from_mapping({"robot_at": "user", "holding": "apple",
                                  "objects": {"sponge": "table"},
                                  "absent": ["coke can"]}, kitchen)
    scene = init.scene(kitchen)
    assert scene["apple"] == GRIPPER and scene["sponge"] == "table"
    assert "coke can" not in scene and scene["pepsi can"] == "far counter"
    assert TaskInit.from_mapping(init.to_mapping(), kitchen) == init


# -- the goal checker --------------------------------------------------------------------------------
def _world(kitchen, skills, *steps, **init) -> SymbolicWorld:
    world = SymbolicWorld(kitchen, TaskInit.from_mapping(init or None, kitchen))
    for text in steps:
        assert world.execute(skills.get(text)).success, text
    return world


def _holds(kitchen, goal: str, state) -> bool:
    return parse_goal(goal, kitchen).holds(state)


def test_goal_at(kitchen, skills):
    world = _world(kitchen, skills, "find an apple", "pick up the apple", "bring it to you",
                   "put down the apple")
    assert _holds(kitchen, "at(apple, user)", world)
    assert not _holds(kitchen, "at(apple, far counter)", world)
    assert _holds(kitchen, "at(orange, table)", world)
    held = _world(kitchen, skills, "pick up the orange")
    assert _holds(kitchen, "at(orange, gripper)", held)
    assert not _holds(kitchen, "at(orange, table)", held)
    absent = _world(kitchen, skills, absent=["apple"])
    assert not _holds(kitchen, "at(apple, far counter)", absent)


def test_goal_holding(kitchen, skills):
    empty = _world(kitchen, skills)
    held = _world(kitchen, skills, "pick up the green tea")
    assert _holds(kitchen, "holding(none)", empty)
    assert not _holds(kitchen, "holding(none)", held)
    assert _holds(kitchen, "holding(green tea)", held)
    assert not _holds(kitchen, "holding(redbull can)", held)
    assert not _holds(kitchen, "holding(green tea)", empty)
    assert _holds(kitchen, "holding(sponge)", _world(kitchen, skills, holding="sponge"))


def test_goal_robot_at(kitchen, skills):
    world = _world(kitchen, skills, "go to the trash can")
    assert _holds(kitchen, "robot_at(trash can)", world)
    assert not _holds(kitchen, "robot_at(table)", world)
    assert _holds(kitchen, "robot_at(user)", _world(kitchen, skills, "bring it to you"))
    assert _holds(kitchen, "robot_at(close counter)", _world(kitchen, skills,
                                                             robot_at="close counter"))


def test_goal_and_or_not(kitchen, skills):
    world = _world(kitchen, skills, "pick up the orange", "bring it to you")
    assert _holds(kitchen, "and(holding(orange), robot_at(user))", world)
    assert not _holds(kitchen, "and(holding(orange), robot_at(table))", world)
    assert _holds(kitchen, "and(holding(orange))", world)
    assert _holds(kitchen, "or(holding(apple), robot_at(user))", world)
    assert not _holds(kitchen, "or(holding(apple), robot_at(table))", world)
    assert _holds(kitchen, "not(holding(none))", world)
    assert not _holds(kitchen, "not(robot_at(user))", world)
    assert _holds(kitchen, "not(not(holding(orange)))", world)
    assert _holds(kitchen, "and(or(holding(apple), holding(orange)), not(at(orange, table)))",
                  world)


def test_goal_atleast(kitchen, skills):
    world = _world(kitchen, skills, "find a coke can", "pick up the coke can", "bring it to you",
                   "put down the coke can", "find a pepsi can", "pick up the pepsi can",
                   "bring it to you", "put down the pepsi can")
    sodas = "at(coke can, user), at(pepsi can, user), at(7up can, user)"
    assert _holds(kitchen, f"atleast(2, {sodas})", world)
    assert not _holds(kitchen, f"atleast(3, {sodas})", world)
    assert _holds(kitchen, f"atleast(1, {sodas})", world)
    assert _holds(kitchen, f"atleast(0, {sodas})", _world(kitchen, skills))
    goal = parse_goal(f"atleast(2, {sodas})", kitchen)
    assert goal.op == "atleast" and goal.args[0] == 2 and len(goal.args) == 4


def test_goal_on_a_snapshot(kitchen, skills):
    snap = _world(kitchen, skills, "pick up the orange").snapshot()
    assert _holds(kitchen, "and(holding(orange), at(orange, gripper), robot_at(table))", snap)


def test_goal_parse_structure_and_whitespace(kitchen):
    goal = parse_goal("  and( at(coke can , user) ,holding(none) )  ", kitchen)
    assert goal.op == "and"
    assert goal.args[0] == GoalExpr("at", ("coke can", "user"))
    assert goal.args[1] == GoalExpr("holding", (None,))
    assert goal.text.strip().startswith("and(")


def test_a_task_may_expect_the_plan_to_be_rejected(kitchen):
    items = [{"id": "r1", "family": "no_skill", "text": "Open the fridge.", "expect": "rejected"}]
    task, = parse_tasks({"instructions": items}, kitchen, "x.yaml")
    assert (task.expect, task.goal) == ("rejected", None)
    assert parse_tasks(_doc(), kitchen)[0].expect == "done"
    assert "has no goal" in _error({"instructions": [{**items[0], "goal": "holding(apple)"}]},
                                   kitchen)
    assert "expect must be one of done, rejected" in _error(
        {"instructions": [{**items[0], "expect": "refused"}]}, kitchen)
    assert "missing 'goal'" in _error({"instructions": [{**items[0], "expect": "done"}]}, kitchen)
