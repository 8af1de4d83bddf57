"""Small pieces every saycan_ros node shares: parameters, QoS, blocking service calls, main()."""
from __future__ import annotations

import os
import sys
import threading
from typing import Any, Callable

import rclpy
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

#: Topics and services of the stack, relative to the node's namespace (remap them like any ROS
#: name): without one they are /saycan/...; under ``__ns:=/robot1`` they are /robot1/saycan/...,
#: so two robots' graphs run side by side in one domain.
INSTRUCTION_TOPIC = "saycan/instruction"
SKILL_SCORES_TOPIC = "saycan/skill_scores"
STATUS_TOPIC = "saycan/status"
RESULT_TOPIC = "saycan/result"
SKILL_MARKERS_TOPIC = "saycan/skill_markers"
WORLD_STATE_TOPIC = "saycan/world_state"
LLM_SERVICE = "saycan/llm/score"
AFFORDANCE_SERVICE = "saycan/affordance/score"
EXECUTE_SERVICE = "saycan/execute"
RESET_SERVICE = "saycan/world/reset"
STATE_SERVICE = "saycan/world/state"
CANCEL_SERVICE = "saycan/cancel"
FOLLOW_ACTION = "saycan/follow_instruction"

#: Last value kept for late joiners (status, world state, map), like a latched ROS 1 topic.
LATCHED_QOS = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL)


class ServiceCallError(RuntimeError):
    """A service that is absent, timed out or failed."""


def declare_parameters(node: Node, defaults: dict[str, Any],
                       descriptions: dict[str, str] | None = None) -> dict[str, Any]:
    """Declare every parameter with its default and a descriptor, and return the values in force.

    The nodes read their parameters once, when they start, so every one is declared read-only:
    a change at run time (``ros2 param set``) is refused with that reason instead of being
    accepted and ignored. ``descriptions`` shows in ``ros2 param describe``."""
    descriptions = descriptions or {}
    values = {}
    for name, value in defaults.items():
        descriptor = ParameterDescriptor(
            description=descriptions.get(name, name.replace("_", " ")) + " (read at start)",
            read_only=True)
        values[name] = node.declare_parameter(name, value, descriptor).value
    return values


def call_service(node: Node, client, request, timeout_s: float, label: str):
    """Call ``client`` and wait for the answer from a thread other than the executor's.

    The caller's thread blocks on an event while the executor (spinning elsewhere) delivers the
    response; an absent server or a late answer raises :class:`ServiceCallError`.
    """
    if not client.wait_for_service(timeout_sec=timeout_s):
        raise ServiceCallError(f"{label} ({client.srv_name}) is not available")
    done = threading.Event()
    future = client.call_async(request)
    future.add_done_callback(lambda _: done.set())
    if not done.wait(timeout_s):
        client.remove_pending_request(future)
        raise ServiceCallError(f"{label} ({client.srv_name}) did not answer within {timeout_s:g} s")
    if future.exception() is not None:
        raise ServiceCallError(f"{label} ({client.srv_name}) failed: {future.exception()}")
    return future.result()


def check_local_discovery() -> None:
    """Warn when DDS discovery may leave this machine (the stack is meant to run on loopback)."""
    if os.environ.get("ROS_AUTOMATIC_DISCOVERY_RANGE") not in ("LOCALHOST", "OFF"):
        print("saycan_ros: ROS_AUTOMATIC_DISCOVERY_RANGE is not LOCALHOST; DDS discovery may "
              "reach other machines", file=sys.stderr)


def spin_node(make_node: Callable[[], Node], args=None, threads: int = 4) -> None:
    """Standard ``main()``: init, build the node, spin a multi-threaded executor, shut down."""
    check_local_discovery()
    rclpy.init(args=args)
    node = None
    try:
        node = make_node()
        executor = MultiThreadedExecutor(num_threads=threads)
        executor.add_node(node)
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        if node is not None:
            node.destroy_node()
        if rclpy.ok():
            rclpy.shutdown()
