"""Synthetic planning dialogues over this kitchen: the planner adapter's training data.

Each :class:`Dialogue` is an instruction (from the templates and vocabulary of
``config/planner_data.yaml`` and ``config/planner_languages.yaml``), a random start state, the
goal a rater would accept, and the plan: the symbolic solver's shortest plan from that start to
the goal, one sub-goal after the other in the order the instruction names them, ending in
``done``. Every plan is replayed on the symbolic world before it is kept, and an instruction
equal to one of ``exclude`` (the test sets, compared lower-cased without punctuation) is never
produced.

The families follow the paper's seven plus negation, counting and other languages; start states
vary the robot's place, what it holds, and which objects were moved or are missing, so the
model learns to read the scene line (:mod:`saycan_ros.planning.scene`). With
``scene_refresh`` the scene line is read again after each put-down, as the planner then sends
it (``Planner(refresh_scene=True)``, prompt ``scene: step``).
"""
from __future__ import annotations

import random
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from saycan_ros.core.config import ConfigError, load_yaml
from saycan_ros.core.kitchen import GRIPPER, USER, Kitchen
from saycan_ros.planning.scene import changes_scene, scene_of
from saycan_ros.core.skills import SkillSet
from saycan_ros.core.solver import MAX_PLAN_SKILLS
from saycan_ros.core.tasks import GoalExpr, TaskError, TaskInit, parse_goal
from saycan_ros.core.world import SymbolicWorld

#: Families and how often each is drawn (the mix of the training set).
#: Version 2 moved weight to what version 1's adapter got wrong on the development set: single
#: primitives that must stop (pick / find / go / put down), counting, negation, other languages.
FAMILY_WEIGHTS: dict[str, float] = {
    "nl_single": 0.11, "nl_nouns": 0.10, "nl_verbs": 0.07, "structured": 0.05,
    "embodiment": 0.08, "crowd": 0.08, "long_horizon": 0.15, "negation": 0.12,
    "counting": 0.10, "multilingual": 0.14,
    # Drawn only where a run's ``family_weights`` asks for them (issue 40): a definite request
    # with several readings in the scene (the plan follows one at random, so the model learns to
    # spread its probability over them), and a request nothing in the kitchen can do (the plan is
    # "done" at once).
    "ambiguous": 0.0, "impossible": 0.0,
}
#: How the plan of a request that any of several objects fulfils picks one: ``random`` (the
#: model learns the category and spreads its probability) or ``first`` (the first of them in the
#: scene line, so the model is sure where any will do and unsure only where the words are).
ANY_READINGS = ("random", "first")
#: Bumped whenever the generator's output for a seed changes (recorded with the adapter).
#: Version 3: sentences of two or three parts of any kind ("take A and B to the table, then
#: bring me C"), exclusions of two categories and by what the person avoids, more ways to say
#: a need. Version 4: ``builtin_share`` of a many-kitchen mix counts dialogues (it counted draws,
#: and a random kitchen gives ``per_kitchen`` dialogues a draw: 0.65 gave 32% built-in).
#: Version 5: a request about the held object is to take it somewhere as often as the other
#: three kinds together, and names it as held ("the mug you're holding"): every adapter put it
#: down where the robot stood (about 8 such dialogues in 2,000).
DATA_VERSION = 5
#: The requests about the held object, weighted: taking it to a place needs two steps before
#: the put-down that the model must not jump to.
HELD_REQUESTS = ("drop_held", "deliver_held", "throw_held", "move_held", "move_held", "move_held")


#: The sentence templates the generator draws (``templates`` of config/planner_data.yaml).
TEMPLATE_KINDS = frozenset({
    "bring", "throw", "move", "pick", "go", "come", "find", "drop_held", "deliver_held",
    "throw_held", "move_held", "then", "then3", "bring_many", "throw_many", "move_many",
    "bring_all", "bring_all_at", "throw_all", "throw_all_at", "move_all_at", "clear_at",
    "bring_everything_at", "swap", "count_bring", "count_throw", "count_move", "neg_bring",
    "neg_neither", "neg_avoid", "neg_throw_all", "neg_move", "bring_two_kinds", "numbers"})


def normalise(text: str) -> str:
    """Lower-cased letters and digits of any script, single spaces (for the overlap check)."""
    kept = "".join(c if unicodedata.category(c)[0] in "LN" else " " for c in text.lower())
    return " ".join(kept.split())


@dataclass(frozen=True)
class Dialogue:
    instruction: str
    family: str
    language: str
    init: TaskInit
    goal: GoalExpr | None             # None: an impossible request (the plan is "done" at once)
    steps: tuple[str, ...]            # skill texts, ending in done
    scenes: tuple[str, ...]           # the scene line before each step (scenes[0]: the start)
    kitchen: str = "home"             # home: the run's own kitchen; random: a drawn one

    @property
    def scene(self) -> str:
        """The scene line when the instruction was given."""
        return self.scenes[0]


@dataclass
class Lexicon:
    """``config/planner_data.yaml`` (+ the languages file), checked against the kitchen."""
    objects: dict[str, dict]
    categories: dict[str, dict]
    locations: dict[str, list[str]]
    needs: dict[str, list[str]]
    templates: dict[str, list]
    steps: dict[str, list[str]]
    spills: list[str]
    places: list[str]
    languages: dict[str, dict] = field(default_factory=dict)
    #: ``impossible`` of planner_data.yaml: requests for an action no skill does ({x}: a thing
    #: of the kitchen, {loc}: a place), drawn by the ``impossible`` family
    impossible_actions: list[str] = field(default_factory=list)

    def members(self, attribute: str) -> list[str]:
        return [o for o, spec in self.objects.items() if attribute in spec["attributes"]]


