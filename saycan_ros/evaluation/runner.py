"""Runs the (model, strategy) evaluations of ``saycan eval``: one after the other, or with
``--jobs N`` in N worker processes (the symbolic or the in-process simulated world; each task's
world is seeded as in the sequential run, so the results are the same).

In parallel, each run is cut into chunks of consecutive tasks and the chunks are handed out
longest-first, so the expensive strategies (generative, llm_planner) do not leave one worker
busy while the other idles; a worker keeps its model loaded from one chunk to the next."""
from __future__ import annotations

import dataclasses
import math
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from saycan_ros.evaluation.plans import EvalReport, TaskOutcome


@dataclass(frozen=True)
class EvalJob:
    model: str
    strategy: str
    llm: dict                              # back-end config without the model
    affordance_file: str = ""
    max_steps: int = 20
    world: str = "symbolic"
    seed: int = 0
    world_options: dict = field(default_factory=dict)
    max_failures: int = 0
    fault_rate: float = 0.0
    prune: bool = True                     # saycan: the LLM scores only skills that can run
    kitchen_file: str = ""                 # "" = the built-in kitchen
    ask: dict = field(default_factory=dict)   # when to ask: planning.asking.make_ask_policy
    refuse: bool = True                    # "I can't ...": planning.refusal, as the planner node
    skill_reliability: float = 0.95        # saycan: a failure's evidence against an affordance


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
    from saycan_ros.planning.affordance import load_affordance
    from saycan_ros.planning.asking import make_ask_policy
    from saycan_ros.evaluation.plans import evaluate
    from saycan_ros.planning.refusal import load_refusals
    from saycan_ros.planning.wording import Wording
    backend = getattr(scorer, "backend", None)
    refusals = load_refusals(vocabulary.kitchen) if job.refuse else None
    return evaluate(tasks, kitchen=vocabulary.kitchen, skills=vocabulary.skills,
                    language_scorer=scorer,
                    affordance_scorer=load_affordance(job.affordance_file or None),
                    world_options=job.world_options, resources=resources,
                    strategy=job.strategy, model_name=job.model, max_steps=job.max_steps,
                    world=job.world, seed=job.seed, on_task=on_task, progress=progress,
                    max_failures=job.max_failures, fault_rate=job.fault_rate,
                    strategy_options={"prune": job.prune,
                                      "skill_reliability": job.skill_reliability},
                    ask_policy=make_ask_policy(job.ask, getattr(backend, "name", "")),
                    refuse=refusals.why_not if refusals is not None else None,
                    wording=Wording.from_kitchen(vocabulary.kitchen)
                    if job.ask and job.ask.get("words", True) else None)


#: The model a worker process holds: (model name, vocabulary, scorer, resources).
_loaded: tuple | None = None


def _worker_model(job: EvalJob) -> tuple:
    """The worker's vocabulary, scorer and resources for ``job.model``, loaded once per model."""
    global _loaded
    from saycan_ros.planning.vocabulary import load_vocabulary
    from saycan_ros.stack import make_language_scorer
    key = (job.model, job.seed, job.kitchen_file)
    if _loaded is None or _loaded[0] != key:
        if _loaded is not None:
            _loaded[2].backend.close()
        vocabulary = load_vocabulary(job.kitchen_file)
        scorer = make_language_scorer({**job.llm, "model": job.model}, vocabulary.prompt)
        _loaded = (key, vocabulary, scorer,
                   strategy_resources(vocabulary, scorer, job.seed))
    return _loaded[1:]


def _worker(job: EvalJob, tasks, start: int) -> EvalReport:
    """Tasks ``start, start + 1, ...`` of one job in a worker process (spawned: no torch state
    is shared); world seeds are those the sequential run gives these tasks."""
    vocabulary, scorer, resources = _worker_model(job)
    chunk_job = dataclasses.replace(job, seed=job.seed + start)
    return _evaluate(chunk_job, tasks, vocabulary, scorer, resources, progress=False)


def _cost(strategy: str) -> int:
    """Relative cost per task (the registry's), to start the longest jobs first."""
    from saycan_ros.strategies.registry import STRATEGIES
    spec = STRATEGIES.get(strategy)
    return spec.cost if spec else 2


def task_chunks(n_tasks: int, workers: int, chunks_per_job: int = 0) -> list[tuple[int, int]]:
    """[start, stop) ranges cutting ``n_tasks`` into about ``2 * workers`` chunks (at least
    one task each): small enough to balance the workers, large enough that the per-chunk
    set-up (a strategy's retrieval pool, caches) stays negligible."""
    count = max(1, min(n_tasks, chunks_per_job or 2 * workers))
    size = math.ceil(n_tasks / count)
    return [(a, min(a + size, n_tasks)) for a in range(0, n_tasks, size)]


def run_jobs(jobs: Sequence[EvalJob], tasks, vocabulary, *, workers: int = 1,
             on_task: Callable[[EvalJob, TaskOutcome], Any] | None = None,
             on_report: Callable[[EvalReport], Any] | None = None,
             chunks_per_job: int = 0) -> list[EvalReport]:
    """The reports in the order of ``jobs``, outcomes in the order of ``tasks``. ``on_task``
    sees each outcome as it finishes in the sequential case; with workers, outcomes arrive per
    finished chunk, and ``on_report`` is called once a job's last chunk is in."""
    if workers <= 1 or (len(jobs) <= 1 and len(tasks) <= 1):
        return _run_sequential(jobs, tasks, vocabulary, on_task, on_report)
    if any(j.world == "nodes" for j in jobs):
        raise ValueError("--jobs > 1 runs in-process worlds only (symbolic or sim), not the "
                         "node graph, which is one simulator for the whole run")
    import multiprocessing

    from tqdm import tqdm
    tasks = list(tasks)
    chunks = task_chunks(len(tasks), workers, chunks_per_job)
    # Longest first (LPT), one model after the other so that workers rarely reload.
    models = list(dict.fromkeys(j.model for j in jobs))
    units = sorted(((i, a, b) for i in range(len(jobs)) for a, b in chunks),
                   key=lambda u: (models.index(jobs[u[0]].model),
                                  -_cost(jobs[u[0]].strategy), u[1]))
    parts: dict[int, dict[int, EvalReport]] = {i: {} for i in range(len(jobs))}
    reports: dict[int, EvalReport] = {}
    with ProcessPoolExecutor(max_workers=workers,
                             mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {pool.submit(_worker, jobs[i], tasks[a:b], a): (i, a) for i, a, b in units}
        for future in tqdm(as_completed(futures), total=len(futures), desc="eval chunks",
                           unit="chunk"):
            i, a = futures[future]
            part = future.result()
            parts[i][a] = part
            for outcome in part.outcomes:
                if on_task:
                    on_task(jobs[i], outcome)
            if len(parts[i]) == len(chunks):
                reports[i] = _merge(jobs[i], parts[i])
                if on_report:
                    on_report(reports[i])
    return [reports[i] for i in range(len(jobs))]


def _merge(job: EvalJob, parts: dict[int, EvalReport]) -> EvalReport:
    """One job's chunk reports as one report, outcomes in task order."""
    first = next(iter(parts.values()))
    merged = EvalReport(first.strategy, first.model, first.world)
    for start in sorted(parts):
        merged.outcomes.extend(parts[start].outcomes)
    return merged


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
