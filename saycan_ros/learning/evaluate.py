"""Evaluations of the learned pick skill and its affordance, on seeds no training run uses.

``eval_skill_pick``: success of the BC policy on fresh feasible starts (random location,
1-6 distractors, as crowded as the task scenes), per object; the last line of ``saycan eval-skill pick`` is
``skill pick: success K/N (P%)``.

``eval_value``: the calibrated value at the start state against the BC policy's actual outcome
from that start, over held-out starts (half feasible, half impossible): AUROC, expected
calibration error, Brier score, log loss, and a reliability diagram.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

import numpy as np

from saycan_ros.learning import repo_root, resolve_model
from saycan_ros.learning.data import EVAL_SEED_BASE, SCENE_DISTRACTORS

SKILL_SEED_OFFSET = 0                  # eval-skill: 900_000_000 + seed * 1_000_000 + k
VALUE_SEED_OFFSET = 50_000_000         # eval-value: 950_000_000 + seed * 1_000_000 + k
EVAL_DISTRACTORS = SCENE_DISTRACTORS    # other objects beside the target: as in the task scenes


def eval_skill_pick(episodes_per_object: int = 20, seed: int = 0, weights=None, n_envs: int = 16,
                    threads: int = 1, progress: bool = True, record: bool = False,
                    distractors: tuple[int, int] = EVAL_DISTRACTORS,
                    log: Callable[[str], None] = print) -> dict:
    """Roll the shipped (or given) BC policy out on ``episodes_per_object`` feasible starts
    per object; returns per-object and total success."""
    import torch

    from saycan_ros.learning import data as D
    from saycan_ros.learning.modeling_bc import PickPolicy
    torch.set_num_threads(threads)
    path = resolve_model(weights, "bc_pick.pt")
    policy = PickPolicy.load(path)
    objects = D.pick_objects()
    base = EVAL_SEED_BASE + SKILL_SEED_OFFSET + seed * 1_000_000
    specs = D.feasible_starts(objects, episodes_per_object, base)
    t = time.time()
    roll = D.rollout(policy, specs, n_envs=n_envs, progress=progress, desc="eval pick",
                     distractors=tuple(distractors))
    per_object = {}
    for obj in objects:
        m = np.array([s.object == obj for s in specs])
        per_object[obj] = {"success": int(roll.success[m].sum()), "episodes": int(m.sum())}
    per_location = {}
    for where in sorted(set(roll.locations)):
        m = np.array([loc == where for loc in roll.locations])
        per_location[where] = {"success": int(roll.success[m].sum()), "episodes": int(m.sum())}
    k, n = int(roll.success.sum()), len(specs)
    result = {"skill": "pick", "weights": path.name, "seed": seed,
              "env_seeds": [base, base + len(specs) - 1], "episodes_per_object": episodes_per_object,
              "distractors": list(distractors),
              "success": k, "episodes": n, "rate": k / n if n else 0.0,
              "min_object_rate": min(v["success"] / v["episodes"] for v in per_object.values()),
              "mean_length": float(roll.length.mean()),
              "mean_length_success": float(roll.length[roll.success].mean()) if k else None,
              "per_object": per_object, "per_location": per_location, "seconds": round(time.time() - t, 1)}
    if record:
        from saycan_ros.learning.train_bc import update_record
        update_record(path, "eval_skill_pick", result)
    return result


# -- value ---------------------------------------------------------------------------------------
def eval_value(episodes: int = 1800, seed: int = 0, weights=None, policy=None, n_envs: int = 16,
               threads: int = 1, png="docs/value_reliability.png", progress: bool = True,
               record: bool = False, distractors: tuple[int, int] = EVAL_DISTRACTORS,
               elsewhere: float | None = None, log: Callable[[str], None] = print) -> dict:
    """Calibrated V(s0, skill) against the BC policy's actual success from s0, on held-out
    mixed starts. Writes a reliability diagram to ``png`` (relative to the repository root).
    ``elsewhere``: the share of starts with the other shelves stocked (None: the value
    configuration's)."""
    import torch

    from saycan_ros.learning import data as D
    from saycan_ros.learning.configuration_value import ValueConfig
    from saycan_ros.learning.modeling_bc import PickPolicy
    from saycan_ros.learning.modeling_value import (PickValue, auroc, brier,
                                                    expected_calibration_error, log_loss,
                                                    reliability_bins)
    torch.set_num_threads(threads)
    vpath = resolve_model(weights, "value_pick.pt")
    value = PickValue.load(vpath)
    ppath = resolve_model(policy, "bc_pick.pt")
    bc = PickPolicy.load(ppath)
    try:
        vcfg = ValueConfig.load()
        fraction, reasons = vcfg.data.feasible_fraction, tuple(vcfg.data.reasons)
        stocked = vcfg.data.elsewhere
    except Exception:  # noqa: BLE001 - fall back to the defaults
        fraction, reasons, stocked = 0.5, D.PICK_REASONS, 0.0
    elsewhere = stocked if elsewhere is None else float(elsewhere)
    base = EVAL_SEED_BASE + VALUE_SEED_OFFSET + seed * 1_000_000
    specs = D.mixed_starts(episodes, base, fraction, reasons)
    t = time.time()
    env = D.make_pick_env(value.image_size, distractors=tuple(distractors), elsewhere=elsewhere)
    images, states, skills = [], [], []
    for spec in specs:
        obs, _ = D.reset_to(env, spec)
        images.append(obs["image"])
        states.append(obs["state"])
        skills.append(obs["skill"])
    images, states = np.stack(images), np.stack(states)
    raw = np.concatenate([value.raw(images[i:i + 256], states[i:i + 256], skills[i:i + 256])
                          for i in range(0, len(skills), 256)])
    p = value.calibration(raw)
    roll = D.rollout(bc, specs, n_envs=n_envs, progress=progress, desc="eval value",
                     distractors=tuple(distractors), elsewhere=elsewhere)
    y = roll.success.astype(float)
    reason = np.array([s.reason or "feasible" for s in specs])
    by_start = {}
    for r in ["feasible", *reasons]:
        m = reason == r
        if m.any():
            by_start[r] = {"episodes": int(m.sum()), "bc_success_rate": float(y[m].mean()),
                           "mean_affordance": float(p[m].mean()), "max_affordance": float(p[m].max()),
                           "min_affordance": float(p[m].min())}
    feas = reason == "feasible"
    result = {"weights": vpath.name, "policy": ppath.name, "seed": seed,
              "env_seeds": [base, base + len(specs) - 1], "episodes": len(specs),
              "distractors": list(distractors), "elsewhere": elsewhere, "bc_success": int(y.sum()),
              "v_min": value.calibration.v_min, "v_max": value.calibration.v_max,
              "auroc": auroc(p, y), "auroc_raw": auroc(raw, y),
              "ece": expected_calibration_error(p, y), "brier": brier(p, y), "log_loss": log_loss(p, y),
              "auroc_feasible_only": auroc(p[feas], y[feas]) if feas.any() else None,
              "by_start": by_start, "bins": reliability_bins(p, y),
              "seconds": round(time.time() - t, 1)}
    if png:
        png_path = Path(png)
        if not png_path.is_absolute():
            png_path = repo_root() / png_path
        plot_reliability(p, y, result, png_path)
        result["png"] = str(png_path)
    if record:
        from saycan_ros.learning.train_bc import update_record
        update_record(vpath, "eval_value", {k: v for k, v in result.items() if k != "png"})
    return result


def format_value_result(result: dict) -> str:
    lines = [f"{'start':<14} {'n':>4}  {'BC success':>10}  {'mean affordance':>15}"]
    for r, v in result["by_start"].items():
        lines.append(f"{r:<14} {v['episodes']:>4}  {v['bc_success_rate']:>10.3f}  "
                     f"{v['mean_affordance']:>15.3f}")
    lines.append(f"v_min {result['v_min']:.4f}  v_max {result['v_max']:.4f}  "
                 f"brier {result['brier']:.4f}  log loss {result['log_loss']:.4f}")
    if result.get("png"):
        lines.append(f"reliability diagram: {result['png']}")
    lines.append(f"value pick: AUROC {result['auroc']:.4f}  ECE {result['ece']:.4f}  "
                 f"(n={result['episodes']}, BC success {result['bc_success']}/{result['episodes']})")
    return "\n".join(lines)


def plot_reliability(p, y, result: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(10, 4.2))
    bins = result["bins"]
    xs = [b["mean_prediction"] for b in bins if b["n"]]
    ys = [b["observed"] for b in bins if b["n"]]
    ns = [b["n"] for b in bins if b["n"]]
    ax.plot([0, 1], [0, 1], "--", color="grey", lw=1, label="perfect calibration")
    ax.bar([(b["lo"] + b["hi"]) / 2 for b in bins if b["n"]], ys, width=0.1, alpha=0.35,
           edgecolor="k", label="observed success per bin")
    ax.plot(xs, ys, "o-", color="C3", label="mean affordance vs. observed")
    for x_, y_, n_ in zip(xs, ys, ns):
        ax.annotate(str(n_), (x_, y_), textcoords="offset points", xytext=(0, 6), ha="center", fontsize=8)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.08)
    ax.set_xlabel("calibrated affordance clamp((v - v_min)/(v_max - v_min), 0, 1)")
    ax.set_ylabel("BC policy success rate")
    ax.set_title(f"pick value: AUROC {result['auroc']:.4f}, ECE {result['ece']:.4f} "
                 f"(n={result['episodes']})", fontsize=10)
    ax.legend(loc="upper left", fontsize=8)
    p, y = np.asarray(p), np.asarray(y).astype(bool)
    edges = np.linspace(0, 1, 21)
    ax2.hist([p[y], p[~y]], bins=edges, stacked=True, label=["BC succeeded", "BC failed"],
             color=["C2", "C7"])
    ax2.set_yscale("log")
    ax2.set_xlabel("calibrated affordance")
    ax2.set_ylabel("start states")
    ax2.set_title(f"v_min {result['v_min']:.3f}, v_max {result['v_max']:.3f}", fontsize=10)
    ax2.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
