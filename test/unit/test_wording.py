"""Reading the instruction when asking (saycan_ros.planning.wording): a definite description
that fits several things is asked about, whatever the scores; a choice the person left to the
robot is not."""
from types import SimpleNamespace

import numpy as np
import pytest

from saycan_ros.core.world import SymbolicWorld
from saycan_ros.planning.affordance import load_affordance
from saycan_ros.planning.asking import Answer, ConformalAsk
from saycan_ros.planning.local import LocalAffordance, WorldExecutor
from saycan_ros.planning.planner import Planner
from saycan_ros.planning.wording import Wording, singular
from saycan_ros.strategies.registry import make_strategy


@pytest.fixture(scope="module")
def wording(vocabulary):
    return Wording.from_kitchen(vocabulary.kitchen)


def _state(vocabulary, robot_at="table", holding=None, **moved):
    world = SymbolicWorld(vocabulary.kitchen)
    objects = dict(world.snapshot().objects)
    objects.update({k.replace("_", " "): v for k, v in moved.items()})
    return SimpleNamespace(robot_at=robot_at, holding=holding, objects=objects)


def _fits(wording, text, state=None):
    return {d.text: set(d.fits) for d in wording.descriptions(text, state)}


def test_singular():
    assert [singular(w) for w in ("cans", "berries", "boxes", "glass", "chips", "is")] == \
        ["can", "berry", "box", "glass", "chip", "is"]


def test_a_definite_description_fits_every_thing_its_words_name(wording, vocabulary):
    state = _state(vocabulary)
    assert _fits(wording, "Bring me the chips.", state) == {
        "chips": {"rice chips", "jalapeno chips", "multigrain chips"}}
    assert _fits(wording, "Go to the counter.") == {"counter": {"close counter", "far counter"}}
    assert _fits(wording, "Bring me the fruit.", state) == {"fruit": {"apple", "orange"}}
    # the things there, when "from the L" names one place
    at_table = {o for o, where in state.objects.items()
                if where == "table" and vocabulary.kitchen.objects[o].category == "drink"}
    assert len(at_table) > 1
    assert _fits(wording, "Bring me the drink from the table.", state) == {"drink": at_table}


@pytest.mark.parametrize("text", [
    "Bring me the rice chips.",              # the whole name
    "Bring me the orange.",                  # a whole name beats a word of another
    "Throw away all the cans on the table.",  # all of them
    "Move the sodas to the table.",          # a plural no name spells: all of them
    "Bring me every bag of chips.",          # no definite description
    "Grab the rice chips from the counter.",  # where it is, not where it goes
    "Throw away the can you are holding.",   # the one in the hand
])
def test_what_leaves_nothing_open(wording, vocabulary, text):
    assert _fits(wording, text, _state(vocabulary, holding="pepsi can")) == {}


def _skills(vocabulary, texts):
    return [vocabulary.skills.get(t) for t in texts]


def test_readings_follow_the_top_skill_or_the_way_to_each_thing(wording, vocabulary):
    texts = ["find the rice chips", "find the jalapeno chips", "find the multigrain chips",
             "pick up the rice chips", "go to the close counter", "go to the far counter",
             "put down the coke can", "done"]
    skills = _skills(vocabulary, texts)
    p = np.array([0.9, 0.02, 0.01, 0.0, 0.03, 0.02, 0.01, 0.01])
    state = _state(vocabulary)
    got = wording.readings("Bring me the chips.", [], skills, p, state)
    assert [texts[i] for i in got] == ["find the rice chips", "find the jalapeno chips",
                                       "find the multigrain chips"]
    # settled once a step named one of them
    assert wording.readings("Bring me the chips.", _skills(vocabulary, ["find the rice chips"]),
                            skills, p, state) == []
    # "the counter" while the top skill puts the coke down where the robot stands: the way to
    # each counter; at the close counter already, putting down here is that reading
    p = np.array([0.0, 0.0, 0.0, 0.0, 0.05, 0.03, 0.9, 0.02])
    holding = _state(vocabulary, robot_at="table", holding="coke can")
    got = wording.readings("Put the coke on the counter.", [], skills, p, holding)
    assert {texts[i] for i in got} == {"go to the close counter", "go to the far counter"}
    # a step that picks up the orange does not decide which counter: not asked yet
    orange = _skills(vocabulary, ["pick up the orange", "go to the close counter",
                                  "go to the far counter"])
    assert wording.readings("Take the orange to the counter.", [], orange,
                            np.array([0.8, 0.1, 0.1]), state) == []
    assert len(wording.readings("Take the orange to the counter.", orange[:1], orange,
                                np.array([0.0, 0.6, 0.4]), state)) == 2
    p[4] = 0.0                                 # going where it stands changes nothing
    here = _state(vocabulary, robot_at="close counter", holding="coke can")
    got = wording.readings("Put the coke on the counter.", [], skills, p, here)
    assert [texts[i] for i in got] == ["put down the coke can", "go to the far counter"]


