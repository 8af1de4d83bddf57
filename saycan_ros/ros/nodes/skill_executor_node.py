"""``skill_executor``: runs skills on the kitchen: the symbolic one, or the built-in simulator
(``world: sim``, skills run by its scripted controllers).

Services: ``/saycan/execute`` (ExecuteSkill), ``/saycan/world/reset`` (ResetWorld),
``/saycan/world/state`` (GetWorldState). Publishes ``/saycan/world_state`` (WorldState, latched)
after every change. Only skills of the repertoire run; anything else is refused with a message.
One skill or reset at a time: a request meanwhile is refused ("busy"), never queued.

With a ``session`` (the launch files give one per launch) the world is saved after every change
and restored when the node restarts in the same session (a respawn after a crash): the planner
and the affordance node keep the world they saw, and revisions never go back.
"""
from __future__ import annotations

import json
import math
import threading
import time

from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node

from saycan_ros.core.kitchen import KitchenError, load_kitchen
from saycan_ros.core.memory import trimmed
from saycan_ros.core.world_store import WorldStore, default_path, init_from_snapshot
from saycan_ros.msg import WorldState
from saycan_ros.ros.nodes.common import (EXECUTE_SERVICE, LATCHED_QOS, RESET_SERVICE, STATE_SERVICE,
                                         WORLD_STATE_TOPIC, announce_alive, declare_parameters,
                                         spin_node)
from saycan_ros.ros.nodes.conversions import snapshot_to_msg
from saycan_ros.core.skills import UnknownSkillError, load_skills
from saycan_ros.srv import ExecuteSkill, GetWorldState, ResetWorld
from saycan_ros.core.tasks import TaskError, parse_init_text
from saycan_ros.core.world import SkillOutcome
from saycan_ros.planning.faults import FaultDice, fault_message
from saycan_ros.stack import make_world

DEFAULTS = {
    "kitchen_file": "",            # "" = built-in config/kitchen.yaml
    "skills_file": "",             # "" = built-in config/skills.yaml
    "frame_id": "map",
    "world": "symbolic",           # symbolic | sim
    "seed": 0,                     # sim: layout and noise
    "fault_rate": 0.0,             # fail this share of executions before they run (fault tests)
    "fault_seed": 0,
    "session": "",                 # one launch of the graph: the world survives a respawn in it
    "state_file": "",              # "" = <tmp>/saycan_ros/<session>/<node>.json (with a session)
}
DESCRIPTIONS = {
    "session": "an id of this launch (the launch files make one): the world is saved after every "
               "change and restored when this node restarts with the same session ('' = never)",
    "state_file": "where the world is saved ('' = <tmp>/saycan_ros/<session>/<node>.json)",
}


def _refusal(text: str) -> str:
    """Why a skill text is refused before the repertoire is asked ("" when it is not)."""
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        return (f"skill text {text[:80]!r} contains control characters; a skill is one line "
                "of printable text")
    return ""


