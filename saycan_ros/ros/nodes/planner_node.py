"""``planner``: the SayCan coordinator.

Takes instructions two ways: the ``saycan/follow_instruction`` action (FollowInstruction: goal
= instruction, optional strategy and step limit; feedback after every decision and skill;
result = success, state, plan, final world state; cancel through the action), and the
``saycan/instruction`` topic (std_msgs/String: a speech front end, rqt, ``ros2 topic pub``).
Per step it calls the language scorer and the affordance node (SkillScore), lets the strategy
choose, calls ``saycan/execute`` (ExecuteSkill), and repeats until ``done``, a failure,
``max_steps`` or a cancel (the action's, or ``saycan/cancel``).

Publishes ``/saycan/skill_scores`` (SkillScores, every step), ``/saycan/status`` (PlanStatus,
latched, on every change) and ``/saycan/result`` (PlanResult, latched: the whole plan with
every step's top scores).

With ``ask_epsilon`` > 0 it asks for help (saycan_ros.planning.asking): when a step's conformal
prediction set holds more than one skill (skills that would change nothing left out), the
question goes out on ``saycan/question`` (Question, latched) and as action feedback (state
``asking``), and the plan waits for the answer on the ``saycan/answer`` service
(AnswerQuestion). No answer within ``answer_timeout_s`` ends the plan ``failed`` with the
reason; nothing is guessed.

An instruction or goal that arrives while a plan runs is rejected with a ``rejected`` status
(it is not queued: a robot should not start a stale request later).
"""
from __future__ import annotations

import json
import threading
import time
from typing import Callable

import numpy as np
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node
from std_msgs.msg import String
from visualization_msgs.msg import MarkerArray
from std_srvs.srv import Trigger

from saycan_ros.action import FollowInstruction
from saycan_ros.msg import PlanResult as PlanResultMsg
from saycan_ros.msg import PlanStatus, Question, SkillScores, WorldState
from saycan_ros.ros.nodes.common import (AFFORDANCE_SERVICE, ANSWER_SERVICE, CANCEL_SERVICE,
                                         EXECUTE_SERVICE, FOLLOW_ACTION, INSTRUCTION_TOPIC,
                                         LATCHED_QOS, LLM_SERVICE, QUESTION_TOPIC,
                                         RESULT_TOPIC, SKILL_MARKERS_TOPIC,
                                         SKILL_SCORES_TOPIC, STATE_SERVICE, STATUS_TOPIC,
                                         ServiceCallError, WatchedClient, call_service,
                                         declare_parameters, spin_node)
from saycan_ros.ros.nodes.conversions import plan_result_to_msg, record_to_msg, score_markers
from saycan_ros.planning.planner import ExecutionResult, Planner, PlannerError, PlanResult, StepRecord
from saycan_ros.strategies.registry import make_strategy, node_strategy_names
from saycan_ros.core.kitchen import GRIPPER, load_kitchen
from saycan_ros.planning.scene import scene_line
from saycan_ros.core.skills import load_skills
from saycan_ros.srv import AnswerQuestion, ExecuteSkill, GetWorldState, SkillScore
from saycan_ros.llm.config import DEFAULT_MODEL
from saycan_ros.planning import asking
from saycan_ros.planning.refusal import load_refusals
from saycan_ros.planning.wording import Wording
from saycan_ros.core.tasks import TaskError, check_instruction

