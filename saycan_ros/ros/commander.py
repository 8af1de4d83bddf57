"""A small façade over the SayCan graph, in the spirit of ``nav2_simple_commander``.

    commander = SayCanCommander()           # an rclpy node; spin it in an executor
    commander.wait_until_ready()
    commander.send_instruction("Bring me a coke.")
    while not commander.is_task_complete():
        time.sleep(0.1)
    result = commander.get_result()         # dict: state, plan, steps with their scores

It publishes instructions, listens to ``/saycan/skill_scores``, ``/saycan/status`` and
``/saycan/result``, and wraps the world's reset/state services and the planner's cancel.
"""
from __future__ import annotations

import json
import threading
import time
from typing import Callable

from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node
from std_msgs.msg import String
from std_srvs.srv import Trigger

from saycan_ros.msg import PlanStatus, SkillScores
from saycan_ros.ros.nodes.common import (AFFORDANCE_SERVICE, CANCEL_SERVICE, EXECUTE_SERVICE,
                                     INSTRUCTION_TOPIC, LATCHED_QOS, LLM_SERVICE, RESET_SERVICE,
                                     RESULT_TOPIC, SKILL_SCORES_TOPIC, STATE_SERVICE,
                                     STATUS_TOPIC, call_service)
from saycan_ros.srv import GetWorldState, ResetWorld

TERMINAL_STATES = ("succeeded", "failed", "cancelled")


class GraphDown(RuntimeError):
    """A node of the graph has died."""


class SayCanCommander(Node):
    def __init__(self, name: str = "saycan_commander",
                 on_scores: Callable[[SkillScores], None] | None = None,
                 on_status: Callable[[PlanStatus], None] | None = None, **node_kwargs):
        super().__init__(name, **node_kwargs)
        group = ReentrantCallbackGroup()
        self.on_scores, self.on_status = on_scores, on_status
        self.instruction_pub = self.create_publisher(String, INSTRUCTION_TOPIC, 10)
        self.create_subscription(SkillScores, SKILL_SCORES_TOPIC, self._scores, 50,
                                 callback_group=group)
        self.create_subscription(PlanStatus, STATUS_TOPIC, self._status, LATCHED_QOS,
                                 callback_group=group)
        self.create_subscription(String, RESULT_TOPIC, self._result, LATCHED_QOS,
                                 callback_group=group)
        self.reset_client = self.create_client(ResetWorld, RESET_SERVICE, callback_group=group)
        self.state_client = self.create_client(GetWorldState, STATE_SERVICE, callback_group=group)
        self.cancel_client = self.create_client(Trigger, CANCEL_SERVICE, callback_group=group)
        self._lock = threading.Lock()
        self._sent: str | None = None
        self._started = False
        self._result_data: dict | None = None
        self.statuses: list[PlanStatus] = []
        self.scores: list[SkillScores] = []

    # -- readiness -----------------------------------------------------------------------------
    def wait_until_ready(self, timeout_s: float = 120.0,
                         gone: Callable[[], str] | None = None) -> None:
        """Wait for the planner to listen and for every service of the graph to be up.
        ``gone()``, checked as often, says which node has died (empty while all run): then
        :class:`GraphDown` is raised at once instead of waiting out the timeout."""
        deadline = time.monotonic() + timeout_s
        services = (LLM_SERVICE, AFFORDANCE_SERVICE, EXECUTE_SERVICE, CANCEL_SERVICE)
        while time.monotonic() < deadline:
            dead = gone() if gone is not None else ""
            if dead:
                raise GraphDown(f"the SayCan graph cannot come up: {dead}")
            names = {name for name, _ in self.get_service_names_and_types()}
            missing = [s for s in services if self.resolve_service_name(s) not in names]
            if not missing and self.instruction_pub.get_subscription_count() > 0:
                return
            time.sleep(0.1)
        raise TimeoutError(f"the SayCan graph is not up after {timeout_s:g} s "
                           f"(missing: {missing or ['planner subscription']})")

    # -- the task --------------------------------------------------------------------------------
    def send_instruction(self, text: str) -> None:
        with self._lock:
            self._sent, self._started, self._result_data = text, False, None
            self.scores.clear()
        self.instruction_pub.publish(String(data=text))

    def is_task_complete(self) -> bool:
        with self._lock:
            return self._result_data is not None

    def get_result(self) -> dict | None:
        with self._lock:
            return self._result_data

    def cancel_task(self, timeout_s: float = 5.0) -> str:
        response = call_service(self, self.cancel_client, Trigger.Request(), timeout_s, "cancel")
        return response.message

    # -- the world -------------------------------------------------------------------------------
    def reset_world(self, init: dict | None = None, seed: int = -1, timeout_s: float = 10.0):
        request = ResetWorld.Request(init=json.dumps(init or {}), seed=seed)
        response = call_service(self, self.reset_client, request, timeout_s, "world reset")
        if not response.success:
            raise ValueError(f"world reset refused: {response.message}")
        return response

    def world_state(self, timeout_s: float = 10.0) -> dict:
        response = call_service(self, self.state_client, GetWorldState.Request(), timeout_s,
                                "world state")
        return json.loads(response.state_json)

    # -- subscriptions -----------------------------------------------------------------------------
    def _ours(self, instruction: str) -> bool:
        """Whether a status/score message is about what we sent (compared as the planner
        shows it: whitespace folded, at most 200 characters for rejected text)."""
        if self._sent is None:
            return False
        sent = " ".join(self._sent.split())
        return sent == instruction or (len(instruction) == 200 and sent[:200] == instruction)

    def _scores(self, msg: SkillScores) -> None:
        with self._lock:
            if not self._ours(msg.instruction):
                return
            self.scores.append(msg)
        if self.on_scores:
            self.on_scores(msg)

    def _status(self, msg: PlanStatus) -> None:
        with self._lock:
            ours = self._ours(msg.instruction)
            if ours:
                self.statuses.append(msg)
                if msg.state in ("planning", "executing"):
                    self._started = True
                elif msg.state == "rejected" and not self._started:
                    # rejected before it ever ran (bad input or busy): that is the result
                    self._result_data = {"instruction": msg.instruction, "state": "rejected",
                                         "message": msg.message, "plan": [], "steps": []}
        if ours and self.on_status:
            self.on_status(msg)

    def _result(self, msg: String) -> None:
        try:
            data = json.loads(msg.data)
        except json.JSONDecodeError:
            self.get_logger().warning("ignoring a result that is not JSON")
            return
        with self._lock:
            if self._ours(data.get("instruction", "")) and self._started:
                self._result_data = data
