"""``affordance``: serves p(success | state, skill) on ``/saycan/affordance/score`` (SkillScore).

The state comes from ``/saycan/world_state``; a request may ask for a state at least as new as
``min_state_revision`` (the revision ExecuteSkill returned), so scores never use a stale world.
The models per skill kind come from ``config/affordance.yaml``.
"""
from __future__ import annotations

import threading

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.node import Node

from saycan_ros.affordance import AffordanceContext, check_covers, load_affordance
from saycan_ros.kitchen import load_kitchen
from saycan_ros.msg import WorldState
from saycan_ros.nodes.common import (AFFORDANCE_SERVICE, LATCHED_QOS, WORLD_STATE_TOPIC,
                                     declare_parameters, spin_node)
from saycan_ros.nodes.conversions import msg_to_snapshot
from saycan_ros.skills import UnknownSkillError, load_skills
from saycan_ros.srv import SkillScore

DEFAULTS = {
    "kitchen_file": "",
    "skills_file": "",
    "affordance_file": "",      # "" = built-in config/affordance.yaml
    "state_timeout_s": 5.0,     # how long to wait for a fresh enough world state
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
        self.create_service(SkillScore, AFFORDANCE_SERVICE, self.on_score,
                            callback_group=MutuallyExclusiveCallbackGroup())

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

    def _wait_for_state(self, min_revision: int):
        timeout = self.params["state_timeout_s"]
        with self._state_changed:
            ready = self._state_changed.wait_for(
                lambda: self._state is not None and self._state.revision >= min_revision,
                timeout=timeout)
            return self._state if ready else None

    def on_score(self, request, response):
        response.success = False
        if not request.skills:
            response.message = "no candidate skills to score"
            return response
        try:
            skills = [self.skills.get(s) for s in request.skills]
            history = [self.skills.get(s) for s in request.history]
        except UnknownSkillError as exc:
            response.message = str(exc)
            return response
        state = self._wait_for_state(int(request.min_state_revision))
        if state is None:
            have = "none" if self._state is None else f"revision {self._state.revision}"
            response.message = (f"no world state with revision >= {request.min_state_revision} "
                                f"within {self.params['state_timeout_s']:g} s (have {have})")
            return response
        try:
            probs, raws = self.scorer.score(skills, history,
                                            AffordanceContext(self.kitchen, state))
        except Exception as exc:  # noqa: BLE001 - a model failure is reported, not fatal
            response.message = f"affordance model failed: {exc}"
            return response
        response.scores = [float(p) for p in probs]
        response.raw = [float(r) for r in raws]  # inf = nowhere to go
        response.success = True
        response.message = f"state revision {state.revision}"
        return response


def main(args=None) -> None:
    spin_node(AffordanceNode, args)


if __name__ == "__main__":
    main()
