"""The world store (core/world_store.py): a world that survives a restart of its process, within
one session only, and whose revisions never go back."""
from __future__ import annotations

import json

from saycan_ros.core.world import SymbolicWorld
from saycan_ros.core.world_store import WorldStore, default_path, init_from_snapshot


def _held_apple(kitchen, skills) -> SymbolicWorld:
    world = SymbolicWorld(kitchen)
    for text in ("find an apple", "pick up the apple", "go to the far counter"):
        assert world.execute(skills.get(text)).success, text
    return world


def test_a_saved_world_is_restored_whole_in_its_session(kitchen, skills, tmp_path):
    world = _held_apple(kitchen, skills)
    store = WorldStore(tmp_path / "w.json", session="launch-1")
    store.save(world.snapshot())
    loaded = store.load()
    assert loaded == world.snapshot()
    restored = SymbolicWorld(kitchen, init_from_snapshot(loaded, kitchen))
    assert restored.holding == "apple" and restored.robot_at == "far counter"
    assert {o: at for o, at in restored.snapshot().objects.items()} == dict(loaded.objects)


def test_another_session_or_a_broken_file_starts_from_the_default_scene(kitchen, skills,
                                                                        tmp_path):
    path = tmp_path / "w.json"
    WorldStore(path, session="launch-1").save(_held_apple(kitchen, skills).snapshot())
    assert WorldStore(path, session="launch-2").load() is None
    for text in ("{not json", json.dumps({"format": 1, "session": "launch-1", "world": 3}),
                 json.dumps([1, 2])):
        path.write_text(text)
        assert WorldStore(path, session="launch-1").load() is None, text
    assert WorldStore(tmp_path / "missing.json", session="launch-1").load() is None


def test_the_default_path_is_per_session_and_node_and_has_no_odd_characters():
    a = default_path("s1", "/saycan/skill_executor")
    assert a != default_path("s2", "/saycan/skill_executor")
    assert a.parent.name == "s1" and "/" not in a.name and a.suffix == ".json"
    assert default_path("../../etc", "x").parent.parent == a.parent.parent   # no way out
