"""``saycan eval --jobs N``: runs are cut into task chunks spread over worker processes; the
merged reports must equal the sequential run's, task for task (the simulator's worlds are
seeded by task index, so a chunk must start from its first task's seed)."""
import pytest

from saycan_ros.evaluation.runner import EvalJob, run_jobs, task_chunks
from saycan_ros.stack import TEST_MODEL
from saycan_ros.core.tasks import load_tasks

from test_tasks import CONFIG


@pytest.mark.parametrize("n, workers, chunks, expected", [
    (105, 2, 0, [(0, 27), (27, 54), (54, 81), (81, 105)]),
    (3, 2, 0, [(0, 1), (1, 2), (2, 3)]),
    (1, 4, 0, [(0, 1)]),
    (10, 2, 3, [(0, 4), (4, 8), (8, 10)]),
])
def test_task_chunks_cover_every_task_once_in_order(n, workers, chunks, expected):
    got = task_chunks(n, workers, chunks)
    assert got == expected
    assert [i for a, b in got for i in range(a, b)] == list(range(n))


def test_parallel_chunks_merge_to_the_sequential_reports(vocabulary):
    tasks = load_tasks(CONFIG / "tasks.yaml", vocabulary.kitchen)[:3]
    llm = {"backend": "transformers", "threads": 1}
    jobs = [EvalJob(TEST_MODEL, "no_vf", llm, max_steps=6),
            EvalJob(TEST_MODEL, "bc_use", llm, max_steps=6, world="sim", seed=5,
                    world_options={"pick": "expert"}, max_failures=2)]
    finished = []
    parallel = run_jobs(jobs, tasks, vocabulary, workers=2,
                        on_report=lambda r: finished.append(r.strategy))
    sequential = run_jobs(jobs, tasks, vocabulary, workers=1)
    assert sorted(finished) == ["bc_use", "no_vf"]        # each job reported once, when whole
    for par, seq in zip(parallel, sequential):
        assert (par.strategy, par.model) == (seq.strategy, seq.model)
        assert [o.task.text for o in par.outcomes] == [t.text for t in tasks]
        assert [o.result.plan for o in par.outcomes] == [o.result.plan for o in seq.outcomes]
        assert [o.plan_success for o in par.outcomes] == [o.plan_success for o in seq.outcomes]
        assert [o.execution_success for o in par.outcomes] == \
            [o.execution_success for o in seq.outcomes]


def test_every_affordance_model_type_resolves_in_a_fresh_interpreter():
    """The table is complete without side-effect imports: a spawned eval worker with
    ``affordance_sim.yaml`` died with "unknown affordance model 'learned_pick'"."""
    import subprocess
    import sys
    code = ("from saycan_ros.planning.affordance import AFFORDANCE_MODELS, affordance_model_type\n"
            "print(sorted(n for n in AFFORDANCE_MODELS if callable(affordance_model_type(n))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    assert "learned_pick" in out and "path_distance" in out


def test_sim_workers_load_the_learned_affordances(vocabulary):
    """``saycan eval --world sim --jobs 2`` with the value-function affordances
    (``affordance_sim.yaml``) gives the sequential results."""
    tasks = load_tasks(CONFIG / "tasks.yaml", vocabulary.kitchen)[:2]
    job = EvalJob(TEST_MODEL, "bc_use", {"backend": "transformers", "threads": 1},
                  affordance_file="affordance_sim.yaml", max_steps=4, world="sim", seed=3,
                  world_options={"pick": "expert"}, max_failures=2)
    parallel = run_jobs([job], tasks, vocabulary, workers=2)[0]
    sequential = run_jobs([job], tasks, vocabulary, workers=1)[0]
    assert [o.result.plan for o in parallel.outcomes] == \
        [o.result.plan for o in sequential.outcomes]
    assert [o.execution_success for o in parallel.outcomes] == \
        [o.execution_success for o in sequential.outcomes]