def load_lexicon(kitchen: Kitchen, path: str | Path | None = None,
                 languages_path: str | Path | None | bool = None) -> Lexicon:
    """The vocabulary; ``languages_path=False``: English only."""
    data, source = load_yaml(path, default_name="planner_data.yaml")
    try:
        lex = Lexicon(objects=dict(data["objects"]), categories=dict(data["categories"]),
                      locations=dict(data["locations"]), needs=dict(data["needs"]),
                      templates=dict(data["templates"]), steps=dict(data["steps"]),
                      spills=list(data["spills"]), places=list(data["places"]),
                      impossible_actions=impossible_actions(data, source))
    except (KeyError, TypeError) as exc:
        raise ConfigError(f"{source}: missing or malformed section {exc}") from None
    missing_templates = TEMPLATE_KINDS - set(lex.templates)
    if missing_templates:
        raise ConfigError(f"{source}: templates: missing {sorted(missing_templates)}")
    for name, spec in lex.objects.items():
        kitchen.object(name)
        unknown = set(spec["attributes"]) - set(lex.categories)
        if unknown:
            raise ConfigError(f"{source}: object {name!r} has unknown attributes {sorted(unknown)}")
    missing = set(kitchen.objects) - set(lex.objects)
    if missing:
        raise ConfigError(f"{source}: no names for objects {sorted(missing)}")
    for attribute in list(lex.needs) + list(lex.categories):
        if not lex.members(attribute):
            raise ConfigError(f"{source}: category {attribute!r} has no member")
    for location in lex.locations:
        kitchen.location(location)
    if languages_path is not False:
        langs, _ = load_yaml(languages_path, default_name="planner_languages.yaml")
        lex.languages = dict(langs.get("languages") or {})
    return lex


def impossible_actions(data: Mapping, source: str = "planner_data.yaml") -> list[str]:
    """``impossible.actions`` of a planner-data file: request templates (strings), or []."""
    section = data.get("impossible") or {}
    actions = section.get("actions") if isinstance(section, Mapping) else None
    if actions is None and not section:
        return []
    if not isinstance(actions, list) or not all(isinstance(a, str) and a.strip()
                                                for a in actions):
        raise ConfigError(f"{source}: impossible.actions must be a list of request templates "
                          f"(strings), got {actions!r}")
    return list(actions)


