"""The SayCan loop, free of ROS: score every skill, pick one, execute it, grow the history.

The planner talks to three sources through small protocols, so the same loop runs in-process
(``saycan eval``) and behind service clients (the ``planner`` node):

- language:   ``score(instruction, history, skills) -> (probs, raw)``
- affordance: ``score(instruction, history, skills, min_state_revision) -> (probs, raw)``
- executor:   ``execute(skill, timeout_s) -> ExecutionResult``

A :class:`Strategy` turns the two score vectors into a choice (SayCan: their product; No VF: the
language score alone). Every strategy is listed, and made by name, in
:mod:`saycan_ros.strategies.registry`.
"""
from __future__ import annotations

import abc
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol, Sequence

import numpy as np

from saycan_ros.core.skills import SkillSet
from saycan_ros.planning.asking import (Answer, Asker, AskPolicy, NoAnswer, Question,
                                        distinct_outcomes, step_probabilities, without_no_ops)
from saycan_ros.planning.scene import changes_scene
from saycan_ros.planning.wording import Wording


# -- what the planner talks to ----------------------------------------------------------------
@dataclass(frozen=True)
class ExecutionResult:
    success: bool
    message: str
    duration_s: float = 0.0
    state_revision: int = 0


class ScoreSource(Protocol):
    """``scene``: the scene line (:mod:`saycan_ros.planning.scene`: the world at the plan's start,
    or after the latest put-down with ``Planner(refresh_scene=True)``), for language scorers
    whose prompt shows it; others ignore it."""
    def score(self, instruction: str, history: Sequence[str], skills: Sequence[str],
              min_state_revision: int = 0, scene: str = "") -> tuple[np.ndarray, np.ndarray]: ...


class SkillExecutor(Protocol):
    def execute(self, skill: str, timeout_s: float = 0.0) -> ExecutionResult: ...


class PlannerError(RuntimeError):
    """A source failed or answered nonsense; the plan stops and nothing more is executed."""


# -- records ----------------------------------------------------------------------------------
@dataclass
class StepRecord:
    step: int
    skills: list[str]
    llm: np.ndarray
    affordance: np.ndarray
    combined: np.ndarray
    selected: str
    success: bool | None = None
    message: str = ""
    seconds: float = 0.0
    note: str = ""                   # what the strategy wants kept (raw generation, explanation)
    #: Skills the language model did not score because they cannot win (``llm`` is NaN there);
    #: None when every skill was scored.
    pruned: np.ndarray | None = None
    #: The question asked at this step (``Planner(ask_policy=...)``) and the person's answer.
    question: Question | None = None
    answer: Answer | None = None

    def top(self, k: int = 5) -> list[tuple[str, float, float, float]]:
        """The ``k`` best scored skills by the combined score (pruned ones are not listed)."""
        order = [i for i in np.argsort(-self.combined, kind="stable")
                 if self.pruned is None or not self.pruned[i]][:k]
        return [(self.skills[i], float(self.llm[i]), float(self.affordance[i]),
                 float(self.combined[i])) for i in order]

    def to_dict(self) -> dict:
        out = {"step": self.step, "selected": self.selected, "success": self.success,
               "message": self.message, "seconds": round(self.seconds, 4),
               "top": [dict(zip(("skill", "llm", "affordance", "combined"), t))
                       for t in self.top(5)]}
        if self.note:
            out["note"] = self.note
        if self.pruned is not None:
            out["pruned"] = int(np.count_nonzero(self.pruned))
        if self.question is not None:
            out["question"] = self.question.to_dict()
            out["answer"] = self.answer.to_dict() if self.answer is not None else None
        return out


#: Why a plan whose first choice is "done" ends rejected (Planner(done_first_rejects=True)).
IDLE_DONE_REASON = ("I can't help with that: my first choice was to stop, so none of my "
                    "skills does it here (or it is done already)")


