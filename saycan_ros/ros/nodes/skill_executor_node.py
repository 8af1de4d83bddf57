"""``skill_executor``: runs skills on the kitchen: the symbolic one, or the built-in simulator
(``world: sim``, skills run by its scripted controllers).

Services: ``/saycan/execute`` (ExecuteSkill), ``/saycan/world/reset`` (ResetWorld),
``/saycan/world/state`` (GetWorldState). Publishes ``/saycan/world_state`` (WorldState, latched)
after every change. Only skills of the repertoire run; anything else is refused with a message.
"""
from __future__ import annotations

import json
import math
import threading
import time

import yaml
from rclpy.node import Node

from saycan_ros.core.kitchen import load_kitchen
from saycan_ros.msg import WorldState
from saycan_ros.ros.nodes.common import (EXECUTE_SERVICE, LATCHED_QOS, RESET_SERVICE, STATE_SERVICE,
                                         WORLD_STATE_TOPIC, declare_parameters, spin_node)
from saycan_ros.ros.nodes.conversions import snapshot_to_msg
from saycan_ros.core.skills import UnknownSkillError, load_skills
from saycan_ros.srv import ExecuteSkill, GetWorldState, ResetWorld
from saycan_ros.core.tasks import TaskError, TaskInit
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
}


def parse_init_text(text: str, kitchen) -> TaskInit:
    """A task ``init`` given as JSON or YAML text ("" or "{}" = the default scene)."""
    if not text.strip():
        return TaskInit()
    try:
        data = yaml.safe_load(text)  # JSON is YAML
    except yaml.YAMLError as exc:
        raise TaskError(f"init is not JSON/YAML: {exc}") from None
    return TaskInit.from_mapping(data, kitchen)


class SkillExecutorNode(Node):
    def __init__(self, **kwargs):
        super().__init__("skill_executor", **kwargs)
        self.params = declare_parameters(self, DEFAULTS)
        self.kitchen = load_kitchen(self.params["kitchen_file"] or None)
        self.skills = load_skills(self.kitchen, self.params["skills_file"] or None)
        self.world = make_world(self.params["world"], self.kitchen, seed=self.params["seed"])
        self.faults = FaultDice(self.params["fault_rate"], self.params["fault_seed"])
        self._lock = threading.Lock()  # one skill or reset at a time
        self.state_pub = self.create_publisher(WorldState, WORLD_STATE_TOPIC, LATCHED_QOS)
        self.create_service(ExecuteSkill, EXECUTE_SERVICE, self.on_execute)
        self.create_service(ResetWorld, RESET_SERVICE, self.on_reset)
        self.create_service(GetWorldState, STATE_SERVICE, self.on_state)
        self.publish_state()
        self.get_logger().info(f"{self.params['world']} kitchen ready: {len(self.skills)} skills, "
                               f"{len(self.kitchen.objects)} objects")

    def publish_state(self) -> None:
        self.state_pub.publish(snapshot_to_msg(self.world.snapshot(),
                                               self.get_clock().now().to_msg(),
                                               self.params["frame_id"]))

    def on_execute(self, request, response):
        started = time.perf_counter()
        if not math.isfinite(request.timeout_s) or request.timeout_s < 0:
            response.success = False
            response.message = f"timeout_s must be >= 0, got {request.timeout_s}"
            return response
        try:
            skill = self.skills.get(request.skill)
        except UnknownSkillError as exc:
            response.success, response.message = False, str(exc)
            self.get_logger().warning(response.message)
            return response
        with self._lock:
            if self.faults.strike():       # the world is left as it was
                outcome = SkillOutcome(False, fault_message(skill.text))
            else:
                outcome = self.world.execute(skill)
            response.state_revision = int(self.world.revision)
            self.publish_state()
        response.success, response.message = bool(outcome.success), outcome.message
        response.duration_s = time.perf_counter() - started
        self.get_logger().info(f"{skill.text}: {'ok' if outcome.success else 'FAILED'} "
                               f"({outcome.message})")
        return response

    def on_reset(self, request, response):
        try:
            init = parse_init_text(request.init, self.kitchen)
        except TaskError as exc:
            response.success, response.message = False, str(exc)
            return response
        with self._lock:
            if request.seed >= 0 and self.params["world"] == "sim":
                self.world.reset(init, seed=int(request.seed))
            else:
                self.world.reset(init)
            response.state_revision = int(self.world.revision)
            self.publish_state()
        response.success, response.message = True, "reset"
        return response

    def on_state(self, request, response):
        with self._lock:
            snapshot = self.world.snapshot()
        response.state = snapshot_to_msg(snapshot, self.get_clock().now().to_msg(),
                                         self.params["frame_id"])
        response.state_json = json.dumps(snapshot.to_dict())
        return response


def main(args=None) -> None:
    spin_node(SkillExecutorNode, args)


if __name__ == "__main__":
    main()
