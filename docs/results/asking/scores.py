"""Offline, on a `saycan calibrate --details` file (data version 3: clear and ambiguous plans):
how often each conformal score and each share of ambiguous plans would ask, at the same
coverage. Per setting, 20 random splits: 200 clear plans (and two thirds of the ambiguous ones
drawn) calibrate, the rest is held aside.

    python docs/results/asking/scores.py docs/results/asking/qwen05/calibration_steps.json.gz
"""
import gzip
import json
import sys

import numpy as np

from saycan_ros.planning.asking import conformal_threshold

plans = json.load(gzip.open(sys.argv[1]))
clear = [p for p in plans if p["family"] != "ambiguous"]
amb = [p for p in plans if p["family"] == "ambiguous"]


def lac(p, y):          # the shipped score: 1 - p
    return 1 - p[y]


def top_lac(p, y):      # the likeliest skill always in the set
    return 0.0 if p[y] >= max(p) else 1 - p[y]


def ratio(p, y):        # relative to the likeliest
    return 1 - p[y] / max(p)


SCORES = {"lac": lac, "top+lac": top_lac, "ratio": ratio}


def step_score(f, st):
    p = st["probabilities"]
    return min((f(p, y) for y in st["right"]), default=1.0)


def thr(f, plans, eps):
    return conformal_threshold([step_score(f, st) for pl in plans for st in pl["steps"]], eps)


def measure(f, plans, q):
    cov, asks, steps = [], [], []
    for pl in plans:
        a = False
        for st in pl["steps"]:
            p = st["probabilities"]
            size = sum(f(p, y) <= q + 1e-12 for y in range(len(p)))
            cov.append(step_score(f, st) <= q + 1e-12)
            steps.append(size != 1)
            a |= size != 1
        asks.append(a)
    return np.mean(cov), np.mean(asks), np.mean(steps)


rng = np.random.default_rng(0)
for eps in (0.1, 0.15, 0.2):
    for share in (0.0, 0.1, 0.2, 0.25):
        k = min(len(amb), int(round(share * len(clear) / (1 - share))))
        for name, f in SCORES.items():
            res = []
            for rep in range(20):
                c = [clear[i] for i in rng.permutation(len(clear))]
                a = [amb[i] for i in rng.permutation(len(amb))][:k]
                cc, ch, ac, ah = c[:200], c[200:], a[:2 * k // 3], a[2 * k // 3:]
                q = thr(f, cc + ac, eps)
                cov, _, _ = measure(f, ch + ah, q)
                _, pc, sc = measure(f, ch, q)
                _, pa, _ = measure(f, ah if ah else amb, q)   # none drawn: all of them
                res.append((q, cov, pc, sc, pa))
            r = np.mean(res, axis=0)
            print(f"eps {eps} share {share:.2f} {name:8}: q {r[0]:.3f} held cov {r[1]:.3f} | "
                  f"clear plans asking {r[2]:.3f} (steps {r[3]:.3f}) | "
                  f"ambiguous plans asking {r[4]:.3f}")