@dataclass
class PlanResult:
    instruction: str
    strategy: str
    state: str = "planning"          # succeeded | failed | cancelled | max_steps | rejected
    message: str = ""
    steps: list[StepRecord] = field(default_factory=list)

    @property
    def plan(self) -> list[str]:
        """Skills executed successfully, oldest first, ending in ``done`` when the plan ended."""
        return [s.selected for s in self.steps if s.success]

    @property
    def questions(self) -> list[Question]:
        """The questions asked, oldest first."""
        return [s.question for s in self.steps if s.question is not None]

    def to_dict(self) -> dict:
        return {"instruction": self.instruction, "strategy": self.strategy, "state": self.state,
                "message": self.message, "plan": self.plan,
                "steps": [s.to_dict() for s in self.steps]}


# -- strategies --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Decision:
    llm: np.ndarray
    affordance: np.ndarray
    combined: np.ndarray
    selected: str
    note: str = ""
    pruned: np.ndarray | None = None   # skills left unscored by the language model (llm NaN)


@dataclass
class StepContext:
    instruction: str
    history: list[str]
    skills: list[str]
    state_revision: int
    #: What the robot perceives now (``Planner(observe=...)``), e.g. ``{"location": "table",
    #: "objects": ["apple", ...]}``; ``None`` when the planner has no observer.
    observation: Mapping[str, Any] | None = None
    #: The scene line (``Planner(describe=...)``): the world at the start (re-read after each
    #: put-down with ``refresh_scene``).
    scene: str = ""


class Strategy(abc.ABC):
    """Chooses the next skill from the sources' scores."""
    name = "strategy"

    def __init__(self, language: ScoreSource, affordance: ScoreSource | None):
        self.language = language
        self.affordance = affordance

    @abc.abstractmethod
    def decide(self, ctx: StepContext) -> Decision: ...

    def reset(self, instruction: str) -> None:
        """Called once per instruction, before the first step."""

    def stats(self) -> dict[str, Any]:
        """Per-instruction counters worth reporting (since the last :meth:`reset`)."""
        return {}

    def continue_after_failure(self, record: "StepRecord") -> bool:
        """Whether planning goes on after ``record``'s skill failed (re-planning strategies);
        by default a failed skill ends the plan."""
        return False


def _checked(name: str, probs, raw, n: int) -> tuple[np.ndarray, np.ndarray]:
    probs = np.asarray(probs, dtype=np.float64)
    raw = np.asarray(raw, dtype=np.float64)
    if probs.shape != (n,):
        raise PlannerError(f"{name} returned {probs.size} scores for {n} skills")
    if not np.all(np.isfinite(probs)) or probs.min() < 0.0 or probs.max() > 1.0:
        bad = probs[~(np.isfinite(probs) & (probs >= 0.0) & (probs <= 1.0))]
        raise PlannerError(f"{name} returned scores outside [0, 1] or NaN, e.g. {bad[0]}")
    return probs, raw


