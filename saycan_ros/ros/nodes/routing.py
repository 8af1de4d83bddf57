"""The planner's executor when skills run on several executor nodes: it routes each skill to the
ExecuteSkill service the skill registry names for its family (``config/skill_registry.yaml``).

:class:`RoutingExecutor` implements the planner's ``SkillExecutor`` protocol
(``execute(skill, timeout_s) -> ExecutionResult``). A skill that is not in the repertoire, or
whose family the registry does not route, is refused without calling anything: nothing outside
the registry can be executed. :meth:`RoutingExecutor.cancel` cancels the skill in flight
through its executor's ``<service>/cancel`` (std_srvs/Trigger).

Wiring in the planner node (parameter ``registry_file``; "" keeps the single ``/saycan/execute``)::

    registry = load_registry(self.params["registry_file"], self.skills)
    self.executor_client = RoutingExecutor(self, registry, self.params["execute_timeout_s"],
                                           clients)
"""
from __future__ import annotations

import threading
from typing import Callable

from rclpy.node import Node
from std_srvs.srv import Trigger

from saycan_ros.ros.nodes.common import ServiceCallError, WatchedClient, call_service
from saycan_ros.planning.planner import ExecutionResult
from saycan_ros.planning.skill_registry import RegistryError, SkillRegistry
from saycan_ros.srv import ExecuteSkill


class RoutingExecutor:
    """ExecuteSkill clients per executor service; see the module docstring."""

    def __init__(self, node: Node, registry: SkillRegistry, timeout_s: float = 300.0,
                 group=None, cancel_timeout_s: float = 5.0,
                 abort: Callable[[], bool] | None = None):
        if registry.skills is None:
            raise RegistryError("RoutingExecutor needs a registry checked against the skills")
        self.node = node
        self.registry = registry
        self.timeout_s = float(timeout_s)          # on top of the skill's own timeout
        self.cancel_timeout_s = float(cancel_timeout_s)
        self.abort = abort                         # true: stop waiting for the answer
        # relative registry names resolve in this node's namespace (/robot1/navigate_skill)
        resolved = {service: node.resolve_service_name(service) for service in registry.services()}
        self._clients = {service: WatchedClient(node, ExecuteSkill, name, group)
                         for service, name in resolved.items()}
        self._cancel_clients = {service: node.create_client(Trigger, f"{name}/cancel",
                                                            callback_group=group)
                                for service, name in resolved.items()}
        self._lock = threading.Lock()
        self._in_flight: str | None = None         # the service running a skill now

    def execute(self, skill: str, timeout_s: float = 0.0) -> ExecutionResult:
        try:
            entry = self.registry.entry_for(skill)
        except RegistryError as exc:
            return ExecutionResult(False, str(exc))
        if entry.executed_by_planner:             # e.g. "done": nothing to run
            return ExecutionResult(True, "done")
        service = self.registry.route(skill)
        request = ExecuteSkill.Request(skill=skill, timeout_s=float(timeout_s))
        with self._lock:
            self._in_flight = service
        try:
            response = self._clients[service].call(request, self.timeout_s + float(timeout_s),
                                                   "skill executor", abort=self.abort)
        except ServiceCallError as exc:
            return ExecutionResult(False, str(exc))
        finally:
            with self._lock:
                self._in_flight = None
        return ExecutionResult(bool(response.success), str(response.message),
                               float(response.duration_s), int(response.state_revision))

    def cancel(self) -> bool:
        """Ask the executor running a skill to stop it; False when none runs or it refuses."""
        with self._lock:
            service = self._in_flight
        if service is None:
            return False
        try:
            response = call_service(self.node, self._cancel_clients[service], Trigger.Request(),
                                    self.cancel_timeout_s, f"cancel {service}")
        except ServiceCallError as exc:
            self.node.get_logger().warning(str(exc))
            return False
        return bool(response.success)

    def ready(self) -> bool:
        """Every executor the registry routes to is up and beating."""
        return all(client.alive for client in self._clients.values())

    @property
    def services(self) -> list[str]:
        return list(self._clients)
