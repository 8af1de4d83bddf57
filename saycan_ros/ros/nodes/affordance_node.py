"""``affordance``: serves p(success | state, skill) on ``/saycan/affordance/score`` (SkillScore).

The state comes from ``/saycan/world_state``; a request may ask for a state at least as new as
``min_state_revision`` (the revision ExecuteSkill returned), so scores never use a stale world.
The models per skill kind come from ``config/affordance.yaml`` (``affordance_file``).

Learned models (``learned_pick``: the pick value function, ``config/affordance_sim.yaml``) score
from the robot's sensors: with ``observe`` (``auto``: when the config has such a model) the node
subscribes to ``camera/image_raw`` and ``joint_states`` and passes the latest frame, received
after the request arrived (so after the last skill ended), and the arm state as
``AffordanceContext.observation`` = ``{"image": HxWx3 uint8, "state": [ee x, y, z, opening
0..1, holding 0/1]}``; every pick candidate of a request is scored in one batched forward pass.
"""
from __future__ import annotations

import threading
import time


from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.node import Node
from rclpy.qos import qos_profile_sensor_data

from saycan_ros.core.memory import trimmed
from saycan_ros.ros.nodes.conversions import image_to_rgb
from saycan_ros.planning.affordance import AffordanceContext, check_covers, load_affordance
from saycan_ros.core.kitchen import load_kitchen
from saycan_ros.planning.local import needs_observation
from saycan_ros.msg import WorldState
from saycan_ros.ros.nodes.common import (AFFORDANCE_SERVICE, LATCHED_QOS, STATE_SERVICE,
                                         SensorInput,
                                         WORLD_STATE_TOPIC, ServiceCallError, announce_alive,
                                         call_service, declare_parameters, spin_node)
from saycan_ros.ros.nodes.conversions import msg_to_snapshot
from saycan_ros.robot.arm import JOINT_NAMES
from saycan_ros.core.skills import UnknownSkillError, load_skills
from saycan_ros.srv import GetWorldState, SkillScore
from sensor_msgs.msg import Image, JointState

#: Skills already executed that a request may carry (a plan is at most 100 steps).
MAX_HISTORY = 100

DEFAULTS = {
    "kitchen_file": "",
    "skills_file": "",
    "affordance_file": "",      # "" = built-in config/affordance.yaml
    "state_timeout_s": 5.0,     # how long to wait for a fresh enough world state
    "observe": "auto",          # camera + joint_states for learned models: auto | true | false
    "fresh_image": True,        # observe: use a camera frame received after the request arrived
    "sensor_timeout_s": 2.0,    # observe: how long to wait for that frame / joint states
    "joint_names": list(JOINT_NAMES),   # saycan_ros.robot.arm
    "max_candidates": 512,      # skills per request (a learned model runs once per skill)
}


