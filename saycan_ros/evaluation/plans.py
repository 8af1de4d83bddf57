"""``saycan eval``: plan every task of a task file and check its goal.

Plan success (the paper's planning metric: raters judged the plan) means the sequence of skills
the planner chose ends with ``done`` and, replayed on the symbolic world, reaches the goal.
Execution success means the goal holds in the world the skills actually ran in: the symbolic
world itself (``--world symbolic``, where both agree), the simulator (``--world sim``) or the
node graph (``--world nodes``).
"""
from __future__ import annotations

import json
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from tqdm import tqdm

from saycan_ros.planning.affordance import AffordanceScorer
from saycan_ros.planning.asking import Answer, AskPolicy, Question
from saycan_ros.core.kitchen import Kitchen
from saycan_ros.core.solver import goal_objects, right_next_skills
from saycan_ros.planning.faults import FaultInjectingExecutor
from saycan_ros.planning.local import LocalAffordance, LocalLanguage, WorldExecutor
from saycan_ros.planning.planner import Planner, PlanResult
from saycan_ros.strategies.registry import make_strategy
from saycan_ros.planning.scene import scene_of
from saycan_ros.core.skills import NAVIGATIONS, SkillSet
from saycan_ros.core.tasks import Task
from saycan_ros.core.world import SymbolicWorld


def replay_reaches_goal(task: Task, plan: Sequence[str], kitchen: Kitchen,
                        skills: SkillSet) -> bool:
    """Whether ``plan`` (ending in ``done``), executed on the symbolic world, reaches the goal."""
    if task.goal is None or not plan or plan[-1] != skills.terminate.text:
        return False
    world = SymbolicWorld(kitchen, task.init)
    for text in plan:
        if not world.execute(skills.get(text)).success:
            return False
    return task.goal.holds(world)


def observation_of(world) -> dict:
    """What the robot perceives in ``world`` now: where it is, the objects there, what it holds
    (the observer of strategies that list seen objects)."""
    snap = world.snapshot()
    return {"location": snap.robot_at, "holding": snap.holding,
            "objects": sorted(o for o, at in snap.objects.items() if at == snap.robot_at)}


class SimulatedPerson:
    """Answers the planner's questions as the person who gave ``task`` would: the first offered
    skill of :func:`intended_next_skills` in the world as it is now, else "something else"."""

    def __init__(self, task: Task, world: SymbolicWorld, skills: SkillSet, kitchen: Kitchen):
        if not isinstance(world, SymbolicWorld):
            raise ValueError("the simulated person reads the symbolic world (--world symbolic)")
        self.task, self.world, self.skills, self.kitchen = task, world, skills, kitchen

    def __call__(self, question: Question) -> Answer:
        meant = intended_next_skills(self.task, self.world, self.skills, self.kitchen)
        hits = meant_options(question.options, meant, self.world, self.skills)
        return Answer(hits[0] if hits else None)


def meant_options(options, meant: set[str], world: SymbolicWorld, skills: SkillSet) -> list[int]:
    """Indices of the offered ``options`` in ``meant`` (:func:`intended_next_skills`); when none
    is, those that go where a meant navigation goes: the planner offers one skill per outcome
    (:func:`~saycan_ros.planning.asking.distinct_outcomes`), so ``find a green tea`` stands for
    ``go to the table`` when the tea is on the table and the table is meant."""
    from saycan_ros.core.world import target_location
    hits = [i for i, option in enumerate(options) if option in meant]
    if hits:
        return hits

    def end(text: str):
        skill = skills.get(text)
        return target_location(world, skill) if skill.kind in NAVIGATIONS else None
    ends = {end(text) for text in meant} - {None}
    return [i for i, option in enumerate(options) if end(option) in ends]


def intended_next_skills(task: Task, world: SymbolicWorld, skills: SkillSet,
                         kitchen: Kitchen) -> set[str]:
    """The next skills the person who gave ``task`` means: those that begin a shortest plan to
    its goal (the symbolic solver), without a ``find`` of a thing the goal does not name when
    another one is left (``find a coke can`` goes to the counter where the wanted pepsi stands
    too, but it is not what the person would choose). A ``go to`` the place stays: with the
    chips already in the trash and the coke in hand, ``go to the trash can`` is as meant as
    ``find the chips`` (the planner offers the two as one outcome, the likelier of them)."""
    right = right_next_skills(task, world, skills, kitchen)
    wanted = goal_objects(task.goal)

    def names_another_thing(text: str) -> bool:
        skill = skills.get(text)
        return skill.kind == "navigate_to_object" and skill.object not in wanted
    return {r for r in right if not names_another_thing(r)} or right


