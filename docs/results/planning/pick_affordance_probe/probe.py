"""The learned pick affordance against the learned pick's outcome, in the simulated kitchen.

For each seed (placements and appearance) and each shelf location of the default layout, the
robot drives to the location, the value function (config/affordance_sim.yaml) rates the pick of
every object there, then each pick is tried with the BC policy from a fresh reset. One JSON line
per pick: seed, location, object, affordance p, success.

    python docs/results/planning/pick_affordance_probe/probe.py 10 40 > rows.jsonl
"""
import json
import sys

import torch

from saycan_ros.planning.affordance import AffordanceContext, load_affordance
from saycan_ros.planning.vocabulary import load_vocabulary
from saycan_ros.worlds.simulated import SimulatedKitchen

SHELVES = ("close counter", "far counter", "table")


def main(first_seed: int, end_seed: int) -> None:
    torch.set_num_threads(1)
    skills = load_vocabulary().skills
    affordance = load_affordance("affordance_sim.yaml")
    sim = SimulatedKitchen(pick="learned")
    for seed in range(first_seed, end_seed):
        for location in SHELVES:
            sim.reset(None, seed=seed)
            here = [o for o, at in sim.objects.items() if at == location]
            sim.drive_to(location)
            context = AffordanceContext(sim.kitchen, sim.snapshot(), sim.observation())
            picks = [skills.get(f"pick up the {o}") for o in here]
            probabilities = affordance.score(picks, [], context)[0]
            for obj, p in zip(here, probabilities):
                sim.reset(None, seed=seed)
                sim.drive_to(location)
                ok = sim.pick(obj).success
                print(json.dumps({"seed": seed, "loc": location, "obj": obj, "p": float(p),
                                  "ok": ok}), flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
