"""The scene line of the SayCan prompt: where the robot stands, what it holds, and where it has
seen each object, rendered from a world state (as LLM-Planner and Inner Monologue give the
model its observations).

The line describes the world when the instruction was given; the steps taken since are in the
dialogue's history. It is one line so that the prompt keeps its dialogue shape::

    Scene: robot at the table, holding nothing. close counter: water bottle, sponge. table: orange.
"""
from __future__ import annotations

from typing import Mapping

from saycan_ros.core.kitchen import GRIPPER, Kitchen

#: Where a scene line starts in the prompt (and how a caller recognises one).
SCENE_TAG = "Scene:"


def scene_line(kitchen: Kitchen, robot_at: str | None, holding: str | None,
               objects: Mapping[str, str]) -> str:
    """The scene line for a state; objects are listed per location in the kitchen's order
    (locations without objects are left out; absent objects are simply not named)."""
    where = f"robot at the {robot_at}" if robot_at else "robot position unknown"
    hand = f"holding the {holding}" if holding else "holding nothing"
    parts = [f"{SCENE_TAG} {where}, {hand}."]
    for location in kitchen.locations:
        here = [o for o in kitchen.objects if objects.get(o) == location]
        if here:
            parts.append(f"{location}: {', '.join(here)}.")
    return " ".join(parts)


def scene_of(kitchen: Kitchen, state) -> str:
    """:func:`scene_line` of anything with ``robot_at``, ``holding`` and ``objects`` (a world,
    a snapshot); the held object's GRIPPER entry is shown as "holding"."""
    objects = {o: at for o, at in dict(state.objects).items() if at != GRIPPER}
    return scene_line(kitchen, state.robot_at, state.holding, objects)