def test_my_that_this_and_your_are_definite(wording, vocabulary):
    state = _state(vocabulary)
    assert [d.fits for d in wording.descriptions("Bring me my chips.", state)] == \
        [("rice chips", "jalapeno chips", "multigrain chips")]
    assert len(wording.descriptions("Throw that can away.", state)[0].fits) == 4
    assert wording.descriptions("Bring me my green tea.", state) == []     # one fits
    assert wording.descriptions("Bring me a drink that has caffeine.", state) == []
    holding = _state(vocabulary, robot_at="table", holding="redbull can")
    assert wording.descriptions("Put this can in the trash.", holding) == []   # the held one
    assert wording.descriptions("Put your drink on the table.", holding) == []
    assert len(wording.descriptions("Throw that can away.", holding)[0].fits) == 4


def test_what_the_words_exclude_is_no_option(wording, vocabulary):
    assert wording.excluded("Put some fruit on the close counter, but not the orange.") == \
        {"orange"}
    assert wording.excluded("Throw away every bag of chips except the multigrain ones.") == \
        {"multigrain chips"}
    assert wording.excluded("I want something without caffeine.") == set()   # no name
    assert wording.excluded("I can't find the apple, bring it to me.") == set()
    assert wording.excluded("Bring me a soda that isn't the coke.") == {"coke can"}
    skills = _skills(vocabulary, ["find an orange", "done", "find an apple"])
    assert wording.not_excluded("Some fruit, but not the orange.", skills) == [1, 2]
    assert wording.not_excluded("Some fruit, but not the orange.", skills[:1]) == [0]


def test_a_choice_left_to_the_robot(wording, vocabulary):
    finds = _skills(vocabulary, ["find a coke can", "find a pepsi can"])
    state = _state(vocabulary)
    assert wording.left_to_robot("Bring me a cola, either one.", finds, state)
    assert wording.left_to_robot("Bring me a soda.", finds, state)
    assert not wording.left_to_robot("Bring me the cola.", finds, state)    # which one?
    assert wording.left_to_robot("Bring me two sodas.", finds, state)       # a number of them
    assert wording.left_to_robot("Put 3 drinks on the table.", finds, state)
    assert wording.left_to_robot("Tráeme una bebida.", finds, state)        # "una"
    assert wording.left_to_robot("My stomach is growling.", finds, state)   # names nothing
    assert not wording.left_to_robot("Bring me that.", finds, state)        # points at one
    assert not wording.left_to_robot("Tráeme la cola.", finds, state)       # "la": one
    assert not wording.left_to_robot("I spilled my coke.", finds, state)    # names the coke
    assert not wording.left_to_robot("Bring me the two sodas.", _skills(
        vocabulary, ["find a coke can", "find a pepsi can", "find a 7up can"]), state)
    assert not wording.left_to_robot("Throw away the can.", finds, state)   # "the can": open
    both = _skills(vocabulary, ["find the multigrain chips", "find an apple"])
    assert wording.left_to_robot("Bring me the multigrain chips and the apple.", both, state)
    assert not wording.left_to_robot("Bring me the multigrain chips.", both, state)
    # "from the far counter": only if each of them is there
    where = state.objects
    assert where["coke can"] == "far counter" and where["water bottle"] != "far counter"
    assert wording.left_to_robot("Bring me all the drinks from the far counter.", finds, state)
    assert not wording.left_to_robot("Bring me all the drinks from the far counter.",
                                     _skills(vocabulary, ["find a coke can",
                                                          "find a water bottle"]), state)
    # picks of what lies at hand: only where the person asked for any of what the words say
    mixed = _skills(vocabulary, ["find a coke can", "pick up the pepsi can"])
    assert wording.left_to_robot("Bring me a soda.", mixed, state)
    assert wording.left_to_robot("I'd like a pair of colas.", mixed, state)
    assert not wording.left_to_robot("My stomach is growling.", mixed, state)  # names nothing
    assert not wording.left_to_robot("Bring me the cola.", mixed, state)
    with_water = _skills(vocabulary, ["find a coke can", "pick up the water bottle"])
    assert not wording.left_to_robot("Bring me a soda.", with_water, state)   # water: no soda
    snacks = _skills(vocabulary, ["pick up the energy bar", "find the multigrain chips"])
    assert wording.left_to_robot("I want a healthy snack.", snacks, state)
    assert not wording.left_to_robot("I want a healthy snack.", _skills(
        vocabulary, ["pick up the green tea", "find the multigrain chips"]), state)
    assert not wording.left_to_robot("Bring me a soda.", _skills(
        vocabulary, ["pick up the coke can", "go to the table"]), state)


