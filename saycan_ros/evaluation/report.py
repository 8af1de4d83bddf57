"""The evaluation report of ``saycan eval --report DIR``: success per family and strategy, the
language model's cost, why plans failed, and how often generations were not admissible.

:func:`write_report` writes ``report.md`` (the tables), ``report.json`` (every task's steps,
scores, attribution and cost) and ``report.png`` (a grouped bar chart). It is pure: it reads
:class:`~saycan_ros.evaluation.plans.EvalReport` objects and the symbolic world, and loads no model.

Failure attribution (the SayCan paper's 65% LLM / 35% affordance split) replays a failed plan's
executed steps on the symbolic world from the task's start and blames the first step whose skill
does not begin a shortest plan to the goal (:func:`~saycan_ros.core.solver.right_next_skills`):

- ``llm``: the language model scored the chosen skill above every right skill;
- ``affordance``: the language model scored a right skill at least as high, but the combined
  (LLM x affordance) score chose otherwise: the affordance suppressed it;
- ``planner``: the strategy has no per-skill language-model probabilities to compare
  (``generative``, ``llm_planner``, ``bc_use``, ``bc_nl``, whose ``llm`` arrays are one-hot
  choices or embedding similarities, or any step whose ``llm`` is not a probability vector);
  the blame is the planner's as a whole;
- ``execution``: every chosen skill was right, but a skill failed when executed (the simulator)
  or the plan ran out of steps;
- ``unknown``: nothing to blame: the plan stopped on an error before a wrong step (a scoring
  failure, an unregistered skill, a cancel), or no plan exists from the state reached.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Sequence

import numpy as np

from saycan_ros.core.kitchen import Kitchen
from saycan_ros.core.skills import SkillSet
from saycan_ros.core.solver import MAX_PLAN_SKILLS, right_next_skills
from saycan_ros.strategies.registry import STRATEGIES
from saycan_ros.core.tasks import Task
from saycan_ros.core.world import SymbolicWorld

if TYPE_CHECKING:  # the report reads these; it needs nothing else from the evaluation
    from saycan_ros.evaluation.plans import EvalReport, TaskOutcome
    from saycan_ros.planning.planner import StepRecord

#: Attribution categories, in the order the report shows them.
ATTRIBUTIONS = ("llm", "affordance", "planner", "execution", "unknown")
#: Strategies whose ``llm`` arrays are the language model's per-skill probabilities, and those
#: whose arrays are not (one-hot choices, translation similarities): from the registry.
SCORING_STRATEGIES = frozenset(n for n, s in STRATEGIES.items() if s.scores_skills)
NON_SCORING_STRATEGIES = frozenset(n for n, s in STRATEGIES.items() if not s.scores_skills)
#: Per-task cost columns: (cost key, column title, decimals).
COST_COLUMNS = (("forward_passes", "LM forward passes", 1), ("scored_tokens", "scored tokens", 1),
                ("generated_tokens", "generated tokens", 1), ("llm_calls", "LM calls", 1),
                ("seconds", "wall s", 2))
NOT_APPLICABLE = "–"


# -- failure attribution ----------------------------------------------------------------------
@dataclass(frozen=True)
class Attribution:
    """Why one plan failed: the ``category`` (one of :data:`ATTRIBUTIONS`), the step blamed
    (1-based; None when no single step is), the skill chosen there and the right ones."""
    category: str
    step: int | None
    selected: str | None
    right: tuple[str, ...]
    reason: str

    def to_dict(self) -> dict:
        return {"category": self.category, "step": self.step, "selected": self.selected,
                "right": list(self.right), "reason": self.reason}


class RightSkills:
    """:func:`~saycan_ros.core.solver.right_next_skills`, remembered per task and world state (many
    strategies and models fail from the same states, above all the start)."""

    def __init__(self, skills: SkillSet, kitchen: Kitchen, max_depth: int = MAX_PLAN_SKILLS):
        self.skills, self.kitchen, self.max_depth = skills, kitchen, max_depth
        self._known: dict[tuple, frozenset[str]] = {}

    def __call__(self, task: Task, world: SymbolicWorld) -> frozenset[str]:
        key = (task.id, task.goal, world.robot_at, world.holding,
               tuple(sorted(world.objects.items())))
        if key not in self._known:
            self._known[key] = frozenset(right_next_skills(task, world, self.skills,
                                                           self.kitchen, self.max_depth))
        return self._known[key]


def has_skill_probabilities(strategy: str, step: "StepRecord") -> bool:
    """Whether ``step.llm`` holds the language model's probability of each skill.

    Known scoring strategies (:data:`SCORING_STRATEGIES`) need finite scores in [0, 1]; known
    non-scoring ones (:data:`NON_SCORING_STRATEGIES`) never have them; for any other strategy
    the scores must also form a distribution (sum 1) that is not a one-hot choice."""
    if strategy in NON_SCORING_STRATEGIES:
        return False
    llm = _scored(step)
    if llm.size == 0 or not np.all(np.isfinite(llm)) or llm.min() < 0.0 or llm.max() > 1.0:
        return False
    if strategy in SCORING_STRATEGIES:
        return True
    one_hot = np.count_nonzero(llm) == 1 and llm.max() == 1.0
    return not one_hot and abs(float(llm.sum()) - 1.0) < 1e-3


def _scored(step: "StepRecord") -> np.ndarray:
    """The language scores of the skills the language model scored (pruned ones left out)."""
    llm = np.asarray(step.llm, dtype=float)
    pruned = getattr(step, "pruned", None)
    return llm if pruned is None else llm[~np.asarray(pruned, dtype=bool)]


def _affordance_took_part(step: "StepRecord") -> bool:
    """Whether the combined score used an affordance (it differs from the LLM score alone)."""
    affordance = np.asarray(step.affordance, dtype=float)
    return bool(np.any(np.isfinite(affordance))) and not np.allclose(
        np.asarray(step.combined, dtype=float), np.asarray(step.llm, dtype=float), equal_nan=True)


def _blame_wrong_step(strategy: str, step: "StepRecord", right: frozenset[str]) -> Attribution:
    """The attribution of ``step``, whose selected skill is not among the ``right`` ones."""
    shown = tuple(sorted(right))
    if not has_skill_probabilities(strategy, step):
        return Attribution("planner", step.step, step.selected, shown,
                           f"{strategy} chose {step.selected!r}; right: {', '.join(shown)}")
    index = {skill: i for i, skill in enumerate(step.skills)}
    candidates = [s for s in step.skills if s in right]
    if step.selected not in index or not candidates:
        return Attribution("unknown", step.step, step.selected, shown,
                           "the right skills were not among the step's candidates")
    llm = np.asarray(step.llm, dtype=float)
    if all(np.isnan(llm[index[s]]) for s in candidates):   # pruned: none of them could run
        return Attribution("affordance", step.step, step.selected, shown,
                           f"affordance 0 for every right skill ({', '.join(shown)}); "
                           f"{step.selected!r} chosen")
    candidates = [s for s in candidates if not np.isnan(llm[index[s]])]
    best = max(candidates, key=lambda s: (llm[index[s]], -index[s]))
    chosen, best_llm = float(llm[index[step.selected]]), float(llm[index[best]])
    if best_llm < chosen or not _affordance_took_part(step):
        return Attribution("llm", step.step, step.selected, shown,
                           f"LLM {chosen:.3f} for {step.selected!r} vs {best_llm:.3f} for the "
                           f"best right skill {best!r}")
    affordance = np.asarray(step.affordance, dtype=float)
    return Attribution("affordance", step.step, step.selected, shown,
                       f"LLM {best_llm:.3f} for the right {best!r} >= {chosen:.3f} for "
                       f"{step.selected!r}, but affordance {affordance[index[best]]:.3f} vs "
                       f"{affordance[index[step.selected]]:.3f}")


def attribute_failure(outcome: "TaskOutcome", *, kitchen: Kitchen, skills: SkillSet,
                      right_skills: RightSkills | None = None) -> Attribution | None:
    """Why ``outcome``'s plan failed (None when it succeeded): its executed steps replayed on
    the symbolic world from the task's start, the first wrong one blamed (module docstring)."""
    if outcome.plan_success:
        return None
    right_skills = right_skills or RightSkills(skills, kitchen)
    task, result = outcome.task, outcome.result
    world = SymbolicWorld(kitchen, task.init)
    terminate = skills.terminate.text
    failed_right: tuple["StepRecord", frozenset[str]] | None = None
    for step in result.steps:
        right = right_skills(task, world)
        if not right:
            return Attribution("unknown", step.step, step.selected, (),
                               f"no plan of at most {right_skills.max_depth} skills from the "
                               f"state before step {step.step}")
        if step.selected not in right:
            return _blame_wrong_step(result.strategy, step, right)
        if step.selected == terminate or step.success is None:
            break
        if not step.success:
            failed_right = failed_right or (step, right)
        elif not world.execute(skills.get(step.selected)).success:
            return Attribution("unknown", step.step, step.selected, tuple(sorted(right)),
                               f"{step.selected!r} succeeded when executed but not on replay")
    if failed_right is not None:
        step, right = failed_right
        return Attribution("execution", step.step, step.selected, tuple(sorted(right)),
                           f"the right skill {step.selected!r} failed: {step.message}")
    if result.state == "max_steps":
        return Attribution("execution", None, None, (),
                           f"every chosen skill was right but {result.message}")
    return Attribution("unknown", None, None, (),
                       f"every chosen skill was right; the plan ended {result.state}: "
                       f"{result.message}")