class PlanDataGenerator:
    """Draws :class:`Dialogue` s; the same seed gives the same dialogues."""

    def __init__(self, kitchen: Kitchen, skills: SkillSet, lexicon: Lexicon, seed: int = 0,
                 exclude: Iterable[str] = (), scene_refresh: bool = False,
                 family_weights: Mapping[str, float] | None = None, scene_details: bool = False,
                 any_reading: str = "random", missing_names: Iterable[str] = ()):
        if any_reading not in ANY_READINGS:
            raise ValueError(f"any_reading: expected one of {ANY_READINGS}, got {any_reading!r}")
        self.kitchen, self.skills, self.lex = kitchen, skills, lexicon
        self.any_reading = any_reading
        #: names of things this kitchen does not have (the ``impossible`` family asks for them):
        #: none that shares a word with a name of the kitchen ("apple juice" beside an apple)
        known = {w for o in kitchen.objects for n in [o, *lexicon.objects.get(o, {}).get(
            "names", [])] for w in n.lower().split()}
        self.missing_names = sorted({n for n in missing_names
                                     if not set(n.lower().split()) & known})
        self.family_weights = {**FAMILY_WEIGHTS, **(family_weights or {})}   # the training mix
        self.scene_refresh = scene_refresh     # scene lines as Planner(refresh_scene=True) sends
        self.scene_details = scene_details     # ... with what each object is (prompt scene_details)
        self.rng = random.Random(seed)
        self.exclude = {normalise(t) for t in exclude}
        #: where "throw away" leads (a kitchen without one: those requests are never drawn)
        self.trash = kitchen.disposal or "trash can"
        self.places = [loc for loc in kitchen.locations if loc != USER]   # where things stand
        self.shelves = [loc for loc in self.places if loc != self.trash]
        self._makers = {
            "nl_single": self._single, "nl_nouns": self._nouns, "nl_verbs": self._verbs,
            "structured": self._structured, "embodiment": self._embodiment,
            "crowd": self._crowd, "long_horizon": self._long_horizon,
            "negation": self._negation, "counting": self._counting,
            "multilingual": self._multilingual, "ambiguous": self._ambiguous,
            "impossible": self._impossible,
        }

    # -- the public interface ----------------------------------------------------------------
    def dialogues(self, n: int, progress=None) -> list[Dialogue]:
        """``n`` distinct dialogues (instruction and start state), families drawn by
        ``family_weights`` (FAMILY_WEIGHTS unless the constructor was given others)."""
        out, seen, tries = [], set(), 0
        families, weights = zip(*self.family_weights.items())
        while len(out) < n:
            tries += 1
            if tries > 50 * n + 1000:
                raise RuntimeError(f"only {len(out)} of {n} dialogues after {tries} draws")
            family = self.rng.choices(families, weights)[0]
            dialogue = self.draw(family)
            if dialogue is None:
                continue
            key = (normalise(dialogue.instruction), dialogue.scene)
            if key in seen:
                continue
            seen.add(key)
            out.append(dialogue)
            if progress is not None:
                progress.update(1)
        return out

    def draw(self, family: str) -> Dialogue | None:
        """One dialogue of ``family``, or None when the draw gave no usable task."""
        init = self._random_init(family)
        world = SymbolicWorld(self.kitchen, init)
        made = self._makers[family](world)
        if made is None:
            return None
        text, goal_text, items, language = made
        if normalise(text) in self.exclude or not text.strip():
            return None
        if goal_text is None:                # nothing the robot can do: "done" at once
            return Dialogue(text, family, language, init, None, (self.skills.terminate.text,),
                            (scene_of(self.kitchen, world, self.scene_details),))
        try:
            goal = parse_goal(goal_text, self.kitchen)
        except TaskError:        # e.g. "throw away" in a kitchen without a disposal place
            return None
        if goal.holds(world):
            return None
        steps = self._plan(world, items)
        if steps is None or not _replays_to(goal, world, steps, self.skills):
            return None
        steps = tuple(steps) + (self.skills.terminate.text,)
        return Dialogue(text, family, language, init, goal, steps,
                        _scenes_along(self.kitchen, world, steps, self.skills,
                                      self.scene_refresh, self.scene_details))

    # -- start states ------------------------------------------------------------------------
    def _random_init(self, family: str) -> TaskInit:
        rng = self.rng
        objects = list(self.kitchen.objects)
        holding = None
        hold_p = 0.6 if family == "embodiment" else 0.12
        if rng.random() < hold_p:
            holding = rng.choice(objects)
        moved: dict[str, str] = {}
        if rng.random() < 0.35:
            for obj in rng.sample(objects, rng.randint(1, 4)):
                if obj != holding:
                    moved[obj] = rng.choice(self.places if rng.random() < 0.9 else [USER])
        absent: list[str] = []
        if rng.random() < (0.45 if family == "embodiment" else 0.15):
            absent = [o for o in rng.sample(objects, rng.randint(1, 3))
                      if o != holding and o not in moved]
        robot_at = rng.choice(list(self.kitchen.locations))
        return TaskInit(robot_at=robot_at, holding=holding, objects=moved, absent=tuple(absent))

    # -- phrases ------------------------------------------------------------------------------
    def _name(self, obj: str, article: str = "the") -> str:
        name = self.rng.choice(self.lex.objects[obj]["names"])
        if article == "a":
            return f"{self.kitchen.object(obj).article} {name}" if name == obj else (
                f"{'an' if name[0] in 'aeiou' else 'a'} {name}")
        return f"the {name}"

    def _loc(self, location: str) -> str:
        return self.rng.choice(self.lex.locations.get(location) or [location])

    def _fill(self, kind: str, **slots) -> str:
        template = self.rng.choice(self.lex.templates[kind])
        return _format(template, trash=self._loc(self.trash), **slots)

    def _present(self, world: SymbolicWorld, candidates: Iterable[str]) -> list[str]:
        """The candidates that are in the kitchen and not already delivered or thrown away."""
        return [o for o in candidates if world.objects.get(o) not in (None, USER, self.trash)]

    def _category(self, world: SymbolicWorld, min_members: int = 1):
        """(attribute, members present) of a random category with enough present members."""
        attrs = [a for a in self.lex.categories if self.lex.categories[a]["one"]]
        self.rng.shuffle(attrs)
        for attr in attrs:
            members = self._present(world, self.lex.members(attr))
            if len(members) >= min_members:
                return attr, members
        return None

    # -- goal pieces -------------------------------------------------------------------------
    @staticmethod
    def _at(obj: str, loc: str) -> str:
        return f"at({obj}, {loc})"

    @staticmethod
    def _any(objs: Sequence[str], loc: str) -> str:
        terms = [f"at({o}, {loc})" for o in objs]
        return terms[0] if len(terms) == 1 else f"or({', '.join(terms)})"

    @staticmethod
    def _all(goals: Sequence[str]) -> str:
        return goals[0] if len(goals) == 1 else f"and({', '.join(goals)})"

    def _delivery(self, text: str, objs: Sequence[str], dest: str, language: str = "en"):
        """A request for one of ``objs`` (any of them) at ``dest``."""
        return text, self._any(objs, dest), [("deliver", tuple(objs), dest)], language

    # -- families ----------------------------------------------------------------------------
    # Each returns (text, goal, plan items, language) or None. Plan items, in the order the
    # instruction names them: ("deliver", objects, destination) (one of the objects),
    # ("hold", object), ("goto", location), ("find", object), ("drop",).
    def _single(self, world):
        rng = self.rng
        kind = rng.choice(["pick", "go", "come", "find", "drop_held"])
        if kind == "pick":
            obj = rng.choice(self._present(world, self.kitchen.objects))
            if world.holding is not None:
                return None
            return (self._fill("pick", x=self._name(obj)), f"holding({obj})", [("hold", obj)],
                    "en")
        if kind == "go":
            loc = rng.choice(self.kitchen.navigable)
            return (self._fill("go", loc=self._loc(loc)), f"robot_at({loc})", [("goto", loc)],
                    "en")
        if kind == "come":
            return self._fill("come"), f"robot_at({USER})", [("goto", USER)], "en"
        if kind == "find":
            obj = rng.choice(self._present(world, self.kitchen.objects))
            if world.objects.get(obj) == GRIPPER:
                return None
            return (self._fill("find", x=self._name(obj, rng.choice(["a", "the"]))),
                    f"robot_at({world.objects[obj]})", [("find", obj)], "en")
        return self._held_request(world, "drop_held")

    def _held_request(self, world, kind: str):
        held = world.holding
        if held is None:
            return None
        text = self._fill(kind, held=self._name(held), loc="{loc}")
        if kind == "drop_held":
            if world.robot_at in (self.trash, USER):
                return None
            return (text, f"and(holding(none), not(at({held}, {self.trash})))", [("drop",)], "en")
        if kind == "deliver_held":
            return self._delivery(text, [held], USER)
        if kind == "throw_held":
            return self._delivery(text, [held], self.trash)
        loc = self.rng.choice(self.shelves)
        return self._delivery(_format(text, loc=self._loc(loc)), [held], loc)

    def _nouns(self, world):
        found = self._category(world)
        if found is None:
            return None
        attr, members = found
        phrase = self.rng.choice(self.lex.categories[attr]["one"])
        if self.rng.random() < 0.75:
            return self._delivery(self._fill("bring", x=phrase), members, USER)
        loc = self.rng.choice(self.shelves)
        members = [m for m in members if world.objects.get(m) != loc]
        if not members:
            return None
        return self._delivery(self._fill("move", x=phrase, loc=self._loc(loc)), members, loc)

    def _verbs(self, world):
        obj = self.rng.choice(self._present(world, self.kitchen.objects))
        kind = self.rng.choice(["bring", "bring", "throw", "move", "move"])
        x = self._name(obj, "the" if kind != "bring" or self.rng.random() < 0.6 else "a")
        if kind == "bring":
            return self._delivery(self._fill("bring", x=x), [obj], USER)
        if kind == "throw":
            return self._delivery(self._fill("throw", x=x), [obj], self.trash)
        loc = self.rng.choice([p for p in self.shelves if p != world.objects.get(obj)])
        return self._delivery(self._fill("move", x=x, loc=self._loc(loc)), [obj], loc)

    def _structured(self, world):
        rng, st = self.rng, self.lex.steps
        obj = rng.choice(self._present(world, self.kitchen.objects))
        if world.objects.get(obj) == GRIPPER:
            return None
        x = self._name(obj)
        if rng.random() < 0.5:
            parts = [_format(rng.choice(st["find"]), x=x)]
            pick = _format(rng.choice(st["pick"]), x="it").replace("pick up it", "pick it up")
        else:
            parts = [_format(rng.choice(st["goto"]), loc=self._loc(world.objects[obj]))]
            pick = _format(rng.choice(st["pick"]), x=x)
        parts.append(pick)
        end = rng.choice(["bring", "carry", "trash"])
        if end == "bring":
            parts.append(rng.choice(st["bring"]))
            dest = USER
        elif end == "trash":
            parts += [_format(rng.choice(st["carry"]), loc=self._loc(self.trash)),
                      rng.choice(st["trash"])]
            dest = self.trash
        else:
            dest = rng.choice([p for p in self.shelves if p != world.objects[obj]])
            parts += [_format(rng.choice(st["carry"]), loc=self._loc(dest)), rng.choice(st["put"])]
        goals, items = [self._at(obj, dest)], [("deliver", (obj,), dest)]
        if rng.random() < 0.25 and dest != USER:
            parts.append(rng.choice(st["come"]))
            goals.append(f"robot_at({USER})")
            items.append(("goto", USER))
        text = ", ".join(parts[:-1]) + (", and " if rng.random() < 0.5 else " and ") + parts[-1]
        return text[0].upper() + text[1:] + ".", self._all(goals), items, "en"

    def _embodiment(self, world):
        rng = self.rng
        if world.holding is not None and rng.random() < 0.5:
            return self._held_request(world, rng.choice(HELD_REQUESTS))
        return rng.choice([self._nouns, self._verbs, self._crowd])(world)

    def _crowd(self, world):
        attrs = [a for a in self.lex.needs if self._present(world, self.lex.members(a))]
        if not attrs:
            return None
        attr = self.rng.choice(attrs)
        text = _format(self.rng.choice(self.lex.needs[attr]), drink=self.rng.choice(
            self.lex.spills), place=self.rng.choice(self.lex.places))
        return self._delivery(text, self._present(world, self.lex.members(attr)), USER)

    def _clause(self, world, taken: set[str]):
        """(clause text, goal, object, destination) of one object for a long sentence."""
        rng = self.rng
        free = [o for o in self._present(world, self.kitchen.objects) if o not in taken]
        if not free:
            return None
        obj = rng.choice(free)
        kind = rng.choice(["bring", "throw", "move"])
        if kind == "bring":
            dest = USER
        elif kind == "throw":
            dest = self.trash
        else:
            dest = rng.choice([p for p in self.shelves if p != world.objects.get(obj)])
        text = self._fill(kind, x=self._name(obj), loc=self._loc(dest) if kind == "move" else "")
        return _lower_first(text.rstrip(".?!")), self._at(obj, dest), obj, dest

    def _part(self, world, taken: set[str], kinds: Sequence[str]):
        """One part of a sentence of several: (lower-cased text, goals, plan items, objects it
        names). ``taken``: objects an earlier part names (no part names one twice)."""
        rng = self.rng
        kind = rng.choice(list(kinds))
        if kind == "clause":
            made = self._clause(world, taken)
            return None if made is None else (made[0], [made[1]],
                                              [("deliver", (made[2],), made[3])], {made[2]})
        if kind == "go":
            loc = rng.choice(list(self.kitchen.navigable))
            return (_lower_first(self._fill("go", loc=self._loc(loc)).rstrip(".?!")),
                    [f"robot_at({loc})"], [("goto", loc)], set())
        if kind == "come":
            return (_lower_first(self._fill("come").rstrip(".?!")), [f"robot_at({USER})"],
                    [("goto", USER)], set())
        if kind == "kinds":
            made = self._two_kinds(world, taken)
        elif kind == "swap":
            made = self._swap(world, taken)
        else:                                # two named objects, one verb and destination
            made = self._many(world, taken, 2)
        if made is None:
            return None
        text, _, items, _ = made
        return (_lower_first(text.rstrip(".?!")), [self._any(i[1], i[2]) for i in items], items,
                {o for item in items for o in item[1]})

    def _then(self, world):
        """Two or three parts in sequence ("take A and B to the table, then bring me C, and
        come back"); a part that only moves the robot comes last."""
        first = ["clause", "clause", "pair", "kinds", "swap"]
        parts, taken = [], set()
        n = 3 if self.rng.random() < 0.3 else 2
        for i in range(n):
            last = i == n - 1
            kinds = (["clause", "clause", "pair", "go", "come"] if last
                     else first if i == 0 else ["clause", "pair"])
            part = self._part(world, taken, kinds)
            if part is None:
                return None
            parts.append(part)
            taken |= part[3]
        texts = {"a": parts[0][0], "b": parts[1][0], "c": parts[-1][0]}
        text = _format(self.rng.choice(self.lex.templates["then" if n == 2 else "then3"]),
                       **texts)
        goals = [g for p in parts for g in p[1]]
        items = [it for p in parts for it in p[2]]
        return text[0].upper() + text[1:], self._all(goals), items, "en"

    def _many(self, world, taken: set[str] = frozenset(), count: int | None = None):
        """Several named objects, one verb ("throw away the A, the B and the C")."""
        rng = self.rng
        verb = rng.choice(["bring", "throw", "move"])
        dest = {"bring": USER, "throw": self.trash}.get(verb) or rng.choice(self.shelves)
        free = [o for o in self._present(world, self.kitchen.objects)
                if o not in taken and world.objects.get(o) != dest]
        objs = rng.sample(free, min(len(free), count or rng.choice([2, 2, 3, 3, 4])))
        if len(objs) < 2:
            return None
        names = [self._name(o, "a" if verb == "bring" and rng.random() < 0.5 else "the")
                 for o in objs]
        slots = {"list": _join(names, rng), "loc": self._loc(dest) if verb == "move" else ""}
        text = self._fill(f"{verb}_many", **slots)
        return (text, self._all([self._at(o, dest) for o in objs]),
                [("deliver", (o,), dest) for o in objs], "en")

    def _swap(self, world, taken: set[str] = frozenset()):
        """Two objects that stand at different places change places."""
        placed = [o for o in self._present(world, self.kitchen.objects)
                  if world.objects.get(o) in self.shelves and o not in taken]
        self.rng.shuffle(placed)
        for a in placed:
            for b in placed:
                la, lb = world.objects[a], world.objects[b]
                if la != lb:
                    text = self._fill("swap", x=self._name(a), y=self._name(b))
                    return (text, self._all([self._at(a, lb), self._at(b, la)]),
                            [("deliver", (a,), lb), ("deliver", (b,), la)], "en")
        return None

    def _long_horizon(self, world):
        rng = self.rng
        kind = rng.choice(["then", "then", "then", "many", "many", "all", "all_at", "clear",
                           "swap", "two_kinds"])
        if kind == "two_kinds":
            return self._two_kinds(world)
        if kind == "then":
            return self._then(world)
        if kind == "swap":
            return self._swap(world)
        if kind == "many":
            return self._many(world)
        if kind in ("all", "all_at"):
            attr = rng.choice([a for a in self.lex.categories if self.lex.categories[a]["all"]])
            plural = rng.choice(self.lex.categories[attr]["all"])
            members = self._present(world, self.lex.members(attr))
            if kind == "all_at":
                loc = rng.choice(self.shelves)
                members = [m for m in members if world.objects.get(m) == loc]
                verb = rng.choice(["bring_all_at", "throw_all_at", "move_all_at"])
                loc2 = rng.choice([p for p in self.shelves if p != loc])
                text = self._fill(verb, all=plural, loc=self._loc(loc), loc2=self._loc(loc2))
                dest = {"bring_all_at": USER, "throw_all_at": self.trash}.get(verb, loc2)
            else:
                verb = rng.choice(["bring_all", "throw_all"])
                text = self._fill(verb, all=plural)
                dest = USER if verb == "bring_all" else self.trash
            members = [m for m in members if world.objects.get(m) != dest]
            if not 2 <= len(members) <= 4:
                return None
            return (text, self._all([self._at(m, dest) for m in members]),
                    [("deliver", (m,), dest) for m in members], "en")
        if kind == "clear":
            loc = rng.choice(self.shelves)
            here = [o for o in self.kitchen.objects if world.objects.get(o) == loc]
            if not 1 <= len(here) <= 4:
                return None
            if rng.random() < 0.4:
                text, dest = self._fill("bring_everything_at", loc=self._loc(loc)), USER
            else:
                dest = rng.choice([p for p in self.shelves if p != loc])
                text = self._fill("clear_at", loc=self._loc(loc), loc2=self._loc(dest))
            return (text, self._all([self._at(o, dest) for o in here]),
                    [("deliver", (o,), dest) for o in here], "en")
        return None

    def _two_kinds(self, world, taken: set[str] = frozenset()):
        """One of each of two categories with no common member ("a drink and a snack")."""
        rng = self.rng
        first, second = self._category(world), self._category(world)
        if first is None or second is None or set(first[1]) & set(second[1]) \
                or set(first[1] + second[1]) & set(taken):
            return None
        phrases = [rng.choice(self.lex.categories[a]["one"]) for a, _ in (first, second)]
        text = self._fill("bring_two_kinds", x=phrases[0], y=phrases[1])
        return (text, self._all([self._any(first[1], USER), self._any(second[1], USER)]),
                [("deliver", tuple(first[1]), USER), ("deliver", tuple(second[1]), USER)], "en")

    def _negation(self, world):
        rng = self.rng
        found = self._category(world, min_members=2)
        if found is None:
            return None
        attr, members = found
        if rng.random() < 0.3 and self.lex.categories[attr]["all"]:   # throw all but one
            keep = rng.choice(members)
            rest = [m for m in members if m != keep]
            if not 1 <= len(rest) <= 4:
                return None
            text = self._fill("neg_throw_all", all=rng.choice(self.lex.categories[attr]["all"]),
                              z=self._name(keep))
            goal = self._all([self._at(m, self.trash) for m in rest]
                             + [f"not(at({keep}, {self.trash}))"])
            return text, goal, [("deliver", (m,), self.trash) for m in rest], "en"
        # exclude one object, or a sub-category
        subs = [a for a in self.lex.categories if a != attr and self.lex.categories[a]["one"]
                and set(self.lex.members(a)) & set(members)
                and set(members) - set(self.lex.members(a))]
        kind = "neg_bring"
        if subs and rng.random() < 0.5:
            chosen = rng.sample(subs, 2 if len(subs) > 1 and rng.random() < 0.3 else 1)
            excluded = [m for m in members if any(m in self.lex.members(a) for a in chosen)]
            ones = [rng.choice(self.lex.categories[a]["one"]) for a in chosen]
            z = " or ".join(ones)
            plurals = [self.lex.categories[a]["all"] for a in chosen]
            if len(chosen) == 2 and rng.random() < 0.5:
                kind = "neg_neither"         # "neither a soda nor an energy drink"
            elif all(plurals) and rng.random() < 0.4:
                kind = "neg_avoid"           # "I'm staying away from sodas; bring me a drink"
                z = " and ".join(rng.choice(p) for p in plurals)
        else:
            excluded = [rng.choice(members)]
            z = self._name(excluded[0])
            ones = [z]
        dest = USER if rng.random() < 0.8 else rng.choice(self.shelves)
        if any(world.objects.get(m) == dest for m in members):
            return None
        allowed = [m for m in members if m not in excluded]
        if not allowed:
            return None
        if dest != USER:
            kind = "neg_move"
        xs = (self.lex.categories[attr]["all"] or ["thing"])[0]
        text = self._fill(kind, x=rng.choice(self.lex.categories[attr]["one"]), z=z, xs=xs,
                          z1=ones[0], z2=ones[-1], loc=self._loc(dest) if dest != USER else "")
        goal = f"and({self._any(allowed, dest)}, not({self._any(excluded, dest)}))"
        return text, goal, [("deliver", tuple(allowed), dest)], "en"

    def _counting(self, world):
        rng = self.rng
        n = rng.choice([2, 2, 3])
        r = rng.random()
        dest = USER if r < 0.6 else self.trash if r < 0.8 else rng.choice(self.shelves)
        attrs = [a for a in self.lex.categories if self.lex.categories[a]["all"]
                 and len(self._present(world, self.lex.members(a))) > n]
        if not attrs:
            return None
        attr = rng.choice(attrs)
        members = self._present(world, self.lex.members(attr))
        if any(world.objects.get(m) == dest for m in members):
            return None                      # "put two drinks on the table" when one is there
        chosen = rng.sample(members, n)
        number = str(rng.choice(self.lex.templates["numbers"][n]))
        plural = rng.choice(self.lex.categories[attr]["all"])
        kind = {USER: "count_bring", self.trash: "count_throw"}.get(dest, "count_move")
        text = self._fill(kind, n=number, all=plural, loc=self._loc(dest) if dest in
                          self.shelves else "")
        # the plan moves the chosen ones; the goal accepts any n of the category
        goal = f"atleast({n}, {', '.join(self._at(m, dest) for m in members)})"
        return text, goal, [("deliver", (m,), dest) for m in chosen], "en"

    def _multilingual(self, world):
        rng = self.rng
        if not self.lex.languages:
            return None
        code = rng.choice(sorted(self.lex.languages))
        lang = self.lex.languages[code]
        tpl = lang["templates"]
        kind = rng.choice(["bring", "bring", "bring_cat", "throw", "move", "pick", "go", "find",
                           "put_down_held", "bring_two"])
        present = self._present(world, self.kitchen.objects)
        obj = rng.choice(present)

        def name(o):
            return rng.choice(lang["objects"][o])

        if kind == "bring":
            return self._delivery(_format(rng.choice(tpl["bring"]), obj=name(obj)), [obj], USER,
                                  code)
        if kind == "bring_cat":
            found = self._category(world)
            if found is None or found[0] not in lang["categories"]:
                return None
            attr, members = found
            text = _format(rng.choice(tpl["bring"]), obj=rng.choice(lang["categories"][attr]))
            return self._delivery(text, members, USER, code)
        if kind == "throw":
            return self._delivery(_format(rng.choice(tpl["throw"]), obj=name(obj)), [obj],
                                  self.trash, code)
        if kind == "move":
            loc = rng.choice([p for p in self.shelves if p != world.objects.get(obj)])
            forms = lang["locations"][loc]
            text = _format(rng.choice(tpl["move"]), obj=name(obj), on=forms["on"], to=forms["to"])
            return self._delivery(text, [obj], loc, code)
        if kind == "pick":
            if world.holding is not None:
                return None
            return (_format(rng.choice(tpl["pick"]), obj=name(obj)), f"holding({obj})",
                    [("hold", obj)], code)
        if kind == "go":
            loc = rng.choice(list(self.kitchen.navigable))
            return (_format(rng.choice(tpl["go"]), to=lang["locations"][loc]["to"]),
                    f"robot_at({loc})", [("goto", loc)], code)
        if kind == "find":
            if world.objects.get(obj) == GRIPPER:
                return None
            return (_format(rng.choice(tpl["find"]), obj=name(obj)),
                    f"robot_at({world.objects[obj]})", [("find", obj)], code)
        if kind == "put_down_held":
            if world.holding is None or world.robot_at in (self.trash, USER):
                return None
            return (rng.choice(tpl["put_down_held"]),
                    f"and(holding(none), not(at({world.holding}, {self.trash})))", [("drop",)], code)
        others = [o for o in present if o != obj]
        if not others:
            return None
        obj2 = rng.choice(others)
        return (_format(rng.choice(tpl["bring_two"]), obj=name(obj), obj2=name(obj2)),
                self._all([self._at(obj, USER), self._at(obj2, USER)]),
                [("deliver", (obj,), USER), ("deliver", (obj2,), USER)], code)

    def _ambiguous(self, world):
        """A definite request that several things (or places) of the scene fit: "Bring me the
        chips." with two bags, "Go to the counter." with two counters. The goal and the plan
        follow one reading drawn at random: only the person knows which (issue 40)."""
        rng = self.rng
        if rng.random() < 0.35:
            made = self._ambiguous_place(world)
            if made is not None:
                return made
        groups = self._definite_groups(world)
        if not groups:
            return None
        phrase, readings = rng.choice(sorted(groups.items()))
        obj = rng.choice(readings)
        kind = rng.choice(["bring", "bring", "throw", "move", "pick", "find"])
        if kind == "pick":
            if world.holding is not None:
                return None
            return self._fill("pick", x=phrase), f"holding({obj})", [("hold", obj)], "en"
        if kind == "find":
            if world.objects.get(obj) == GRIPPER:
                return None
            return (self._fill("find", x=phrase), f"robot_at({world.objects[obj]})",
                    [("find", obj)], "en")
        if kind == "bring":
            return self._delivery(self._fill("bring", x=phrase), [obj], USER)
        if kind == "throw":
            return self._delivery(self._fill("throw", x=phrase), [obj], self.trash)
        loc = rng.choice([p for p in self.shelves if p != world.objects.get(obj)])
        return self._delivery(self._fill("move", x=phrase, loc=self._loc(loc)), [obj], loc)

    def _ambiguous_place(self, world):
        """"Go to the counter." / "Put what you're holding on the counter." with two counters."""
        groups: dict[str, list[str]] = {}
        for loc in self.shelves:
            for word in {name.split()[-1] for name in self.lex.locations.get(loc) or [loc]}:
                groups.setdefault(word, []).append(loc)
        groups = {w: locs for w, locs in groups.items() if len(locs) > 1}
        if not groups:
            return None
        word, locs = self.rng.choice(sorted(groups.items()))
        loc = self.rng.choice(locs)
        held = world.holding
        if held is not None and self.rng.random() < 0.6:
            return self._delivery(self._fill("move_held", loc=word), [held], loc)
        if loc not in self.kitchen.navigable:
            return None
        return self._fill("go", loc=word), f"robot_at({loc})", [("goto", loc)], "en"

    def _definite_groups(self, world) -> dict[str, list[str]]:
        """Definite phrases ("the chips", "the soda") -> the things of the scene they fit, where
        more than one fits: the last word of two things' names, or a category's one-phrase."""
        present = self._present(world, self.kitchen.objects)
        groups: dict[str, set[str]] = {}
        for obj in present:
            for name in self.lex.objects[obj]["names"]:
                if len(name.split()) > 1:
                    groups.setdefault(f"the {name.split()[-1]}", set()).add(obj)
        for attr, spec in self.lex.categories.items():
            members = self._present(world, self.lex.members(attr))
            for phrase in spec["one"]:
                head, _, rest = phrase.partition(" ")
                if head in ("a", "an") and rest and len(members) > 1:
                    groups.setdefault(f"the {rest}", set()).update(members)
        return {p: sorted(objs) for p, objs in groups.items() if len(objs) > 1}

    def _impossible(self, world):
        """A request the robot cannot carry out: a thing the kitchen does not have ("Bring me
        a pineapple." in a kitchen without one) or an action no skill does ("Wash the
        sponge."). The plan is "done" before anything runs (the planner then says it cannot)."""
        rng = self.rng
        if self.missing_names and (not self.lex.impossible_actions or rng.random() < 0.5):
            from saycan_ros.learning.kitchens import article_of
            name = rng.choice(self.missing_names)
            x = f"{article_of(name)} {name}" if rng.random() < 0.6 else f"the {name}"
            kind = rng.choice(["bring", "bring", "bring", "throw", "move", "pick", "find"])
            text = self._fill(kind, x=x, loc=self._loc(rng.choice(self.shelves)))
        elif self.lex.impossible_actions:
            present = self._present(world, self.kitchen.objects)
            if not present:
                return None
            text = _format(rng.choice(self.lex.impossible_actions),
                           x=self._name(rng.choice(present)),
                           loc=self._loc(rng.choice(self.shelves)))
        else:
            return None
        return text, None, [], "en"

    def _reading(self, world: SymbolicWorld, options: Sequence[str]) -> str:
        """Which of ``options`` (any of which fulfils the request) the plan fetches."""
        if self.any_reading == "random" or len(options) == 1:
            return self.rng.choice(list(options))
        scene = scene_of(self.kitchen, world)

        def position(obj: str) -> int:
            found = re.search(r"(?<![\w-])" + re.escape(obj) + r"(?![\w-])", scene)
            return found.start() if found else len(scene)
        return min(options, key=position)

    # -- plans -------------------------------------------------------------------------------
    def _plan(self, world: SymbolicWorld, items) -> list[str] | None:
        """The plan a person writes for ``items``, replayed on a copy of ``world``: fetch an
        object with ``find`` (unless the robot stands where it is), ``pick up``, go to the
        destination (``bring it to you`` for the user), ``put down``. A held object the request
        does not name is put down first where the robot stands (at a counter or the table),
        else where the next object is found. One object of a several-object item is chosen at
        random, so the model learns the category, not one favourite. None if a step fails or
        the plan is longer than MAX_PLAN_SKILLS."""
        from saycan_ros.core.solver import clone_world
        w = clone_world(world)
        steps: list[str] = []
        sk = self._skill_texts

        def run(text: str) -> None:
            if not w.execute(self.skills.get(text)).success:
                raise _NoPlan(text)
            steps.append(text)

        def fetch(obj: str) -> None:
            if w.holding == obj:
                return
            if w.holding is not None and w.robot_at in self.shelves:
                run(sk["place", w.holding])
            if w.objects.get(obj) != w.robot_at:
                run(sk["navigate_to_object", obj])
            if w.holding is not None:
                run(sk["place", w.holding])
            run(sk["pick", obj])

        def go(loc: str) -> None:
            if w.robot_at != loc:
                run(sk["navigate", loc])

        try:
            for item in items:
                kind = item[0]
                if kind == "deliver":
                    options = [o for o in item[1] if w.objects.get(o) not in (None, item[2])]
                    if not options:
                        return None
                    obj = self._reading(w, options)
                    fetch(obj)
                    go(item[2])
                    run(sk["place", obj])
                elif kind == "hold":
                    fetch(item[1])
                elif kind == "goto":
                    go(item[1])
                elif kind == "find":
                    if w.objects.get(item[1]) != w.robot_at:
                        run(sk["navigate_to_object", item[1]])
                elif kind == "drop":
                    run(sk["place", w.holding])
        except (_NoPlan, KeyError):
            return None
        return steps if 0 < len(steps) <= MAX_PLAN_SKILLS else None

    @property
    def _skill_texts(self) -> dict[tuple[str, str], str]:
        """(kind, object or location) -> skill text."""
        if not hasattr(self, "_texts"):
            self._texts = {}
            for skill in self.skills:
                key = skill.object if skill.object is not None else skill.location
                self._texts.setdefault((skill.kind, key), skill.text)
        return self._texts


