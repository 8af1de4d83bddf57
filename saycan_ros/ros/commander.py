"""A small façade over the SayCan graph, in the spirit of ``nav2_simple_commander``.

    commander = SayCanCommander()           # an rclpy node; spin it in an executor
    commander.wait_until_ready()
    commander.followInstruction("Bring me a coke.")    # the FollowInstruction action
    while not commander.isTaskComplete():
        feedback = commander.getFeedback()  # step, chosen skill, its top scores
        time.sleep(0.1)
    result = commander.getResult()          # dict: success, state, plan, final_state, steps

When the planner asks for help (its ``ask_epsilon`` parameter), ``getQuestion()`` returns the
open question (a dict: id, text, options, probabilities) and ``answer(i)`` answers it (i the
1-based option, 0 for "something else").

Uniform send -> isTaskComplete -> getResult, as nav2_simple_commander's methods (the
snake_case names are the same methods). ``send_instruction`` publishes on the instruction
topic instead (what a speech front end does); the same is_task_complete / get_result follow
it through ``/saycan/status`` and ``/saycan/result``. ``cancelTask`` cancels the action goal
(or calls ``/saycan/cancel`` for a topic instruction). It also wraps the world's reset and
state services.
"""
from __future__ import annotations

import json
import threading
import time
from typing import Callable

from rclpy.action import ActionClient
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node
from std_msgs.msg import String
from std_srvs.srv import Trigger

from saycan_ros.action import FollowInstruction
from saycan_ros.msg import PlanResult, PlanStatus, Question, SkillScores
from saycan_ros.ros.nodes.conversions import plan_result_dict
from saycan_ros.ros.nodes.common import (AFFORDANCE_SERVICE, ANSWER_SERVICE, CANCEL_SERVICE,
                                         EXECUTE_SERVICE, FOLLOW_ACTION, INSTRUCTION_TOPIC,
                                         LATCHED_QOS, LLM_SERVICE, QUESTION_TOPIC,
                                         RESET_SERVICE, RESULT_TOPIC,
                                         SKILL_SCORES_TOPIC, STATE_SERVICE, STATUS_TOPIC,
                                         WatchedClient, call_service)