def attribution_counts(attributions: Iterable[Attribution | None]) -> dict[str, int]:
    """How many failed plans fall in each category (every category, zeros included)."""
    counts = dict.fromkeys(ATTRIBUTIONS, 0)
    for attribution in attributions:
        if attribution is not None:
            counts[attribution.category] += 1
    return counts


# -- numbers ----------------------------------------------------------------------------------
def rate_text(k: int, n: int) -> str:
    """``K/N (P%)``, as the evaluation prints it."""
    return f"{k}/{n} ({100.0 * k / max(n, 1):.0f}%)"


def family_order(reports: Sequence["EvalReport"]) -> list[str]:
    """The task families in the order they first appear."""
    return list(dict.fromkeys(o.task.family for r in reports for o in r.outcomes))


def run_labels(reports: Sequence["EvalReport"]) -> list[str]:
    """A short, unique name per run: the strategy, with the model when the runs use several
    (its last path component when that is unambiguous)."""
    models = list(dict.fromkeys(r.model for r in reports))
    short = {m: (m.rstrip("/").rsplit("/", 1)[-1] or m) for m in models}
    if len(set(short.values())) < len(models):
        short = {m: m for m in models}
    labels = [r.strategy if len(models) == 1 else f"{r.strategy} ({short[r.model]})"
              for r in reports]
    seen: dict[str, int] = {}
    unique = []
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
        unique.append(label if labels.count(label) == 1 else f"{label} #{seen[label]}")
    return unique


