"""Shortest plans over the symbolic world: the oracle behind the task checks and the report's
failure attribution.

A search only moves the objects that can matter (the ones the goal names, or one alternative's
of an ``or(...)``/``atleast(...)`` goal, plus the one in hand); navigation is always allowed.
Other objects never need to move, so this keeps the search small without making plans longer.

- :func:`solve`: a shortest plan from a task's start (or any state);
- :func:`find_plan`: some plan, fast on wide ``or(...)`` goals;
- :func:`right_next_skills`: every skill that begins a shortest plan from a state.
"""
from __future__ import annotations

import itertools
from collections import deque
from typing import Iterable

from saycan_ros.core.kitchen import GRIPPER, Kitchen
from saycan_ros.core.skills import NAVIGATIONS, Skill, SkillSet
from saycan_ros.core.tasks import GoalExpr, Task
from saycan_ros.core.world import SymbolicWorld

#: The longest plan searched (+ ``done`` = the planner's default ``max_steps`` of 20).
MAX_PLAN_SKILLS = 19
#: At most this many goal alternatives are searched one by one.
MAX_TERMS = 200
#: At most this many states are expanded by one search (a search that runs out finds nothing).
MAX_EXPANDED_STATES = 200_000

_WORLD_CHANGING = (*NAVIGATIONS, "pick", "place")


# -- goals ------------------------------------------------------------------------------------
def goal_objects(goal: GoalExpr) -> set[str]:
    """Every object a goal names."""
    if goal.op == "at":
        return {goal.args[0]}
    if goal.op == "holding":
        return {goal.args[0]} - {None}
    if goal.op == "robot_at":
        return set()
    return set().union(*(goal_objects(a) for a in goal.args if isinstance(a, GoalExpr)))


def negated_objects(goal: GoalExpr) -> set[str]:
    """The objects named inside ``not(...)``: moving them may be needed to satisfy the goal."""
    if goal.op == "not":
        return goal_objects(goal.args[0])
    return set().union(*(negated_objects(a) for a in goal.args if isinstance(a, GoalExpr)))


def goal_terms(goal: GoalExpr) -> list[frozenset[str]]:
    """The object sets of the goal's alternatives (or / atleast expanded; not() adds nothing)."""
    if goal.op in ("at", "holding"):
        return [frozenset({goal.args[0]} - {None})]
    if goal.op in ("robot_at", "not"):
        return [frozenset()]
    if goal.op == "or":
        return list(dict.fromkeys(t for a in goal.args for t in goal_terms(a)))
    if goal.op == "atleast":
        n, subs = goal.args[0], goal.args[1:]
        return list(dict.fromkeys(t for combo in itertools.combinations(subs, n)
                                  for t in goal_terms(GoalExpr("and", combo))))
    out = [frozenset()]
    for part in goal.args:                                   # and(...)
        out = list(dict.fromkeys(a | b for a in out for b in goal_terms(part)))
    return out


# -- worlds -----------------------------------------------------------------------------------
def start_world(task: Task, kitchen: Kitchen) -> SymbolicWorld:
    """The symbolic world at the task's start."""
    return SymbolicWorld(kitchen, task.init)


def clone_world(world: SymbolicWorld) -> SymbolicWorld:
    """An independent copy of ``world`` (skills run on it leave ``world`` untouched)."""
    clone = object.__new__(type(world))
    clone.__dict__.update(world.__dict__)
    clone.objects = dict(world.objects)
    return clone


def _held(world: SymbolicWorld) -> set[str]:
    return {world.holding} - {None}


#: A search state: (robot location, held object or None, locations of the searched objects).
State = tuple