@dataclass
class TaskOutcome:
    task: Task
    result: PlanResult
    plan_success: bool
    execution_success: bool
    seconds: float
    cost: dict = field(default_factory=dict)        # language-model work for this task
    strategy_stats: dict = field(default_factory=dict)

    @property
    def success(self) -> bool:
        return self.plan_success

    @property
    def questions(self) -> int:
        return len(self.result.questions)

    def to_dict(self) -> dict:
        return {"id": self.task.id, "family": self.task.family, "text": self.task.text,
                "goal": self.task.goal.text if self.task.goal else "",
                "expect": self.task.expect, "plan_success": self.plan_success,
                "execution_success": self.execution_success, "seconds": round(self.seconds, 3),
                "cost": self.cost, "strategy_stats": self.strategy_stats,
                **{k: v for k, v in self.result.to_dict().items() if k != "instruction"}}


def _rate(k: int, n: int) -> str:
    return f"{k}/{n} ({100.0 * k / max(n, 1):.0f}%)"


@dataclass
class EvalReport:
    strategy: str
    model: str
    world: str = "symbolic"
    outcomes: list[TaskOutcome] = field(default_factory=list)

    def by_family(self, metric: str = "plan_success") -> dict[str, tuple[int, int]]:
        table: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for outcome in self.outcomes:
            table[outcome.task.family][0] += getattr(outcome, metric)
            table[outcome.task.family][1] += 1
        return {family: (k, n) for family, (k, n) in table.items()}

    def total(self, metric: str = "plan_success") -> tuple[int, int]:
        return sum(getattr(o, metric) for o in self.outcomes), len(self.outcomes)

    def table(self) -> str:
        plan, execution = self.by_family(), self.by_family("execution_success")
        lines = [f"| family | tasks | plan ({self.strategy}, {self.model}) | "
                 f"execution ({self.world}) |", "|---|---:|---:|---:|"]
        for family, (k, n) in plan.items():
            lines.append(f"| {family} | {n} | {_rate(k, n)} | {_rate(*execution[family])} |")
        k, n = self.total()
        lines.append(f"| **total** | {n} | {_rate(k, n)} | "
                     f"{_rate(*self.total('execution_success'))} |")
        return "\n".join(lines)

    def failed_lines(self, limit: int = 20) -> list[str]:
        """One line per task whose plan failed (id, family, instruction, the plan and how it
        ended), at most ``limit`` of them, then how many were left out."""
        failed = [o for o in self.outcomes if not o.plan_success]
        if not failed:
            return []
        lines = [f"failed plans ({self.strategy}, {self.model}): {len(failed)}"]
        for o in failed[:limit]:
            plan = " → ".join(o.result.plan) or "(no step)"
            lines.append(f"  {o.task.id} [{o.task.family}] {o.task.text!r}: {plan} "
                         f"({o.result.state}: {o.result.message})")
        if len(failed) > limit:
            lines.append(f"  … and {len(failed) - limit} more (every task: --json or --report)")
        return lines

    def summary_line(self, metric: str = "plan_success") -> str:
        k, n = self.total(metric)
        return f"{metric.replace('_', ' ')}: {k}/{n} ({100.0 * k / max(n, 1):.1f}%)"

    def help_line(self) -> str:
        """``asked for help: K/N tasks (P%), Q questions (q per task)``."""
        n = len(self.outcomes)
        asked = sum(o.questions > 0 for o in self.outcomes)
        questions = sum(o.questions for o in self.outcomes)
        return (f"asked for help: {asked}/{n} tasks ({100.0 * asked / max(n, 1):.1f}%), "
                f"{questions} questions ({questions / max(n, 1):.2f} per task)")

    def to_dict(self) -> dict:
        k, n = self.total()
        return {"strategy": self.strategy, "model": self.model, "world": self.world,
                "plan_success": k, "execution_success": self.total("execution_success")[0],
                "tasks": n, "asked": sum(o.questions > 0 for o in self.outcomes),
                "questions": sum(o.questions for o in self.outcomes),
                "by_family": {f: {"plan_success": s, "tasks": t,
                                  "execution_success": self.by_family("execution_success")[f][0]}
                              for f, (s, t) in self.by_family().items()},
                "tasks_detail": [o.to_dict() for o in self.outcomes]}

    def write_json(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=1), encoding="utf-8")


