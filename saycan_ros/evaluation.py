"""``saycan eval``: plan every task of a task file and check its goal on the symbolic world.

Plan success (the paper's planning metric) means the sequence of skills the planner chose,
executed on the symbolic world, ends with ``done`` and the task's goal holds.
"""
from __future__ import annotations

import json
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from tqdm import tqdm

from saycan_ros.affordance import AffordanceScorer
from saycan_ros.kitchen import Kitchen
from saycan_ros.local import LocalAffordance, LocalLanguage, WorldExecutor
from saycan_ros.planner import Planner, PlanResult, make_strategy
from saycan_ros.skills import SkillSet
from saycan_ros.tasks import Task
from saycan_ros.world import SymbolicWorld


@dataclass
class TaskOutcome:
    task: Task
    result: PlanResult
    goal_reached: bool
    seconds: float

    @property
    def success(self) -> bool:
        return self.result.state == "succeeded" and self.goal_reached

    def to_dict(self) -> dict:
        return {"id": self.task.id, "family": self.task.family, "text": self.task.text,
                "goal": self.task.goal.text, "success": self.success,
                "goal_reached": self.goal_reached, "seconds": round(self.seconds, 3),
                **{k: v for k, v in self.result.to_dict().items() if k != "instruction"}}


@dataclass
class EvalReport:
    strategy: str
    model: str
    outcomes: list[TaskOutcome] = field(default_factory=list)

    def by_family(self) -> dict[str, tuple[int, int]]:
        table: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for outcome in self.outcomes:
            table[outcome.task.family][0] += outcome.success
            table[outcome.task.family][1] += 1
        return {family: (k, n) for family, (k, n) in table.items()}

    @property
    def total(self) -> tuple[int, int]:
        return sum(o.success for o in self.outcomes), len(self.outcomes)

    def table(self) -> str:
        lines = [f"| family | tasks | plan success ({self.strategy}, {self.model}) |",
                 "|---|---:|---:|"]
        for family, (k, n) in self.by_family().items():
            lines.append(f"| {family} | {n} | {k}/{n} ({100.0 * k / n:.0f}%) |")
        k, n = self.total
        lines.append(f"| **total** | {n} | {k}/{n} ({100.0 * k / max(n, 1):.0f}%) |")
        return "\n".join(lines)

    def summary_line(self) -> str:
        k, n = self.total
        return f"plan success: {k}/{n} ({100.0 * k / max(n, 1):.1f}%)"

    def to_dict(self) -> dict:
        k, n = self.total
        return {"strategy": self.strategy, "model": self.model, "success": k, "tasks": n,
                "by_family": {f: {"success": s, "tasks": t}
                              for f, (s, t) in self.by_family().items()},
                "tasks_detail": [o.to_dict() for o in self.outcomes]}

    def write_json(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=1), encoding="utf-8")


def evaluate(tasks: Sequence[Task], *, kitchen: Kitchen, skills: SkillSet, language_scorer,
             affordance_scorer: AffordanceScorer, strategy: str = "saycan",
             model_name: str = "", max_steps: int = 20, progress: bool = True,
             on_task: Callable[[TaskOutcome], None] | None = None) -> EvalReport:
    """Plan each task from its ``init`` on a fresh symbolic world; the world is the oracle."""
    report = EvalReport(strategy, model_name)
    language = LocalLanguage(language_scorer)
    for task in tqdm(tasks, desc=f"eval {strategy}", unit="task", disable=not progress):
        world = SymbolicWorld(kitchen, task.init)
        planner = Planner(skills, make_strategy(strategy, language,
                                                LocalAffordance(affordance_scorer, world, skills)),
                          WorldExecutor(world, skills), max_steps=max_steps)
        started = time.perf_counter()
        result = planner.run(task.text)
        outcome = TaskOutcome(task, result, task.goal.holds(world),
                              time.perf_counter() - started)
        report.outcomes.append(outcome)
        if on_task:
            on_task(outcome)
    return report
