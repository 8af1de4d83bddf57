"""The learned pick affordance in the built-in kitchen's own scenes, ratings only (no picks).

For each seed (placements and appearance) and each shelf of the default layout, the robot
drives there and the value function rates the pick of every object: those on this shelf are
within reach (probe.py: the BC policy picks 449 of 450 of them), those on the other shelves
are not (the head camera may still see them). One summary for the weights given.

    python docs/results/planning/pick_affordance_probe/kitchen_ratings.py 10 40 models/value_pick.pt
"""
import sys

import numpy as np
import torch

from saycan_ros.learning.modeling_value import auroc
from saycan_ros.planning.affordance import AffordanceContext
from saycan_ros.planning.vocabulary import load_vocabulary
from saycan_ros.skills.pick.affordance import LearnedPickAffordance
from saycan_ros.worlds.simulated import SimulatedKitchen

SHELVES = ("close counter", "far counter", "table")


def main(first_seed: int, end_seed: int, weights: str) -> None:
    torch.set_num_threads(1)
    skills = load_vocabulary().skills
    affordance = LearnedPickAffordance(weights=weights)
    sim = SimulatedKitchen(pick="expert")
    names = list(sim.kitchen.objects)
    picks = [skills.get(f"pick up the {name}") for name in names]
    here, elsewhere, by_shelf = [], [], {shelf: [] for shelf in SHELVES}
    for seed in range(first_seed, end_seed):
        for shelf in SHELVES:
            sim.reset(None, seed=seed)
            sim.drive_to(shelf)
            context = AffordanceContext(sim.kitchen, sim.snapshot(), sim.observation())
            for name, p in zip(names, affordance.evaluate(picks, context)[0]):
                if sim.objects[name] == shelf:
                    here.append(p)
                    by_shelf[shelf].append(p)
                else:
                    elsewhere.append(p)
    h, e = np.array(here), np.array(elsewhere)
    labels = np.r_[np.ones(len(h)), np.zeros(len(e))]
    print(f"{weights}: AUROC {auroc(np.r_[h, e], labels):.3f}")
    print(f"  on this shelf   n={len(h)} mean {h.mean():.3f}; below 0.02/0.05/0.1/0.2/0.5: "
          f"{[int((h < t).sum()) for t in (0.02, 0.05, 0.1, 0.2, 0.5)]}")
    print(f"  on other shelves n={len(e)} mean {e.mean():.3f}; above 0.5/0.8/0.95: "
          f"{[int((e > t).sum()) for t in (0.5, 0.8, 0.95)]}")
    for shelf, values in by_shelf.items():
        v = np.array(values)
        print(f"  {shelf}: mean {v.mean():.3f}, {int((v < 0.5).sum())} of {len(v)} below 0.5")


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3])
