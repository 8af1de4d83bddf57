"""The robot's skills: short language descriptions expanded from templates in ``config/skills.yaml``.

A :class:`Skill` knows its text, its family (the template it came from) and its kind (what it
does to the world), plus the object or location it is about. The :class:`SkillSet` is the whole
repertoire: the planner may only ever choose one of its skills.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping

from saycan_ros.core.config import ConfigError, load_yaml
from saycan_ros.core.kitchen import Kitchen

#: What a skill does; affordance models and executors are chosen by kind.
KINDS = ("navigate", "navigate_to_object", "pick", "place", "terminate")
#: The kinds that move the robot (whose outcome is where they end).
NAVIGATIONS = ("navigate", "navigate_to_object")


@dataclass(frozen=True)
class Skill:
    text: str
    family: str
    kind: str
    object: str | None = None
    location: str | None = None

    def __str__(self) -> str:
        return self.text


class UnknownSkillError(KeyError):
    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0])


@dataclass(frozen=True)
class SkillSet:
    """An ordered, immutable repertoire of skills, looked up by text."""
    skills: tuple[Skill, ...]

    def __post_init__(self) -> None:
        texts = [s.text for s in self.skills]
        duplicates = {t for t in texts if texts.count(t) > 1}
        if duplicates:
            raise ConfigError(f"skills defined twice: {sorted(duplicates)}")
        object.__setattr__(self, "_by_text", {s.text: s for s in self.skills})

    def __iter__(self) -> Iterator[Skill]:
        return iter(self.skills)

    def __len__(self) -> int:
        return len(self.skills)

    def __contains__(self, text: object) -> bool:
        return text in self._by_text

    @property
    def texts(self) -> list[str]:
        return [s.text for s in self.skills]

    def get(self, text: str) -> Skill:
        try:
            return self._by_text[text]
        except (KeyError, TypeError):
            raise UnknownSkillError(f"unknown skill {text!r}: not in the robot's repertoire of "
                                    f"{len(self.skills)} skills") from None

    def of_kind(self, *kinds: str) -> list[Skill]:
        return [s for s in self.skills if s.kind in kinds]

    @property
    def terminate(self) -> Skill:
        found = self.of_kind("terminate")
        if not found:
            raise ConfigError("the repertoire has no terminate skill (kind: terminate)")
        return found[0]


def _expand(family: str, spec: Mapping, kitchen: Kitchen) -> list[Skill]:
    template = spec.get("template")
    kind = spec.get("kind")
    if not isinstance(template, str) or kind not in KINDS:
        raise ConfigError(f"skill family {family!r}: needs a 'template' and a 'kind' in {KINDS}")
    over = spec.get("over")
    if over is None:
        location = spec.get("location")
        if location is not None:
            kitchen.location(location)
        return [Skill(template, family, kind, location=location)]
    if over == "objects":
        return [Skill(template.format(object=o.name, object_phrase=o.phrase), family, kind,
                      object=o.name, location=None)
                for o in kitchen.objects.values()]
    if over in ("navigable_locations", "locations"):
        names = kitchen.navigable if over == "navigable_locations" else tuple(kitchen.locations)
        return [Skill(template.format(location=name), family, kind, location=name)
                for name in names]
    raise ConfigError(f"skill family {family!r}: 'over' must be objects, locations or "
                      f"navigable_locations, got {over!r}")


def skills_from_dict(data: Mapping, kitchen: Kitchen) -> SkillSet:
    families = data.get("families")
    if not isinstance(families, Mapping) or not families:
        raise ConfigError("skills config: expected a non-empty 'families' mapping")
    skills: list[Skill] = []
    for family, spec in families.items():
        if not isinstance(spec, Mapping):
            raise ConfigError(f"skill family {family!r}: expected a mapping")
        skills.extend(_expand(str(family), spec, kitchen))
    return SkillSet(tuple(skills))


def load_skills(kitchen: Kitchen, path: str | Path | None = None) -> SkillSet:
    """The repertoire from ``config/skills.yaml`` (or ``path``) over ``kitchen``."""
    data, _ = load_yaml(path, default_name="skills.yaml")
    return skills_from_dict(data, kitchen)