class _SkillEffects:
    """What each skill does, learned from :class:`SymbolicWorld` itself and cached.

    A skill reads and changes only the robot's location, the hand and its own object's location
    (the world's semantics), so its effect is looked up by exactly those. ``base`` gives the
    locations of the objects a search does not track (they move only by being picked up, and
    a held object is at the gripper)."""

    def __init__(self, base: SymbolicWorld, tracked: Iterable[str]):
        self.base = base
        self.order = sorted(tracked)
        self.index = {name: i for i, name in enumerate(self.order)}
        self._scratch = clone_world(base)
        self._cache: dict[tuple, tuple | None] = {}

    def state_of(self, world: SymbolicWorld) -> State:
        return (world.robot_at, world.holding, tuple(world.objects.get(o) for o in self.order))

    def location(self, state: State, name: str) -> str | None:
        """Where ``name`` is in ``state``."""
        if name == state[1]:
            return GRIPPER
        i = self.index.get(name)
        return state[2][i] if i is not None else self.base.objects.get(name)

    def after(self, state: State, skill: Skill) -> State | None:
        """The state after ``skill``, or None when it fails."""
        robot_at, holding, locations = state
        where = self.location(state, skill.object) if skill.object is not None else None
        key = (skill.text, robot_at, holding, where)
        if key not in self._cache:
            self._cache[key] = self._run(skill, robot_at, holding, where)
        effect = self._cache[key]
        if effect is None:
            return None
        robot_at, holding, where = effect
        i = self.index.get(skill.object)
        if i is not None and locations[i] != where:
            locations = locations[:i] + (where,) + locations[i + 1:]
        return robot_at, holding, locations

    def _run(self, skill: Skill, robot_at: str, holding: str | None, where: str | None):
        world = self._scratch
        world.robot_at, world.holding = robot_at, holding
        world.objects = dict(self.base.objects)
        if holding is not None:
            world.objects[holding] = GRIPPER
        if skill.object is not None:
            world.objects.pop(skill.object, None)
            if where is not None:
                world.objects[skill.object] = where
        if not world.execute(skill).success:
            return None
        return world.robot_at, world.holding, (world.objects.get(skill.object)
                                               if skill.object is not None else None)

    def goal_holds(self, goal: GoalExpr, state: State) -> bool:
        return goal.holds(_StateView(self, state))


class _StateView:
    """A search state as the goal checker reads it (``object_location``, ``holding``,
    ``robot_at``)."""
    __slots__ = ("_effects", "_state", "robot_at", "holding")

    def __init__(self, effects: _SkillEffects, state: State):
        self._effects, self._state = effects, state
        self.robot_at, self.holding = state[0], state[1]

    def object_location(self, name: str) -> str | None:
        return self._effects.location(self._state, name)


def _search_skills(skills: SkillSet, relevant: set[str]) -> list[Skill]:
    """The skills a search tries, in registry order: ``go to`` every location, and ``find``,
    pick and place of ``relevant`` objects (every location has a ``go to``, so finding another
    object never reaches a new state)."""
    return [s for s in skills if s.kind in _WORLD_CHANGING
            and (s.object is None or s.object in relevant)]


def _successors(effects: _SkillEffects, state: State, candidates: list[Skill],
                every_skill: bool = True):
    """(skill, state after it) for each candidate skill that succeeds in ``state``.

    Unless ``every_skill``, a navigation skill is skipped when it leads where the robot is or
    where an earlier one led (its state would be the same)."""
    reached = {state[0]}
    for skill in candidates:
        nxt = effects.after(state, skill)
        if nxt is None:
            continue
        if not every_skill and skill.kind in NAVIGATIONS:
            if nxt[0] in reached:
                continue
            reached.add(nxt[0])
        yield skill, nxt


# -- shortest plans ---------------------------------------------------------------------------
def shortest_plan(goal: GoalExpr, start: SymbolicWorld, relevant: Iterable[str],
                  skills: SkillSet, max_depth: int = MAX_PLAN_SKILLS) -> list[str] | None:
    """A shortest plan (skill texts, without ``done``) from ``start`` to ``goal`` that picks and
    places only ``relevant`` objects, or None within ``max_depth`` skills (or
    :data:`MAX_EXPANDED_STATES`). ``start`` is not changed."""
    relevant = set(relevant)
    candidates = _search_skills(skills, relevant)
    effects = _SkillEffects(start, relevant)
    first = effects.state_of(start)
    if goal.holds(start):
        return []
    frontier = deque([(first, ())])
    seen = {first}
    expanded = 0
    while frontier and expanded < MAX_EXPANDED_STATES:
        state, plan = frontier.popleft()
        expanded += 1
        if len(plan) >= max_depth:
            continue
        for skill, nxt in _successors(effects, state, candidates, every_skill=False):
            if nxt in seen:
                continue
            seen.add(nxt)
            new_plan = plan + (skill.text,)
            if effects.goal_holds(goal, nxt):
                return list(new_plan)
            frontier.append((nxt, new_plan))
    return None


def solve(task: Task, kitchen: Kitchen, skills: SkillSet, max_depth: int = MAX_PLAN_SKILLS,
          world: SymbolicWorld | None = None) -> list[str] | None:
    """A shortest plan (skill texts, without ``done``) from ``world`` (default: the task's start)
    reaching the goal, or None.

    Only the skills about the objects the goal names (and the one held) and ``go to`` every
    location are tried: other objects never need to move.
    """
    world = world if world is not None else start_world(task, kitchen)
    return shortest_plan(task.goal, world, goal_objects(task.goal) | _held(world), skills,
                         max_depth)