def evaluate(tasks: Sequence[Task], *, kitchen: Kitchen, skills: SkillSet, language_scorer,
             affordance_scorer: AffordanceScorer, strategy: str = "saycan",
             model_name: str = "", max_steps: int = 20, world: str = "symbolic",
             seed: int = 0, progress: bool = True,
             on_task: Callable[[TaskOutcome], None] | None = None,
             world_options: dict | None = None, resources=None,
             strategy_options: dict | None = None, max_failures: int = 0,
             fault_rate: float = 0.0, ask_policy: AskPolicy | None = None,
             person: Callable | None = None,
             refuse: Callable[[str], str] | None = None,
             wording=None) -> EvalReport:
    """Plan and execute each task from its ``init`` in a fresh ``world`` (``symbolic``; ``sim``:
    the simulator, seeded per task; ``nodes``: the node graph; ``world_options`` go to it, e.g.
    ``pick="learned"``).

    ``resources`` (a :class:`~saycan_ros.strategies.resources.StrategyResources`) is needed by
    the strategies beyond saycan / no_vf. ``max_failures``: failed skills tolerated per task
    (re-scored from the new state; useful where skills fail at random, as in the simulator).
    ``fault_rate``: that fraction of skill executions fails before it runs (seeded per task,
    :class:`~saycan_ros.planning.faults.FaultInjectingExecutor`), to measure recovery.
    ``ask_policy``: when to ask (:mod:`saycan_ros.planning.asking`); ``person(task, world,
    skills, kitchen)`` makes who answers (default :class:`SimulatedPerson`); ``wording`` (a
    :class:`~saycan_ros.planning.wording.Wording`) lets the instruction's words overrule the
    policy where the scores cannot tell. Each outcome
    records the language model's work (forward passes, scored and generated tokens, seconds)
    spent on its task. ``refuse(instruction)``: the reason to refuse it, or "" (what the planner
    node does with ``refuse_impossible``, :mod:`saycan_ros.planning.refusal`); a task whose
    ``expect`` is ``rejected`` succeeds when the plan ends rejected before any skill runs."""
    from saycan_ros.stack import WORLDS, make_world
    if world not in WORLDS:
        raise ValueError(f"unknown world {world!r}; known: {', '.join(WORLDS)}")
    report = EvalReport(strategy, model_name, world)
    language = LocalLanguage(language_scorer)
    backend = getattr(language_scorer, "backend", None)
    affordance = LocalAffordance(affordance_scorer, None, skills)   # its world is set per task
    # the scene line says what objects are when the scorer's prompt was made that way
    details = getattr(getattr(language_scorer, "prompt", None), "scene_details", False)
    plan_strategy = make_strategy(strategy, language, affordance, resources=resources,
                                  **(strategy_options or {}))
    for index, task in enumerate(tqdm(tasks, desc=f"eval {strategy}", unit="task",
                                      disable=not progress)):
        here = make_world(world, kitchen, task.init, seed=seed + index, **(world_options or {}))
        affordance.world = here
        executor = WorldExecutor(here, skills)
        if fault_rate:
            executor = FaultInjectingExecutor(executor, fault_rate, seed=seed + index)
        planner = Planner(skills, plan_strategy, executor,
                          max_steps=max_steps, observe=lambda: observation_of(here),
                          max_failures=max_failures,
                          describe=lambda: scene_of(kitchen, here.snapshot(), details),
                          refresh_scene=getattr(language_scorer, "refreshes_scene", False),
                          ask_policy=ask_policy,
                          ask=(person or SimulatedPerson)(task, here, skills, kitchen)
                          if ask_policy is not None else None,
                          world_state=here.snapshot, refuse=refuse,
                          done_first_rejects=refuse is not None,
                          wording=wording if ask_policy is not None else None)
        before = backend.stats.snapshot() if backend is not None else None
        started = time.perf_counter()
        result = planner.run(task.text)
        seconds = time.perf_counter() - started
        cost = {"seconds": round(seconds, 3)}
        if before is not None:
            work = backend.stats.snapshot() - before
            cost.update(forward_passes=work.forward_passes, scored_tokens=work.scored_tokens,
                        generated_tokens=work.generated_tokens, prompt_tokens=work.prompt_tokens,
                        llm_calls=work.calls)
        if task.expect == "rejected":    # refused, and nothing ran
            planned = executed = result.state == "rejected" and not result.plan
        else:
            planned = replay_reaches_goal(task, result.plan, kitchen, skills)
            executed = result.state == "succeeded" and task.goal.holds(here)
        outcome = TaskOutcome(task, result, planned, executed, seconds, cost,
                              plan_strategy.stats())
        report.outcomes.append(outcome)
        if on_task:
            on_task(outcome)
    return report