DEFAULTS = {
    "strategy": "saycan",          # saycan | no_vf (saycan_ros.strategies.registry)
    "max_steps": 20,
    "score_timeout_s": 60.0,       # per scoring call
    "execute_timeout_s": 130.0,    # per skill, on top of skill_timeout_s (a dead executor is
                                   # noticed within 3 s by its beats, not by this)
    "skill_timeout_s": 0.0,        # passed to ExecuteSkill (0 = the executor's default)
    "kitchen_file": "",
    "skills_file": "",
    "registry_file": "",           # "" = every skill to /saycan/execute; else route per family
    "refresh_scene": True,         # scene line re-read after each put-down (the default adapter's
                                   # prompt is scene: step; false for a scene: true adapter)
    "prune": True,                 # saycan: the LLM scores only skills whose affordance is > 0
    "skill_reliability": 0.95,     # saycan: a failure's evidence against that skill's affordance
    "ask_epsilon": 0.0,            # > 0: ask when the conformal set (coverage 1 - eps) is not one
    "ask_calibration_file": "",    # "" = the default model's (models/ask_calibration_qwen05.json)
    "answer_timeout_s": 60.0,      # a question unanswered this long ends the plan failed
    "ask_reads_words": True,       # asking reads the instruction: "the chips" (which?), "a soda"
    "refuse_impossible": True,     # "I can't ...": an action no skill does, a thing not here
    "refusals_file": "",           # "" = config/refusals.yaml
}
DESCRIPTIONS = {
    "strategy": "how the next skill is chosen: saycan (LLM x affordance) or no_vf (LLM only)",
    "max_steps": "skills per instruction before the plan ends as max_steps (>= 1)",
    "score_timeout_s": "seconds to wait for each SkillScore answer",
    "execute_timeout_s": "seconds to wait for each ExecuteSkill answer beyond skill_timeout_s "
                         "(covers the executors' own default, 120 s)",
    "skill_timeout_s": "timeout passed to ExecuteSkill (0: the executor's default)",
    "kitchen_file": "kitchen YAML ('' = config/kitchen.yaml)",
    "skills_file": "skill repertoire YAML ('' = config/skills.yaml)",
    "registry_file": "skill registry YAML routing each family to its executor ('' = all to "
                     "/saycan/execute)",
    "refresh_scene": "read the scene line again after each put-down, for a language scorer "
                     "whose adapter was trained so (prompt 'scene: step', the default); false: at the "
                     "start only (a 'scene: true' adapter)",
    "prune": "saycan: ask the language scorer only for the skills whose affordance is above 0 "
             "(the same choice, fewer tokens; the others are published with llm NaN and "
             "pruned true); false: every skill is scored",
    "skill_reliability": "saycan: the chance that a skill which can succeed does (0..1); each "
                         "failure updates that skill's affordance by Bayes' rule until a skill "
                         "succeeds, so an uncertain pick that failed gives way to a find "
                         "(0: failures change nothing; an affordance of 1 is kept)",
    "ask_epsilon": "ask the person when the step's conformal prediction set, which holds a "
                   "right next skill with probability 1 - ask_epsilon, holds skills that do "
                   "different things (0: never ask; e.g. 0.15)",
    "refuse_impossible": "end a plan before anything moves, status rejected with the reason, "
                         "when the instruction needs an action no skill does or an everyday "
                         "thing the kitchen does not have (config/refusals.yaml, "
                         "config/planner_lexicon.yaml), or when the first step the "
                         "planner chooses is 'done'",
    "refusals_file": "the actions the robot cannot do ('' = config/refusals.yaml)",
    "ask_calibration_file": "the conformal calibration (saycan calibrate; '' = the shipped one "
                            "of the default model, models/ask_calibration_qwen05.json; the "
                            "launch files' model:= and saycan run --model set that model's)",
    "answer_timeout_s": "seconds a question waits on saycan/answer before the plan ends failed",
    "ask_reads_words": "with asking on, the instruction's words overrule the conformal set "
                       "where scores cannot tell: a definite description that fits several "
                       "things ('the chips', three bags) is asked about until a step names one; "
                       "finds of things the person left to the robot ('a soda', 'some chips'), "
                       "or picks of things its words describe, are not "
                       "(saycan_ros.planning.wording); false: the scores alone",
}


#: SkillScore.min_state_revision is a uint64: what a Python caller may put there.
MAX_REVISION = 2 ** 64 - 1


class ServiceScoreSource:
    """A SkillScore server seen through the planner's ScoreSource protocol. ``abort()`` true
    (the plan was cancelled) abandons a pending call at once."""

    def __init__(self, node: Node, name: str, label: str, timeout_s: float, group,
                 abort: Callable[[], bool] | None = None):
        self.label, self.timeout_s, self.abort = label, timeout_s, abort
        self.client = WatchedClient(node, SkillScore, name, group)

    def score(self, instruction, history, skills, min_state_revision=0, scene=""):
        revision = int(min_state_revision)
        if not 0 <= revision <= MAX_REVISION:   # rosidl would raise a bare SystemError
            raise PlannerError(f"{self.label}: min_state_revision must be in 0..2^64-1, "
                               f"got {revision}")
        request = SkillScore.Request(instruction=instruction, history=list(history),
                                     skills=list(skills), min_state_revision=revision,
                                     scene=scene)
        try:
            response = self.client.call(request, self.timeout_s, self.label, abort=self.abort)
        except ServiceCallError as exc:
            raise PlannerError(str(exc)) from None
        if not response.success:
            raise PlannerError(f"{self.label}: {response.message}")
        return np.asarray(response.scores), np.asarray(response.raw)


