"""``saycan calibrate``: the conformal calibration of asking for help (saycan_ros.planning.asking).

Calibration plans are generated dialogues (the planner-data generator, a seed of their own,
every instruction of the task files left out) in the built-in kitchen. Each is planned by SayCan
as ``saycan eval`` plans it, except that at every step a :class:`CalibratingPerson` is asked
with every skill on offer (without those that would change nothing, and one skill per outcome,
as in use): it notes the step's largest probability of a right next skill (one that begins a
shortest plan to the goal, by the symbolic solver, but not a ``find`` of a thing the goal does
not name; or, when none is offered, one that goes where a right one goes) and answers with it,
so the plan follows a right path. Each step's score is 1 minus that probability. Two thirds of the plans
calibrate, the rest are held aside to measure coverage (split by plan: a plan's steps stay
together).
"""
from __future__ import annotations

import numpy as np

from saycan_ros.core.tasks import Task
from saycan_ros.planning.asking import Answer, Calibration, Question, step_score

#: Generator seed of the calibration dialogues (training uses small seeds, held-out checks
#: 1_000_003 + seed): these are neither.
CALIBRATION_SEED = 7_700_001
#: Version of the calibration data recipe (bump when the recipe changes). 2: a ``go to`` the
#: place is as right as a ``find`` of the goal's thing there, and an offered skill that goes
#: where a right one goes counts (version 1 found no right option at 7% of its steps).
DATA_VERSION = 2


class OfferEverything:
    """An ask policy that offers every skill that can run, likeliest first (calibration)."""
    name = "calibration"

    def options(self, p: np.ndarray) -> list[int]:
        return [int(i) for i in np.argsort(-p, kind="stable") if p[i] > 0.0]


class CalibratingPerson:
    """Answers with the likeliest right next skill (one the person means:
    :func:`~saycan_ros.evaluation.plans.meant_options`) and keeps, per step, its
    probability (0 where none was on offer)."""

    def __init__(self, task: Task, world, skills, kitchen):
        self.task, self.world, self.skills, self.kitchen = task, world, skills, kitchen
        self.right_probabilities: list[float] = []
        #: per step, the offered skills with their probabilities, which of them were right,
        #: and every right skill (offered or not)
        self.steps: list[dict] = []

    def __call__(self, question: Question) -> Answer:
        from saycan_ros.evaluation.plans import intended_next_skills, meant_options
        right = intended_next_skills(self.task, self.world, self.skills, self.kitchen)
        hits = meant_options(question.options, right, self.world, self.skills)
        self.right_probabilities.append(
            float(question.probabilities[hits[0]]) if hits else 0.0)
        self.steps.append({"options": list(question.options),
                           "probabilities": [round(float(p), 6) for p in question.probabilities],
                           "right": hits, "right_skills": sorted(right)})
        return Answer(hits[0] if hits else None)


def calibration_tasks(vocabulary, n: int, seed: int = CALIBRATION_SEED,
                      progress: bool = True) -> list[Task]:
    """``n`` generated calibration plans in ``vocabulary``'s kitchen as tasks."""
    from tqdm import tqdm

    from saycan_ros.core.config import config_dir
    from saycan_ros.learning.planner_data import (EXCLUDED_SETS, PlanDataGenerator,
                                                  heldout_instructions, load_lexicon)
    kitchen, skills = vocabulary.kitchen, vocabulary.skills
    generator = PlanDataGenerator(kitchen, skills, load_lexicon(kitchen), seed=seed,
                                  exclude=heldout_instructions(config_dir(), kitchen,
                                                               EXCLUDED_SETS))
    with tqdm(total=n, desc="calibration dialogues", disable=not progress) as bar:
        dialogues = generator.dialogues(n, progress=bar)
    return [Task(f"cal{i:04d}", d.family, d.instruction, d.init, d.goal)
            for i, d in enumerate(dialogues)]


def calibrate(vocabulary, language_scorer, affordance_scorer, *, n: int = 300,
              heldout_share: float = 1 / 3, seed: int = CALIBRATION_SEED,
              model_name: str = "", progress: bool = True,
              details: str | None = None) -> Calibration:
    """Plan ``n`` calibration tasks (module docstring) and split their scores into calibration
    and held-aside ones. ``details``: a .json.gz file for every step's offered probabilities
    and right options, per plan with its split (to study other scores without replanning)."""
    from saycan_ros.evaluation.plans import evaluate
    if n < 3:
        raise ValueError(f"calibration needs at least 3 plans, got {n}")
    if not 0.0 < heldout_share < 1.0:
        raise ValueError(f"heldout_share must be in (0, 1), got {heldout_share!r}")
    tasks = calibration_tasks(vocabulary, n, seed, progress)
    people: list[CalibratingPerson] = []

    def person(task, world, skills, kitchen):
        people.append(CalibratingPerson(task, world, skills, kitchen))
        return people[-1]

    report = evaluate(tasks, kitchen=vocabulary.kitchen, skills=vocabulary.skills,
                      language_scorer=language_scorer, affordance_scorer=affordance_scorer,
                      model_name=model_name, progress=progress, ask_policy=OfferEverything(),
                      person=person)
    # plans are split, their steps are the samples: a step's score is 1 - p(right next skill)
    steps = [[step_score(p) for p in person.right_probabilities] for person in people]
    order = np.random.default_rng(seed).permutation(len(steps))
    n_held = max(1, int(round(len(steps) * heldout_share)))
    held = sorted(int(i) for i in order[:n_held])
    cal = sorted(int(i) for i in order[n_held:])
    reached = sum(o.plan_success for o in report.outcomes)
    if details:
        import gzip
        import json
        with gzip.open(details, "wt") as f:
            json.dump([{"task": task.id, "split": "heldout" if i in held else "calibration",
                        "steps": people[i].steps} for i, task in enumerate(tasks)], f)
    return Calibration(
        [s for i in cal for s in steps[i]], [s for i in held for s in steps[i]], model_name,
        {"generator": "PlanDataGenerator (built-in kitchen)", "seed": seed,
         "plans": len(steps), "calibration_plans": len(cal), "heldout_plans": len(held),
         "data_version": DATA_VERSION, "scope": "step",
         "followed_plans_reaching_goal": reached, "steps": sum(len(s) for s in steps),
         "plans_covered_at": {f"{e:g}": _plans_covered([steps[i] for i in held],
                                                       [s for i in cal for s in steps[i]], e)
                              for e in (0.05, 0.1, 0.15, 0.2, 0.25)}})


def _plans_covered(plans: list[list[float]], calibration: list[float], epsilon: float) -> float:
    """Share of ``plans`` whose every step's set (the step threshold at ``epsilon``) holds a
    right next skill: the plan-level coverage a per-step calibration gives."""
    from saycan_ros.planning.asking import conformal_threshold
    q = conformal_threshold(calibration, epsilon)
    return round(float(np.mean([all(s <= q + 1e-12 for s in plan) for plan in plans])), 4) \
        if plans else float("nan")
