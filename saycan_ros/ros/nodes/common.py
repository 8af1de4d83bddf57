"""Small pieces every saycan_ros node shares: parameters, QoS, blocking service calls, main()."""
from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any, Callable

import rclpy
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.exceptions import ParameterException
from rclpy.executors import (ExternalShutdownException, MultiThreadedExecutor, ShutdownException,
                             SingleThreadedExecutor)
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import Empty

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
QUESTION_TOPIC = "saycan/question"
ANSWER_SERVICE = "saycan/answer"

#: Last value kept for late joiners (status, world state, map), like a latched ROS 1 topic.
LATCHED_QOS = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL)


#: A server's sign of life: an Empty on ``<service>/alive`` every :data:`BEAT_S`. A client
#: counts the server gone after :data:`ALIVE_TIMEOUT_S` without one, where the graph
#: (``service_is_ready``) still lists a killed process's service for the DDS participant lease
#: (about 20 s with Fast DDS). Beats, not the DDS liveliness QoS: Fast DDS reports a writer's
#: liveliness to only the first reader in the same process. 3 s, not less: two busy cores may
#: delay a beat.
BEAT_S = 0.5
ALIVE_TIMEOUT_S = 3.0
ALIVE_QOS = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE)
#: How often a waiting call looks at its abort flag and its server's beats.
POLL_S = 0.02


class ServiceCallError(RuntimeError):
    """A service that is absent, timed out, gone or failed."""


class CallAbandoned(ServiceCallError):
    """The caller gave up waiting (a cancel): the answer, if it comes, is dropped."""


def alive_topic(node: Node, service: str) -> str:
    """The beat topic of ``service`` as this node resolves it (remaps included)."""
    return node.resolve_service_name(service) + "/alive"


def announce_alive(node: Node, service: str):
    """Beat on ``<service>/alive`` so that clients notice within :data:`ALIVE_TIMEOUT_S` when
    this server is gone (its own callback group: a long request does not hold the beats)."""
    publisher = node.create_publisher(Empty, alive_topic(node, service), ALIVE_QOS)
    publisher.publish(Empty())
    node.create_timer(BEAT_S, lambda: publisher.publish(Empty()),
                      callback_group=MutuallyExclusiveCallbackGroup())
    return publisher


class SensorInput:
    """A node's high-rate sensor subscriptions (tf, odom, scan, camera, joint states) on a node
    of their own, ``<owner>_sensors`` in the owner's namespace, spun by one thread.

    Why not the owner's MultiThreadedExecutor: rclpy's yields a callback again on every pass
    of its loop until a worker has started it, so with tf and odom at 50 Hz on two busy cores
    its waiting thread spins at a whole core and holds the GIL that the skill's control loop
    and its cancel service need (measured on ``navigate_skill``: about 100% of a core while
    idle, cancels served up to 370 ms late). A SingleThreadedExecutor takes each message once
    (about 10% of a core for the same streams). Callbacks here run on that one thread, so they
    must stay short (store the message, as the caches do).

    Topics are resolved by the owner (its namespace and remaps, the process's and its own), so
    ``-r odom:=/robot/odom`` on the owner moves its sensor stream too."""

    def __init__(self, owner: Node):
        self.owner = owner
        # no global arguments: a launch file's __node/__ns remaps name the owner, not this node
        self.node = Node(f"{owner.get_name()}_sensors", namespace=owner.get_namespace(),
                         context=owner.context, use_global_arguments=False,
                         start_parameter_services=False)
        self._executor = SingleThreadedExecutor(context=owner.context)
        self._executor.add_node(self.node)
        self._thread = threading.Thread(target=self._spin, daemon=True, name=self.node.get_name())
        self._thread.start()

    def _spin(self) -> None:
        try:
            self._executor.spin()
        except (ExternalShutdownException, ShutdownException):
            pass

    def subscribe(self, msg_type, topic: str, callback: Callable, qos):
        return self.node.create_subscription(msg_type, self.owner.resolve_topic_name(topic),
                                             callback, qos)

    def close(self) -> None:
        self._executor.shutdown(timeout_sec=1.0)
        self._thread.join(timeout=2.0)
        self.node.destroy_node()


