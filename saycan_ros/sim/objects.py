"""The objects of the simulated kitchen: their shapes, and where they may stand on a surface.

Shapes follow the object's kind (cans, bottles, fruit, bags, bars), so the camera tells them
apart by outline as well as by colour; a second colour (a label band) separates the ones whose
main colours are close. Everything about an object that grasping needs is ``width`` (across
the fingers) and ``height``.
"""
from __future__ import annotations

import math
import zlib
from dataclasses import dataclass

import numpy as np

from saycan_ros.core.kitchen import Kitchen, KitchenObject


@dataclass(frozen=True)
class Shape:
    kind: str          # cylinder | sphere | box
    width: float       # across the gripper fingers, m
    length: float      # the other horizontal size (boxes), m
    height: float


CAN = Shape("cylinder", 0.066, 0.066, 0.12)
BOTTLE = Shape("cylinder", 0.06, 0.06, 0.2)
FRUIT = Shape("sphere", 0.08, 0.08, 0.08)
BAG = Shape("box", 0.07, 0.14, 0.16)
BAR = Shape("box", 0.04, 0.12, 0.03)
SPONGE = Shape("box", 0.07, 0.10, 0.045)

#: Label band colours, picked by a stable hash of the name (not Python's salted hash()).
BAND_COLOURS = ((255, 255, 255), (20, 20, 20), (230, 200, 40), (200, 40, 160), (40, 200, 220),
                (250, 120, 0))


def shape_of(obj: KitchenObject) -> Shape:
    name = obj.name
    if name.endswith(" can"):
        return CAN
    if any(word in name for word in ("bottle", "soda", "tea")):
        return BOTTLE
    if obj.category == "fruit":
        return FRUIT
    if "bar" in name:
        return BAR
    if obj.category == "cleaning":
        return SPONGE
    if obj.category == "snack":
        return BAG
    return CAN


def band_colour(name: str) -> tuple[int, int, int]:
    return BAND_COLOURS[zlib.crc32(name.encode()) % len(BAND_COLOURS)]


@dataclass
class SimObject:
    name: str
    shape: Shape
    colour: tuple[int, int, int]
    band: tuple[int, int, int]
    x: float = 0.0
    y: float = 0.0
    z: float = 0.0           # bottom of the object
    yaw: float = 0.0
    location: str = ""       # a kitchen location, "gripper" or "floor"


def make_objects(kitchen: Kitchen) -> dict[str, SimObject]:
    return {name: SimObject(name, shape_of(obj), obj.colour, band_colour(name))
            for name, obj in kitchen.objects.items()}


# -- where objects stand --------------------------------------------------------------------------
SLOT_SPACING = 0.16      # between neighbours: the open gripper fits between them
EDGE_MARGIN = 0.07       # from the surface edge


@dataclass(frozen=True)
class Slot:
    x: float
    y: float
    reachable: bool | None   # from the location's approach pose; None: borderline


def surface_slots(kitchen: Kitchen, location: str, reachable) -> list[Slot]:
    """Grid points on a location's surface, each marked reachable or not from its approach.

    ``reachable(forward, left)`` says whether the arm reaches a point given in the frame of a
    robot standing at the approach pose (True, False, or None for borderline).
    """
    loc = kitchen.location(location)
    half_x = loc.size[0] / 2 - EDGE_MARGIN
    half_y = loc.size[1] / 2 - EDGE_MARGIN
    nx = max(1, int(2 * half_x // SLOT_SPACING) + 1)
    ny = max(1, int(2 * half_y // SLOT_SPACING) + 1)
    xs = loc.center[0] + (np.arange(nx) - (nx - 1) / 2) * (2 * half_x / max(nx - 1, 1))
    ys = loc.center[1] + (np.arange(ny) - (ny - 1) / 2) * (2 * half_y / max(ny - 1, 1))
    cos, sin = math.cos(loc.yaw), math.sin(loc.yaw)
    slots = []
    for x in xs:
        for y in ys:
            dx, dy = x - loc.approach[0], y - loc.approach[1]
            slots.append(Slot(float(x), float(y), reachable(cos * dx + sin * dy, -sin * dx + cos * dy)))
    return slots