class _NoPlan(Exception):
    """A step of a canonical plan failed."""


def _replays_to(goal: GoalExpr, world: SymbolicWorld, steps: Sequence[str],
                skills: SkillSet) -> bool:
    from saycan_ros.core.solver import clone_world
    replay = clone_world(world)
    return all(replay.execute(skills.get(t)).success for t in steps) and goal.holds(replay)


def _scenes_along(kitchen: Kitchen, world: SymbolicWorld, steps: Sequence[str],
                  skills: SkillSet, refresh: bool, details: bool = False) -> tuple[str, ...]:
    """The scene line before each step, as the planner shows it while the plan runs: read at
    the start and, with ``refresh``, again after every step that
    :func:`~saycan_ros.planning.scene.changes_scene`."""
    from saycan_ros.core.solver import clone_world
    replay = clone_world(world)
    scenes = [scene_of(kitchen, replay, details)]
    if not refresh:
        return tuple(scenes) * len(steps)
    for text in steps[:-1]:
        skill = skills.get(text)
        replay.execute(skill)
        scenes.append(scene_of(kitchen, replay, details) if changes_scene(skill) else scenes[-1])
    return tuple(scenes)


def _format(template: str, **slots) -> str:
    """``template`` with {slot} / {Slot} (capitalised) filled; unknown braces kept."""
    def sub(match):
        key = match.group(1)
        value = slots.get(key.lower())
        if value is None:
            return match.group(0)
        return value[0].upper() + value[1:] if key[0].isupper() and value else value
    return re.sub(r"\{(\w+)\}", sub, template)


