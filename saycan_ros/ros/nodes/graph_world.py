"""The simulated kitchen as the real node graph, behind the world interface of ``saycan eval``
(``reset``, ``snapshot``, ``execute``, ``observation``, ``robot_at``, ``holding``, ...):

- ``kitchen_sim`` in a child process: the robot on its standard topics, ground truth and
  ``/saycan/world/reset`` / ``/saycan/world/state``;
- the ``navigate_skill``, ``pick_skill`` (learned BC policy) and ``place_skill`` executor nodes
  in this process (their own rclpy context and executor), every skill routed to them over DDS
  by the skill registry (:class:`saycan_ros.ros.nodes.routing.RoutingExecutor`);
- :meth:`observation`: the latest head-camera frame and arm state received over DDS, for the
  learned pick affordance.

``saycan eval --world nodes`` plans in-process (language model, affordance models) and
executes every skill on these nodes. DDS stays on this machine (``ROS_AUTOMATIC_DISCOVERY_RANGE
=LOCALHOST``) in ``ROS_DOMAIN_ID`` (or ``domain_id``).
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from saycan_ros.ros.graph import InProcessGraph, stop_processes
from saycan_ros.ros.nodes.common import RESET_SERVICE, STATE_SERVICE
from saycan_ros.ros.nodes.conversions import image_to_rgb
from saycan_ros.ros.sensor_cache import SensorCache
from saycan_ros.core.kitchen import Kitchen, load_kitchen
from saycan_ros.robot.arm import JOINT_NAMES
from saycan_ros.core.skills import Skill, SkillSet, load_skills
from saycan_ros.core.tasks import init_to_json
from saycan_ros.core.world import SkillOutcome, WorldSnapshot


class NodeGraphWorld:
    def __init__(self, kitchen: Kitchen | None = None, skills: SkillSet | None = None,
                 domain_id: int | None = None, log_dir: str | None = None,
                 skill_timeout_s: float = 120.0, ready_timeout_s: float = 60.0,
                 pick_params: dict | None = None, kitchen_file: str = ""):
        os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
        import rclpy
        from rclpy.parameter import Parameter
        from rclpy.qos import qos_profile_sensor_data
        from sensor_msgs.msg import Image, JointState

        from saycan_ros.ros.nodes.navigate_skill_node import NavigateSkillNode
        from saycan_ros.ros.nodes.pick_skill_node import PickSkillNode
        from saycan_ros.ros.nodes.place_skill_node import PlaceSkillNode
        from saycan_ros.ros.nodes.routing import RoutingExecutor
        from saycan_ros.planning.skill_registry import load_registry
        from saycan_ros.srv import GetWorldState, ResetWorld

        self.kitchen = kitchen or load_kitchen(kitchen_file or None)
        self.skills = skills or load_skills(self.kitchen)
        self.skill_timeout_s = float(skill_timeout_s)
        self.domain_id = int(os.environ.get("ROS_DOMAIN_ID") or 0) if domain_id is None \
            else int(domain_id)
        self.log_dir = Path(log_dir or tempfile.mkdtemp(prefix="saycan_nodes_"))
        env = dict(os.environ, ROS_DOMAIN_ID=str(self.domain_id))
        self._log = open(self.log_dir / "kitchen_sim.log", "w")
        sim_args = ["--ros-args", "-p", f"kitchen:={kitchen_file}"] if kitchen_file else []
        self.sim = subprocess.Popen([sys.executable, "-m", "saycan_ros.ros.nodes.kitchen_sim_node",
                                     *sim_args],
                                    env=env, stdout=self._log, stderr=subprocess.STDOUT)
        self.context = rclpy.Context()
        rclpy.init(context=self.context, domain_id=self.domain_id)
        where = [Parameter("kitchen_file", value=kitchen_file)] if kitchen_file else []
        self.nodes = [NavigateSkillNode(context=self.context, parameter_overrides=where),
                      PickSkillNode(context=self.context, parameter_overrides=where + [
                          Parameter(k, value=v) for k, v in (pick_params or {}).items()]),
                      PlaceSkillNode(context=self.context, parameter_overrides=where)]
        self.client = rclpy.create_node("saycan_eval_world", context=self.context)
        self.spinning = InProcessGraph.spinning(threads=8, context=self.context)
        for node in (*self.nodes, self.client):
            self.spinning.add(node)
        self.router = RoutingExecutor(self.client, load_registry(None, self.skills),
                                      timeout_s=10.0)
        self._reset = self.client.create_client(ResetWorld, RESET_SERVICE)
        self._state = self.client.create_client(GetWorldState, STATE_SERVICE)
        self.sensors = SensorCache()         # "image" and the joint states
        self.client.create_subscription(Image, "camera/image_raw", self._on_image,
                                        qos_profile_sensor_data)
        self.client.create_subscription(JointState, "joint_states", self._on_joints, 10)
        self._snapshot: WorldSnapshot | None = None
        self._wait_ready(ready_timeout_s)

    # -- plumbing --------------------------------------------------------------------------------
    def _on_image(self, msg) -> None:
        image = image_to_rgb(msg)
        if image is not None:
            self.sensors.put("image", image)

    def _on_joints(self, msg) -> None:
        self.sensors.put_joints(msg.name, msg.position)

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.sim.poll() is not None:
                raise RuntimeError(f"kitchen_sim exited (log: {self.log_dir}/kitchen_sim.log)")
            if (self._reset.service_is_ready() and self._state.service_is_ready()
                    and self.sensors.has("image") and self.sensors.joints(JOINT_NAMES)
                    and self.router.ready()):
                return
            time.sleep(0.1)
        raise TimeoutError(f"the node graph did not come up within {timeout:g} s "
                           f"(logs: {self.log_dir})")

    def _call(self, client, request, what: str, timeout: float = 20.0):
        from saycan_ros.ros.nodes.common import call_service
        return call_service(self.client, client, request, timeout, what)

    # -- the world interface -----------------------------------------------------------------------
    def reset(self, init=None, seed: int | None = None) -> None:
        from saycan_ros.srv import ResetWorld
        response = self._call(self._reset, ResetWorld.Request(
            init=init_to_json(init), seed=-1 if seed is None else int(seed)), "reset")
        if not response.success:
            raise ValueError(f"kitchen_sim refused the reset: {response.message}")
        time.sleep(0.3)              # the camera and joint states of the new scene
        self._snapshot = None

    def snapshot(self) -> WorldSnapshot:
        from saycan_ros.ros.nodes.conversions import msg_to_snapshot
        from saycan_ros.srv import GetWorldState
        self._snapshot = msg_to_snapshot(self._call(self._state, GetWorldState.Request(),
                                                    "world state").state)
        return self._snapshot

    @property
    def revision(self) -> int:
        return self.snapshot().revision

    @property
    def robot_at(self) -> str | None:
        return self.snapshot().robot_at

    @property
    def holding(self) -> str | None:
        return self.snapshot().holding

    @property
    def objects(self) -> dict[str, str]:
        return dict(self.snapshot().objects)

    def object_location(self, name: str) -> str | None:
        return self.snapshot().objects.get(name)

    def execute(self, skill: Skill) -> SkillOutcome:
        result = self.router.execute(skill.text, self.skill_timeout_s)
        return SkillOutcome(result.success, result.message)

    def observation(self) -> dict:
        """A camera frame received after this call, and the arm state (pick env convention)."""
        from saycan_ros.skills.pick.policy import as_image, policy_state
        image = self.sensors.wait_since("image", time.monotonic(), timeout=2.0)
        joints = self.sensors.joints(JOINT_NAMES)
        if image is None or joints is None:
            raise TimeoutError("no camera/image_raw frame (or joint state) within 2 s")
        holding = (self._snapshot or self.snapshot()).holding is not None
        return {"image": as_image(image), "state": policy_state(joints, holding)}

    def close(self) -> None:
        import rclpy
        self.spinning.shutdown()            # nothing may spin while the nodes are destroyed
        if self.context.ok():
            rclpy.shutdown(context=self.context)
        stop_processes([self.sim])          # SIGINT, then kill after 5 s
        self._log.close()