class WatchedClient:
    """A service client that knows when its server is gone, and calls that a cancel can abandon.

    ``gone()`` says why the server cannot answer: its service left the graph (a clean exit), or
    its beats on ``<service>/alive`` stopped (a killed or hung process). A server that never
    beat (a third-party one) is judged by the graph and the timeout only."""

    def __init__(self, node: Node, srv_type, name: str, group=None):
        self.node = node
        self.client = node.create_client(srv_type, name, callback_group=group)
        self._last_beat: float | None = None          # monotonic time of the latest beat
        node.create_subscription(Empty, alive_topic(node, name), self._on_beat, ALIVE_QOS,
                                 callback_group=group)

    @property
    def srv_name(self) -> str:
        return self.client.srv_name

    def _on_beat(self, _msg) -> None:
        self._last_beat = time.monotonic()

    def _silent_s(self) -> float | None:
        last = self._last_beat
        return None if last is None else time.monotonic() - last

    @property
    def alive(self) -> bool:
        """In the graph and beating now (what "ready" means for the stack's own servers, which
        all beat)."""
        silent = self._silent_s()
        return silent is not None and silent < ALIVE_TIMEOUT_S and self.client.service_is_ready()

    def gone(self) -> str:
        """Why the server is gone ("" while it is there, or while it is unknown)."""
        silent = self._silent_s()
        if silent is not None and silent >= ALIVE_TIMEOUT_S:
            return f"its node has shown no sign of life for {silent:.1f} s (stopped or killed)"
        if not self.client.service_is_ready():
            return "its service left the graph"
        return ""

    def call(self, request, timeout_s: float, label: str,
             abort: Callable[[], bool] | None = None):
        return call_service(self.node, self.client, request, timeout_s, label, abort=abort,
                            gone=self.gone)


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


def nul_field(message) -> str:
    """Which text field of a message holds a NUL byte ("" when none does). rosidl hands strings
    to C, which ends them at the NUL: ``"go to the table\x00; rm -rf /"`` would arrive as
    ``"go to the table"`` and run. Such a message must not be sent at all."""
    for name, kind in message.get_fields_and_field_types().items():
        value = getattr(message, name)
        texts = [value] if kind.startswith(("string", "wstring")) else \
            value if "string" in kind and isinstance(value, (list, tuple)) else []
        if any(isinstance(t, str) and "\x00" in t for t in texts):
            return f"field {name!r} contains a NUL byte (the receiver would get only its prefix)"
    return ""


def call_service(node: Node, client, request, timeout_s: float, label: str,
                 abort: Callable[[], bool] | None = None, gone: Callable[[], str] | None = None):
    """Call ``client`` and wait for the answer from a thread other than the executor's.

    The caller's thread waits while the executor (spinning elsewhere) delivers the response.
    Raises :class:`ServiceCallError` for an absent server, a late answer, or a server that
    ``gone()`` reports gone (checked every :data:`POLL_S`), and :class:`CallAbandoned` as soon as
    ``abort()`` is true: the pending request is dropped, never waited out.
    """
    where = f"{label} ({client.srv_name})"
    problem = nul_field(request)
    if problem:
        raise ServiceCallError(f"{where}: not sent: {problem}")
    deadline = time.monotonic() + timeout_s
    while not client.service_is_ready():
        if abort is not None and abort():
            raise CallAbandoned(f"{where}: abandoned (cancelled)")
        if time.monotonic() >= deadline:
            raise ServiceCallError(f"{where} is not available")
        time.sleep(POLL_S)
    done = threading.Event()
    future = client.call_async(request)
    future.add_done_callback(lambda _: done.set())
    while not done.wait(POLL_S):
        reason = ""
        if abort is not None and abort():
            client.remove_pending_request(future)
            raise CallAbandoned(f"{where}: abandoned (cancelled)")
        if gone is not None:
            reason = gone()
        if reason:
            client.remove_pending_request(future)
            raise ServiceCallError(f"{where} is gone: {reason}")
        if time.monotonic() >= deadline:
            client.remove_pending_request(future)
            raise ServiceCallError(f"{where} did not answer within {timeout_s:g} s")
    if future.exception() is not None:
        raise ServiceCallError(f"{where} failed: {future.exception()}")
    return future.result()


def check_local_discovery() -> None:
    """DDS discovery on loopback unless the environment asks otherwise: an unset
    ``ROS_AUTOMATIC_DISCOVERY_RANGE`` becomes LOCALHOST (before rclpy.init reads it), and a range
    that may leave this machine is named on stderr."""
    range_ = os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    if range_ not in ("LOCALHOST", "OFF"):
        print(f"saycan_ros: ROS_AUTOMATIC_DISCOVERY_RANGE={range_}: DDS discovery may reach "
              "other machines", file=sys.stderr)


def spin_node(make_node: Callable[[], Node], args=None, threads: int = 4) -> None:
    """Standard ``main()``: init, build the node, spin a multi-threaded executor, shut down.
    A node that refuses its parameters (a value of the wrong type, or a ValueError/ConfigError
    of its checks) exits with status 1 and one line saying why, the line a launch shows for the
    process that died."""
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
    except (ValueError, ParameterException) as exc:
        print(f"{getattr(make_node, '__name__', 'node')}: refused to start: {exc}",
              file=sys.stderr, flush=True)
        raise SystemExit(1) from None
    finally:
        if node is not None:
            node.destroy_node()
        if rclpy.ok():
            rclpy.shutdown()