def _lower_first(text: str) -> str:
    return text[0].lower() + text[1:] if text and not text.startswith("I ") else text


def _join(items: Sequence[str], rng: random.Random) -> str:
    if len(items) == 2:
        return f"{items[0]} and {items[1]}"
    return ", ".join(items[:-1]) + (", and " if rng.random() < 0.4 else " and ") + items[-1]


#: The test sets: never in a prompt, a pool or a training dialogue.
TEST_SETS = ("tasks.yaml", "tasks_extra.yaml")
#: What the generator never produces: the test sets and the development sets (so that they
#: keep measuring generalisation, not recall).
#: The development sets of asking and saying no (issue 40).
ASKING_SETS = ("asking_dev.yaml", "impossible_dev.yaml")
EXCLUDED_SETS = TEST_SETS + ("tasks_dev.yaml",) + ASKING_SETS
#: The development kitchens (a kitchen file and its task file each), under the config folder.
DEV_KITCHENS = "dev_kitchens"


def heldout_instructions(config_dir: Path, kitchen: Kitchen,
                         sets: Sequence[str] = EXCLUDED_SETS,
                         dev_kitchens: bool = True) -> list[str]:
    """Every instruction of the task files ``sets`` in ``config_dir`` (default: the test sets
    and the development set) and, with ``dev_kitchens``, of the development kitchens' task
    files (``dev_kitchens/*_tasks.yaml``): what the generator must never produce."""
    import yaml

    from saycan_ros.core.config import read_text
    from saycan_ros.core.tasks import load_tasks
    texts = []
    for name in sets:
        path = Path(config_dir) / name
        if path.is_file():
            texts += [t.text for t in load_tasks(path, kitchen)]
    kitchen_files = (Path(config_dir) / DEV_KITCHENS).glob("*_tasks.yaml") if dev_kitchens else ()
    for path in sorted(kitchen_files):
        data = yaml.safe_load(read_text(path)) or {}
        texts += [str(item["text"]) for item in data.get("instructions", [])
                  if isinstance(item, Mapping) and "text" in item]
    return texts


def dialogue_record(d: Dialogue) -> Mapping:
    return {"instruction": d.instruction, "family": d.family, "language": d.language,
            "init": d.init.to_mapping(), "goal": d.goal.text if d.goal is not None else None,
            "steps": list(d.steps),
            "scenes": list(d.scenes)}
