"""Saying "I can't" before the robot moves: a request that needs an action no skill does
("Open the fridge.") or an everyday thing the kitchen does not have ("Bring me a banana.") is
refused with the reason, instead of being carried out on something else.

Grounded in the kitchen file and two word lists, not in the language model: the actions of
``config/refusals.yaml`` (verbs that start a clause of the request) and the everyday objects of
``config/planner_lexicon.yaml``. Names of the kitchen's own objects and places are read first and
never count as missing ("lime" in "lime soda"), and a thing named after "not", "no", "without"
or "except" is not asked for. A request in words neither list knows is left to the planner.
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

    def why_not(self, instruction: str) -> str:
        text = _words(instruction)
        for name in self.known:                     # its own names first: never missing
            for match in reversed(list(_find(name, text))):
                text = text[:match.start()] + "#" + text[match.end():]
        action = self._action(text)
        if action:
            return f"I can't {self.actions[action]}: my skills find, pick up, put down and " \
                   f"bring things and go to places ('{action}' is none of them)"
        thing = self._missing(text)
        if thing:
            plural = thing.endswith("s") and not thing.endswith("ss")
            return f"I can't: there {'are' if plural else 'is'} no {thing} here"
        return ""

    def _action(self, text: str) -> str:
        for clause in _CLAUSES.split(text):
            words = clause.strip()
            changed = True
            while changed:
                changed = False
                for lead in LEAD_INS:
                    if words == lead or words.startswith(lead + " "):
                        words, changed = words[len(lead):].strip(), True
            for action in sorted(self.actions, key=len, reverse=True):
                if words == action or words.startswith(action + " "):
                    return action
        return ""

    def _missing(self, text: str) -> str:
        for name in self.missing:
            for form in _plurals(name):
                for match in _find(form, text):
                    if re.match(r"\s+of\s+(?:\w+\s+)?#", text[match.end():]):
                        continue     # "a cup of green tea": the kitchen's green tea, in a cup
                    before = text[:match.start()].split()[-4:]
                    if not any(n in " ".join(before).split() or f" {n} " in
                               f" {' '.join(before)} " for n in NEGATIONS):
                        return name
        return ""


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
    if synonyms is None:
        planner_data, _ = load_yaml(None, default_name="planner_data.yaml")
        synonyms = {name: entry.get("names", []) for name, entry in
                    (planner_data.get("objects") or {}).items() if name in kitchen.objects}
    known = {_words(n) for n in (*kitchen.objects, *kitchen.locations)}
    known |= {_words(n) for names in synonyms.values() for n in names}
    things = {_words(n) for n in lexicon["objects"]}
    missing = sorted(things - known, key=len, reverse=True)
    return Refusals({_words(k): v.strip() for k, v in actions.items()}, tuple(missing),
                    tuple(sorted(known, key=len, reverse=True)))