class AffordanceNode(Node):
    def __init__(self, **kwargs):
        super().__init__("affordance", **kwargs)
        self.params = declare_parameters(self, DEFAULTS)
        self.kitchen = load_kitchen(self.params["kitchen_file"] or None)
        self.skills = load_skills(self.kitchen, self.params["skills_file"] or None)
        self.scorer = load_affordance(self.params["affordance_file"] or None)
        check_covers(self.scorer, self.skills)
        self._state = None
        self._state_changed = threading.Condition()
        # The service waits for state updates, so the two must run in different groups.
        self.create_subscription(WorldState, WORLD_STATE_TOPIC, self.on_state, LATCHED_QOS,
                                 callback_group=MutuallyExclusiveCallbackGroup())
        observe = str(self.params["observe"]).lower()
        if observe not in ("auto", "true", "false"):
            raise ValueError(f"observe must be auto, true or false, got {observe!r}")
        self.observe = observe == "true" or (observe == "auto" and needs_observation(self.scorer))
        self._sensors = threading.Condition()
        self._image = None                  # (sensor_msgs/Image rgb8 or bgr8, received)
        self._joints: dict[str, float] = {}
        self._joints_time = 0.0
        self.sensor_input = None
        if self.observe:
            # Camera and joints on a thread of their own (SensorInput says why): on this node's
            # executor their stream kept its threads busy enough on two loaded cores to silence
            # the service's beats for 3 s, and the planner took the node for dead.
            self.sensor_input = SensorInput(self)
            self.sensor_input.subscribe(Image, "camera/image_raw", self.on_image,
                                        qos_profile_sensor_data)
            self.sensor_input.subscribe(JointState, "joint_states", self.on_joints, 10)
        # Requests run side by side (one waiting for a state does not hold up the others); the
        # models themselves score one request at a time.
        self._model_lock = threading.Lock()
        self.state_client = self.create_client(GetWorldState, STATE_SERVICE,
                                               callback_group=ReentrantCallbackGroup())
        self.create_service(SkillScore, AFFORDANCE_SERVICE, trimmed(self.on_score),
                            callback_group=ReentrantCallbackGroup())
        self.alive_pub = announce_alive(self, AFFORDANCE_SERVICE)
        if self.observe:
            self.get_logger().info("scoring learned affordances from camera/image_raw and "
                                   "joint_states")

    # -- sensors (learned models) --------------------------------------------------------------
    def on_image(self, msg: Image) -> None:
        if msg.encoding not in ("rgb8", "bgr8"):   # kept short: converted when a request uses it
            return
        with self._sensors:
            self._image = (msg, time.monotonic())
            self._sensors.notify_all()

    def on_joints(self, msg: JointState) -> None:
        with self._sensors:
            self._joints.update(zip(msg.name, msg.position))
            self._joints_time = time.monotonic()
            self._sensors.notify_all()

    def observation(self, since: float, holding: bool):
        """{"image", "state"} from a frame received after ``since`` and the latest joint
        states; raises TimeoutError naming what is missing."""
        from saycan_ros.skills.pick.policy import as_image, policy_state
        names = list(self.params["joint_names"])
        timeout = float(self.params["sensor_timeout_s"])
        with self._sensors:
            ready = self._sensors.wait_for(
                lambda: self._image is not None and self._image[1] >= since
                and all(n in self._joints for n in names) and self._joints_time >= since - 1.0,
                timeout=timeout)
            if not ready:
                missing = "camera/image_raw" if self._image is None or self._image[1] < since \
                    else "joint_states"
                raise TimeoutError(f"no {missing} within {timeout:g} s")
            frame = self._image[0]
            joints = [self._joints[n] for n in names]
        image = image_to_rgb(frame)
        if image is None:
            raise TimeoutError(f"camera/image_raw: a {frame.width}x{frame.height} "
                               f"{frame.encoding} image whose data does not match its size")
        return {"image": as_image(image), "state": policy_state(joints, holding)}

    def on_state(self, msg: WorldState) -> None:
        try:
            snapshot = msg_to_snapshot(msg)
        except ValueError as exc:
            self.get_logger().warning(f"ignoring world state: {exc}")
            return
        with self._state_changed:
            if self._state is None or snapshot.revision >= self._state.revision:
                self._state = snapshot
            self._state_changed.notify_all()

    def _world_revision(self) -> int | None:
        """The revision the world serves now (GetWorldState), None when it cannot say."""
        if not self.state_client.service_is_ready():
            return None
        try:
            response = call_service(self, self.state_client, GetWorldState.Request(), 1.0,
                                    "world state")
        except ServiceCallError:
            return None
        return int(response.state.revision)

    def _wait_for_state(self, min_revision: int):
        timeout = self.params["state_timeout_s"]
        with self._state_changed:
            if self._state is not None and self._state.revision >= min_revision:
                return self._state
        # Behind: the world's own answer tells a late message from a revision that does not
        # exist (a request must not hold the node for the timeout for something never coming).
        world = self._world_revision()
        if world is not None and world < min_revision:
            raise LookupError(f"the world is at revision {world}; revision {min_revision} does "
                              "not exist")
        with self._state_changed:
            ready = self._state_changed.wait_for(
                lambda: self._state is not None and self._state.revision >= min_revision,
                timeout=timeout)
            return self._state if ready else None

    def on_score(self, request, response):
        arrived = time.monotonic()
        response.success = False
        if not request.skills:
            response.message = "no candidate skills to score"
            return response
        if len(request.skills) > self.params["max_candidates"]:
            response.message = (f"{len(request.skills)} candidates; the limit is "
                                f"{self.params['max_candidates']}")
            return response
        if len(request.history) > MAX_HISTORY:
            response.message = f"{len(request.history)} history steps; the limit is {MAX_HISTORY}"
            return response
        try:
            skills = [self.skills.get(s) for s in request.skills]
            history = [self.skills.get(s) for s in request.history]
        except UnknownSkillError as exc:
            response.message = str(exc)
            return response
        try:
            state = self._wait_for_state(int(request.min_state_revision))
        except LookupError as exc:
            response.message = f"no world state with revision >= {request.min_state_revision}: {exc}"
            return response
        if state is None:
            have = "none" if self._state is None else f"revision {self._state.revision}"
            response.message = (f"no world state with revision >= {request.min_state_revision} "
                                f"within {self.params['state_timeout_s']:g} s (have {have})")
            return response
        observation = None
        if self.observe:
            try:
                observation = self.observation(arrived if self.params["fresh_image"] else 0.0,
                                               state.holding is not None)
            except TimeoutError as exc:
                response.message = f"affordance observation: {exc}"
                return response
        try:
            with self._model_lock:
                probs, raws = self.scorer.score(skills, history,
                                                AffordanceContext(self.kitchen, state, observation))
        except Exception as exc:  # noqa: BLE001 - a model failure is reported, not fatal
            response.message = f"affordance model failed: {exc}"
            return response
        response.scores = [float(p) for p in probs]
        response.raw = [float(r) for r in raws]  # inf = nowhere to go
        response.success = True
        response.message = f"state revision {state.revision}"
        return response

    def destroy_node(self) -> None:
        if self.sensor_input is not None:
            self.sensor_input.close()
        super().destroy_node()


def main(args=None) -> None:
    spin_node(AffordanceNode, args)


if __name__ == "__main__":
    main()
