"""Kitchen files and the many-kitchen training data: every mistake in a kitchen file is one
line naming its field; random kitchens are valid and their plans replay; the lexicon is large
and shares no name with the development kitchens; a foreign kitchen's prompt is never a
traceback."""
from __future__ import annotations

import random
from pathlib import Path

import pytest
import yaml

from saycan_ros.core.config import ConfigError
from saycan_ros.core.kitchen import KitchenError, kitchen_from_dict, load_kitchen
from saycan_ros.core.skills import load_skills
from saycan_ros.learning.kitchens import (ManyKitchenGenerator, kitchen_lexicon, kitchen_names,
                                          load_kitchen_lexicon, random_kitchen)
from saycan_ros.learning.planner_data import PlanDataGenerator, _replays_to
from saycan_ros.planning.vocabulary import load_vocabulary

CONFIG = Path(__file__).resolve().parents[2] / "config"
WORKSHOP = CONFIG / "dev_kitchens" / "workshop.yaml"
DEV_KITCHENS = [CONFIG / "dev_kitchens" / f"{name}.yaml" for name in ("workshop", "nursery", "cafe")]


@pytest.fixture(scope="module")
def lexicon():
    return load_kitchen_lexicon()


def _workshop() -> dict:
    return yaml.safe_load(WORKSHOP.read_text(encoding="utf-8"))


@pytest.mark.parametrize("change, field", [
    (lambda d: d["objects"]["flashlight"].update(default="garage"), "objects.flashlight.default"),
    (lambda d: d["objects"]["flashlight"].update(colour=[1, 2]), "objects.flashlight.colour"),
    (lambda d: d["objects"]["flashlight"].update(article="le"), "objects.flashlight.article"),
    (lambda d: d["objects"]["flashlight"].update(attributes=[3]), "objects.flashlight.attributes"),
    (lambda d: d["objects"]["flashlight"].update(colr=[1, 2, 3]), "objects.flashlight.colr"),
    (lambda d: d["objects"].update({"Torch (big)": {"default": "workbench"}}), "objects.Torch (big)"),
    (lambda d: d["locations"]["workbench"].pop("approach"), "locations.workbench.approach"),
    (lambda d: d["locations"]["workbench"].update(center=[1, "x"]), "locations.workbench.center"),
    (lambda d: d["locations"].pop("user"), "locations"),
    (lambda d: d.update(disposal="garage"), "disposal"),
    (lambda d: d.update(navigable=["workbench", "attic"]), "navigable"),
    (lambda d: d.update(robot={"start": "attic"}), "robot.start"),
    (lambda d: d.update(objects={"workbench": {"default": "workbench"}}), "objects.workbench"),
    (lambda d: d.update(object={}), "object"),
])
def test_each_kind_of_kitchen_file_mistake_is_one_line_naming_its_field(change, field):
    data = _workshop()
    change(data)
    with pytest.raises(KitchenError) as error:
        kitchen_from_dict(data, "my_kitchen.yaml")
    text = str(error.value)
    assert "\n" not in text and text.startswith(f"my_kitchen.yaml: {field}"), text


def test_attributes_and_disposal_are_read_from_the_kitchen_file():
    kitchen = load_kitchen(WORKSHOP)
    assert kitchen.disposal == "scrap bin" and "scrap bin" not in kitchen.surfaces
    assert kitchen.object("flashlight").about == "tool, gives light"
    assert load_kitchen().disposal == "trash can"
    assert load_kitchen().object("apple").about == "fruit, snack, healthy, sweet"


def test_a_foreign_kitchen_keeps_only_the_prompt_examples_it_can_run(tmp_path):
    vocabulary = load_vocabulary(WORKSHOP)       # prompt.yaml names the built-in kitchen
    assert all(all(s in vocabulary.skills for s in e.steps) for e in vocabulary.prompt.examples)
    prompt = tmp_path / "prompt.yaml"
    prompt.write_text(yaml.safe_dump({"preamble": "", "examples": [
        {"instruction": "Bring me the apple.", "steps": ["find an apple", "done"]}]}))
    with pytest.raises(ConfigError, match="write examples for your kitchen there"):
        load_vocabulary(WORKSHOP, prompt_file=prompt)
    typo = tmp_path / "typo.yaml"
    typo.write_text(yaml.safe_dump({"preamble": "x", "examples": [
        {"instruction": "Bring me the apple.", "steps": ["find an aple", "done"]}]}))
    with pytest.raises(ConfigError, match="not skills"):     # the built-in kitchen: strict
        load_vocabulary(prompt_file=typo)