def find_plan(task: Task, kitchen: Kitchen, skills: SkillSet, max_depth: int = MAX_PLAN_SKILLS,
              world: SymbolicWorld | None = None) -> list[str] | None:
    """Some plan within ``max_depth`` skills (not always the shortest), or None; fast on wide
    or(...) goals: each alternative's objects are searched alone before all of them together."""
    world = world if world is not None else start_world(task, kitchen)
    held = _held(world)
    for term in sorted(goal_terms(task.goal), key=len)[:MAX_TERMS]:
        plan = shortest_plan(task.goal, world, set(term) | held, skills, max_depth)
        if plan is not None:
            return plan
    return solve(task, kitchen, skills, max_depth, world)


# -- the right next skills --------------------------------------------------------------------
def _first_skills_of_shortest_plans(goal: GoalExpr, start: SymbolicWorld, relevant: set[str],
                                    skills: SkillSet, max_depth: int
                                    ) -> tuple[int, set[str]] | None:
    """(length, first skills) of the shortest plans from ``start`` to ``goal`` (goal not yet
    holding) that pick and place only ``relevant`` objects after their first skill, or None
    within ``max_depth`` skills (or :data:`MAX_EXPANDED_STATES`).

    A breadth-first search layer by layer; each state keeps every first skill that reaches it
    at its depth, so no first skill is lost when two plans meet. The first skill may be any
    world-changing skill (e.g. ``find`` of an object the goal does not name, which goes to the
    same place as a ``go to``)."""
    effects = _SkillEffects(start, relevant)
    first_layer_skills = [s for s in skills if s.kind in _WORLD_CHANGING]
    later_skills = _search_skills(skills, relevant)
    layer: dict[State, set[str]] = {effects.state_of(start): set()}
    seen = set(layer)
    expanded = 0
    for depth in range(1, max_depth + 1):
        next_layer: dict[State, set[str]] = {}
        for state, firsts in layer.items():
            expanded += 1
            if expanded > MAX_EXPANDED_STATES:
                return None
            successors = (_successors(effects, state, first_layer_skills) if depth == 1
                          else _successors(effects, state, later_skills, every_skill=False))
            for skill, nxt in successors:
                if nxt in seen:
                    continue
                next_layer.setdefault(nxt, set()).update(firsts if depth > 1 else (skill.text,))
        if not next_layer:
            return None
        winners = [firsts for state, firsts in next_layer.items()
                   if effects.goal_holds(goal, state)]
        if winners:
            return depth, set().union(*winners)
        seen.update(next_layer)
        layer = next_layer
    return None


def right_next_skills(task: Task, world: SymbolicWorld, skills: SkillSet, kitchen: Kitchen,
                      max_depth: int = MAX_PLAN_SKILLS) -> set[str]:
    """The skills that begin some shortest plan from ``world`` to the task's goal: ``{"done"}``
    (the terminate skill) when the goal already holds; empty when no plan of at most
    ``max_depth`` skills exists. ``world`` is not changed.

    Each alternative of the goal (:func:`goal_terms`, at most :data:`MAX_TERMS`, with the objects
    under ``not(...)`` and the one held) is searched alone, never deeper than the shortest found
    so far; the first skills of the shortest alternatives are united. If no alternative reaches
    the goal, all the goal's objects are searched together.
    """
    del kitchen  # the world carries its kitchen; kept for a uniform signature
    if task.goal is None:      # an impossible request: no skill is right
        return set()
    if task.goal.holds(world):
        return {skills.terminate.text}
    always = negated_objects(task.goal) | _held(world)
    best_depth, best_firsts = max_depth + 1, set()
    for term in sorted(goal_terms(task.goal), key=len)[:MAX_TERMS]:
        found = _first_skills_of_shortest_plans(task.goal, world, set(term) | always, skills,
                                                min(best_depth, max_depth))
        if found is None:
            continue
        depth, firsts = found
        if depth < best_depth:
            best_depth, best_firsts = depth, set(firsts)
        elif depth == best_depth:
            best_firsts |= firsts
    if best_firsts:
        return best_firsts
    found = _first_skills_of_shortest_plans(task.goal, world, goal_objects(task.goal) | always,
                                            skills, max_depth)
    return found[1] if found is not None else set()
