"""The symbolic kitchen: where the robot and the objects are, and what each skill does to that.

It is the oracle for plan success (a plan succeeds when, replayed here, it reaches the task's
goal), the executor of ``saycan run`` on the built-in kitchen, and the state behind the
symbolic affordances.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from saycan_ros.core.kitchen import GRIPPER, USER, Kitchen
from saycan_ros.core.skills import NAVIGATIONS, Skill
from saycan_ros.core.tasks import TaskInit


@dataclass(frozen=True)
class SkillOutcome:
    success: bool
    message: str

    def __post_init__(self) -> None:  # numpy bools from simulators must not leak into messages
        object.__setattr__(self, "success", bool(self.success))
        object.__setattr__(self, "message", str(self.message))


@dataclass(frozen=True)
class WorldSnapshot:
    """An immutable copy of the symbolic state (what affordances and goals read)."""
    revision: int
    robot_at: str | None
    robot_pose: tuple[float, float, float]
    holding: str | None
    objects: Mapping[str, str]        # object -> location, GRIPPER when held

    def object_location(self, name: str) -> str | None:
        return self.objects.get(name)

    def to_dict(self) -> dict:
        return {"revision": self.revision, "robot_at": self.robot_at,
                "robot_pose": list(self.robot_pose), "holding": self.holding,
                "objects": dict(self.objects)}

    @classmethod
    def from_dict(cls, data: Mapping) -> "WorldSnapshot":
        """The inverse of :meth:`to_dict` (e.g. the skill executor's ``state_json``)."""
        return cls(int(data.get("revision", 0)), data.get("robot_at"),
                   tuple(data.get("robot_pose") or (0.0, 0.0, 0.0)), data.get("holding"),
                   dict(data.get("objects") or {}))


class SymbolicWorld:
    """Mutable symbolic kitchen state with skill semantics.

    ``find <object>`` goes to where the object is; ``go to the <location>`` and
    ``bring it to you`` go to a location; ``pick up`` needs the object where the robot stands and
    an empty hand; ``put down`` needs the object in hand and leaves it where the robot stands
    (at the user: delivered; at the trash can: thrown away).
    """

    def __init__(self, kitchen: Kitchen, init: TaskInit | None = None):
        self.kitchen = kitchen
        self.revision = 0
        self.reset(init or TaskInit())

    # -- state -------------------------------------------------------------------------------
    def reset(self, init: TaskInit) -> None:
        self.objects: dict[str, str] = init.scene(self.kitchen)
        self.holding: str | None = init.holding
        self._move_to(init.robot_at or self.kitchen.robot_start)

    def _move_to(self, location: str) -> None:
        loc = self.kitchen.location(location)
        self.robot_at = location
        self.robot_pose = (loc.approach[0], loc.approach[1], loc.yaw)
        self.revision += 1

    def object_location(self, name: str) -> str | None:
        return self.objects.get(name)

    def snapshot(self) -> WorldSnapshot:
        return WorldSnapshot(self.revision, self.robot_at, self.robot_pose, self.holding,
                             dict(self.objects))

    # -- skills ------------------------------------------------------------------------------
    def execute(self, skill: Skill) -> SkillOutcome:
        """Carry out ``skill``; the state changes only on success."""
        if skill.kind in NAVIGATIONS:
            target = target_location(self, skill)
            if target is None:
                where = self.objects.get(skill.object)
                reason = "it is in the gripper" if where == GRIPPER else "it is not in the kitchen"
                return SkillOutcome(False, f"cannot {skill.text}: {reason}")
            self._move_to(target)
            return SkillOutcome(True, f"at the {target}")
        if skill.kind == "pick":
            if self.holding is not None:
                return SkillOutcome(False, f"cannot {skill.text}: already holding the "
                                           f"{self.holding}")
            where = self.objects.get(skill.object)
            if where != self.robot_at:
                seen = "not in the kitchen" if where is None else f"at the {where}"
                return SkillOutcome(False, f"cannot {skill.text}: it is {seen}, the robot is at "
                                           f"the {self.robot_at}")
            self.objects[skill.object] = GRIPPER
            self.holding = skill.object
            self.revision += 1
            return SkillOutcome(True, f"holding the {skill.object}")
        if skill.kind == "place":
            if self.holding != skill.object:
                held = self.holding or "nothing"
                return SkillOutcome(False, f"cannot {skill.text}: holding {held}")
            self.objects[skill.object] = self.robot_at
            self.holding = None
            self.revision += 1
            verb = "delivered to the user" if self.robot_at == USER else f"at the {self.robot_at}"
            return SkillOutcome(True, f"the {skill.object} is {verb}")
        if skill.kind == "terminate":
            return SkillOutcome(True, "done")
        return SkillOutcome(False, f"no symbolic semantics for skill kind {skill.kind!r}")


def target_location(state, skill: Skill) -> str | None:
    """Where a navigation skill leads from ``state`` (a world or snapshot), or None if nowhere."""
    if skill.kind == "navigate_to_object":
        where = state.objects.get(skill.object)
        return None if where in (None, GRIPPER) else where
    if skill.kind == "navigate":
        return skill.location
    return None


def effect_holds(state, skill: Skill) -> bool:
    """Whether ``skill``'s effect is already true in ``state``: running it again changes nothing."""
    if skill.kind in NAVIGATIONS:
        return target_location(state, skill) == state.robot_at
    if skill.kind == "pick":
        return state.holding == skill.object
    if skill.kind == "place":
        return state.objects.get(skill.object) not in (None, GRIPPER)
    return False
