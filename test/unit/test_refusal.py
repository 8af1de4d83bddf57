"""Saying "I can't" (saycan_ros/planning/refusal.py): impossible requests are refused with the
reason before anything moves; no possible task of any task file is refused."""
import glob
from pathlib import Path

import pytest
import yaml

from saycan_ros.core.config import ConfigError
from saycan_ros.core.kitchen import load_kitchen
from saycan_ros.planning.refusal import load_refusals

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def refusals():
    return load_refusals(load_kitchen())


def test_actions_no_skill_does_and_things_the_kitchen_lacks_are_refused_with_the_reason(
        refusals):
    assert refusals.why_not("Open the fridge.").startswith("I can't open things:")
    assert refusals.why_not("Could you please wash the dishes?").startswith(
        "I can't wash things:")
    assert refusals.why_not("Go to the table and then turn on the lights.").startswith(
        "I can't switch things on or off:")
    assert refusals.why_not("Bring me a banana.") == "I can't: there is no banana here"
    assert refusals.why_not("Throw away the paper towel.") == \
        "I can't: there are no paper towels here"


def test_the_kitchens_own_names_negations_and_compounds_are_not_refused(refusals):
    for possible in ("Bring me the lime soda.",          # "lime" is in the lexicon
                     "Bring me a lemon-lime soda.",      # a compound word, not a lemon
                     "Bring me a fruit that is not a banana.",
                     "I'd like a snack without nuts.",
                     "Bring me some water.",             # the built-in water bottle's name
                     "Make your way back to the table.",
                     "Bring me a cup of green tea.",     # a container of the kitchen's tea
                     "Get me a glass of water.",
                     "I spilled my coke, can you help me clean it up?"):
        assert refusals.why_not(possible) == "", possible


def test_no_possible_task_of_any_task_file_is_refused():
    files = sorted(glob.glob(str(ROOT / "config" / "tasks*.yaml"))) + \
        [str(ROOT / "config" / "asking_dev.yaml")] + \
        sorted(glob.glob(str(ROOT / "config" / "dev_kitchens" / "*_tasks.yaml")))
    refused = []
    for path in files:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        kitchen = data.get("kitchen")
        refusals = load_refusals(load_kitchen(Path(path).parent / kitchen if kitchen else None),
                                 synonyms={} if kitchen else None)
        refused += [(path, t["text"]) for t in data["instructions"]
                    if refusals.why_not(t["text"])]
    assert not refused, refused


def test_the_impossible_development_set(refusals):
    """config/impossible_dev.yaml: 38 of its 40 are refused (not: setting the table, wiping,
    which tasks.yaml's "Wipe the far counter." keeps off the action list)."""
    data = yaml.safe_load((ROOT / "config" / "impossible_dev.yaml").read_text(encoding="utf-8"))
    refused = [t["id"] for t in data["instructions"] if refusals.why_not(t["text"])]
    assert len(data["instructions"]) >= 15
    assert len(refused) >= 38, refused


def test_short_names_count_only_when_asked_for(refusals):
    """"pizza" (of "frozen pizza") and "grapes" (of "bunch of grapes") are everyday things too,
    but a short word is often mentioned without being asked for ("under the car")."""
    assert refusals.why_not("I'd like a slice of pizza.") == "I can't: there is no pizza here"
    assert refusals.why_not("Bring me some grapes.") == "I can't: there are no grapes here"
    assert refusals.why_not("Take the dog for a walk.") == "I can't: there is no dog here"
    for possible in ("It's too dark under this car, bring me the sponge.",
                     "Pack me a lunch: a piece of fruit, a drink and a bag of chips.",
                     "I dropped the pizza, can you help me clean it up?"):
        assert refusals.why_not(possible) == "", possible


def test_a_verb_that_is_also_a_kitchen_name_is_a_verb_before_a_determiner(refusals):
    assert refusals.why_not("Please water the plants.").startswith("I can't water plants:")
    assert refusals.why_not("Water, please.") == ""          # the kitchen's water bottle
    assert refusals.why_not("Bring me water.") == ""


def test_a_bad_refusals_file_is_one_line(tmp_path):
    bad = tmp_path / "refusals.yaml"
    bad.write_text("actions: [open, wash]\n")
    with pytest.raises(ConfigError, match="'actions' must map verb phrases"):
        load_refusals(load_kitchen(), bad)
    bad.write_text("actions: {open: open things}\nthings: phone\n")
    with pytest.raises(ConfigError, match="'things' must be a list of names"):
        load_refusals(load_kitchen(), bad)


def test_the_planner_ends_a_refused_plan_rejected_before_any_step(kitchen, skills):
    from saycan_ros.core.world import SymbolicWorld
    from saycan_ros.planning.local import WorldExecutor
    from saycan_ros.planning.planner import Planner

    class NeverAsked:
        name = "never"

        def reset(self, instruction):
            raise AssertionError("a refused instruction must not be planned")

    world = SymbolicWorld(kitchen, None)
    planner = Planner(skills, NeverAsked(), WorldExecutor(world, skills),
                      refuse=load_refusals(kitchen).why_not)
    result = planner.run("Open the fridge.")
    assert result.state == "rejected" and result.steps == [] and result.plan == []
    assert result.message.startswith("I can't open things")


def test_more_everyday_things_count_when_asked_for_and_never_as_the_kitchen_s_own_words(
        refusals):
    assert refusals.why_not("Where is my phone? Bring it to me.") == \
        "I can't: there is no phone here"
    assert refusals.why_not("Could you grab me a beer?") == "I can't: there is no beer here"
    assert refusals.why_not("I left my phone on the table, go there.") == ""   # not asked for
    nursery = load_kitchen(ROOT / "config" / "dev_kitchens" / "nursery.yaml")
    assert "toy" in " ".join(a for o in nursery.objects.values() for a in o.attributes)
    assert load_refusals(nursery, synonyms={}).why_not("Bring me a toy.") == ""   # a rattle
    assert refusals.why_not("Bring me a toy.") == "I can't: there is no toy here"