class ServiceExecutor:
    """An ExecuteSkill server seen through the planner's SkillExecutor protocol. ``abort()``
    true abandons the pending call (the planner gives a cancelled skill a grace to stop)."""

    def __init__(self, node: Node, name: str, timeout_s: float, group,
                 abort: Callable[[], bool] | None = None):
        self.timeout_s, self.abort = timeout_s, abort
        self.client = WatchedClient(node, ExecuteSkill, name, group)

    def execute(self, skill: str, timeout_s: float = 0.0) -> ExecutionResult:
        request = ExecuteSkill.Request(skill=skill, timeout_s=float(timeout_s))
        try:
            response = self.client.call(request, self.timeout_s + timeout_s, "skill executor",
                                        abort=self.abort)
        except ServiceCallError as exc:
            return ExecutionResult(False, str(exc))
        return ExecutionResult(response.success, response.message, response.duration_s,
                               response.state_revision)


class PlannerNode(Node):
    def __init__(self, **kwargs):
        super().__init__("planner", **kwargs)
        self.params = declare_parameters(self, DEFAULTS, DESCRIPTIONS)
        if self.params["strategy"] not in node_strategy_names():
            # generative, llm_planner, saycan_cot, bc_* need a text generator or the pick
            # policy in the same process: they run in `saycan eval`, not behind SkillScore.
            raise ValueError(f"strategy {self.params['strategy']!r} is not served by the planner "
                             f"node; it runs: {', '.join(node_strategy_names())} (the others: "
                             f"saycan eval)")
        if self.params["max_steps"] < 1:
            raise ValueError("max_steps must be at least 1")
        if not 0.0 <= self.params["skill_reliability"] <= 1.0:
            raise ValueError(f"skill_reliability must be in [0, 1], got "
                             f"{self.params['skill_reliability']}")
        self.ask_policy = _ask_policy(self.params)
        kitchen = self.kitchen = load_kitchen(self.params["kitchen_file"] or None)
        self.wording = Wording.from_kitchen(kitchen) \
            if self.ask_policy is not None and self.params["ask_reads_words"] else None
        self.skills = load_skills(kitchen, self.params["skills_file"] or None)
        self.refusals = load_refusals(kitchen, self.params["refusals_file"] or None,
                                      synonyms=None if not self.params["kitchen_file"] else {}) \
            if self.params["refuse_impossible"] else None
        # The plan in hand: claimed (busy), its cancel flag, its Planner once built. The flag is
        # made when the plan is claimed, so a cancel acknowledged at any moment after that holds.
        self._busy = threading.Lock()
        self._plan_lock = threading.Lock()
        self._cancel = threading.Event()
        self._cancelled_at = 0.0
        self._finishing = False           # the plan in hand is publishing its end
        self._planner: Planner | None = None
        clients = ReentrantCallbackGroup()
        self.language = ServiceScoreSource(self, LLM_SERVICE, "language scorer",
                                           self.params["score_timeout_s"], clients,
                                           abort=self._cancel_requested)
        self.affordance = ServiceScoreSource(self, AFFORDANCE_SERVICE, "affordance scorer",
                                             self.params["score_timeout_s"], clients,
                                             abort=self._cancel_requested)
        if self.params["registry_file"]:
            from saycan_ros.ros.nodes.routing import RoutingExecutor
            from saycan_ros.planning.skill_registry import load_registry
            self.executor_client = RoutingExecutor(
                self, load_registry(self.params["registry_file"], self.skills),
                self.params["execute_timeout_s"], clients, abort=self._cancel_overdue)
        else:
            self.executor_client = ServiceExecutor(self, EXECUTE_SERVICE,
                                                   self.params["execute_timeout_s"], clients,
                                                   abort=self._cancel_overdue)
        self.state_client = self.create_client(GetWorldState, STATE_SERVICE,
                                               callback_group=clients)
        self.scores_pub = self.create_publisher(SkillScores, SKILL_SCORES_TOPIC, 10)
        self.markers_pub = self.create_publisher(MarkerArray, SKILL_MARKERS_TOPIC, 10)
        self.status_pub = self.create_publisher(PlanStatus, STATUS_TOPIC, LATCHED_QOS)
        self.result_pub = self.create_publisher(PlanResultMsg, RESULT_TOPIC, LATCHED_QOS)
        self.create_subscription(String, INSTRUCTION_TOPIC, self.on_instruction, 10)
        self.create_service(Trigger, CANCEL_SERVICE, self.on_cancel)
        self.question_pub = self.create_publisher(Question, QUESTION_TOPIC, LATCHED_QOS)
        self.create_service(AnswerQuestion, ANSWER_SERVICE, self.on_answer,
                            callback_group=ReentrantCallbackGroup())
        self._question_lock = threading.Lock()
        self._questions = 0                 # questions asked since start (their ids)
        self._open: _OpenQuestion | None = None
        self.action_server = ActionServer(
            self, FollowInstruction, FOLLOW_ACTION, execute_callback=self._execute_goal,
            goal_callback=self._on_goal, cancel_callback=self._on_goal_cancel,
            callback_group=ReentrantCallbackGroup())
        self._instruction = ""
        self._strategy = self.params["strategy"]
        self._feedback = None              # the running goal's publish_feedback, if any
        self._publish_status(PlanStatus.STATE_IDLE, "", 0, "waiting for an instruction", [])

    # -- status ------------------------------------------------------------------------------
    def _publish_status(self, state: str, instruction: str, step: int, message: str,
                        plan: list[str]) -> None:
        msg = PlanStatus(instruction=instruction, state=state, step=step, message=message,
                         plan=list(plan), strategy=self._strategy)
        msg.header.stamp = self.get_clock().now().to_msg()
        self.status_pub.publish(msg)
        # rclpy forbids one call site logging at two severities: two call sites.
        if state in (PlanStatus.STATE_REJECTED, PlanStatus.STATE_FAILED):
            self.get_logger().warning(f"[{state}] {message}")
        else:
            self.get_logger().info(f"[{state}] {message}")

    # -- callbacks ---------------------------------------------------------------------------
    def on_instruction(self, msg: String) -> None:
        try:
            instruction = check_instruction(msg.data)
        except TaskError as exc:
            shown = " ".join(msg.data.split())[:200]  # enough for the sender to recognise it
            self._publish_status("rejected", shown, 0, f"rejected: {exc}", [])
            return
        if not self._claim(instruction):
            return
        threading.Thread(target=self._run_and_release, args=(instruction,), daemon=True,
                         name="saycan-plan").start()

    def _claim(self, instruction: str, strategy: str | None = None) -> bool:
        """Take the planner for ``instruction``, or publish why not (busy)."""
        if not (self._busy.acquire(blocking=False)
                or self._finishing and self._busy.acquire(timeout=FINISH_WAIT_S)):
            self._publish_status(PlanStatus.STATE_REJECTED, instruction, 0,
                                 f"rejected: busy with {self._instruction!r}; cancel it first "
                                 f"({CANCEL_SERVICE} or the {FOLLOW_ACTION} action)", [])
            return False
        with self._plan_lock:
            self._cancel = threading.Event()
            self._instruction = instruction
            self._strategy = strategy or self.params["strategy"]
        return True

    def _cancel_requested(self) -> bool:
        return self._cancel.is_set()

    def _cancel_overdue(self) -> bool:
        """A cancelled skill's executor had its grace to stop it and answer: stop waiting."""
        return self._cancel.is_set() and \
            time.monotonic() - self._cancelled_at > CANCEL_GRACE_S

    def on_cancel(self, request, response):
        if self._cancel_plan():
            response.success, response.message = True, f"cancelling {self._instruction!r}"
        else:
            response.success, response.message = False, "no plan is running"
        return response

    def _cancel_plan(self) -> bool:
        """Cancel the plan in hand, from its claim to its end: after this returns no skill
        starts, and a skill already dispatched is told to stop."""
        with self._plan_lock:
            if not self._busy.locked() or self._finishing:
                return False                          # none, or it has ended (status going out)
            if self._cancel.is_set():                 # cancelled already: still cancelling
                return True
            self._cancelled_at = time.monotonic()
            if self._planner is None:                # claimed, not started: it will not
                self._cancel.set()
                return True
            if not self._planner.cancel():           # sets self._cancel, under its lock
                return False                          # it has just ended
            dispatched = self._planner.dispatched
        cancel_skill = getattr(self.executor_client, "cancel", None)
        if dispatched is not None and cancel_skill is not None:
            threading.Thread(target=cancel_skill, daemon=True, name="saycan-cancel").start()
        return True

    # -- the action ----------------------------------------------------------------------------
    def _goal_problem(self, goal) -> str:
        """Why a goal cannot run ("" when it can): checked before anything moves."""
        try:
            check_instruction(goal.instruction)
        except TaskError as exc:
            return str(exc)
        if goal.strategy and goal.strategy not in node_strategy_names():
            return (f"strategy {goal.strategy!r} is not served by the planner node; it runs: "
                    f"{', '.join(node_strategy_names())}")
        if goal.max_steps > MAX_GOAL_STEPS:
            return f"max_steps {goal.max_steps} is more than {MAX_GOAL_STEPS}"
        return ""

    def _on_goal(self, goal) -> GoalResponse:
        problem = self._goal_problem(goal)
        if problem or self._busy.locked():
            shown = " ".join(goal.instruction.split())[:200]
            reason = problem or f"busy with {self._instruction!r}; cancel it first"
            self._publish_status(PlanStatus.STATE_REJECTED, shown, 0, f"rejected: {reason}", [])
            return GoalResponse.REJECT
        return GoalResponse.ACCEPT

    def _on_goal_cancel(self, goal_handle) -> CancelResponse:
        return CancelResponse.ACCEPT if self._cancel_plan() else CancelResponse.REJECT

    def _execute_goal(self, goal_handle):
        goal = goal_handle.request
        instruction = check_instruction(goal.instruction)        # accepted: it is valid
        if not self._claim(instruction, goal.strategy):          # taken since it was accepted
            goal_handle.abort()
            return FollowInstruction.Result(success=False, state=PlanStatus.STATE_REJECTED,
                                            message=f"busy with {self._instruction!r}")
        self._feedback = goal_handle.publish_feedback
        try:
            result = self._run(instruction, goal.max_steps or self.params["max_steps"])
        finally:
            self._feedback = None
        state = _node_state(result)
        if state == PlanStatus.STATE_CANCELLED:
            goal_handle.canceled()
        elif state == PlanStatus.STATE_SUCCEEDED:
            goal_handle.succeed()
        else:
            goal_handle.abort()
        return FollowInstruction.Result(
            success=state == PlanStatus.STATE_SUCCEEDED, state=state,
            message=result.message if result is not None else "planner error (see status)",
            plan=result.plan if result is not None else [], final_state=self._world_state())

    # -- the plan ----------------------------------------------------------------------------
    def _run_and_release(self, instruction: str) -> None:
        self._run(instruction, self.params["max_steps"])

    def _run(self, instruction: str, max_steps: int) -> PlanResult | None:
        """Plan and execute, publish the end and release the planner (the caller claimed it).
        None after a planner error."""
        self._plan: list[str] = []
        result, error = None, ""
        try:
            strategy = make_strategy(self._strategy, self.language, self.affordance,
                                     prune=self.params["prune"],
                                     skill_reliability=self.params["skill_reliability"])
            with self._plan_lock:                     # a cancel sees it built, or not at all
                self._planner = Planner(self.skills, strategy, self.executor_client,
                                        max_steps=max_steps,
                                        skill_timeout_s=self.params["skill_timeout_s"],
                                        on_decision=lambda r: self._on_decision(instruction, r),
                                        on_step=lambda r: self._on_step(instruction, r),
                                        describe=self._scene, cancel_event=self._cancel,
                                        refresh_scene=self.params["refresh_scene"],
                                        ask_policy=self.ask_policy,
                                        ask=(lambda q: self._ask_person(instruction, q))
                                        if self.ask_policy is not None else None,
                                        world_state=self._state_now,
                                        refuse=self.refusals.why_not
                                        if self.refusals is not None else None,
                                        done_first_rejects=self.refusals is not None,
                                        wording=self.wording)
                planner = self._planner
            self._publish_status(PlanStatus.STATE_PLANNING, instruction, 0, "planning", [])
            result = planner.run(instruction, self._current_revision())
        except Exception as exc:  # noqa: BLE001 - the node must outlive any plan
            error = f"planner error: {exc}"
        # Whoever sees the terminal status may send the next instruction at once: from here a
        # claim waits for the release instead of answering busy.
        self._finishing = True
        try:
            with self._plan_lock:
                self._planner = None
            if result is not None:
                self._finish(result)
            else:
                self._publish_status(PlanStatus.STATE_FAILED, instruction, 0, error, [])
        finally:
            self._finishing = False
            self._busy.release()
        return result

    def _current_revision(self) -> int:
        """The world's revision now, so the first affordances see the state the instruction
        was given in (e.g. right after a reset); 0 (any) when no world serves its state."""
        if not self.state_client.service_is_ready():
            return 0
        try:
            response = call_service(self, self.state_client, GetWorldState.Request(), 2.0,
                                    "world state")
        except ServiceCallError:
            return 0
        return int(response.state.revision)

    def _world_state(self) -> WorldState:
        """The world now, for the action's result; empty when no world serves its state."""
        if not self.state_client.service_is_ready():
            return WorldState()
        try:
            return call_service(self, self.state_client, GetWorldState.Request(), 2.0,
                                "world state").state
        except ServiceCallError:
            return WorldState()

    def _state_now(self):
        """The world now as the asking code reads it (robot_at, holding, objects), or None."""
        import types
        if not self.state_client.service_is_ready():
            return None
        try:
            response = call_service(self, self.state_client, GetWorldState.Request(), 2.0,
                                    "world state")
            state = json.loads(response.state_json)
        except (ServiceCallError, ValueError):
            return None
        return types.SimpleNamespace(robot_at=state.get("robot_at"),
                                     holding=state.get("holding"),
                                     objects=dict(state.get("objects") or {}))

    # -- asking for help -----------------------------------------------------------------------
    def _ask_person(self, instruction: str, question: asking.Question) -> asking.Answer:
        """Publish ``question`` and wait for its answer on saycan/answer (the planner's asker).
        Raises NoAnswer after answer_timeout_s, or at once when the plan is cancelled."""
        timeout = float(self.params["answer_timeout_s"])
        with self._question_lock:
            self._questions += 1
            pending = self._open = _OpenQuestion(self._questions, question)
        msg = Question(id=pending.id, instruction=instruction, step=int(question.step),
                       text=question.text, options=list(question.options),
                       probabilities=[float(p) for p in question.probabilities],
                       timeout_s=timeout)
        msg.header.stamp = self.get_clock().now().to_msg()
        self.question_pub.publish(msg)
        self._publish_status(PlanStatus.STATE_ASKING, instruction, question.step,
                             f"question {pending.id}: {question.text}", self._plan)
        publish = self._feedback
        if publish is not None:
            publish(FollowInstruction.Feedback(
                step=int(question.step), state=PlanStatus.STATE_ASKING,
                top_skills=list(question.options),
                top_scores=[float(p) for p in question.probabilities], message=question.text))
        deadline = time.monotonic() + timeout
        try:
            while not pending.answered.wait(0.1):
                if self._cancel.is_set():
                    raise asking.NoAnswer("cancelled while waiting")
                if time.monotonic() > deadline:
                    raise asking.NoAnswer(f"nobody answered within {timeout:g} s")
        finally:
            with self._question_lock:
                if self._open is pending:
                    self._open = None
        return pending.answer

    def on_answer(self, request, response):
        with self._question_lock:
            pending = self._open
            if pending is None or pending.answered.is_set():
                response.accepted, response.message = False, "no question is open"
                return response
            if request.question_id not in (0, pending.id):
                response.accepted = False
                response.message = (f"question {request.question_id} is not open (the open one "
                                    f"is {pending.id})")
                return response
            n = len(pending.question.options)
            if request.choice > n:
                response.accepted = False
                response.message = f"choice {request.choice} is not 0..{n} (0: something else)"
                return response
            pending.answer = asking.Answer(request.choice - 1 if request.choice else None)
            pending.answered.set()
        chosen = (pending.question.options[request.choice - 1] if request.choice
                  else asking.NONE_OF_THEM)
        response.accepted, response.message = True, f"question {pending.id}: {chosen}"
        return response

    def _scene(self) -> str:
        """The scene line of the world now (the language scorer shows it with the instruction
        where its prompt asks for it); empty when no world serves its state."""
        if not self.state_client.service_is_ready():
            return ""
        try:
            response = call_service(self, self.state_client, GetWorldState.Request(), 2.0,
                                    "world state")
            state = json.loads(response.state_json)
        except (ServiceCallError, ValueError):
            return ""
        return scene_line(self.kitchen, state.get("robot_at"), state.get("holding"),
                          {o: at for o, at in (state.get("objects") or {}).items()
                           if at != GRIPPER}, details=True)

    def _on_decision(self, instruction: str, record: StepRecord) -> None:
        now = self.get_clock().now().to_msg()
        self.scores_pub.publish(record_to_msg(record, instruction, self._strategy, now))
        self.markers_pub.publish(score_markers(record, instruction, now))
        message = f"step {record.step}: executing {record.selected!r}"
        self._publish_status(PlanStatus.STATE_EXECUTING, instruction, record.step, message,
                             self._plan)
        self._send_feedback(record, message, done=False)

    def _on_step(self, instruction: str, record: StepRecord) -> None:
        if record.success:
            self._plan.append(record.selected)
        outcome = "succeeded" if record.success else "failed"
        message = f"step {record.step}: {record.selected!r} {outcome}: {record.message}"
        self._publish_status(PlanStatus.STATE_EXECUTING, instruction, record.step, message,
                             self._plan)
        self._send_feedback(record, message, done=True)

    def _send_feedback(self, record: StepRecord, message: str, done: bool) -> None:
        publish = self._feedback
        if publish is None:
            return
        top = record.top(5)
        publish(FollowInstruction.Feedback(
            step=int(record.step), state=PlanStatus.STATE_EXECUTING, skill=record.selected,
            skill_done=done, skill_succeeded=bool(record.success) if done else False,
            top_skills=[t[0] for t in top], top_scores=[float(t[3]) for t in top],
            message=message))

    def _finish(self, result: PlanResult) -> None:
        self.result_pub.publish(plan_result_to_msg(result, self.get_clock().now().to_msg()))
        self._publish_status(_node_state(result), result.instruction, len(result.steps),
                             result.message, result.plan)


