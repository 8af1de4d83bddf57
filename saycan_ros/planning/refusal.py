"""Saying "I can't" before the robot moves: a request that needs an action no skill does
("Open the fridge.") or an everyday thing the kitchen does not have ("Bring me a banana.") is
refused with the reason, instead of being carried out on something else.

Grounded in the kitchen file and word lists, not in the language model: the actions of
``config/refusals.yaml`` (verbs that start a clause of the request), the everyday objects of
``config/planner_lexicon.yaml`` and the more everyday things of ``refusals.yaml``'s ``things``
(those count only when asked for, as short names do). Names of the kitchen's own objects and
places are read first and never count as missing ("lime" in "lime soda"), and a thing named
after "not", "no", "without" or "except" is not asked for. Short names of the lexicon's
objects ("pizza" of "frozen pizza") count only after a request word in their sentence ("bring",
"I'd like"): short words are often mentioned without being asked for. A request in words no
list knows is left to the planner.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Mapping

from saycan_ros.core.config import ConfigError, load_yaml
from saycan_ros.core.kitchen import Kitchen

#: Words that open a request before its verb ("Can you please open ...").
LEAD_INS = ("please", "can you", "could you", "would you", "will you", "can u", "kindly",
            "i want you to", "i need you to", "i'd like you to", "i would like you to",
            "go and", "go", "and", "then", "also", "now", "just", "first", "hey robot", "robot",
            "hey", "ok", "okay")
#: Words that put what follows them out of the request ("a fruit that is not a banana").
NEGATIONS = ("not", "no", "without", "except", "n't", "instead", "other than", "never", "nor")
DETERMINERS = ("the", "a", "an", "my", "your", "our", "his", "her", "their", "this", "that",
               "these", "those", "some", "all")
#: Words that ask for a thing: a short name ("pizza", "grapes") counts as asked for only after
#: one of them in its sentence ("I'd like a slice of pizza", not "I'm under the car").
REQUESTS = ("bring", "get", "fetch", "give", "hand", "grab", "find", "pick up", "pass",
            "throw", "put", "take", "move", "i want", "i'd like", "i would like", "i need",
            "can i have", "could i have", "may i have", "where is", "where's", "look for")
_SENTENCES = re.compile(r"[.;!?]+")
_CLAUSES = re.compile(r"[.,;:!?]+|\band then\b|\bthen\b|\band\b|\bbut\b")


def _words(text: str) -> str:
    """Lower case, apostrophes and hyphens kept, every other non-letter a space."""
    text = text.lower().replace("’", "'")
    text = re.sub(r"n't\b", " n't", text)
    return " ".join(re.sub(r"[^a-z0-9' -]+", " ", text).split())


def _find(name: str, text: str):
    """Where ``name`` stands in ``text`` as whole words: a hyphenated word ("lemon-lime") is one
    word, so "lemon" is not found in it."""
    return re.finditer(rf"(?<![\w'-]){re.escape(name)}(?![\w'-])", text)


def _plurals(name: str) -> tuple[str, ...]:
    if name.endswith("s"):       # "paper towels": "paper towel" too (one word: "drops" != "drop")
        return (name, name[:-1]) if " " in name else (name,)
    if name.endswith(("ch", "sh", "x", "o")):
        return (name, name + "es")
    if name.endswith("y") and name[-2:-1] not in "aeiou":
        return (name, name[:-1] + "ies")
    return (name, name + "s")


@dataclass(frozen=True)
class Refusals:
    """What the robot cannot do in one kitchen. :meth:`why_not` is the reason for a request,
    or "" when nothing in it is known to be impossible."""

    actions: Mapping[str, str]          # verb phrase -> what the refusal says it cannot do
    missing: tuple[str, ...]            # everyday objects this kitchen does not have
    known: tuple[str, ...]              # the kitchen's own object and place names (and synonyms)
    short: tuple[str, ...] = ()         # short names of everyday objects: only when asked for

    def why_not(self, instruction: str) -> str:
        raw = text = _words(instruction)
        for name in self.known:                     # its own names first: never missing
            for match in reversed(list(_find(name, text))):
                text = text[:match.start()] + "#" + text[match.end():]
        # a verb that is also one of the kitchen's names ("water") is a verb before a determiner
        action = self._action(text) or self._action(raw, before_determiner=True)
        if action:
            return f"I can't {self.actions[action]}: my skills find, pick up, put down and " \
                   f"bring things and go to places ('{action}' is none of them)"
        thing = self._missing(text)
        if thing:
            plural = thing.endswith("s") and not thing.endswith("ss")
            return f"I can't: there {'are' if plural else 'is'} no {thing} here"
        return ""

    def _action(self, text: str, before_determiner: bool = False) -> str:
        for clause in _CLAUSES.split(text):
            words = clause.strip()
            changed = True
            while changed:
                changed = False
                for lead in LEAD_INS:
                    if words == lead or words.startswith(lead + " "):
                        words, changed = words[len(lead):].strip(), True
            for action in sorted(self.actions, key=len, reverse=True):
                if before_determiner:
                    if re.match(rf"{re.escape(action)} (?:{'|'.join(DETERMINERS)}) ", words):
                        return action
                elif words == action or words.startswith(action + " "):
                    return action
        return ""

    def _missing(self, text: str) -> str:
        for names, asked_only in ((self.missing, False), (self.short, True)):
            for name in names:
                for form in _plurals(name):
                    for match in _find(form, text):
                        if self._asked_for(text, match, asked_only):
                            return name
        return ""

    def _names(self, word: str) -> bool:
        """Whether ``word`` is (a form of) an everyday object the kitchen lacks."""
        return any(word in _plurals(n) for n in (*self.missing, *self.short))

    def _asked_for(self, text: str, match, asked_only: bool) -> bool:
        after = re.match(r"\s+of\s+(?:\w+\s+)?([#\w'-]+)", text[match.end():])
        if after and (after.group(1) == "#" or self._names(after.group(1))):
            return False       # "a cup of green tea", "a slice of pizza": the thing after "of"
        before = text[:match.start()].split()[-4:]
        if any(n in before or f" {n} " in f" {' '.join(before)} " for n in NEGATIONS):
            return False
        if not asked_only:
            return True
        sentence = _SENTENCES.split(text[:match.start()])[-1]
        return any(next(_find(r, sentence), None) for r in REQUESTS)


def load_refusals(kitchen: Kitchen, path=None, lexicon_path=None,
                  synonyms: Mapping[str, Iterable[str]] | None = None) -> Refusals:
    """The refusals of ``kitchen``: ``path`` (default config/refusals.yaml) for the actions,
    ``lexicon_path`` (default config/planner_lexicon.yaml) for the everyday objects; ``synonyms``:
    more names of the kitchen's objects (the built-in kitchen's, from config/planner_data.yaml,
    when not given)."""
    data, source = load_yaml(path, default_name="refusals.yaml")
    actions = data.get("actions")
    if not isinstance(actions, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) and k.strip() and v.strip()
            for k, v in actions.items()):
        raise ConfigError(f"{source}: 'actions' must map verb phrases to what the robot "
                          f"cannot do (text)")
    lexicon, lex_source = load_yaml(lexicon_path, default_name="planner_lexicon.yaml")
    if not isinstance(lexicon.get("objects"), Mapping):
        raise ConfigError(f"{lex_source}: 'objects' must map names to attributes")
    planner_data, _ = load_yaml(None, default_name="planner_data.yaml")
    builtin = planner_data.get("objects") or {}
    if synonyms is None:
        synonyms = {name: entry.get("names", []) for name, entry in builtin.items()
                    if name in kitchen.objects}
    known = {_words(n) for n in (*kitchen.objects, *kitchen.locations)}
    known |= {_words(n) for names in synonyms.values() for n in names}
    things = data.get("things", [])
    if not isinstance(things, list) or not all(isinstance(t, str) and t.strip() for t in things):
        raise ConfigError(f"{source}: 'things' must be a list of names of everyday things")
    categories = {**(planner_data.get("categories") or {}), **(lexicon.get("categories") or {})}
    names = {_words(n) for n in lexicon["objects"]}
    missing = sorted(names - known, key=len, reverse=True)
    own_words = {w for n in known for w in n.split()}
    own_words |= {w for obj in kitchen.objects.values()
                  for w in _words(" ".join((obj.category, *obj.attributes))).split()}
    more = {t for t in map(_words, things) if t not in own_words}     # "towel": a paper towel
    short = sorted((_short_names(names, categories) | more) - names - known, key=len,
                   reverse=True)
    return Refusals({_words(k): v.strip() for k, v in actions.items()}, tuple(missing),
                    tuple(sorted(known, key=len, reverse=True)), tuple(short))


def _phrases(spec) -> list[str]:
    if not isinstance(spec, Mapping):
        return []
    return [p for key in ("one", "all") for p in (spec.get(key) or []) if isinstance(p, str)]


def _short_names(names: set[str], categories: Mapping) -> set[str]:
    """What people call the lexicon's objects for short: the thing of "bunch of grapes" and the
    last word of "frozen pizza" or "stuffed dog", unless that word also names a kind of thing
    ("dog food": "food") or a one-word object."""
    kinds = {w for key, spec in categories.items() if isinstance(spec, Mapping)
             for p in (*_phrases(spec), key.replace("_", " "), str(spec.get("word", "")))
             for w in _words(p).split()}
    single = {n for n in names if " " not in n}
    short = set()
    for name in names:
        if " of " in name:
            short.add(name.split(" of ", 1)[1])
        elif " " in name:
            short.add(name.rsplit(" ", 1)[1])
    return {n for n in short if n not in single and not set(n.split()) & kinds}