def mean_cost(report: "EvalReport") -> dict[str, float | None]:
    """The mean per task of each :data:`COST_COLUMNS` key, over the tasks that report it (wall
    seconds fall back to the task's own); None when no task does."""
    means: dict[str, float | None] = {}
    for key, _, _ in COST_COLUMNS:
        values = [o.cost.get(key, o.seconds if key == "seconds" else None)
                  for o in report.outcomes]
        values = [float(v) for v in values if v is not None]
        means[key] = sum(values) / len(values) if values else None
    return means


def generation_stats(report: "EvalReport") -> tuple[int, int] | None:
    """(raw generations, inadmissible ones) summed over the tasks, or None when the strategy
    does not count them (``generations`` or ``generated_steps``, and
    ``inadmissible_generations`` in its stats)."""
    total = inadmissible = 0
    counted = False
    for outcome in report.outcomes:
        stats = outcome.strategy_stats or {}
        generated = stats.get("generations", stats.get("generated_steps"))
        if generated is None or "inadmissible_generations" not in stats:
            continue
        counted = True
        total += int(generated)
        inadmissible += int(stats["inadmissible_generations"])
    return (total, inadmissible) if counted else None


# -- markdown ---------------------------------------------------------------------------------
def _row(cells: Iterable[object]) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def success_table(reports: Sequence["EvalReport"]) -> str:
    """Rows: families (first-seen order) and the total; columns: plan and execution success of
    each run as ``K/N (P%)`` (``–`` where a run has no task of the family)."""
    labels = run_labels(reports)
    header = ["family"] + [f"{kind}: {label}" for label in labels
                           for kind in ("plan", "execution")]
    lines = [_row(header), _row(["---"] + ["---:"] * (len(header) - 1))]
    tables = [(r.by_family(), r.by_family("execution_success")) for r in reports]
    for family in family_order(reports):
        cells = [family]
        for plan, execution in tables:
            cells += [rate_text(*plan[family]) if family in plan else NOT_APPLICABLE,
                      rate_text(*execution[family]) if family in execution else NOT_APPLICABLE]
        lines.append(_row(cells))
    total = ["**total**"]
    for report in reports:
        total += [rate_text(*report.total()), rate_text(*report.total("execution_success"))]
    lines.append(_row(total))
    return "\n".join(lines)