def test_the_lexicon_is_large_and_disjoint_from_every_development_kitchen(lexicon):
    assert len(lexicon.objects) >= 300 and len(lexicon.places) >= 40
    for path in sorted((CONFIG / "dev_kitchens").glob("*.yaml")):
        if path.stem.endswith("_tasks"):
            continue
        shared = kitchen_names(load_kitchen(path)) & lexicon.names
        assert not shared, f"{path.name} uses names of the training lexicon: {sorted(shared)}"


def test_random_kitchens_are_valid_and_every_generated_plan_replays(lexicon):
    rng = random.Random(3)
    for _ in range(20):
        kitchen = random_kitchen(lexicon, rng)
        assert 5 <= len(kitchen.objects) <= 20 and 3 <= len(kitchen.surfaces) <= 7
        assert kitchen.disposal in kitchen.locations
        skills = load_skills(kitchen)
        generator = PlanDataGenerator(kitchen, skills, kitchen_lexicon(kitchen, lexicon),
                                      seed=rng.randrange(1000), scene_refresh=True)
        for family in ("nl_nouns", "nl_verbs", "crowd", "long_horizon", "negation"):
            dialogue = generator.draw(family)
            if dialogue is None:
                continue
            from saycan_ros.core.world import SymbolicWorld
            world = SymbolicWorld(kitchen, dialogue.init)
            assert _replays_to(dialogue.goal, world, dialogue.steps[:-1], skills)
            assert all(o in dialogue.scene for o in kitchen.objects
                       if world.objects.get(o) in kitchen.surfaces)


def test_many_kitchen_dialogues_mix_kitchens_and_reproduce(lexicon, kitchen, skills):
    from saycan_ros.learning.planner_data import load_lexicon

    def draw(seed):
        builtin = PlanDataGenerator(kitchen, skills, load_lexicon(kitchen), seed=seed)
        return ManyKitchenGenerator(lexicon, seed=seed, builtin=builtin, builtin_share=0.25
                                    ).dialogues(80)
    first = draw(0)
    assert [d.instruction for d in first] == [d.instruction for d in draw(0)]
    builtin = sum("far counter" in d.scene or "close counter" in d.scene for d in first)
    assert builtin == 20            # a share of dialogues, though a random kitchen gives 4 a draw
    assert sum(d.kitchen == "home" for d in first) == 20
    assert len({d.scene.split(".")[1] for d in first}) > 15      # many different kitchens


def test_a_user_kitchen_gets_categories_from_its_attributes(lexicon):
    kitchen = load_kitchen(WORKSHOP)
    lex = kitchen_lexicon(kitchen, lexicon)
    assert "drink" in lex.objects["root beer"]["attributes"]
    assert "tool" in lex.objects["flashlight"]["attributes"]
    generator = PlanDataGenerator(kitchen, load_skills(kitchen), lex, seed=0)
    assert len(generator.dialogues(30)) == 30