class _OpenQuestion:
    """A question waiting for its answer."""

    def __init__(self, ident: int, question: asking.Question):
        self.id, self.question = ident, question
        self.answered = threading.Event()
        self.answer: asking.Answer | None = None


def _ask_policy(params) -> asking.ConformalAsk | None:
    """The conformal ask policy of the node's parameters, or None (ask_epsilon 0: never ask).
    A bad epsilon, timeout or calibration file is a ValueError naming the parameter."""
    epsilon = float(params["ask_epsilon"])
    if epsilon == 0.0:
        return None
    if not 0.0 < epsilon < 1.0:
        raise ValueError(f"ask_epsilon must be 0 (never ask) or in (0, 1), got {epsilon:g}")
    if not float(params["answer_timeout_s"]) > 0.0:
        raise ValueError(f"answer_timeout_s must be > 0, got {params['answer_timeout_s']}")
    path = params["ask_calibration_file"] or asking.default_calibration(DEFAULT_MODEL)
    if not path:
        raise ValueError("ask_epsilon is set but there is no calibration: give "
                         "ask_calibration_file (saycan calibrate makes one)")
    try:
        return asking.Calibration.load(path).policy(epsilon)
    except ValueError as exc:
        raise ValueError(f"ask_calibration_file: {exc}") from None


#: Seconds a cancelled skill's executor has to stop it and answer before the planner stops
#: waiting (the answer carries the world's revision; a hung executor must not hold the cancel).
CANCEL_GRACE_S = 1.0
#: A claim that meets a plan publishing its end waits this long for it (milliseconds, usually).
FINISH_WAIT_S = 2.0

#: The most steps a goal may ask for (a typo of 10,000 must not keep a robot busy all day).
MAX_GOAL_STEPS = 100


def _node_state(result: PlanResult | None) -> str:
    """The PlanStatus state a plan ended in (``max_steps`` and errors are failures)."""
    if result is None:
        return PlanStatus.STATE_FAILED
    return {"succeeded": PlanStatus.STATE_SUCCEEDED,
            "cancelled": PlanStatus.STATE_CANCELLED,
            "rejected": PlanStatus.STATE_REJECTED}.get(result.state, PlanStatus.STATE_FAILED)


def main(args=None) -> None:
    spin_node(PlannerNode, args)


if __name__ == "__main__":
    main()
