"""The skill registry: which executor runs each skill family, and which affordance model scores
it (``config/skill_registry.yaml``). ROS-free.

Every family of the repertoire (``config/skills.yaml``) must be registered and every registered
family must exist, so a skill can neither be chosen without a way to run it nor be routed to
an executor for a family the robot does not have. :meth:`SkillRegistry.route` maps a skill's
exact text to its executor's ExecuteSkill service and rejects anything else with a clear
error: nothing outside the registry can be executed. Families with ``executor: none`` (the
terminate skill, ``done``) are ended by the planner itself and never sent to an executor.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from saycan_ros.core.config import ConfigError, load_yaml
from saycan_ros.core.skills import Skill, SkillSet, UnknownSkillError

#: A ROS service name: relative or absolute, slash-separated tokens.
_NAME = re.compile(r"^/?[A-Za-z_][A-Za-z0-9_]*(/[A-Za-z_][A-Za-z0-9_]*)*$")
NO_EXECUTOR = "none"
_ENTRY_KEYS = {"executor", "affordance", "description"}


class RegistryError(ConfigError):
    """A malformed registry, or a skill it does not route."""


class UnregisteredSkillError(RegistryError, KeyError):
    def __str__(self) -> str:
        return str(self.args[0])


@dataclass(frozen=True)
class RegistryEntry:
    family: str
    executor: str                  # ExecuteSkill service name, or "none"
    affordance: Mapping            # affordance model spec: {type: NAME, **params}
    description: str = ""

    @property
    def executed_by_planner(self) -> bool:
        return self.executor == NO_EXECUTOR


def _absolute(name: str) -> str:
    return name if name.startswith("/") else "/" + name


class SkillRegistry:
    def __init__(self, entries: Mapping[str, RegistryEntry], skills: SkillSet | None = None,
                 source: str = "<dict>"):
        self.entries = dict(entries)
        self.skills = skills
        self.source = source
        if skills is not None:
            self.validate(skills)

    # -- checks --------------------------------------------------------------------------------
    def validate(self, skills: SkillSet) -> None:
        """Raise RegistryError unless the registry and the repertoire match exactly."""
        families: dict[str, list[Skill]] = {}
        for skill in skills:
            families.setdefault(skill.family, []).append(skill)
        missing = sorted(set(families) - set(self.entries))
        if missing:
            raise RegistryError(f"{self.source}: skill families without an executor: {missing} "
                                f"(add them to the registry)")
        unknown = sorted(set(self.entries) - set(families))
        if unknown:
            raise RegistryError(f"{self.source}: registers families that are not in the skill "
                                f"repertoire: {unknown}")
        by_kind: dict[str, tuple[str, dict]] = {}
        for family, members in families.items():
            entry = self.entries[family]
            kind = members[0].kind
            if entry.executed_by_planner and kind != "terminate":
                raise RegistryError(f"{self.source}: family {family!r} (kind {kind}) needs an "
                                    f"executor; only terminate skills may have 'executor: none'")
            spec = dict(entry.affordance)
            if kind in by_kind and by_kind[kind][1] != spec:
                raise RegistryError(f"{self.source}: families {by_kind[kind][0]!r} and "
                                    f"{family!r} are both of kind {kind!r} but name different "
                                    f"affordance models")
            by_kind[kind] = (family, spec)
        self.skills = skills

    # -- routing ---------------------------------------------------------------------------------
    def entry_for(self, skill: str | Skill) -> RegistryEntry:
        if isinstance(skill, Skill):
            found = skill
        else:
            if self.skills is None:
                raise RegistryError("the registry was loaded without a skill repertoire")
            try:
                found = self.skills.get(skill)
            except UnknownSkillError:
                raise UnregisteredSkillError(
                    f"unregistered skill {skill!r}: not in the robot's repertoire; nothing "
                    f"outside the skill registry can be executed") from None
        entry = self.entries.get(found.family)
        if entry is None:
            raise UnregisteredSkillError(f"skill {found.text!r}: its family {found.family!r} "
                                         f"has no executor in the skill registry")
        return entry

    def route(self, skill: str | Skill) -> str:
        """The ExecuteSkill service that executes ``skill``, as the registry names it (a
        relative name resolves in the caller's namespace)."""
        entry = self.entry_for(skill)
        if entry.executed_by_planner:
            raise RegistryError(f"{str(skill)!r} is not sent to an executor: the planner ends "
                                f"the plan with it")
        return entry.executor

    def services(self) -> list[str]:
        """Every executor service, once, in registry order."""
        out: list[str] = []
        for entry in self.entries.values():
            if not entry.executed_by_planner and entry.executor not in out:
                out.append(entry.executor)
        return out

    def families_of(self, service: str, resolve=_absolute) -> list[str]:
        """The families routed to ``service`` (names compared after ``resolve``, e.g. a node's
        ``resolve_service_name``)."""
        return [f for f, e in self.entries.items()
                if not e.executed_by_planner and resolve(e.executor) == resolve(service)]

    # -- affordances -----------------------------------------------------------------------------
    def affordance_models(self) -> dict[str, dict]:
        """Affordance model spec per skill kind (what ``config/affordance.yaml`` holds)."""
        if self.skills is None:
            raise RegistryError("the registry was loaded without a skill repertoire")
        kinds: dict[str, dict] = {}
        for skill in self.skills:
            kinds.setdefault(skill.kind, dict(self.entries[skill.family].affordance))
        return kinds

    def affordance_scorer(self, completed_cap: float = 0.0):
        """An AffordanceScorer with the registry's models."""
        from saycan_ros.planning.affordance import AffordanceScorer, make_affordance_model
        return AffordanceScorer({kind: make_affordance_model(spec)
                                 for kind, spec in self.affordance_models().items()},
                                completed_cap=completed_cap)


def registry_from_dict(data: Mapping, skills: SkillSet | None = None,
                       source: str = "<dict>") -> SkillRegistry:
    section = data.get("registry", data) if isinstance(data, Mapping) else None
    families = section.get("families") if isinstance(section, Mapping) else None
    if not isinstance(families, Mapping) or not families:
        raise RegistryError(f"{source}: expected 'families' mapping skill family -> "
                            f"{{executor, affordance}}")
    from saycan_ros.planning.affordance import AFFORDANCE_MODELS
    entries = {}
    for family, spec in families.items():
        where = f"{source}: family {family!r}"
        if not isinstance(spec, Mapping):
            raise RegistryError(f"{where}: expected a mapping with 'executor' and 'affordance'")
        extra = set(spec) - _ENTRY_KEYS
        if extra:
            raise RegistryError(f"{where}: unknown keys {sorted(extra)}; allowed: "
                                f"{sorted(_ENTRY_KEYS)}")
        executor = spec.get("executor")
        if executor is None or executor is False:
            executor = NO_EXECUTOR
        if not isinstance(executor, str) or not (executor == NO_EXECUTOR or _NAME.match(executor)):
            raise RegistryError(f"{where}: executor must be a ROS service name or 'none', got "
                                f"{executor!r}")
        affordance = spec.get("affordance")
        if isinstance(affordance, str):
            affordance = {"type": affordance}
        if not isinstance(affordance, Mapping) or "type" not in affordance:
            raise RegistryError(f"{where}: affordance must be a model spec {{type: NAME, ...}}, "
                                f"got {affordance!r}")
        if affordance["type"] not in AFFORDANCE_MODELS:
            raise RegistryError(f"{where}: unknown affordance model {affordance['type']!r}; "
                                f"known: {', '.join(AFFORDANCE_MODELS)}")
        entries[str(family)] = RegistryEntry(str(family), executor, dict(affordance),
                                             str(spec.get("description", "")))
    return SkillRegistry(entries, skills, source)


def load_registry(path: str | Path | None = None, skills: SkillSet | None = None) -> SkillRegistry:
    """The registry from ``config/skill_registry.yaml`` (or ``path``), checked against
    ``skills`` when given."""
    data, source = load_yaml(path, default_name="skill_registry.yaml")
    return registry_from_dict(data, skills, source)