class SkillExecutorNode(Node):
    def __init__(self, **kwargs):
        super().__init__("skill_executor", **kwargs)
        self.params = declare_parameters(self, DEFAULTS, DESCRIPTIONS)
        self.kitchen = load_kitchen(self.params["kitchen_file"] or None)
        self.skills = load_skills(self.kitchen, self.params["skills_file"] or None)
        self.world = make_world(self.params["world"], self.kitchen, seed=self.params["seed"])
        self.faults = FaultDice(self.params["fault_rate"], self.params["fault_seed"])
        self._lock = threading.Lock()  # one skill or reset at a time; others are refused
        self._running = ""             # what holds the world now
        self.store = self._make_store()
        self._restore()
        self._snapshot = self.world.snapshot()   # the state service answers from this at once
        self.state_pub = self.create_publisher(WorldState, WORLD_STATE_TOPIC, LATCHED_QOS)
        # Each service in its own group: a running skill never holds up the state service, and
        # a second execute or a reset meanwhile is refused at once instead of queued unseen.
        self.create_service(ExecuteSkill, EXECUTE_SERVICE, trimmed(self.on_execute),
                            callback_group=ReentrantCallbackGroup())
        self.create_service(ResetWorld, RESET_SERVICE, trimmed(self.on_reset),
                            callback_group=ReentrantCallbackGroup())
        self.create_service(GetWorldState, STATE_SERVICE, self.on_state,
                            callback_group=ReentrantCallbackGroup())
        self.alive_pub = announce_alive(self, EXECUTE_SERVICE)
        self.publish_state()
        self.get_logger().info(f"{self.params['world']} kitchen ready: {len(self.skills)} skills, "
                               f"{len(self.kitchen.objects)} objects, world revision "
                               f"{self.world.revision}")

    # -- the world's state, kept across restarts -------------------------------------------------
    def _make_store(self) -> WorldStore | None:
        session = str(self.params["session"])
        if not session:
            return None
        path = self.params["state_file"] or default_path(
            session, self.get_fully_qualified_name())
        return WorldStore(path, session)

    def _restore(self) -> None:
        saved = self.store.load() if self.store is not None else None
        if saved is None:
            return
        try:
            self.world.reset(init_from_snapshot(saved, self.kitchen))
        except (TaskError, KitchenError) as exc:
            self.get_logger().error(f"the saved world ({self.store.path}) does not fit this "
                                    f"kitchen, starting from the default scene: {exc}")
            return
        advance_revision(self.world, saved.revision + 1)
        self.get_logger().warning(f"restored the world of revision {saved.revision} from "
                                  f"{self.store.path} (now revision {self.world.revision})")

    def publish_state(self) -> None:
        """After every change (the caller holds the lock): save, remember, publish."""
        snapshot = self._snapshot = self.world.snapshot()
        if self.store is not None:
            try:
                self.store.save(snapshot)
            except OSError as exc:
                self.get_logger().error(f"cannot save the world to {self.store.path}: {exc}")
        self.state_pub.publish(snapshot_to_msg(snapshot, self.get_clock().now().to_msg(),
                                               self.params["frame_id"]))

    def _busy(self, what: str) -> bool:
        """Take the world for ``what``, or False when a skill or a reset holds it."""
        if not self._lock.acquire(blocking=False):
            return False
        self._running = what
        return True

    def _release(self) -> None:
        self._running = ""
        self._lock.release()

    # -- services ----------------------------------------------------------------------------------
    def on_execute(self, request, response):
        started = time.perf_counter()
        response.success = False
        if not math.isfinite(request.timeout_s) or request.timeout_s < 0:
            response.message = f"timeout_s must be >= 0, got {request.timeout_s}"
            return response
        try:
            refusal = _refusal(request.skill)
            if refusal:
                raise UnknownSkillError(refusal)
            skill = self.skills.get(request.skill)
        except UnknownSkillError as exc:
            response.message = str(exc)
            self.get_logger().warning(response.message)
            return response
        holder = self._running
        if not self._busy(skill.text):
            response.message = (f"busy: {holder or 'a reset'!r} is running; one skill at a time "
                                "(the planner sends the next when this one has ended)")
            return response
        try:
            if self.faults.strike():       # the world is left as it was
                outcome = SkillOutcome(False, fault_message(skill.text))
            else:
                outcome = self.world.execute(skill)
            response.state_revision = int(self.world.revision)
            self.publish_state()
        except Exception as exc:  # noqa: BLE001 - a skill error is a failed skill, not a crash
            outcome = SkillOutcome(False, f"executor error: {type(exc).__name__}: {exc}")
            response.state_revision = int(self.world.revision)
        finally:
            self._release()
        response.success, response.message = bool(outcome.success), outcome.message
        response.duration_s = time.perf_counter() - started
        self.get_logger().info(f"{skill.text}: {'ok' if outcome.success else 'FAILED'} "
                               f"({outcome.message})")
        return response

    def on_reset(self, request, response):
        response.success = False
        try:
            init = parse_init_text(request.init, self.kitchen)
        except TaskError as exc:
            response.message = str(exc)
            return response
        except Exception as exc:  # noqa: BLE001 - no input may take the world down
            response.message = f"init refused: {type(exc).__name__}"
            self.get_logger().error(f"reset: {type(exc).__name__}: {str(exc)[:300]}")
            return response
        holder = self._running
        if not self._busy("reset"):
            response.message = f"busy: {holder or 'a reset'!r} is running; reset when it has ended"
            return response
        try:
            if request.seed >= 0 and self.params["world"] == "sim":
                self.world.reset(init, seed=int(request.seed))
            else:
                self.world.reset(init)
            advance_revision(self.world, self._snapshot.revision + 1)
            response.state_revision = int(self.world.revision)
            self.publish_state()
            response.success, response.message = True, "reset"
        except Exception as exc:  # noqa: BLE001
            response.message = f"reset failed: {type(exc).__name__}: {str(exc)[:300]}"
            self.get_logger().error(response.message)
        finally:
            self._release()
        return response

    def on_state(self, request, response):
        snapshot = self._snapshot           # the last published state: never waits for a skill
        response.state = snapshot_to_msg(snapshot, self.get_clock().now().to_msg(),
                                         self.params["frame_id"])
        response.state_json = json.dumps(snapshot.to_dict())
        return response


def advance_revision(world, at_least: int) -> None:
    """Raise the world's revision to ``at_least`` (never lower it): the revisions a restored or
    reset world publishes stay above every one it published before."""
    holder = getattr(world, "world", world)      # the simulator keeps it in its KitchenWorld
    holder.revision = max(int(holder.revision), int(at_least))


def main(args=None) -> None:
    spin_node(SkillExecutorNode, args)


if __name__ == "__main__":
    main()