class SayCanStrategy(Strategy):
    """argmax over skills of p_LLM(skill | instruction, history) * p_affordance(skill | state).

    ``prune`` (default): the affordances come first, and the language model scores only the
    skills that can run. A skill of affordance 0 has product 0 whatever its language score,
    and the softmax over the others keeps their ratios, so the choice is the one the full
    pass makes (checked on the development set: docs/results/scoring.md); pruned skills get
    ``llm`` NaN and are marked in :attr:`Decision.pruned`. ``prune=False`` scores every skill
    (the language score of each skill is then published, as the paper's figures show it).

    A skill that failed since the last success is evidence against its affordance: each
    failure updates it by Bayes' rule, ``p' = p (1 - r) / (p (1 - r) + 1 - p)``, with ``r``
    (``skill_reliability``) the chance that a skill which can succeed does. A value function
    that rated a pick 0.08 where the object is not does not keep the robot grasping at air
    while the language model insists; a certain affordance (1) is left as it is, so a missed
    grasp is still tried again."""
    name = "saycan"

    def __init__(self, language: ScoreSource, affordance: ScoreSource | None,
                 prune: bool = True, skill_reliability: float = 0.95):
        super().__init__(language, affordance)
        self.prune = bool(prune)
        if not 0.0 <= float(skill_reliability) <= 1.0:
            raise ValueError(f"skill_reliability must be in [0, 1], got {skill_reliability!r}")
        self.skill_reliability = float(skill_reliability)
        self._failures: dict[str, int] = {}
        self._history_seen = 0

    def reset(self, instruction: str) -> None:
        super().reset(instruction)
        self._failures.clear()
        self._history_seen = 0

    def continue_after_failure(self, record: "StepRecord") -> bool:
        self._failures[record.selected] = self._failures.get(record.selected, 0) + 1
        return super().continue_after_failure(record)

    def _after_failures(self, ctx: StepContext, aff: np.ndarray) -> np.ndarray:
        """``aff`` updated by the failures since the last skill that succeeded."""
        if len(ctx.history) != self._history_seen:      # a success: the state moved on
            self._failures.clear()
            self._history_seen = len(ctx.history)
        if not self._failures:
            return aff
        aff = aff.copy()
        for i, skill in enumerate(ctx.skills):
            failed = self._failures.get(skill, 0)
            if failed and 0.0 < aff[i] < 1.0:
                kept = aff[i] * (1.0 - self.skill_reliability) ** failed
                aff[i] = kept / (kept + 1.0 - aff[i])
        return aff

    def decide(self, ctx: StepContext) -> Decision:
        n = len(ctx.skills)
        aff, _ = _checked("affordance scorer",
                          *self.affordance.score(ctx.instruction, ctx.history, ctx.skills,
                                                 ctx.state_revision),
                          n=n)
        aff = self._after_failures(ctx, aff)
        runnable = np.flatnonzero(aff > 0.0)
        if not self.prune or len(runnable) in (0, n):
            llm, _ = _checked("language scorer",
                              *self.language.score(ctx.instruction, ctx.history, ctx.skills,
                                                   scene=ctx.scene),
                              n=n)
            combined = llm * aff
            return Decision(llm, aff, combined, ctx.skills[int(np.argmax(combined))])
        scored, _ = _checked("language scorer",
                             *self.language.score(ctx.instruction, ctx.history,
                                                  [ctx.skills[i] for i in runnable],
                                                  scene=ctx.scene),
                             n=len(runnable))
        llm = np.full(n, np.nan)
        llm[runnable] = scored
        combined = np.zeros(n)
        combined[runnable] = scored * aff[runnable]
        return Decision(llm, aff, combined, ctx.skills[int(np.argmax(combined))],
                        pruned=aff <= 0.0)


class NoVFStrategy(Strategy):
    """The paper's No VF baseline: the language model alone (affordances shown, not used)."""
    name = "no_vf"

    def decide(self, ctx: StepContext) -> Decision:
        llm, _ = _checked("language scorer",
                          *self.language.score(ctx.instruction, ctx.history, ctx.skills,
                                               scene=ctx.scene),
                          n=len(ctx.skills))
        aff = np.full(len(ctx.skills), np.nan)
        if self.affordance is not None:
            try:  # shown for comparison only; No VF does not depend on it
                aff, _ = _checked("affordance scorer",
                                  *self.affordance.score(ctx.instruction, ctx.history, ctx.skills,
                                                         ctx.state_revision),
                                  n=len(ctx.skills))
            except Exception:  # noqa: BLE001
                aff = np.full(len(ctx.skills), np.nan)
        return Decision(llm, aff, llm.copy(), ctx.skills[int(np.argmax(llm))])


