"""Would a temperature on the step distribution (p ** (1/T), renormalised) shrink the conformal
sets at the same coverage? Reads `saycan calibrate --details FILE`: the share of steps asking is
judged on half of the calibration plans, the threshold taken from the other half, coverage and
asking measured on the held-aside plans.

    python docs/results/asking/temperature.py FILE.json.gz [EPSILON]
"""
import gzip
import json
import sys

import numpy as np

from saycan_ros.planning.asking import conformal_threshold


def sharpen(p, t):
    p = np.asarray(p, dtype=float)
    logp = np.where(p > 0, np.log(np.maximum(p, 1e-300)) / t, -np.inf)
    e = np.exp(logp - logp.max())
    return e / e.sum()


def score(step, t):
    p = sharpen(step["probabilities"], t)
    return 1.0 - (max(p[i] for i in step["right"]) if step["right"] else 0.0)


def threshold(plans, t, eps):
    return conformal_threshold([score(step, t) for plan in plans for step in plan["steps"]], eps)


def measure(plans, t, q):
    """Step coverage, share of steps whose set is not one skill, share of plans that ask."""
    covered, asking, plans_asking = [], [], []
    for plan in plans:
        asks = False
        for step in plan["steps"]:
            size = int((sharpen(step["probabilities"], t) >= 1 - q - 1e-12).sum())
            covered.append(score(step, t) <= q + 1e-12)
            asking.append(size != 1)
            asks |= size != 1
        plans_asking.append(asks)
    return np.mean(covered), np.mean(asking), np.mean(plans_asking)


def main():
    plans = json.load(gzip.open(sys.argv[1]))
    eps = float(sys.argv[2]) if len(sys.argv) > 2 else 0.15
    cal = [p for p in plans if p["split"] == "calibration"]
    held = [p for p in plans if p["split"] == "heldout"]
    judge, fit = cal[::2], cal[1::2]
    print(f"epsilon {eps}: {len(judge)} calibration plans judge, {len(fit)} set the threshold, "
          f"{len(held)} held aside")
    for t in (2.0, 1.5, 1.0, 0.8, 0.6, 0.5, 0.4, 0.3):
        _, judged, _ = measure(judge, t, threshold(judge, t, eps))
        q = threshold(fit, t, eps)
        cov, steps, asked = measure(held, t, q)
        print(f"T {t:3}: judged steps asking {judged:.3f} | held aside: p >= {1 - q:.3f}, "
              f"coverage {cov:.3f}, steps asking {steps:.3f}, plans asking {asked:.3f}")


if __name__ == "__main__":
    main()