def cost_table(reports: Sequence["EvalReport"]) -> str:
    """Per run, the mean per task of the language model's work and the wall time."""
    lines = [_row(["run", "tasks"] + [title for _, title, _ in COST_COLUMNS]),
             _row(["---"] + ["---:"] * (1 + len(COST_COLUMNS)))]
    for label, report in zip(run_labels(reports), reports):
        means = mean_cost(report)
        lines.append(_row([label, len(report.outcomes)] + [
            NOT_APPLICABLE if means[key] is None else f"{means[key]:,.{digits}f}"
            for key, _, digits in COST_COLUMNS]))
    return "\n".join(lines)


def attribution_table(reports: Sequence["EvalReport"],
                      attributions: Sequence[Sequence[Attribution | None]]) -> str:
    """Per run, the failed plans and their attribution as ``count (percent of failed)``."""
    lines = [_row(["run", "failed plans", *ATTRIBUTIONS]),
             _row(["---"] + ["---:"] * (1 + len(ATTRIBUTIONS)))]
    for label, per_task in zip(run_labels(reports), attributions):
        counts = attribution_counts(per_task)
        failed = sum(counts.values())
        lines.append(_row([label, failed] + [
            f"{counts[c]} ({100.0 * counts[c] / failed:.0f}%)" if failed else NOT_APPLICABLE
            for c in ATTRIBUTIONS]))
    return "\n".join(lines)


def generation_table(reports: Sequence["EvalReport"]) -> str:
    """Per run that counts them, raw generations and the inadmissible ones ("" when none)."""
    rows = [(label, stats) for label, stats in zip(run_labels(reports),
                                                   map(generation_stats, reports))
            if stats is not None]
    if not rows:
        return ""
    lines = [_row(["run", "raw generations", "not admissible"]), _row(["---", "---:", "---:"])]
    lines += [_row([label, total, rate_text(bad, total)]) for label, (total, bad) in rows]
    return "\n".join(lines)


def render_markdown(reports: Sequence["EvalReport"],
                    attributions: Sequence[Sequence[Attribution | None]],
                    command: str = "") -> str:
    """The whole ``report.md``."""
    worlds = ", ".join(dict.fromkeys(r.world for r in reports))
    models = ", ".join(dict.fromkeys(r.model or "(unnamed)" for r in reports))
    parts = ["# SayCan evaluation", ""]
    if command:
        parts += [f"Command: `{command}`", ""]
    parts += [f"World: {worlds}. Language models: {models}.", "",
              "## Success by family", "",
              "Plan success: the chosen skills, replayed on the symbolic world, reach the goal "
              "and end with `done`. Execution success: the goal holds where the skills ran.", "",
              success_table(reports), "",
              "## Cost per task", "",
              "Means per task of the language model's work (`–`: not measured for that run).",
              "", cost_table(reports), "",
              "## Failure attribution", "",
              "Each failed plan is replayed on the symbolic world; the first step whose skill "
              "begins no shortest plan to the goal is blamed on the language model (`llm`: it "
              "scored the chosen skill above every right one) or the affordance "
              "(`affordance`: the LLM ranked a right skill at least as high but the product "
              "chose otherwise); `planner`: strategies without per-skill LLM probabilities; "
              "`execution`: every chosen skill was right but one failed when executed or the "
              "plan ran out of steps; `unknown`: an error stopped the plan first.", "",
              attribution_table(reports, attributions), ""]
    generations = generation_table(reports)
    if generations:
        parts += ["## Inadmissible generations", "",
                  "Raw generated steps that are not, word for word, a skill of the repertoire "
                  "(before translation to the nearest skill).", "", generations, ""]
    return "\n".join(parts)


