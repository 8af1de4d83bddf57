"""Task files: instructions with a start state (``init``) and a goal to check.

The format (YAML)::

    instructions:
    - {id: t001, family: nl_nouns, text: "Bring me a fruit.",
       init: {robot_at: table, holding: null, objects: {apple: far counter}, absent: [orange]},
       goal: "or(at(apple, user), at(orange, user))"}

Goal grammar: ``at(O, L)``, ``holding(O)``, ``holding(none)``, ``robot_at(L)``, ``and(...)``,
``or(...)``, ``not(...)``, ``atleast(N, ...)``. Every error names the task id and where it is.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

import yaml

from saycan_ros.core.kitchen import GRIPPER, Kitchen, KitchenError

FAMILIES = ("nl_single", "nl_nouns", "nl_verbs", "structured", "embodiment", "crowd",
            "long_horizon")
INIT_KEYS = {"robot_at", "holding", "objects", "absent"}
MAX_INSTRUCTION_CHARS = 2000
#: An init names at most every object and place of a kitchen once: a few hundred characters.
MAX_INIT_CHARS = 20_000


class TaskError(ValueError):
    """A task file, task init or goal that cannot be used; the message says where and why."""


# -- start states ------------------------------------------------------------------------------
@dataclass(frozen=True)
class TaskInit:
    """Overrides of the default scene that a task starts from."""
    robot_at: str | None = None
    holding: str | None = None
    objects: Mapping[str, str] = field(default_factory=dict)
    absent: tuple[str, ...] = ()

    @classmethod
    def from_mapping(cls, data: Mapping | None, kitchen: Kitchen) -> "TaskInit":
        if data is None:
            return cls()
        if not isinstance(data, Mapping):
            raise TaskError(f"init must be a mapping, got {type(data).__name__}")
        unknown = set(data) - INIT_KEYS
        if unknown:
            raise TaskError(f"init has unknown keys {sorted(unknown)}; allowed: {sorted(INIT_KEYS)}")
        try:
            robot_at = _name_or_none(data.get("robot_at"), "robot_at")
            if robot_at is not None:
                kitchen.location(robot_at)
            holding = _name_or_none(data.get("holding"), "holding")
            if holding in ("none", ""):
                holding = None
            if holding is not None:
                kitchen.object(holding)
            objects = data.get("objects") or {}
            if not isinstance(objects, Mapping):
                raise TaskError("init.objects must map object -> location")
            for obj, loc in objects.items():
                kitchen.object(_name(obj, "objects key"))
                kitchen.location(_name(loc, f"objects[{obj!r}]"))
            absent = data.get("absent") or []
            if isinstance(absent, str) or not isinstance(absent, Sequence):
                raise TaskError("init.absent must be a list of objects")
            for obj in absent:
                kitchen.object(_name(obj, "absent item"))
        except KitchenError as exc:
            raise TaskError(f"init: {exc}") from None
        init = cls(robot_at=None if robot_at is None else str(robot_at),
                   holding=None if holding is None else str(holding),
                   objects={str(k): str(v) for k, v in objects.items()},
                   absent=tuple(str(a) for a in absent))
        if init.holding is not None and init.holding in init.absent:
            raise TaskError(f"init: {init.holding!r} is both held and absent")
        if init.holding is not None and init.holding in init.objects:
            raise TaskError(f"init: {init.holding!r} is both held and placed at "
                            f"{init.objects[init.holding]!r}")
        for obj in init.absent:
            if obj in init.objects:
                raise TaskError(f"init: {obj!r} is both absent and placed at {init.objects[obj]!r}")
        return init

    def scene(self, kitchen: Kitchen) -> dict[str, str]:
        """Object -> location for every present object (a held one maps to ``GRIPPER``)."""
        scene = kitchen.default_scene()
        scene.update(self.objects)
        for obj in self.absent:
            scene.pop(obj, None)
        if self.holding is not None:
            scene[self.holding] = GRIPPER
        return scene

    def to_mapping(self) -> dict:
        return {"robot_at": self.robot_at, "holding": self.holding,
                "objects": dict(self.objects), "absent": list(self.absent)}


def _name(value, where: str) -> str:
    """A name of the kitchen as given: text only, checked before it is formatted anywhere (a
    YAML alias bomb is a nested list whose str() would not fit in memory)."""
    if not isinstance(value, str):
        raise TaskError(f"init.{where} must be a name (text), got {type(value).__name__}")
    return value


def _name_or_none(value, where: str) -> str | None:
    return None if value is None else _name(value, where)


class _NoAliasLoader(yaml.SafeLoader):
    """The safe loader without anchors and aliases: a start state has no use for them, and
    they are how a few hundred bytes of YAML expand into billions of nodes."""

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.get_event()
            raise TaskError(f"init: YAML aliases (*{event.anchor}) are not accepted")
        return super().compose_node(parent, index)


def parse_init_text(text: str, kitchen: Kitchen) -> TaskInit:
    """A task ``init`` given as JSON or YAML text, as a service request carries it ("" or "{}"
    = the default scene): at most :data:`MAX_INIT_CHARS` characters, no YAML aliases, names
    only where names go. Raises :class:`TaskError`."""
    if not isinstance(text, str):
        raise TaskError(f"init must be text, got {type(text).__name__}")
    if len(text) > MAX_INIT_CHARS:
        raise TaskError(f"init has {len(text)} characters; the limit is {MAX_INIT_CHARS}")
    if not text.strip():
        return TaskInit()
    try:
        data = yaml.load(text, Loader=_NoAliasLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise TaskError(f"init is not JSON/YAML: {str(exc)[:300]}") from None
    return TaskInit.from_mapping(data, kitchen)


def init_to_json(init) -> str:
    """A task ``init`` (TaskInit, mapping, JSON text or None) as compact JSON without the empty
    keys (what ``--init`` and the ResetWorld service take); "" for no init."""
    if init is None:
        return ""
    if isinstance(init, str):
        return init
    if isinstance(init, TaskInit):
        init = init.to_mapping()
    return json.dumps({k: v for k, v in dict(init).items() if v not in (None, {}, [], ())})


# -- goals -------------------------------------------------------------------------------------
_TOKEN = re.compile(r"\s*(?:(?P<punct>[(),])|(?P<word>[^(),]+))")


@dataclass(frozen=True)
class GoalExpr:
    """A parsed goal: ``op`` with ``args`` (sub-goals or names)."""
    op: str
    args: tuple
    text: str = field(default="", compare=False)

    def holds(self, state) -> bool:
        """Evaluate on anything with ``object_location(o)``, ``holding`` and ``robot_at``."""
        op, args = self.op, self.args
        if op == "at":
            return state.object_location(args[0]) == args[1]
        if op == "holding":
            return state.holding == args[0]
        if op == "robot_at":
            return state.robot_at == args[0]
        if op == "and":
            return all(a.holds(state) for a in args)
        if op == "or":
            return any(a.holds(state) for a in args)
        if op == "not":
            return not args[0].holds(state)
        if op == "atleast":
            return sum(a.holds(state) for a in args[1:]) >= args[0]
        raise AssertionError(op)


def _tokens(text: str) -> list[tuple[str, int]]:
    out, pos = [], 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if not match or match.end() == pos:
            if text[pos:].strip() == "":
                break
            raise TaskError(f"goal {text!r}: cannot read at character {pos}")
        token = match.group("punct") or match.group("word").strip()
        if token:
            out.append((token, match.start(match.lastgroup)))
        pos = match.end()
    return out


def parse_goal(text: str, kitchen: Kitchen) -> GoalExpr:
    """Parse a goal string, checking every name against the kitchen."""
    if not isinstance(text, str) or not text.strip():
        raise TaskError("goal must be a non-empty string")
    tokens = _tokens(text)
    index = 0

    def fail(msg: str, at: int | None = None) -> TaskError:
        where = tokens[at][1] if at is not None and at < len(tokens) else len(text)
        return TaskError(f"goal {text!r}: {msg} (at character {where})")

    def expect(symbol: str) -> None:
        nonlocal index
        if index >= len(tokens) or tokens[index][0] != symbol:
            raise fail(f"expected {symbol!r}", index)
        index += 1

    def name() -> str:
        nonlocal index
        if index >= len(tokens) or tokens[index][0] in "(),":
            raise fail("expected a name", index)
        index += 1
        return tokens[index - 1][0]

    def checked(kind: str, value: str, at: int) -> str:
        try:
            (kitchen.object if kind == "object" else kitchen.location)(value)
        except KitchenError as exc:
            raise fail(str(exc), at) from None
        return value

    def expr() -> GoalExpr:
        nonlocal index
        start = index
        op = name()
        expect("(")
        if op == "at":
            obj = checked("object", name(), index - 1)
            expect(",")
            loc = name()
            if loc != GRIPPER:
                checked("location", loc, index - 1)
            args = (obj, loc)
        elif op == "holding":
            value = name()
            args = (None,) if value == "none" else (checked("object", value, index - 1),)
        elif op == "robot_at":
            args = (checked("location", name(), index - 1),)
        elif op in ("and", "or", "not", "atleast"):
            items: list = []
            if op == "atleast":
                raw = name()
                if not raw.isdigit():
                    raise fail(f"atleast needs a whole number first, got {raw!r}", index - 1)
                items.append(int(raw))
                expect(",")
            items.append(expr())
            while index < len(tokens) and tokens[index][0] == ",":
                index += 1
                items.append(expr())
            if op == "not" and len(items) != 1:
                raise fail("not(...) takes exactly one goal", start)
            if op == "atleast" and items[0] > len(items) - 1:
                raise fail(f"atleast({items[0]}, ...) has only {len(items) - 1} goals", start)
            args = tuple(items)
        else:
            raise fail(f"unknown goal {op!r}; known: at, holding, robot_at, and, or, not, atleast",
                       start)
        expect(")")
        return GoalExpr(op, args, text)

    goal = expr()
    if index != len(tokens):
        raise fail("unexpected text after the goal", index)
    return goal


# -- task files --------------------------------------------------------------------------------
#: What a task expects of the planner: ``done`` (reach ``goal``) or ``rejected`` (refuse
#: before any skill runs: the request is impossible, and the task has no goal).
EXPECTS = ("done", "rejected")


@dataclass(frozen=True)
class Task:
    id: str
    family: str
    text: str
    init: TaskInit
    goal: GoalExpr | None                # None only when expect is "rejected"
    expect: str = "done"


def check_instruction(text) -> str:
    """The instruction stripped, or a :class:`TaskError` saying why it cannot be planned."""
    if not isinstance(text, str):
        raise TaskError(f"instruction must be text, got {type(text).__name__}")
    stripped = " ".join(text.split())
    if not stripped:
        raise TaskError("instruction is empty")
    if len(stripped) > MAX_INSTRUCTION_CHARS:
        raise TaskError(f"instruction has {len(stripped)} characters; the limit is "
                        f"{MAX_INSTRUCTION_CHARS}")
    return stripped


def parse_tasks(data, kitchen: Kitchen, source: str = "<tasks>") -> list[Task]:
    """Validate the mapping of a task file; errors name the file, the task id and its index."""
    if not isinstance(data, Mapping) or "instructions" not in data:
        raise TaskError(f"{source}: expected a mapping with an 'instructions' list")
    items = data["instructions"]
    if not isinstance(items, list) or not items:
        raise TaskError(f"{source}: 'instructions' must be a non-empty list")
    tasks, seen = [], set()
    for position, item in enumerate(items):
        where = f"{source}: instructions[{position}]"
        if not isinstance(item, Mapping):
            raise TaskError(f"{where}: expected a mapping")
        raw_id = item.get("id")
        task_id = str(raw_id).strip() if isinstance(raw_id, (str, int)) else ""
        if task_id:
            where += f" (id {task_id})"
        try:
            unknown = set(item) - {"id", "family", "text", "init", "goal", "expect"}
            if unknown:
                raise TaskError(f"unknown keys {sorted(unknown)}")
            expect = item.get("expect", "done")
            if expect not in EXPECTS:
                raise TaskError(f"expect must be one of {', '.join(EXPECTS)}, got {expect!r}")
            required = ("id", "family", "text") + (("goal",) if expect == "done" else ())
            for key in required:
                if key not in item:
                    raise TaskError(f"missing {key!r}")
            if expect == "rejected" and item.get("goal") is not None:
                raise TaskError("a task that expects 'rejected' has no goal")
            if not task_id:
                raise TaskError(f"id must be a non-empty name, got {raw_id!r}")
            if task_id in seen:
                raise TaskError("duplicate id")
            family = str(item["family"])
            if not re.fullmatch(r"[a-z][a-z0-9_]*", family):
                raise TaskError(f"family {family!r} must be a lower-case identifier")
            tasks.append(Task(id=task_id, family=family, text=check_instruction(item["text"]),
                              init=TaskInit.from_mapping(item.get("init"), kitchen),
                              goal=parse_goal(item["goal"], kitchen) if expect == "done"
                              else None, expect=expect))
            seen.add(task_id)
        except TaskError as exc:
            raise TaskError(f"{where}: {exc}") from None
    return tasks


def load_tasks(path: str | Path, kitchen: Kitchen) -> list[Task]:
    """Read and validate a task file (YAML); see :func:`parse_tasks`."""
    from saycan_ros.core.config import ConfigError, read_text, resolve_config
    try:
        resolved = resolve_config(path, "tasks.yaml")
        data = yaml.safe_load(read_text(resolved))
    except ConfigError as exc:
        raise TaskError(str(exc)) from None
    except yaml.YAMLError as exc:
        raise TaskError(f"{resolved}: invalid YAML: {exc}") from None
    return parse_tasks(data, kitchen, str(resolved))


def task_file_kitchen(path: str | Path) -> str:
    """The kitchen a task file names (its top-level ``kitchen:``, relative to the task file's
    folder) as an absolute path, or "" when it names none (the built-in kitchen)."""
    from saycan_ros.core.config import ConfigError, read_text, resolve_config
    try:
        resolved = resolve_config(path, "tasks.yaml")
        data = yaml.safe_load(read_text(resolved))
    except (ConfigError, yaml.YAMLError):
        return ""              # load_tasks says what is wrong with the file
    name = data.get("kitchen") if isinstance(data, Mapping) else None
    if not name:
        return ""
    kitchen = Path(resolved).parent / str(name)
    if not kitchen.is_file():
        raise TaskError(f"{resolved}: kitchen: no such file {kitchen}")
    return str(kitchen.resolve())
