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

    @property
    def phrase(self) -> str:
        """The object with its article, as skills say it: "a coke can", "an apple"."""
        return f"{self.article} {self.name}"


@dataclass(frozen=True)
class Kitchen:
    frame_id: str
    size: tuple[float, float]
    locations: Mapping[str, Location]
    navigable: tuple[str, ...]
    objects: Mapping[str, KitchenObject]
    robot_start: str
    source: str = field(default="", compare=False)

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


def _pair(value, what: str) -> tuple[float, float]:
    if not (isinstance(value, (list, tuple)) and len(value) == 2
            and all(isinstance(v, (int, float)) and math.isfinite(v) for v in value)):
        raise KitchenError(f"{what}: expected two finite numbers, got {value!r}")
    return float(value[0]), float(value[1])


def kitchen_from_dict(data: Mapping, source: str = "<dict>") -> Kitchen:
    """Build a :class:`Kitchen` from the mapping in ``kitchen.yaml``, checking every field."""
    try:
        locations = {
            name: Location(
                name=name,
                center=_pair(loc["center"], f"{source}: locations.{name}.center"),
                size=_pair(loc["size"], f"{source}: locations.{name}.size"),
                height=float(loc.get("height", 0.8)),
                approach=_pair(loc["approach"], f"{source}: locations.{name}.approach"),
                yaw=float(loc.get("yaw", 0.0)),
            )
            for name, loc in data["locations"].items()
        }
        objects = {
            name: KitchenObject(
                name=name,
                article=str(obj.get("article", "a")),
                category=str(obj.get("category", "")),
                colour=tuple(int(c) for c in obj.get("colour", (128, 128, 128))),
                default_location=str(obj["default"]),
            )
            for name, obj in data["objects"].items()
        }
        kitchen = Kitchen(
            frame_id=str(data.get("frame_id", "map")),
            size=_pair(data.get("size", (8.0, 6.0)), f"{source}: size"),
            locations=locations,
            navigable=tuple(data.get("navigable", [n for n in locations if n != USER])),
            objects=objects,
            robot_start=str(data.get("robot", {}).get("start", next(iter(locations)))),
            source=source,
        )
    except (KeyError, TypeError, AttributeError) as exc:
        raise KitchenError(f"{source}: malformed kitchen description ({exc!r})") from None
    if USER not in kitchen.locations:
        raise KitchenError(f"{source}: the kitchen needs a location named {USER!r}")
    for name in kitchen.navigable:
        kitchen.location(name)
    kitchen.location(kitchen.robot_start)
    for obj in kitchen.objects.values():
        kitchen.location(obj.default_location)
    return kitchen


def load_kitchen(path: str | Path | None = None) -> Kitchen:
    """Load the kitchen; ``None`` means the built-in ``config/kitchen.yaml``."""
    data, source = load_yaml(path, default_name="kitchen.yaml")
    return kitchen_from_dict(data, source)