from saycan_ros.srv import AnswerQuestion, ExecuteSkill, GetWorldState, ResetWorld, SkillScore

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
        self.create_subscription(PlanResult, RESULT_TOPIC, self._result, LATCHED_QOS,
                                 callback_group=group)
        self.reset_client = self.create_client(ResetWorld, RESET_SERVICE, callback_group=group)
        self.state_client = self.create_client(GetWorldState, STATE_SERVICE, callback_group=group)
        self.cancel_client = self.create_client(Trigger, CANCEL_SERVICE, callback_group=group)
        self.answer_client = self.create_client(AnswerQuestion, ANSWER_SERVICE,
                                                callback_group=group)
        self.create_subscription(Question, QUESTION_TOPIC, self._question, LATCHED_QOS,
                                 callback_group=group)
        self.action_client = ActionClient(self, FollowInstruction, FOLLOW_ACTION,
                                          callback_group=group)
        # readiness probes: a service counts once its server beats (a killed node's
        # services stay in the graph for the DDS participant lease, ~20 s)
        self._probes = {name: WatchedClient(self, kind, name, group) for name, kind in
                        ((LLM_SERVICE, SkillScore), (AFFORDANCE_SERVICE, SkillScore),
                         (EXECUTE_SERVICE, ExecuteSkill))}
        self._lock = threading.Lock()
        self._sent: str | None = None
        self._started = False
        self._result_data: dict | None = None
        self._goal_handle = None           # of the running FollowInstruction goal
        self._record: dict | None = None   # /saycan/result of an action goal (every step's scores)
        self.statuses: list[PlanStatus] = []
        self.scores: list[SkillScores] = []
        self.feedback: list[FollowInstruction.Feedback] = []
        self.questions: list[dict] = []     # the questions about our instruction, oldest first
        self._answered: set[int] = set()

    # -- readiness -----------------------------------------------------------------------------
    def wait_until_ready(self, timeout_s: float = 120.0,
                         gone: Callable[[], str] | None = None) -> None:
        """Wait for the planner to listen and for every service of the graph to be up.
        ``gone()``, checked as often, says which node has died (empty while all run): then
        :class:`GraphDown` is raised at once instead of waiting out the timeout."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            dead = gone() if gone is not None else ""
            if dead:
                raise GraphDown(f"the SayCan graph cannot come up: {dead}")
            missing = [name for name, probe in self._probes.items() if not probe.alive]
            if not self.cancel_client.service_is_ready():
                missing.append(CANCEL_SERVICE)
            if not missing and self.instruction_pub.get_subscription_count() > 0 \
                    and self.action_client.server_is_ready():
                return
            time.sleep(0.1)
        raise TimeoutError(f"the SayCan graph is not up after {timeout_s:g} s "
                           f"(missing: {missing or ['planner subscription']})")

    # -- the task --------------------------------------------------------------------------------
    def _begin(self, text: str, goal_handle=None) -> None:
        with self._lock:
            self._sent, self._started, self._result_data = text, False, None
            self._goal_handle, self._record = goal_handle, None
            self.scores.clear()
            self.feedback.clear()
            self.questions.clear()

    def follow_instruction(self, text: str, strategy: str = "", max_steps: int = 0,
                           timeout_s: float = 10.0) -> bool:
        """Send ``text`` as a FollowInstruction goal. False when the planner rejects it (bad
        text, unknown strategy, busy): :meth:`get_result` then says why."""
        _check_carriable(text)
        if not self.action_client.wait_for_server(timeout_sec=timeout_s):
            raise TimeoutError(f"no {FOLLOW_ACTION} action server after {timeout_s:g} s")
        self._begin(text)
        with self._lock:
            self._goal_handle = "sending"  # status and scores are ours from now on
            seen = len(self.statuses)
        goal = FollowInstruction.Goal(instruction=text, strategy=strategy,
                                      max_steps=int(max_steps))
        sent = _wait(self.action_client.send_goal_async(goal, feedback_callback=self._on_feedback),
                     timeout_s, "the goal's answer")
        handle = sent.result()
        if not handle.accepted:
            reason = self._rejection(seen, timeout_s=2.0)
            with self._lock:
                self._goal_handle = None
                self._result_data = {"instruction": text, "state": "rejected", "success": False,
                                     "message": reason, "plan": [], "steps": []}
            return False
        with self._lock:
            self._goal_handle = handle
        handle.get_result_async().add_done_callback(self._on_action_result)
        return True

    def send_instruction(self, text: str) -> None:
        """Publish ``text`` on the instruction topic (no goal: follow it by the status)."""
        _check_carriable(text)
        self._begin(text)
        self.instruction_pub.publish(String(data=text))

    def track_instruction(self, text: str) -> None:
        """Follow the plan of ``text`` sent by someone else (the speech front end, rqt) by its
        status and result, as if :meth:`send_instruction` had sent it."""
        self._begin(text)

    def is_task_complete(self) -> bool:
        with self._lock:
            return self._result_data is not None

    def get_result(self) -> dict | None:
        with self._lock:
            return self._result_data

    def get_feedback(self) -> FollowInstruction.Feedback | None:
        with self._lock:
            return self.feedback[-1] if self.feedback else None

    def cancel_task(self, timeout_s: float = 5.0) -> str:
        with self._lock:
            handle = self._goal_handle
        if handle is not None and not isinstance(handle, str):
            answer = _wait(handle.cancel_goal_async(), timeout_s, "the cancel's answer").result()
            return "cancelling" if answer.goals_canceling else "nothing to cancel"
        response = call_service(self, self.cancel_client, Trigger.Request(), timeout_s, "cancel")
        return response.message

    def get_question(self) -> dict | None:
        """The open question about our instruction (id, step, text, options, probabilities,
        timeout_s), or None while no question waits."""
        with self._lock:
            if self._result_data is not None or not self.questions or \
                    not self.statuses or self.statuses[-1].state != PlanStatus.STATE_ASKING:
                return None
            last = self.questions[-1]
            return None if last["id"] in self._answered else dict(last)

    def answer(self, choice: int, question_id: int = 0, timeout_s: float = 5.0) -> str:
        """Answer the open question: ``choice`` the 1-based option, 0 for "something else".
        Returns the planner's acknowledgement; ValueError when it refuses the answer."""
        request = AnswerQuestion.Request(question_id=int(question_id), choice=int(choice))
        response = call_service(self, self.answer_client, request, timeout_s, "answer")
        if not response.accepted:
            raise ValueError(f"answer refused: {response.message}")
        with self._lock:
            for q in self.questions:
                if question_id in (0, q["id"]):
                    self._answered.add(q["id"])
        return response.message

    # nav2_simple_commander's spelling
    followInstruction = follow_instruction
    isTaskComplete = is_task_complete
    getResult = get_result
    getFeedback = get_feedback
    cancelTask = cancel_task
    getQuestion = get_question

    def _rejection(self, seen: int, timeout_s: float) -> str:
        """The planner's reason for rejecting our goal, from the status it published about it
        (after the first ``seen`` statuses)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._lock:
                for status in reversed(self.statuses[seen:]):
                    if status.state == PlanStatus.STATE_REJECTED:
                        return status.message
            time.sleep(0.02)
        return "rejected by the planner"

    def _on_feedback(self, message) -> None:
        with self._lock:
            self.feedback.append(message.feedback)

    def _on_action_result(self, future) -> None:
        result = future.result().result
        with self._lock:
            data = dict(self._record or {"instruction": self._sent, "steps": []})
            data.update(success=bool(result.success), state=result.state,
                        message=result.message, plan=list(result.plan),
                        final_state=_world_dict(result.final_state))
            self._result_data = data

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
                if msg.state in ("planning", "executing", "asking"):
                    self._started = True
                elif msg.state == "rejected" and not self._started and self._goal_handle is None:
                    # rejected before it ever ran (bad input or busy): that is the result
                    self._result_data = {"instruction": msg.instruction, "state": "rejected",
                                         "message": msg.message, "plan": [], "steps": []}
        if ours and self.on_status:
            self.on_status(msg)

    def _question(self, msg: Question) -> None:
        with self._lock:
            if self._ours(msg.instruction) and self._started and \
                    all(q["id"] != msg.id for q in self.questions):
                self.questions.append({"id": int(msg.id), "step": int(msg.step),
                                       "text": msg.text, "options": list(msg.options),
                                       "probabilities": [float(p) for p in msg.probabilities],
                                       "timeout_s": float(msg.timeout_s)})

    def _result(self, msg: PlanResult) -> None:
        data = plan_result_dict(msg)
        with self._lock:
            if self._ours(data.get("instruction", "")) and self._started:
                if self._goal_handle is not None:   # an action goal: its result completes it
                    self._record = data
                else:
                    self._result_data = data


def _check_carriable(text: str) -> None:
    """Refuse text that a ROS string cannot carry whole: rosidl ends it at a NUL byte, so the
    planner would get (and run) only the prefix."""
    if "\x00" in text:
        raise ValueError("the instruction contains a NUL byte; the planner would get only the "
                         "text before it")


def _wait(future, timeout_s: float, what: str):
    """Wait for an rclpy future that another thread's executor completes."""
    done = threading.Event()
    future.add_done_callback(lambda _: done.set())
    if not done.wait(timeout_s):
        raise TimeoutError(f"no answer within {timeout_s:g} s ({what})")
    return future


def _world_dict(state) -> dict:
    """A WorldState message as the dict ``world_state()`` returns (robot_at, holding, objects)."""
    return {"revision": int(state.revision), "robot_at": state.robot_location or None,
            "holding": state.holding or None,
            "objects": dict(zip(state.objects, state.object_locations))}
