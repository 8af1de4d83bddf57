"""The kitchen's vocabulary and geometry, loaded from ``config/kitchen.yaml``.

Everything that names an object or a place (skills, worlds, the simulator, task files) goes
through :class:`Kitchen`, so a typo in a task file is caught in one place.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from saycan_ros.core.config import load_yaml

#: Where the robot's own hand counts as a "location" of an object.
GRIPPER = "gripper"
#: The location that means "delivered to the person".
USER = "user"


class KitchenError(ValueError):
    """A name or value that does not belong to the kitchen."""


@dataclass(frozen=True)
class Location:
    name: str
    center: tuple[float, float]
    size: tuple[float, float]
    height: float
    approach: tuple[float, float]
    yaw: float


@dataclass(frozen=True)
class KitchenObject:
    name: str
    article: str
    category: str
    colour: tuple[int, int, int]
    default_location: str
    #: What the object is, in a few words the planner may read ("office supply", "fizzy").
    attributes: tuple[str, ...] = ()
    description: str = ""

    @property
    def phrase(self) -> str:
        """The object with its article, as skills say it: "a coke can", "an apple"."""
        return f"{self.article} {self.name}".strip()

    @property
    def about(self) -> str:
        """The words the kitchen file gives about the object (attributes, then description)."""
        return ", ".join([*self.attributes, *([self.description] if self.description else [])])


@dataclass(frozen=True)
class Kitchen:
    frame_id: str
    size: tuple[float, float]
    locations: Mapping[str, Location]
    navigable: tuple[str, ...]
    objects: Mapping[str, KitchenObject]
    robot_start: str
    source: str = field(default="", compare=False)
    #: Where "throw away" leads (None: the kitchen has no such place).
    disposal: str | None = None

    # -- lookups with clear errors -------------------------------------------------------------
    def location(self, name: str) -> Location:
        try:
            return self.locations[name]
        except KeyError:
            raise KitchenError(
                f"unknown location {name!r}; known: {', '.join(self.locations)}") from None

    def object(self, name: str) -> KitchenObject:
        try:
            return self.objects[name]
        except KeyError:
            raise KitchenError(
                f"unknown object {name!r}; known: {', '.join(self.objects)}") from None

    def distance(self, a: tuple[float, float], b: tuple[float, float]) -> float:
        return math.hypot(a[0] - b[0], a[1] - b[1])

    def default_scene(self) -> dict[str, str]:
        """Object -> location of the default scene."""
        return {name: obj.default_location for name, obj in self.objects.items()}

    @property
    def surfaces(self) -> tuple[str, ...]:
        """Where things stand and are fetched from: every location but the user and the
        disposal place."""
        return tuple(n for n in self.locations if n not in (USER, self.disposal))


#: The top-level fields of a kitchen file (anything else is a typo worth one line).
KITCHEN_FIELDS = ("frame_id", "size", "locations", "navigable", "objects", "robot", "disposal")
LOCATION_FIELDS = ("center", "size", "height", "approach", "yaw")
OBJECT_FIELDS = ("article", "category", "colour", "default", "attributes", "description")
#: Names the planner's grammar and worlds reserve.
RESERVED_NAMES = (GRIPPER, "none", "floor")
#: The location used for throwing things away when the file names no ``disposal``.
DEFAULT_DISPOSAL = "trash can"


def _pair(value, what: str) -> tuple[float, float]:
    if not (isinstance(value, (list, tuple)) and len(value) == 2
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                    for v in value)):
        raise KitchenError(f"{what}: expected two finite numbers, got {value!r}")
    return float(value[0]), float(value[1])


def _number(value, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise KitchenError(f"{what}: expected a finite number, got {value!r}")
    return float(value)


def _mapping(value, what: str) -> Mapping:
    if not isinstance(value, Mapping) or not value:
        raise KitchenError(f"{what}: expected a non-empty mapping, got {value!r}")
    return value


def _fields(value, allowed: tuple[str, ...], what: str) -> Mapping:
    value = _mapping(value, what)
    unknown = [k for k in value if k not in allowed]
    if unknown:
        where = f"{what} {unknown[0]}" if what.endswith(":") else f"{what}.{unknown[0]}"
        raise KitchenError(f"{where}: unknown field; known: {', '.join(allowed)}")
    return value


def _name(name, what: str) -> str:
    """A name the skills and the goal grammar can carry: lower-case words, no punctuation
    that the grammar uses."""
    if not isinstance(name, str) or not name.strip() or name != " ".join(name.split()):
        raise KitchenError(f"{what}: {name!r} must be words separated by single spaces")
    if any(c in name for c in "(),:\n") or name != name.lower():
        raise KitchenError(f"{what}: {name!r} must be lower case, without ( ) , or :")
    if name in RESERVED_NAMES:
        raise KitchenError(f"{what}: {name!r} is reserved ({', '.join(RESERVED_NAMES)})")
    return name


def _location(name: str, loc, source: str) -> Location:
    what = f"{source}: locations.{name}"
    loc = _fields(loc, LOCATION_FIELDS, what)
    for required in ("center", "size", "approach"):
        if required not in loc:
            raise KitchenError(f"{what}.{required}: missing")
    return Location(name=name, center=_pair(loc["center"], f"{what}.center"),
                    size=_pair(loc["size"], f"{what}.size"),
                    height=_number(loc.get("height", 0.8), f"{what}.height"),
                    approach=_pair(loc["approach"], f"{what}.approach"),
                    yaw=_number(loc.get("yaw", 0.0), f"{what}.yaw"))


def _object(name: str, obj, source: str, locations: Mapping[str, Location]) -> KitchenObject:
    what = f"{source}: objects.{name}"
    obj = _fields(obj, OBJECT_FIELDS, what)
    if "default" not in obj:
        raise KitchenError(f"{what}.default: missing (the location where it stands)")
    default = obj["default"]
    if default not in locations:
        raise KitchenError(f"{what}.default: unknown location {default!r}; known: "
                           f"{', '.join(locations)}")
    article = obj.get("article", "a")
    if article not in ("a", "an", "the", "some", ""):
        raise KitchenError(f"{what}.article: expected a, an, the, some or '', got {article!r}")
    colour = obj.get("colour", (128, 128, 128))
    if not (isinstance(colour, (list, tuple)) and len(colour) == 3 and all(
            isinstance(c, int) and not isinstance(c, bool) and 0 <= c <= 255 for c in colour)):
        raise KitchenError(f"{what}.colour: expected three integers 0-255 (RGB), got {colour!r}")
    attributes = obj.get("attributes", [])
    if isinstance(attributes, str):
        attributes = [a.strip() for a in attributes.split(",")]
    if not isinstance(attributes, (list, tuple)) or not all(
            isinstance(a, str) and a.strip() and not any(c in a for c in ",()\n")
            for a in attributes):
        raise KitchenError(f"{what}.attributes: expected a list of short words, got "
                           f"{attributes!r}")
    description = obj.get("description", "")
    if not isinstance(description, str) or "\n" in description.strip() or len(description) > 120:
        raise KitchenError(f"{what}.description: expected one line of at most 120 characters")
    category = obj.get("category", "")
    if not isinstance(category, str):
        raise KitchenError(f"{what}.category: expected a word, got {category!r}")
    return KitchenObject(name=name, article=str(article), category=category,
                         colour=tuple(colour), default_location=str(default),
                         attributes=tuple(" ".join(a.split()) for a in attributes),
                         description=" ".join(description.split()))


def kitchen_from_dict(data: Mapping, source: str = "<dict>") -> Kitchen:
    """Build a :class:`Kitchen` from the mapping in ``kitchen.yaml``, checking every field;
    each mistake is one :class:`KitchenError` line that names the file and the field."""
    data = _fields(data, KITCHEN_FIELDS, f"{source}:")
    for required in ("locations", "objects"):
        if required not in data:
            raise KitchenError(f"{source}: {required}: missing")
    locations = {_name(name, f"{source}: locations.{name}"): _location(name, loc, source)
                 for name, loc in _mapping(data["locations"], f"{source}: locations").items()}
    if USER not in locations:
        raise KitchenError(f"{source}: locations: the kitchen needs a location named {USER!r} "
                           "(where the person is served)")
    objects = {_name(name, f"{source}: objects.{name}"): _object(name, obj, source, locations)
               for name, obj in _mapping(data["objects"], f"{source}: objects").items()}
    clash = sorted(set(objects) & set(locations))
    if clash:
        raise KitchenError(f"{source}: objects.{clash[0]}: also the name of a location")
    navigable = data.get("navigable", [n for n in locations if n != USER])
    if not isinstance(navigable, (list, tuple)):
        raise KitchenError(f"{source}: navigable: expected a list of locations")
    for name in navigable:
        if name not in locations:
            raise KitchenError(f"{source}: navigable: unknown location {name!r}; known: "
                               f"{', '.join(locations)}")
    robot = data.get("robot", {}) or {}
    if not isinstance(robot, Mapping) or set(robot) - {"start"}:
        raise KitchenError(f"{source}: robot: expected a mapping with 'start'")
    start = robot.get("start", next(iter(locations)))
    if start not in locations:
        raise KitchenError(f"{source}: robot.start: unknown location {start!r}; known: "
                           f"{', '.join(locations)}")
    disposal = data.get("disposal", DEFAULT_DISPOSAL if DEFAULT_DISPOSAL in locations else None)
    if disposal is not None and (disposal not in locations or disposal == USER):
        raise KitchenError(f"{source}: disposal: {disposal!r} is not a location of the kitchen "
                           f"(other than the user); known: {', '.join(locations)}")
    return Kitchen(frame_id=str(data.get("frame_id", "map")),
                   size=_pair(data.get("size", (8.0, 6.0)), f"{source}: size"),
                   locations=locations, navigable=tuple(navigable), objects=objects,
                   robot_start=str(start), source=source, disposal=disposal)


def load_kitchen(path: str | Path | None = None) -> Kitchen:
    """Load the kitchen; ``None`` means the built-in ``config/kitchen.yaml``."""
    data, source = load_yaml(path, default_name="kitchen.yaml")
    return kitchen_from_dict(data, source)
