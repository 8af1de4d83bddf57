"""The development kitchens (config/dev_kitchens/): kitchens the planner was never trained on,
each with its own task file. Every kitchen loads, every task is solvable and not done at its
start, each file covers the seven families plus negation, and no task copies a test
instruction."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from saycan_ros.core.tasks import FAMILIES, load_tasks, task_file_kitchen
from saycan_ros.learning.planner_data import normalise
from saycan_ros.planning.vocabulary import load_vocabulary
from test_tasks import check_solvable

CONFIG = Path(__file__).resolve().parents[2] / "config"
DEV_KITCHENS = CONFIG / "dev_kitchens"
TASK_FILES = sorted(DEV_KITCHENS.glob("*_tasks.yaml"))


def test_there_are_at_least_three_development_kitchens():
    assert len(TASK_FILES) >= 3, TASK_FILES


@pytest.mark.parametrize("task_file", TASK_FILES, ids=lambda p: p.stem)
def test_each_dev_kitchen_is_sized_and_its_tasks_solvable(task_file):
    kitchen_file = task_file_kitchen(task_file)
    assert Path(kitchen_file).parent == DEV_KITCHENS
    vocabulary = load_vocabulary(kitchen_file)
    kitchen = vocabulary.kitchen
    assert len(kitchen.objects) >= 12 and len(kitchen.surfaces) >= 4
    assert kitchen.disposal is not None
    tasks = load_tasks(task_file, kitchen)
    assert len(tasks) >= 40
    families = Counter(t.family for t in tasks)
    assert set(FAMILIES) | {"negation"} <= set(families), families
    assert min(families.values()) >= 4, families
    check_solvable(tasks, kitchen, vocabulary.skills)
    assert len({normalise(t.text) + repr(t.init.to_mapping()) for t in tasks}) == len(tasks)


def test_dev_kitchen_tasks_copy_no_test_instruction(kitchen):
    tests = {normalise(t.text) for name in ("tasks.yaml", "tasks_extra.yaml")
             for t in load_tasks(CONFIG / name, kitchen)}
    for task_file in TASK_FILES:
        tasks = load_tasks(task_file, load_vocabulary(task_file_kitchen(task_file)).kitchen)
        copied = [t.id for t in tasks if normalise(t.text) in tests]
        assert not copied, f"{task_file.name}: {copied}"
