"""The scene line of the SayCan prompt: where the robot stands, what it holds, and where it has
seen each object, rendered from a world state (as LLM-Planner and Inner Monologue give the
model its observations).

The line describes the world when the instruction was given; the steps taken since are in the
dialogue's history. For an adapter trained that way (prompt ``scene: step``) the planner reads it
again after every step that puts something down (:func:`changes_scene`): that is where a plan
chooses what to fetch next, and what is left of "everything on the table" is then read off the
line instead of being counted through the history. It is one line so that the prompt keeps its
dialogue shape::

    Scene: robot at the table, holding nothing. close counter: water bottle, sponge. table: orange.
"""
from __future__ import annotations

from typing import Mapping

from saycan_ros.core.kitchen import GRIPPER, Kitchen
from saycan_ros.core.skills import Skill

#: Where a scene line starts in the prompt (and how a caller recognises one).
SCENE_TAG = "Scene:"


def scene_line(kitchen: Kitchen, robot_at: str | None, holding: str | None,
               objects: Mapping[str, str], details: bool = False) -> str:
    """The scene line for a state; objects are listed per location in the kitchen's order
    (locations without objects are left out; absent objects are simply not named).
    ``details``: each object followed by what the kitchen file says it is ("croissant
    (pastry, buttery)"), and where things are thrown away."""
    def named(name: str) -> str:
        about = kitchen.objects[name].about if details and name in kitchen.objects else ""
        return f"{name} ({about})" if about else name

    where = f"robot at the {robot_at}" if robot_at else "robot position unknown"
    hand = f"holding the {named(holding)}" if holding else "holding nothing"
    parts = [f"{SCENE_TAG} {where}, {hand}."]
    for location in kitchen.locations:
        here = [named(o) for o in kitchen.objects if objects.get(o) == location]
        if here:
            parts.append(f"{location}: {', '.join(here)}.")
    if details and kitchen.disposal:
        parts.append(f"Trash goes in the {kitchen.disposal}.")
    return " ".join(parts)


def _details(kitchen: Kitchen) -> list[tuple[str, str]]:
    """Each detailed object text and its plain name, longest name first (so that "can" never
    rewrites inside "coke can (soda)")."""
    named = [(f"{name} ({obj.about})", name) for name, obj in kitchen.objects.items() if obj.about]
    return sorted(named, key=lambda pair: -len(pair[1]))


def fit_scene(kitchen: Kitchen, scene: str, details: bool) -> str:
    """``scene`` (a line from elsewhere: the planner node sends the detailed one) as a prompt
    with ``scene_details: details`` was trained on it: a detailed line loses what each object
    is and where trash goes for a prompt trained without them. Anything but a scene line is
    returned as it is. Raises ValueError for a plain line to a prompt that wants the details
    (they cannot be told from it) where that shows: in a kitchen with a disposal place, whose
    detailed line always ends with where trash goes."""
    if not scene.startswith(SCENE_TAG):
        return scene
    trash = f" Trash goes in the {kitchen.disposal}." if kitchen.disposal else ""
    named = _details(kitchen)
    shown = bool(trash and trash in scene) or any(text in scene for text, _ in named)
    if shown == details or not (trash or named):
        return scene
    if details:
        if not trash:
            return scene
        raise ValueError("the scene line does not say what each object is, but the language "
                         "model's prompt was trained with it (scene_line(..., details=True))")
    plain = scene.replace(trash, "") if trash else scene
    for text, name in named:
        plain = plain.replace(text, name)
    return plain


def scene_of(kitchen: Kitchen, state, details: bool = False) -> str:
    """:func:`scene_line` of anything with ``robot_at``, ``holding`` and ``objects`` (a world,
    a snapshot); the held object's GRIPPER entry is shown as "holding"."""
    objects = {o: at for o, at in dict(state.objects).items() if at != GRIPPER}
    return scene_line(kitchen, state.robot_at, state.holding, objects, details)


#: Skill kinds after which the planner reads the scene line again.
REFRESH_KINDS = frozenset({"place"})


def changes_scene(skill: Skill) -> bool:
    """Whether the scene line is read again after ``skill`` succeeded or failed (the adapter
    is trained on exactly this rule: :mod:`saycan_ros.learning.planner_data`)."""
    return skill.kind in REFRESH_KINDS
