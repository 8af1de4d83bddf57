"""The development task set (config/tasks_dev.yaml): written fresh for tuning, kept apart from
the test sets (config/tasks.yaml, config/tasks_extra.yaml) and the prompt's examples.

Same checks as test/unit/test_tasks.py: every goal is reachable within 19 skills (plus ``done``),
replays to the goal on the symbolic world and does not hold at the start.
"""
from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
import yaml

from saycan_ros.core.tasks import FAMILIES, Task, load_tasks
from saycan_ros.learning.planner_data import normalise
from test_tasks import check_solvable, check_task_file_shape

CONFIG = Path(__file__).resolve().parents[2] / "config"
DEV_FAMILIES = FAMILIES + ("negation", "multilingual", "counting")
DEMO = "I spilled my coke, can you bring me something to clean it up?"


@pytest.fixture(scope="module")
def dev_tasks(kitchen):
    return load_tasks(CONFIG / "tasks_dev.yaml", kitchen)


def test_dev_file_has_enough_tasks_of_every_family(dev_tasks):
    check_task_file_shape(dev_tasks, r"d\d{3}", DEV_FAMILIES, min_tasks=150)


def test_dev_start_states_are_varied(dev_tasks):
    inits = [t.init for t in dev_tasks]
    assert sum(i.holding is not None or bool(i.objects) or bool(i.absent) for i in inits) >= 40
    assert len({i.robot_at for i in inits}) >= 5
    assert sum(i.holding is not None for i in inits) >= 10
    assert sum(bool(i.objects) for i in inits) >= 8
    assert sum(bool(i.absent) for i in inits) >= 8


def test_dev_texts_are_distinct(dev_tasks):
    """A text may repeat only with a different start state."""
    seen = Counter((normalise(t.text), repr(t.init.to_mapping())) for t in dev_tasks)
    assert all(n == 1 for n in seen.values()), [k for k, n in seen.items() if n > 1]


def test_dev_texts_copy_no_test_task_or_prompt_example(dev_tasks, kitchen):
    others = {normalise(t.text) for name in ("tasks.yaml", "tasks_extra.yaml")
              for t in load_tasks(CONFIG / name, kitchen)}
    prompt = yaml.safe_load((CONFIG / "prompt.yaml").read_text(encoding="utf-8"))
    others |= {normalise(e["instruction"]) for e in prompt["examples"]}
    others.add(normalise(DEMO))
    copied = [(t.id, t.text) for t in dev_tasks if normalise(t.text) in others]
    assert not copied, f"dev tasks copying a test task, a prompt example or the demo: {copied}"


def test_dev_family_character(dev_tasks):
    by_family: dict[str, list[Task]] = {}
    for task in dev_tasks:
        by_family.setdefault(task.family, []).append(task)
    assert all("not(" in t.goal.text for t in by_family["negation"])
    assert all("atleast(" in t.goal.text for t in by_family["counting"])
    multilingual = [t.text for t in by_family["multilingual"]]
    assert any(re.search(r"[\u4e00-\u9fff]", t) for t in multilingual)       # Chinese
    assert any(re.search(r"[áéíóúñ¿¡]", t) for t in multilingual)           # Spanish/Portuguese
    emb = [t.init for t in by_family["embodiment"]]
    assert sum(i.holding is not None for i in emb) >= 5
    assert sum(bool(i.absent) for i in emb) >= 3
    assert sum(bool(i.objects) for i in emb) >= 3


def test_every_dev_task_is_solvable_and_not_trivial(dev_tasks, kitchen, skills):
    lengths = check_solvable(dev_tasks, kitchen, skills)
    family = {t.id: t.family for t in dev_tasks}
    single = {tid: n for tid, n in lengths.items() if family[tid] == "nl_single"}
    assert max(single.values()) <= 2, single
    long = [n for tid, n in lengths.items() if family[tid] == "long_horizon"]
    assert min(long) >= 7, long
