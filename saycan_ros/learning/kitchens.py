"""Many kitchens: every training dialogue can be drawn in a kitchen of its own, so that the
planner adapter learns to read the scene line and the instruction instead of memorising one
kitchen's fifteen names.

A random kitchen takes 5-20 objects of ``config/planner_lexicon.yaml`` (over 300 everyday
objects with their attributes) and 3-7 of its places, plus a disposal place and the user; the
lexicon's categories and needs (with ``config/planner_data.yaml``'s templates) then make the
instructions, exactly as :class:`~saycan_ros.learning.planner_data.PlanDataGenerator` does for
the built-in kitchen. :func:`kitchen_lexicon` does the same for any kitchen file (``saycan
train planner --kitchen``): its objects' names, and the categories that its attributes name.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterable, Mapping

from saycan_ros.core.config import ConfigError, load_yaml
from saycan_ros.core.kitchen import USER, Kitchen, kitchen_from_dict
from saycan_ros.core.skills import load_skills
from saycan_ros.learning.planner_data import (Dialogue, Lexicon, PlanDataGenerator,
                                              impossible_actions)

#: Where the places of a random kitchen stand (metres; the symbolic world and the distance
#: affordance read them): up to 7 surfaces, the disposal place and the user.
_SLOTS = ((1.2, 1.0), (6.6, 5.0), (3.8, 3.0), (3.8, 5.5), (6.6, 3.0), (1.2, 3.2), (2.6, 5.4))
_DISPOSAL_AT, _USER_AT = (0.6, 5.2), (6.8, 1.2)
#: The families a random kitchen draws (its objects have no names in other languages).
MANY_KITCHEN_FAMILIES = ("nl_single", "nl_nouns", "nl_verbs", "structured", "embodiment", "crowd",
                         "long_horizon", "negation", "counting", "ambiguous", "impossible")


@dataclass(frozen=True)
class KitchenLexicon:
    """``config/planner_lexicon.yaml`` joined with ``config/planner_data.yaml``'s categories,
    needs, templates and step phrases."""
    objects: Mapping[str, tuple[str, ...]]        # name -> attribute keys
    categories: Mapping[str, Mapping]             # key -> {one, all, word}
    needs: Mapping[str, list[str]]
    places: tuple[str, ...]
    disposals: tuple[str, ...]
    base: Mapping                                 # planner_data.yaml (templates, steps ...)

    @property
    def names(self) -> set[str]:
        """Every object and place name (what development kitchens must not use)."""
        return set(self.objects) | set(self.places) | set(self.disposals)


def load_kitchen_lexicon(path: str | Path | None = None,
                         base_path: str | Path | None = None) -> KitchenLexicon:
    data, source = load_yaml(path, default_name="planner_lexicon.yaml")
    base, _ = load_yaml(base_path, default_name="planner_data.yaml")
    try:
        categories = {**{k: {**v, "word": k.replace("_", " ")}
                         for k, v in base["categories"].items()}, **data["categories"]}
        objects = {str(k): tuple(v) for k, v in data["objects"].items()}
        needs = {**base["needs"], **data.get("needs", {})}
        lexicon = KitchenLexicon(objects, categories, needs, tuple(data["places"]),
                                 tuple(data["disposals"]), base)
    except (KeyError, TypeError, AttributeError) as exc:
        raise ConfigError(f"{source}: missing or malformed section {exc}") from None
    for name, attributes in data["objects"].items():
        if not isinstance(attributes, list) or not all(isinstance(a, str) for a in attributes):
            raise ConfigError(f"{source}: objects.{name}: expected a list of attribute keys")
    for name, attributes in lexicon.objects.items():
        unknown = set(attributes) - set(categories)
        if unknown:
            raise ConfigError(f"{source}: objects.{name}: unknown attributes {sorted(unknown)}")
    return lexicon


def article_of(name: str) -> str:
    if name.endswith("s") and not name.endswith("ss"):
        return "the"
    return "an" if name[0] in "aeiou" else "a"


def random_kitchen(lexicon: KitchenLexicon, rng: random.Random,
                   objects: tuple[int, int] = (5, 20), places: tuple[int, int] = (3, 7)
                   ) -> Kitchen:
    """A kitchen of random objects and places of the lexicon, each object at a random place."""
    surfaces = rng.sample(lexicon.places, rng.randint(*places))
    disposal = rng.choice(lexicon.disposals)
    chosen = rng.sample(sorted(lexicon.objects), rng.randint(*objects))
    locations = {name: _place(xy) for name, xy in zip(surfaces, _SLOTS)}
    locations[disposal] = _place(_DISPOSAL_AT, height=0.6)
    locations[USER] = _place(_USER_AT)
    data = {"locations": locations, "disposal": disposal,
            "objects": {name: {"article": article_of(name), "default": rng.choice(surfaces),
                               "attributes": [lexicon.categories[a]["word"]
                                              for a in lexicon.objects[name]]}
                        for name in chosen},
            "robot": {"start": rng.choice(surfaces)}}
    return kitchen_from_dict(data, source="<random kitchen>")


def _place(xy: tuple[float, float], height: float = 0.85) -> dict:
    return {"center": list(xy), "size": [1.0, 0.6], "height": height,
            "approach": [xy[0], xy[1] - 0.8 if xy[1] > 2 else xy[1] + 0.8], "yaw": 0.0}


def kitchen_lexicon(kitchen: Kitchen, lexicon: KitchenLexicon) -> Lexicon:
    """The generator's :class:`Lexicon` for ``kitchen``: each object named by its own name, its
    categories those of the lexicon entry of that name (or whose ``word`` the kitchen file's
    attributes use), and only the categories and needs some object of the kitchen fills."""
    by_word = {spec["word"]: key for key, spec in lexicon.categories.items()}
    objects = {}
    for name, obj in kitchen.objects.items():
        keys = set(lexicon.objects.get(name, ()))
        keys |= {by_word[w] for w in obj.attributes if w in by_word}
        keys |= {w for w in obj.attributes if w in lexicon.categories}
        objects[name] = {"names": [name], "attributes": sorted(keys)}
    used = {a for spec in objects.values() for a in spec["attributes"]}
    categories = {k: {"one": list(v.get("one") or []), "all": list(v.get("all") or [])}
                  for k, v in lexicon.categories.items() if k in used}
    base = lexicon.base
    return Lexicon(objects=objects, categories=categories,
                   locations={loc: [loc] for loc in kitchen.locations if loc != USER},
                   needs={k: v for k, v in lexicon.needs.items() if k in used},
                   templates=dict(base["templates"]), steps=dict(base["steps"]),
                   spills=list(base["spills"]), places=list(base["places"]),
                   impossible_actions=impossible_actions(base))


class ManyKitchenGenerator:
    """Dialogues each drawn in a random kitchen (``per_kitchen`` dialogues share one), mixed
    with ``builtin_share`` of dialogues from ``builtin`` (the built-in kitchen's generator) so
    that the built-in kitchen is not forgotten. The same seed gives the same dialogues."""

    def __init__(self, lexicon: KitchenLexicon, seed: int = 0, exclude: Iterable[str] = (),
                 scene_refresh: bool = False, builtin: PlanDataGenerator | None = None,
                 builtin_share: float = 0.0, per_kitchen: int = 4,
                 family_weights: Mapping[str, float] | None = None,
                 skills_file: str | None = None, scene_details: bool = False,
                 any_reading: str = "random"):
        self.lexicon, self.rng = lexicon, random.Random(seed)
        self.exclude, self.scene_refresh = list(exclude), scene_refresh
        self.builtin, self.builtin_share = builtin, builtin_share
        self.per_kitchen = max(1, per_kitchen)
        self.family_weights = {f: w for f, w in (family_weights or {}).items()
                               if f in MANY_KITCHEN_FAMILIES}
        self.skills_file, self.scene_details = skills_file, scene_details
        self.any_reading = any_reading

    def _kitchen_generator(self) -> PlanDataGenerator:
        kitchen = random_kitchen(self.lexicon, self.rng)
        skills = load_skills(kitchen, self.skills_file)
        from saycan_ros.learning.planner_data import FAMILY_WEIGHTS
        weights = {f: w for f, w in {**FAMILY_WEIGHTS, **self.family_weights}.items()
                   if f in MANY_KITCHEN_FAMILIES}
        return PlanDataGenerator(kitchen, skills, kitchen_lexicon(kitchen, self.lexicon),
                                 seed=self.rng.randrange(2**31), exclude=self.exclude,
                                 scene_refresh=self.scene_refresh, family_weights=weights,
                                 scene_details=self.scene_details, any_reading=self.any_reading,
                                 missing_names=self.lexicon.objects)

    def dialogues(self, n: int, progress=None) -> list[Dialogue]:
        """``n`` dialogues, ``round(n * builtin_share)`` of them from the built-in kitchen at
        random places in the list. (The share counts dialogues, not draws: a random kitchen
        gives ``per_kitchen`` dialogues at a time, the built-in generator one.)"""
        n_builtin = round(n * self.builtin_share) if self.builtin is not None else 0
        builtin_slots = [True] * n_builtin + [False] * (n - n_builtin)
        self.rng.shuffle(builtin_slots)
        home = self.builtin.dialogues(n_builtin) if n_builtin else []
        if progress is not None:
            progress.update(len(home))
        away: list[Dialogue] = []
        while len(away) < n - n_builtin:
            batch = _draw_some(self._kitchen_generator(),
                               min(self.per_kitchen, n - n_builtin - len(away)))
            away.extend(replace(d, kitchen="random") for d in batch)
            if progress is not None:
                progress.update(len(batch))
        home_iter, away_iter = iter(home), iter(away)
        return [next(home_iter) if at_home else next(away_iter) for at_home in builtin_slots]


def _draw_some(generator: PlanDataGenerator, n: int, tries: int = 200) -> list[Dialogue]:
    """Up to ``n`` distinct dialogues of one kitchen (a small kitchen may give fewer)."""
    out, seen = [], set()
    families, weights = zip(*generator.family_weights.items())
    for _ in range(tries):
        if len(out) >= n:
            break
        dialogue = generator.draw(generator.rng.choices(families, weights)[0])
        if dialogue is not None and (dialogue.instruction, dialogue.scene) not in seen:
            seen.add((dialogue.instruction, dialogue.scene))
            out.append(dialogue)
    return out


def kitchen_names(kitchen: Kitchen) -> set[str]:
    """A kitchen's object and place names (for the lexicon disjointness check)."""
    return set(kitchen.objects) | {p for p in kitchen.locations if p != USER}