# -- json -------------------------------------------------------------------------------------
def _json_safe(value):
    """``value`` with NaN/infinity as None and numpy scalars and arrays as Python values."""
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, np.ndarray):
        return _json_safe(value.tolist())
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def report_data(reports: Sequence["EvalReport"],
                attributions: Sequence[Sequence[Attribution | None]],
                command: str = "") -> dict:
    """The whole ``report.json``: per run, its totals, families, mean cost, attribution,
    generation counts and every task (steps, scores, cost, attribution)."""
    runs = []
    for label, report, per_task in zip(run_labels(reports), reports, attributions):
        counts = attribution_counts(per_task)
        failed = sum(counts.values())
        generations = generation_stats(report)
        summary = report.to_dict()
        runs.append({
            "label": label, "strategy": report.strategy, "model": report.model,
            "world": report.world, "tasks": summary["tasks"],
            "plan_success": summary["plan_success"],
            "execution_success": summary["execution_success"],
            "by_family": summary["by_family"], "cost_mean": mean_cost(report),
            "attribution": {"failed_plans": failed, "counts": counts,
                            "percent": {c: (100.0 * n / failed if failed else None)
                                        for c, n in counts.items()}},
            "generations": None if generations is None else
            {"raw": generations[0], "inadmissible": generations[1]},
            "tasks_detail": [{**outcome.to_dict(),
                              "attribution": None if a is None else a.to_dict()}
                             for outcome, a in zip(report.outcomes, per_task)]})
    return _json_safe({"command": command, "families": family_order(reports), "runs": runs})


# -- chart ------------------------------------------------------------------------------------
def plot_success(reports: Sequence["EvalReport"], path: str | Path) -> Path:
    """A grouped bar chart: per family (and the total), per run, plan success (solid) and
    execution success (lighter, hatched), in percent."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    families = family_order(reports) + ["total"]
    labels = run_labels(reports)
    colours = plt.get_cmap("tab10").colors
    group_width = 0.8
    bar = group_width / max(len(reports), 1) / 2
    width = 2.5 + len(families) * (0.5 + 0.3 * len(reports))
    fig, ax = plt.subplots(figsize=(max(7.0, width), 4.2))
    x = np.arange(len(families))
    for r, report in enumerate(reports):
        plan, execution = report.by_family(), report.by_family("execution_success")
        plan["total"], execution["total"] = report.total(), report.total("execution_success")
        left = x - group_width / 2 + 2 * r * bar
        colour = colours[r % len(colours)]
        ax.bar(left + bar / 2, [_percent(plan.get(f)) for f in families], bar, color=colour)
        ax.bar(left + 1.5 * bar, [_percent(execution.get(f)) for f in families], bar,
               color=colour, alpha=0.45, hatch="//", edgecolor=colour, linewidth=0)
    ax.set_xticks(x, families, rotation=20, ha="right", fontsize=8)
    ax.set_ylim(0, 100)
    ax.set_ylabel("success (%)")
    ax.set_title("Plan success (solid) and execution success (hatched) by family", fontsize=10)
    handles = [Patch(color=colours[r % len(colours)], label=label)
               for r, label in enumerate(labels)]
    handles.append(Patch(facecolor="lightgrey", hatch="//", label="execution"))
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0),
              frameon=False)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)
    return path


def _percent(rate: tuple[int, int] | None) -> float:
    """``K/N`` as a percentage; 0 where the run has no such task."""
    return 100.0 * rate[0] / rate[1] if rate and rate[1] else 0.0


# -- the report -------------------------------------------------------------------------------
def attribute_all(reports: Sequence["EvalReport"], *, kitchen: Kitchen,
                  skills: SkillSet) -> list[list[Attribution | None]]:
    """The attribution of every task of every run (None for the plans that succeeded)."""
    right_skills = RightSkills(skills, kitchen)
    return [[attribute_failure(o, kitchen=kitchen, skills=skills, right_skills=right_skills)
             for o in report.outcomes] for report in reports]


def write_report(reports: Sequence["EvalReport"], out_dir: str | Path, *, kitchen: Kitchen,
                 skills: SkillSet, command: str = "") -> dict[str, Path]:
    """Write ``report.md``, ``report.json`` and ``report.png`` into ``out_dir`` (created if
    needed) and return their paths as ``{"markdown", "json", "png"}``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    attributions = attribute_all(reports, kitchen=kitchen, skills=skills)
    paths = {"markdown": out / "report.md", "json": out / "report.json",
             "png": out / "report.png"}
    paths["markdown"].write_text(render_markdown(reports, attributions, command),
                                 encoding="utf-8")
    paths["json"].write_text(json.dumps(report_data(reports, attributions, command), indent=1,
                                        ensure_ascii=False, allow_nan=False) + "\n",
                             encoding="utf-8")
    plot_success(reports, paths["png"])
    return paths