def test_saycan_check_reports_a_kitchen_and_refuses_a_broken_one(tmp_path, capsys):
    from saycan_ros.cli.main import main
    assert main(["check", "--kitchen", str(WORKSHOP)]) == 0
    out = capsys.readouterr().out
    assert "throw away: scrap bin" in out and "skills: 49" in out
    assert "at(socket wrench, scrap bin): find a socket wrench → pick up the socket wrench → " \
           "go to the scrap bin → put down the socket wrench" in out
    broken = _workshop()
    broken["objects"]["flashlight"]["default"] = "garage"
    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump(broken))
    assert main(["check", "--kitchen", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "objects.flashlight.default: unknown location 'garage'" in err


def test_a_task_file_names_its_kitchen(tmp_path):
    from saycan_ros.core.tasks import TaskError, task_file_kitchen
    tasks = CONFIG / "dev_kitchens" / "workshop_tasks.yaml"
    assert task_file_kitchen(tasks) == str(WORKSHOP.resolve())
    assert task_file_kitchen(CONFIG / "tasks.yaml") == ""
    orphan = tmp_path / "tasks.yaml"
    orphan.write_text("kitchen: nowhere.yaml\ninstructions: []\n")
    with pytest.raises(TaskError, match="no such file"):
        task_file_kitchen(orphan)


def test_every_node_that_reads_the_kitchen_gets_it_from_saycan_run():
    import argparse
    from saycan_ros.cli.run import node_params
    args = argparse.Namespace(world="symbolic", seed=0, strategy="saycan", max_steps=20,
                              model="smollm2-135m")
    params = node_params(args, "/k.yaml")
    assert {n for n, p in params.items() if p.get("kitchen_file") == "/k.yaml"} == {
        "llm_scorer", "affordance", "skill_executor", "planner"}


def test_the_detailed_scene_line_says_what_objects_are_and_where_trash_goes():
    from saycan_ros.core.world import SymbolicWorld
    from saycan_ros.planning.scene import scene_of
    kitchen = load_kitchen(WORKSHOP)
    world = SymbolicWorld(kitchen)
    plain, detailed = scene_of(kitchen, world), scene_of(kitchen, world, details=True)
    assert "flashlight (tool, gives light)" in detailed and "(" not in plain
    assert detailed.endswith("Trash goes in the scrap bin.")
    assert detailed.replace(" (tool, gives light)", "").startswith(plain.split(" workbench:")[0])
    builtin = load_kitchen()
    detailed_builtin = scene_of(builtin, SymbolicWorld(builtin), details=True)
    assert "sponge (cleaning)" in detailed_builtin and "apple (fruit, snack" in detailed_builtin
    assert detailed_builtin.endswith("Trash goes in the trash can.")


@pytest.mark.parametrize("path", [None, *DEV_KITCHENS], ids=["builtin", "workshop", "nursery", "cafe"])
def test_the_scorer_fits_the_detailed_scene_line_to_its_prompt(path):
    """The planner node sends the detailed line; a prompt trained without details sees exactly
    the plain line of the same state, in every state; a plain line to a prompt that wants the
    details is an error where it shows (a kitchen with a disposal place)."""
    from saycan_ros.planning.scene import fit_scene, scene_line
    kitchen = load_kitchen(path)
    rng = random.Random(0)
    places = list(kitchen.locations)
    for _ in range(30):
        objects = {o: rng.choice(places) for o in kitchen.objects if rng.random() < 0.8}
        holding = rng.choice([None, *kitchen.objects])
        objects.pop(holding, None)
        robot_at = rng.choice([None, *places])
        plain = scene_line(kitchen, robot_at, holding, objects)
        detailed = scene_line(kitchen, robot_at, holding, objects, details=True)
        assert fit_scene(kitchen, detailed, False) == plain
        assert fit_scene(kitchen, detailed, True) == detailed
        assert fit_scene(kitchen, plain, False) == plain
        if kitchen.disposal:
            with pytest.raises(ValueError, match="trained with it"):
                fit_scene(kitchen, plain, True)
    assert fit_scene(kitchen, "", True) == fit_scene(kitchen, "", False) == ""


def test_a_prompt_asks_for_the_detailed_scene_and_training_data_follows_it(lexicon):
    from saycan_ros.planning.prompt import load_prompt, prompt_from_dict
    assert load_prompt("prompt_adapter_step_details.yaml").scene_details
    assert not load_prompt("prompt_adapter_step.yaml").scene_details
    with pytest.raises(ConfigError, match="scene_details"):
        prompt_from_dict({"preamble": "x", "examples": [], "scene_details": "yes"})
    generator = ManyKitchenGenerator(lexicon, seed=1, scene_refresh=True, scene_details=True)
    scenes = [d.scene for d in generator.dialogues(20)]
    assert all("Trash goes in the" in s for s in scenes)
    assert sum("(" in s for s in scenes) >= 15          # lexicon objects carry their words


def test_a_malformed_lexicon_entry_is_one_line_naming_it(tmp_path):
    bad = tmp_path / "lexicon.yaml"
    data = yaml.safe_load((CONFIG / "planner_lexicon.yaml").read_text(encoding="utf-8"))
    data["objects"]["banana"] = "fruit"
    bad.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match="objects.banana: expected a list"):
        load_kitchen_lexicon(bad)
    data["objects"]["banana"] = ["fruit", "fruity_thing"]
    bad.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=r"objects.banana: unknown attributes \['fruity_thing'\]"):
        load_kitchen_lexicon(bad)