# -- the loop ----------------------------------------------------------------------------------
class Planner:
    """Runs one instruction to completion: until done, a failure, the step limit or cancel."""

    def __init__(self, skills: SkillSet, strategy: Strategy, executor: SkillExecutor,
                 max_steps: int = 20, skill_timeout_s: float = 0.0,
                 on_decision: Callable[[StepRecord], None] | None = None,
                 on_step: Callable[[StepRecord], None] | None = None,
                 observe: Callable[[], Mapping[str, Any]] | None = None,
                 max_failures: int = 0, describe: Callable[[], str] | None = None,
                 cancel_event: threading.Event | None = None, refresh_scene: bool = False,
                 ask_policy: AskPolicy | None = None, ask: Asker | None = None,
                 world_state: Callable[[], Any] | None = None,
                 refuse: Callable[[str], str] | None = None, done_first_rejects: bool = False,
                 wording: Wording | None = None):
        if max_steps < 1:
            raise ValueError(f"max_steps must be at least 1, got {max_steps}")
        if max_failures < 0:
            raise ValueError(f"max_failures must be >= 0, got {max_failures}")
        if (ask_policy is None) != (ask is None):
            raise ValueError("ask_policy and ask come together: a policy that decides when to "
                             "ask, and someone to ask")
        self.skills = skills
        self.strategy = strategy
        self.executor = executor
        self.max_steps = max_steps
        self.skill_timeout_s = skill_timeout_s
        self.on_decision = on_decision  # chosen, not yet executed
        self.on_step = on_step          # executed (record.success set)
        self.observe = observe          # what the robot perceives, for strategies that use it
        self.describe = describe        # the scene line, read when a plan starts
        # ... and again after each put-down (for an adapter trained so: ``scene: step``)
        self.refresh_scene = refresh_scene
        # Failed skills tolerated per instruction: the loop re-scores from the new state (a
        # missed grasp is usually tried again); 0: the first failure ends the plan.
        self.max_failures = max_failures
        # When the step's prediction set is not one skill, ``ask`` (the person) chooses
        self.ask_policy = ask_policy
        self.ask = ask
        # The world's state now (robot_at, holding, objects), when the caller knows it: skills
        # that would change nothing are no candidates (planning.asking.without_no_ops)
        self.world_state = world_state
        # Why an instruction cannot be done at all ("" when it may be): then nothing moves and
        # the plan ends rejected with that reason (planning.refusal.Refusals.why_not)
        self.refuse = refuse
        # "done" as the first step (before any skill succeeded) ends the plan rejected with
        # IDLE_DONE_REASON instead of succeeded: the model's own "nothing I can do helps"
        self.done_first_rejects = done_first_rejects
        # With asking on: the instruction's words overrule the set where the scores cannot
        # tell (planning.wording): "the chips" with three bags is asked about, "a soda" is not
        self.wording = wording
        # Given by a caller that acknowledges cancels before the plan starts (the planner node):
        # a cancel holds from the moment it is set, even before run() begins.
        self.cancel_event = cancel_event if cancel_event is not None else threading.Event()
        # Held while deciding to dispatch a skill and while cancelling: a cancel either comes
        # first (nothing starts) or finds the skill dispatched (then the executor is told).
        self.dispatch_lock = threading.RLock()
        self.dispatched: str | None = None   # the skill whose execution was requested, if any
        self.ended = False                   # run() has decided how the plan ends

    def cancel(self) -> bool:
        """Cancel the plan: no skill starts after this returns. False when the plan has already
        ended (the cancel changes nothing). :attr:`dispatched` is then the skill in execution,
        if any: the caller stops it at its executor."""
        with self.dispatch_lock:
            if self.ended:
                return False
            self.cancel_event.set()
            return True

    @property
    def cancelled(self) -> bool:
        return self.cancel_event.is_set()

    def run(self, instruction: str, start_revision: int = 0) -> PlanResult:
        """Plan and execute; ``start_revision``: the world-state revision the first step's
        affordances must reflect (e.g. after a reset). A planner that was cancelled stays
        cancelled (its runs end at once): make one per instruction."""
        result = PlanResult(instruction, self.strategy.name)
        terminate = self.skills.terminate.text
        candidates = self.skills.texts
        revision = start_revision
        failures = 0
        reason = self.refuse(instruction) if self.refuse is not None else ""
        if reason:
            return self._end(result, "rejected", reason)
        self.strategy.reset(instruction)
        scene = self._scene(result, "")
        for step in range(1, self.max_steps + 1):
            if self.cancel_event.is_set():
                return self._end(result, "cancelled", "cancelled before step %d" % step)
            started = time.perf_counter()
            try:
                observation = self.observe() if self.observe is not None else None
                decision = self.strategy.decide(
                    StepContext(instruction, result.plan, candidates, revision, observation,
                                scene))
            except Exception as exc:  # noqa: BLE001 - any source failure ends the plan cleanly
                if self.cancelled:        # the pending score was abandoned for the cancel
                    return self._end(result, "cancelled", f"cancelled during step {step}")
                return self._end(result, "failed", f"step {step}: scoring failed: {exc}")
            if decision.selected not in self.skills:  # never run what is not in the registry
                return self._end(result, "failed",
                                 f"step {step}: strategy chose unregistered {decision.selected!r}")
            record = StepRecord(step, list(candidates), decision.llm, decision.affordance,
                                decision.combined, decision.selected, note=decision.note,
                                pruned=decision.pruned)
            result.steps.append(record)
            if self.ask_policy is not None and not self.cancelled:
                ended = self._ask(record, result)
                if ended is not None:
                    return ended
            if self.cancelled:            # chosen, not announced as executing: nothing runs
                record.message = "not executed: cancelled"
                self._notify(record)
                return self._end(result, "cancelled", "cancelled before execution")
            if self.on_decision is not None:
                self.on_decision(record)
            if record.selected == terminate:
                if self.cancelled:
                    record.message = "not executed: cancelled"
                    self._notify(record)
                    return self._end(result, "cancelled", "cancelled before execution")
                if self.done_first_rejects and not result.plan:
                    # the likeliest next step of a request, before anything ran, is to stop:
                    # none of the skills helps (an adapter trained on impossible requests
                    # says so), so the plan ends as a refusal, not as a success
                    record.message = "not executed: nothing to do"
                    record.seconds = time.perf_counter() - started
                    self._notify(record)
                    return self._end(result, "rejected", IDLE_DONE_REASON)
                record.success, record.message = True, "done"
                record.seconds = time.perf_counter() - started
                self._notify(record)
                return self._end(result, "succeeded", f"done after {step - 1} skills")
            with self.dispatch_lock:      # a cancel from here on finds the skill dispatched
                if self.cancelled:
                    record.message = "not executed: cancelled"
                    self._notify(record)
                    return self._end(result, "cancelled", "cancelled before execution")
                self.dispatched = record.selected
            try:
                outcome = self.executor.execute(record.selected, self.skill_timeout_s)
            except Exception as exc:  # noqa: BLE001
                outcome = ExecutionResult(False, f"executor error: {exc}")
            finally:
                with self.dispatch_lock:
                    self.dispatched = None
            record.success, record.message = outcome.success, outcome.message
            record.seconds = time.perf_counter() - started
            revision = max(revision, outcome.state_revision)
            if self.refresh_scene and changes_scene(self.skills.get(record.selected)):
                scene = self._scene(result, scene)
            self._notify(record)
            if self.cancelled:            # stopped by the cancel (or ended while it came)
                return self._end(result, "cancelled",
                                 f"cancelled during {record.selected!r}: {outcome.message}")
            if not outcome.success:
                failures += 1
                replans = self.strategy.continue_after_failure(record)   # it may re-plan
                if failures > self.max_failures and not replans:
                    return self._end(result, "failed", f"step {step}: {record.selected!r} "
                                                       f"failed: {outcome.message}")
        return self._end(result, "max_steps", f"no 'done' within {self.max_steps} steps")

    def _ask(self, record: StepRecord, result: PlanResult) -> PlanResult | None:
        """Ask the person when the policy's set is not one skill; ``record.selected`` becomes
        their choice. Returns the ended plan when there is no answer or nothing left to run."""
        p = step_probabilities(record.combined)
        state = None
        if self.world_state is not None:
            try:
                state = self.world_state()
            except Exception:  # noqa: BLE001 - without the state every skill is a candidate
                state = None
        if state is not None:
            p = without_no_ops(p, [self.skills.get(text) for text in record.skills], state)
        offered, policy = self.ask_policy.options(p), self.ask_policy.name
        if self.wording is not None:
            offered, policy = self._read_the_words(result, record, p, state, offered, policy)
            # "but not the orange": the orange is no reading to offer
            kept = self.wording.not_excluded(result.instruction,
                                             [self.skills.get(record.skills[i]) for i in offered])
            offered = [offered[k] for k in kept]
        if state is not None:
            offered = distinct_outcomes(offered, [self.skills.get(text) for text in
                                                  record.skills], state)
        if len(offered) == 1:             # the set's one skill (not one that changes nothing)
            record.selected = record.skills[offered[0]]
        if len(offered) < 2:
            return None
        question = Question(record.step, tuple(record.skills[i] for i in offered),
                            tuple(float(p[i]) for i in offered), policy)
        record.question = question
        try:
            answer = self.ask(question)
        except NoAnswer as exc:
            record.message = "not executed: no answer"
            self._notify(record)
            return self._end(result, "failed", f"step {record.step}: no answer to "
                                               f"{question.text!r}" + (f" ({exc})" if str(exc)
                                                                       else ""))
        except Exception as exc:  # noqa: BLE001 - a broken asker ends the plan, never guesses
            record.message = "not executed: asking failed"
            self._notify(record)
            return self._end(result, "failed", f"step {record.step}: asking failed: {exc}")
        record.answer = answer
        if answer.choice is not None:
            if not 0 <= answer.choice < len(question.options):
                record.message = "not executed: bad answer"
                self._notify(record)
                return self._end(result, "failed", f"step {record.step}: answer "
                                                   f"{answer.choice} is not an option of "
                                                   f"{question.text!r}")
            record.selected = question.options[answer.choice]
            return None
        rest = np.array(p)
        rest[offered] = 0.0         # "something else": the likeliest skill not offered
        if rest.max() <= 0.0:
            record.message = "not executed: none of the options, and nothing else can run"
            self._notify(record)
            return self._end(result, "failed", f"step {record.step}: the person wanted none "
                                               f"of {list(question.options)} and no other "
                                               f"skill can run")
        record.selected = record.skills[int(np.argmax(rest))]
        return None

    def _read_the_words(self, result: PlanResult, record: StepRecord, p, state,
                        offered: list[int], policy: str) -> tuple[list[int], str]:
        """The options after reading the instruction (:mod:`~saycan_ros.planning.wording`): a
        description that fits several things and that no step settled asks which one (once per
        set of readings); a set of finds (or picks of what the words describe) the person left
        to the robot is the likeliest."""
        candidates = [self.skills.get(text) for text in record.skills]
        history = [self.skills.get(text) for text in result.plan if text in self.skills]
        readings = self.wording.readings(result.instruction, history, candidates, p, state)
        # a question the person answered with one of its options is not asked again; after
        # "something else" it may come back at a later step
        asked = [set(s.question.options) for s in result.steps if s.question is not None
                 and s.answer is not None and s.answer.choice is not None]
        if readings and not any({record.skills[i] for i in readings} <= a for a in asked):
            # the words' readings, and any the set holds that the words did not see ("the
            # soda" is also the 7up can the model weighs): likeliest first
            merged = readings + [i for i in offered if i not in readings and len(offered) > 1]
            return sorted(merged, key=lambda i: -p[i]), "reading"
        if len(offered) > 1 and self.wording.left_to_robot(
                result.instruction, [candidates[i] for i in offered], state):
            return offered[:1], policy
        return offered, policy

    def _scene(self, result: PlanResult, last: str) -> str:
        """The scene line now (read at the start and after each step that
        :func:`~saycan_ros.planning.scene.changes_scene`); the last one if it cannot be read."""
        if self.describe is None:
            return ""
        try:
            return self.describe()
        except Exception as exc:  # noqa: BLE001 - an older scene is better than no plan
            result.message = f"no scene line: {exc}"
            return last

    def _notify(self, record: StepRecord) -> None:
        if self.on_step is not None:
            self.on_step(record)

    def _end(self, result: PlanResult, state: str, message: str) -> PlanResult:
        with self.dispatch_lock:   # a cancel from now on is answered "ended", not lost
            if self.cancelled and state != "cancelled":   # acknowledged: it holds
                state, message = "cancelled", f"cancelled ({message})"
            self.ended = True
        result.state, result.message = state, message
        return result
