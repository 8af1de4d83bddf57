"""``saycan calibrate``: the conformal calibration of asking for help (saycan_ros.planning.asking).

Calibration plans are generated dialogues (the planner-data generator, a seed of their own,
every instruction of the task files left out) in the built-in kitchen: mostly its usual mix, and
a share (:data:`AMBIGUOUS_SHARE`) of requests with several readings in the scene ("Bring me the
chips." with three bags), whose goal follows one reading at random: only the person knows which.
KnowNo calibrates on what the robot will be told, ambiguity included; without such plans the
sets would know the model's doubt on clear requests only and ask wherever it is less than sure.
Each plan is planned by SayCan as ``saycan eval`` plans it, except that at every step a
:class:`CalibratingPerson` is asked with every skill on offer (without those that would change
nothing, and one skill per outcome, as in use): it notes the step's largest probability of a
right next skill (one that begins a shortest plan to the goal, by the symbolic solver, but not a
``find`` of a thing the goal does not name; or, when none is offered, one that goes where a
right one goes) and answers with it, so the plan follows a right path. Each step's score is 1
minus that probability. Two thirds of the plans calibrate, the rest are held aside to measure
coverage (split by plan: a plan's steps stay together).
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
#: 3: a share of the plans are ambiguous requests (:data:`AMBIGUOUS_SHARE`).
DATA_VERSION = 3
#: Share of the calibration plans that are requests with several readings (the rest: the
#: generator's usual mix). Their generator has a seed of its own, so the clear plans of ``n``
#: are the first ``n - round(n * share)`` of the usual mix whatever the share.
AMBIGUOUS_SHARE = 0.25
AMBIGUOUS_SEED_OFFSET = 500_000


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
                      progress: bool = True,
                      ambiguous_share: float = AMBIGUOUS_SHARE) -> list[Task]:
    """``n`` generated calibration plans in ``vocabulary``'s kitchen as tasks: the usual mix,
    then ``round(n * ambiguous_share)`` ambiguous requests (module docstring)."""
    from tqdm import tqdm

    from saycan_ros.core.config import config_dir
    from saycan_ros.learning.planner_data import (EXCLUDED_SETS, FAMILY_WEIGHTS,
                                                  PlanDataGenerator, heldout_instructions,
                                                  load_lexicon)
    if not 0.0 <= ambiguous_share <= 1.0:
        raise ValueError(f"ambiguous_share must be in [0, 1], got {ambiguous_share!r}")
    kitchen, skills = vocabulary.kitchen, vocabulary.skills
    lexicon = load_lexicon(kitchen)
    exclude = heldout_instructions(config_dir(), kitchen, EXCLUDED_SETS)
    n_ambiguous = int(round(n * ambiguous_share))
    only_ambiguous = dict.fromkeys(FAMILY_WEIGHTS, 0.0) | {"ambiguous": 1.0}
    generators = [
        (n - n_ambiguous, PlanDataGenerator(kitchen, skills, lexicon, seed=seed,
                                            exclude=exclude)),
        (n_ambiguous, PlanDataGenerator(kitchen, skills, lexicon,
                                        seed=seed + AMBIGUOUS_SEED_OFFSET, exclude=exclude,
                                        family_weights=only_ambiguous))]
    dialogues = []
    with tqdm(total=n, desc="calibration dialogues", disable=not progress) as bar:
        for count, generator in generators:
            dialogues += generator.dialogues(count, progress=bar)
    return [Task(f"cal{i:04d}", d.family, d.instruction, d.init, d.goal)
            for i, d in enumerate(dialogues)]


def calibrate(vocabulary, language_scorer, affordance_scorer, *, n: int = 400,
              heldout_share: float = 1 / 3, seed: int = CALIBRATION_SEED,
              model_name: str = "", progress: bool = True,
              details: str | None = None,
              ambiguous_share: float = AMBIGUOUS_SHARE) -> Calibration:
    """Plan ``n`` calibration tasks (module docstring) and split their scores into calibration
    and held-aside ones. ``details``: a .json.gz file for every step's offered probabilities
    and right options, per plan with its split (to study other scores without replanning)."""
    from saycan_ros.evaluation.plans import evaluate
    if n < 3:
        raise ValueError(f"calibration needs at least 3 plans, got {n}")
    if not 0.0 < heldout_share < 1.0:
        raise ValueError(f"heldout_share must be in (0, 1), got {heldout_share!r}")
    tasks = calibration_tasks(vocabulary, n, seed, progress, ambiguous_share)
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
            json.dump([{"task": task.id, "family": task.family, "text": task.text,
                        "split": "heldout" if i in held else "calibration",
                        "steps": people[i].steps} for i, task in enumerate(tasks)], f)
    return Calibration(
        [s for i in cal for s in steps[i]], [s for i in held for s in steps[i]], model_name,
        {"generator": "PlanDataGenerator (built-in kitchen)", "seed": seed,
         "plans": len(steps), "calibration_plans": len(cal), "heldout_plans": len(held),
         "ambiguous_plans": sum(task.family == "ambiguous" for task in tasks),
         "data_version": DATA_VERSION, "scope": "step",
         "followed_plans_reaching_goal": reached, "steps": sum(len(s) for s in steps),
         "plans_covered_at": {f"{e:g}": _plans_covered([steps[i] for i in held],
                                                       [s for i in cal for s in steps[i]], e)
                              for e in (0.05, 0.1, 0.15, 0.2, 0.25)},
         "heldout_coverage_over_splits": {f"{e:g}": _coverage_over_splits(steps, n_held, e, seed)
                                          for e in (0.05, 0.1, 0.15, 0.2, 0.25)}})


#: Random plan splits over which :func:`_coverage_over_splits` averages.
SPLITS = 500


def _coverage_over_splits(plans: list[list[float]], n_held: int, epsilon: float,
                          seed: int) -> dict:
    """Held-aside step coverage over :data:`SPLITS` random splits of the plans (``n_held``
    held aside each time), mean and standard deviation: one split's figure varies by a point
    or two with which plans it holds aside (a plan's steps are not independent); the mean is
    what conformal prediction promises."""
    from saycan_ros.planning.asking import conformal_threshold, coverage
    rng = np.random.default_rng(seed + 1)
    found = []
    for _ in range(SPLITS):
        order = rng.permutation(len(plans))
        held = [s for i in order[:n_held] for s in plans[i]]
        q = conformal_threshold([s for i in order[n_held:] for s in plans[i]], epsilon)
        if held:
            found.append(coverage(held, q))
    return {"mean": round(float(np.mean(found)), 4), "sd": round(float(np.std(found)), 4)} \
        if found else {}


def _plans_covered(plans: list[list[float]], calibration: list[float], epsilon: float) -> float:
    """Share of ``plans`` whose every step's set (the step threshold at ``epsilon``) holds a
    right next skill: the plan-level coverage a per-step calibration gives."""
    from saycan_ros.planning.asking import conformal_threshold
    q = conformal_threshold(calibration, epsilon)
    return round(float(np.mean([all(s <= q + 1e-12 for s in plan) for plan in plans])), 4) \
        if plans else float("nan")