def test_what_the_words_describe(wording):
    assert wording.described("I want a healthy snack.") == \
        {"apple", "orange", "multigrain chips", "energy bar"}    # not the green tea
    assert wording.described("Bring me two sodas and the sponge.") >= \
        {"coke can", "7up can", "sponge"}
    assert "water bottle" not in wording.described("Bring me two sodas and the sponge.")
    assert wording.described("My stomach is growling.") == set()


class Sure:
    """A language model sure of one skill at each step (p 0.9), following a script."""

    def __init__(self, script):
        self.script = script

    def score(self, instruction, history, skills, min_state_revision=0, scene=""):
        target = self.script[min(len(history), len(self.script) - 1)]
        probs = np.array([0.9 if s == target else 0.1 / (len(skills) - 1) for s in skills])
        return probs, np.log(probs)


def _run(vocabulary, script, text, answer, wording=True):
    world = SymbolicWorld(vocabulary.kitchen)
    affordance = LocalAffordance(load_affordance(), world, vocabulary.skills)
    asked = []

    def person(question):
        asked.append(question)
        return Answer(answer(question))

    planner = Planner(vocabulary.skills, make_strategy("saycan", Sure(script), affordance),
                      WorldExecutor(world, vocabulary.skills), ask_policy=ConformalAsk(0.7),
                      ask=person, world_state=world.snapshot, max_steps=6,
                      wording=Wording.from_kitchen(vocabulary.kitchen) if wording else None)
    return planner.run(text), asked


def test_the_planner_asks_which_chips_though_the_model_is_sure(vocabulary):
    """The robot stands at the table by the multigrain chips: picking them up is that reading."""
    script = ["find the rice chips", "pick up the jalapeno chips", "bring it to you",
              "put down the jalapeno chips", "done"]
    result, asked = _run(vocabulary, script, "Bring me the chips.",
                         lambda q: q.options.index("find the jalapeno chips"))
    assert len(asked) == 1 and asked[0].policy == "reading"
    assert set(asked[0].options) == {"find the rice chips", "find the jalapeno chips",
                                     "pick up the multigrain chips"}
    assert result.plan == ["find the jalapeno chips"] + script[1:]
    # the scores alone: the model is sure, nobody is asked
    rice = [step.replace("jalapeno", "rice") for step in script]
    result, asked = _run(vocabulary, rice, "Bring me the chips.", lambda q: 0, wording=False)
    assert asked == [] and result.plan[0] == "find the rice chips"


def test_the_planner_does_not_ask_which_soda_when_any_will_do(vocabulary):
    class Torn(Sure):
        def score(self, instruction, history, skills, min_state_revision=0, scene=""):
            if history:
                return super().score(instruction, history, skills, min_state_revision, scene)
            probs = np.array([0.45 if s in ("find a coke can", "find a pepsi can")
                              else 0.1 / (len(skills) - 2) for s in skills])
            return probs, np.log(probs)

    result, asked = _run(vocabulary, ["done"], "Bring me a cola, either one.", lambda q: 0)
    assert asked == []
    torn = Torn(["done"])
    world = SymbolicWorld(vocabulary.kitchen)
    affordance = LocalAffordance(load_affordance(), world, vocabulary.skills)
    asked = []
    for words, expected in ((True, 0), (False, 1)):
        asked.clear()
        planner = Planner(vocabulary.skills, make_strategy("saycan", torn, affordance),
                          WorldExecutor(world, vocabulary.skills), ask_policy=ConformalAsk(0.7),
                          ask=lambda q: asked.append(q) or Answer(0), max_steps=1,
                          wording=Wording.from_kitchen(vocabulary.kitchen) if words else None)
        planner.run("Bring me a cola, either one.")
        assert len(asked) == expected
