"""Reading the instruction's words when deciding to ask: what the scores cannot tell.

The conformal set (:mod:`saycan_ros.planning.asking`) sees a step's probabilities only, and two
things that matter are in the words, not in the scores:

- **A definite description that fits several things** ("the chips" with three bags, "the
  counter" with two, "the can" with four, "my soda", "that can"; "this can" and "your drink"
  are the one in the hand where it fits): the person means one of them, and the model is
  often sure of one reading anyway (p 0.84 for one counter). Until a step has named one of
  them, the robot asks which (:meth:`Wording.readings`), whatever the scores.
- **A choice left to the robot**: when every option of a set is a ``find`` of a different
  thing and the person asked for *any* ("a soda", "some chips", "something to drink", "every
  bag of chips", "two drinks"), named each of them ("the apple and the sponge": the order is
  the robot's), or named nothing at all ("my stomach is growling"), any option is right and
  the robot acts on the likeliest (:meth:`Wording.left_to_robot`). So too when some options
  ``pick up`` what lies at hand, if the person asked for any and each option's thing is one
  the words describe ("a soda": pick up the coke can, pick up the 7up can, find a pepsi can).

A description fits a thing when each of its words is a word of the thing's name, its
category or its attributes in the kitchen file (singular or plural as written): "the chips"
fits "rice chips", "the fruit" fits "apple" (category fruit), "the soda" the 7up can
(attribute soda), "the rice chips" only "rice chips". A plural that no name spells so
("the cans", "the drinks") means all of them, as does a description after "all", "both",
"each" or "every" (and "all of the ..."): nothing to ask. When the world's state is known,
"the X from / on / at the L" keeps the things at L and "the X you are holding" the thing in the
hand. "from the counter" says where a thing is, not where it goes, and is never asked about.
ROS-free; the kitchen gives names and categories.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

#: Words after which "the ..." means all of them, not one.
ALL_OF = frozenset({"all", "both", "each", "every", "of"})
#: Words that make a description definite: the person means one thing ("the soda", "my soda",
#: "that can"); "this" and "your" point at the thing in the robot's hand where it fits.
DEFINITE = frozenset({"the", "my", "that", "this", "your", "our"})
IN_HAND = frozenset({"this", "your"})
#: Words by which a person leaves the choice of thing to the robot.
#: A number of them ("two drinks"), not "the two drinks" (which two?); the indefinite
#: articles of the planner's other languages ("una fruta", "eine Orange").
ANY_CUES = re.compile(r"\b(a|an|some|any|anything|something|every|each|all|either|whichever|"
                      r"whatever|un|una|uno|uma|um|une|ein|eine|einen|qualcosa|algo|"
                      r"quelque)\b|(?<!the )\b(two|three|four|five|six|few|several|couple|"
                      r"[2-9])\b")
#: Words that point at one thing the words may not name ("bring me that", "the cola", "la
#: esponja"): an instruction with one of them is not a need that leaves the thing to the robot.
POINTING = re.compile(r"\b(the|it|this|that|these|those|them|there|here|one|el|la|los|las|il|"
                      r"lo|gli|le|les|der|die|das|den|dem|o|os|as)\b")
#: Prepositions that place a description: "the drink from the table".
PLACED = frozenset({"from", "on", "at", "off", "in"})
#: Prepositions after which a place is where a thing is, not where it goes: no need to ask.
SOURCE = frozenset({"from", "off"})
#: Words after a description that make it the thing in the robot's hand.
HELD = re.compile(r"(you are holding|you're holding|you hold|in your (hand|hands|gripper))\b")
#: The kinds of skill whose step decides which thing or place a description means (a step that
#: picks up the orange does not decide which counter it goes to).
DECIDES = {"object": frozenset({"navigate_to_object", "pick"}),
           "place": frozenset({"navigate", "place"})}
#: Words after which the things named are what the person does not want ("but not the
#: orange", "every bag of chips except the multigrain ones"); not a bare "n't" ("I can't find
#: the apple" wants it).
EXCLUDING = re.compile(r"\b(not|no|without|except|nor|neither|never|other than|instead of|"
                       r"isn't|aren't|don't want|do not want)\b")
#: Words after such a cue in which an excluded thing is looked for.
EXCLUDED_SPAN = 5
#: Most options a question offers (plus "something else").
MAX_READINGS = 5
_WORD = re.compile(r"[a-z0-9]+(?:[-'][a-z0-9]+)*")


def singular(word: str) -> str:
    """A plural's singular by the common English endings ("cans" -> "can", "berries" ->
    "berry"); other words as they are."""
    if len(word) > 3 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith(("ches", "shes", "xes", "sses")):
        return word[:-2]
    if len(word) > 2 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


@dataclass(frozen=True)
class Description:
    """A definite description in the instruction and the things it fits."""
    text: str                     # as written after "the": "chips", "close counter"
    fits: tuple[str, ...]         # objects or places, in kitchen order
    kind: str                     # "object" | "place"


class Wording:
    """The kitchen's names as the instruction's words may say them."""

    def __init__(self, objects: Mapping[str, str], places: Sequence[str]):
        """``objects``: name -> category; ``places``: the navigable places."""
        self.things: dict[str, tuple[str, frozenset[str]]] = {}
        for name, category in objects.items():
            self.things[name] = ("object", self._words(name, category))
        for name in places:
            self.things.setdefault(name, ("place", self._words(name, "")))
        self.vocabulary = frozenset(w for _, words in self.things.values() for w in words)
        self.object_names = {name: self._words(name, "") for name in objects}

    @classmethod
    def from_kitchen(cls, kitchen) -> "Wording":
        # what the kitchen file says an object is counts as its category ("the soda" is the
        # 7up can too where the file calls it one)
        return cls({name: " ".join([obj.category, *obj.attributes])
                    for name, obj in kitchen.objects.items()}, kitchen.navigable)

    @staticmethod
    def _words(name: str, category: str) -> frozenset[str]:
        words = set(_WORD.findall(name.lower()))
        if category:
            words |= set(_WORD.findall(category.lower()))
        return frozenset(words)

    # -- descriptions ---------------------------------------------------------------------------
    def _fits(self, words: Sequence[str]) -> tuple[list[str], bool]:
        """The things every word fits, and whether the words name them in the plural. Words
        that are a thing's whole name fit that thing only ("the orange", not "orange soda")."""
        exact = [name for name in self.things if name.lower() == " ".join(words)]
        if exact:
            return exact, False
        fits, plural = [], False
        for name, (_, names) in self.things.items():
            if all(w in names or singular(w) in names for w in words):
                fits.append(name)
                plural = plural or words[-1] not in names
        return fits, plural

    def descriptions(self, instruction: str, state: Any = None) -> list[Description]:
        """The definite descriptions of ``instruction`` that fit more than one thing of one
        kind (objects or places) and mean one of them."""
        words = _WORD.findall(instruction.lower())
        out: list[Description] = []
        for i, word in enumerate(words):
            if word not in DEFINITE or (i > 0 and words[i - 1] in ALL_OF):
                continue
            for n in (3, 2, 1):                   # the longest run of words that fits a thing
                run = words[i + 1:i + 1 + n]
                if len(run) < n or not all(w in self.vocabulary or singular(w) in
                                           self.vocabulary for w in run):
                    continue
                fits, plural = self._fits(run)
                if not fits:
                    continue
                if not plural:
                    source = i > 0 and words[i - 1] in SOURCE
                    after = words[i + 1 + n:]
                    out += [d for d in self._one_of(" ".join(run), fits, after, state,
                                                    in_hand=word in IN_HAND)
                            if not (source and d.kind == "place")]
                break
        return out

    def _one_of(self, text: str, fits: list[str], after: list[str], state,
                in_hand: bool = False) -> list[Description]:
        found = []
        for kind in ("object", "place"):
            of_kind = [t for t in fits if self.things[t][0] == kind]
            if kind == "object" and state is not None:
                objects = dict(getattr(state, "objects", {}) or {})
                of_kind = [t for t in of_kind if t in objects]
                place = self._placed_at(after)
                if place is not None:
                    of_kind = [t for t in of_kind if objects.get(t) == place]
                held = getattr(state, "holding", None)
                if HELD.match(" ".join(after[:4])) or (in_hand and held in of_kind):
                    of_kind = [t for t in of_kind if t == held]
            if len(of_kind) > 1:
                found.append(Description(text, tuple(of_kind), kind))
        return found

    def _placed_at(self, after: list[str]) -> str | None:
        """The one place that "from / on / at the L" right after a description names."""
        if len(after) < 3 or after[0] not in PLACED or after[1] != "the":
            return None
        for n in (3, 2, 1):
            run = after[2:2 + n]
            if len(run) == n:
                fits, _ = self._fits(run)
                places = [t for t in fits if self.things[t][0] == "place"]
                if len(places) == 1:
                    return places[0]
        return None

    # -- the two rules --------------------------------------------------------------------------
    @staticmethod
    def _names(skill) -> str | None:
        return getattr(skill, "object", None) or getattr(skill, "location", None)

    def readings(self, instruction: str, history: Sequence, candidates: Sequence,
                 p: Sequence[float], state: Any = None) -> list[int]:
        """Indices into ``candidates`` (skills) of the readings to ask about, likeliest first,
        or [] when no description is left open. ``history``: the skills run so far; a
        description one of them named is settled; a description is asked about at a step
        whose top skill names one of its things or is of a kind that decides it (:data:`DECIDES`:
        a find or a pick for a thing, a go-to or a put-down for a place). Each reading is the
        likeliest skill that
        names its thing, of the top skill's kind where one is ("pick up the coke can" ->
        "pick up the pepsi can", else "find a pepsi can"); a thing no runnable skill names
        because the robot is there already is read as the top skill."""
        if not candidates:
            return []
        named = {self._names(s) for s in history} - {None}
        top = max(range(len(candidates)), key=lambda i: p[i])
        for description in self.descriptions(instruction, state):
            if set(description.fits) & named:
                continue
            if self._names(candidates[top]) not in description.fits and \
                    candidates[top].kind not in DECIDES[description.kind]:
                continue            # not yet: this step does not decide which one
            options = self._reading_options(description.fits, candidates, p, top, state)
            if len(options) > 1:
                return sorted(options, key=lambda i: -p[i])[:MAX_READINGS]
        return []

    def _reading_options(self, fits, candidates, p, top: int, state) -> list[int]:
        options: list[int] = []
        top_kind, top_names = candidates[top].kind, self._names(candidates[top])
        for thing in fits:
            naming = [i for i, s in enumerate(candidates) if self._names(s) == thing and p[i] > 0]
            if naming:
                same = [i for i in naming if candidates[i].kind == top_kind]
                choice = max(same or naming, key=lambda i: p[i])
            elif top_names not in fits and self._here(thing, state):
                choice = top
            else:
                continue
            if choice not in options:
                options.append(choice)
        return options

    @staticmethod
    def _here(thing: str, state) -> bool:
        """Whether the robot is at the place ``thing``, or by or holding the object."""
        if state is None:
            return False
        at = getattr(state, "robot_at", None)
        where = (dict(getattr(state, "objects", {}) or {})).get(thing)
        return thing == at or (where is not None and where == at) \
            or getattr(state, "holding", None) == thing

    def excluded(self, instruction: str) -> frozenset[str]:
        """The kitchen's objects named right after a word that excludes them ("not", "except",
        "other than" ...: :data:`EXCLUDING`). By the words of one object's name only: "without
        caffeine" must not read as the caffeine-free drinks (their attribute words)."""
        text = instruction.lower()
        out: set[str] = set()
        for cue in EXCLUDING.finditer(text):
            for word in _WORD.findall(text[cue.end():])[:EXCLUDED_SPAN]:
                named = [name for name, words in self.object_names.items()
                         if word in words or singular(word) in words]
                if len(named) == 1:
                    out.add(named[0])
        return frozenset(out)

    def not_excluded(self, instruction: str, options: Sequence) -> list[int]:
        """Indices of ``options`` (skills) that name nothing the instruction excludes; all of
        them when that would leave none."""
        out = self.excluded(instruction)
        kept = [i for i, s in enumerate(options) if getattr(s, "object", None) not in out]
        return kept or list(range(len(options)))

    def described(self, instruction: str) -> frozenset[str]:
        """The objects the instruction's words describe: for each longest run of the kitchen's
        words (at most three) that fits objects, those objects ("a healthy snack": the
        healthy snacks, not every healthy thing; "two drinks": every drink)."""
        words = _WORD.findall(instruction.lower())
        out: set[str] = set()
        i = 0
        while i < len(words):
            for n in (3, 2, 1):
                run = words[i:i + n]
                if len(run) < n or not all(w in self.vocabulary or singular(w) in
                                           self.vocabulary for w in run):
                    continue
                objects = [t for t in self._fits(run)[0] if self.things[t][0] == "object"]
                if objects:
                    out.update(objects)
                    i += n
                    break
            else:
                i += 1
        return frozenset(out)

    def left_to_robot(self, instruction: str, options: Sequence, state: Any = None) -> bool:
        """Whether any of ``options`` (skills) is what the person asked for: each is a ``find``
        of a different thing, no description leaves two of them open, each is where "from the
        L" says (when the state is known), and the instruction asks for any ("a", "some",
        "every", a number ...), names each of them alone, or names no thing and points
        at none ("my stomach is growling", not "bring me that" or "bring me the cola").
        Options that ``pick up`` a thing count too where the instruction asks for any and
        each option's thing is one its words describe (:meth:`described`); a need that
        names nothing still asks about picks (of what lies at hand the model's guess is
        often confidently wrong: "My throat feels so dry." -> the rice chips first)."""
        things = [self._names(s) for s in options]
        kinds = {s.kind for s in options}
        if len(options) < 2 or not kinds <= {"navigate_to_object", "pick"} \
                or len(set(things)) < len(things):
            return False
        if "pick" in kinds and not (ANY_CUES.search(instruction.lower())
                                    and set(things) <= self.described(instruction)):
            return False
        open_ = self.descriptions(instruction, state)
        if any(len(set(d.fits) & set(things)) > 1 for d in open_):
            return False
        words = _WORD.findall(instruction.lower())
        if state is not None:               # "all the drinks from the close counter": there
            objects = dict(getattr(state, "objects", {}) or {})
            for i, word in enumerate(words):
                place = self._placed_at(words[i:]) if word in SOURCE else None
                if place is not None and any(objects.get(t) != place for t in things):
                    return False
        if ANY_CUES.search(instruction.lower()):
            return True
        alone, named = set(), False
        for n in (3, 2, 1):
            for i in range(len(words) - n + 1):
                run = words[i:i + n]
                if not all(w in self.vocabulary or singular(w) in self.vocabulary for w in run):
                    continue
                fits, _ = self._fits(run)
                named = named or bool(fits)
                if len(fits) == 1:
                    alone.add(fits[0])
        # a need that names nothing ("my stomach is growling") leaves the thing to the robot
        return set(things) <= alone or not (named or POINTING.search(instruction.lower()))
