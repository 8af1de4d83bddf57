"""Runs the (model, strategy) evaluations of ``saycan eval``: one after the other, or with
``--jobs N`` in N worker processes (each loads its own model; the oracle executor only), which
on a 2-core machine halves the wall time of the full table."""
from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from saycan_ros.evaluation import EvalReport, TaskOutcome


@dataclass(frozen=True)
class EvalJob:
    model: str
    strategy: str
    llm: dict                              # back-end config without the model
    affordance_file: str = ""
    max_steps: int = 20
    executor: str = "oracle"
    seed: int = 0
    world_options: dict = field(default_factory=dict)
    max_failures: int = 0


#: Rough relative cost per task, to start the longest jobs first when running in parallel.
_COST = {"generative": 4, "llm_planner": 3, "saycan_cot": 3, "saycan": 2, "no_vf": 2,
         "bc_nl": 1, "bc_use": 0}


def strategy_resources(vocabulary, scorer, seed: int):
    """What the non-scoring strategies use: the scorer's back end as text generator, MiniLM
    sentence embeddings, the shipped BC pick policy (each loaded only when first used)."""
    from saycan_ros.strategies.resources import StrategyResources, minilm_embedder

    def pick_policy():
        from saycan_ros.learning.factory import make_policy
        return make_policy("bc_pick")
    return StrategyResources(vocabulary.skills, vocabulary.prompt, kitchen=vocabulary.kitchen,
                             generator=scorer.backend, embed=minilm_embedder(),
                             pick_policy=pick_policy, seed=seed)


def _evaluate(job: EvalJob, tasks, vocabulary, scorer, resources, on_task=None,
              progress: bool = True) -> EvalReport:
    from saycan_ros.affordance import load_affordance
    from saycan_ros.evaluation import evaluate
    return evaluate(tasks, kitchen=vocabulary.kitchen, skills=vocabulary.skills,
                    language_scorer=scorer,
                    affordance_scorer=load_affordance(job.affordance_file or None),
                    world_options=job.world_options, resources=resources,
                    strategy=job.strategy, model_name=job.model, max_steps=job.max_steps,
                    executor=job.executor, seed=job.seed, on_task=on_task, progress=progress,
                    max_failures=job.max_failures)


def _worker(job: EvalJob, tasks) -> EvalReport:
    """One job in a fresh process (spawned: no torch state is shared)."""
    from saycan_ros.stack import load_vocabulary, make_language_scorer
    vocabulary = load_vocabulary()
    scorer = make_language_scorer({**job.llm, "model": job.model}, vocabulary.prompt)
    try:
        return _evaluate(job, tasks, vocabulary, scorer,
                         strategy_resources(vocabulary, scorer, job.seed), progress=False)
    finally:
        scorer.backend.close()


def run_jobs(jobs: Sequence[EvalJob], tasks, vocabulary, *, workers: int = 1,
             on_task: Callable[[EvalJob, TaskOutcome], Any] | None = None,
             on_report: Callable[[EvalReport], Any] | None = None) -> list[EvalReport]:
    """The reports in the order of ``jobs``. ``on_task`` sees each outcome as it finishes in
    the sequential case; with workers, outcomes arrive per finished job."""
    if workers <= 1 or len(jobs) <= 1:
        return _run_sequential(jobs, tasks, vocabulary, on_task, on_report)
    if any(j.executor != "oracle" for j in jobs):
        raise ValueError("--jobs > 1 needs the oracle executor (one simulator per process)")
    import multiprocessing

    from tqdm import tqdm
    order = sorted(range(len(jobs)), key=lambda i: -_COST.get(jobs[i].strategy, 2))
    reports: dict[int, EvalReport] = {}
    with ProcessPoolExecutor(max_workers=workers,
                             mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {pool.submit(_worker, jobs[i], tasks): i for i in order}
        for future in tqdm(as_completed(futures), total=len(futures), desc="eval jobs",
                           unit="job"):
            i = futures[future]
            reports[i] = future.result()
            for outcome in reports[i].outcomes:
                if on_task:
                    on_task(jobs[i], outcome)
            if on_report:
                on_report(reports[i])
    return [reports[i] for i in range(len(jobs))]


def _run_sequential(jobs, tasks, vocabulary, on_task, on_report) -> list[EvalReport]:
    from saycan_ros.stack import make_language_scorer
    reports, scorer, loaded = [], None, None
    try:
        for job in jobs:
            if loaded != job.model:          # one model in memory at a time
                if scorer is not None:
                    scorer.backend.close()
                scorer = make_language_scorer({**job.llm, "model": job.model},
                                              vocabulary.prompt)
                resources, loaded = strategy_resources(vocabulary, scorer, job.seed), job.model
            report = _evaluate(job, tasks, vocabulary, scorer, resources,
                               on_task=(lambda o, j=job: on_task(j, o)) if on_task else None)
            reports.append(report)
            if on_report:
                on_report(report)
    finally:
        if scorer is not None:
            scorer.backend.close()
    return reports
