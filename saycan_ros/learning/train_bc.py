"""``saycan train bc``: behaviour cloning of the pick policy from noise-injected expert
demonstrations (plus optional DAgger rounds), reproducible from a seed.

    saycan train bc [--config config/learning.yaml] [--seed 0] [--out models/bc_pick.pt]

Writes the weights (``.pt``) and a record (``.json``: data, config, seed, timings, metrics).
"""
from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Callable

import numpy as np

from saycan_ros.core.config import ConfigError
from saycan_ros.learning import resolve_output
from saycan_ros.learning._config_util import with_overrides
from saycan_ros.learning.configuration_bc import BCConfig

DEFAULT_OUT = "bc_pick.pt"


def _demo_spec(cfg: BCConfig) -> dict:
    d, m = cfg.data, cfg.model
    spec = {"episodes": d.episodes, "seed_base": d.seed_base, "noise": list(d.noise),
            "distractors": list(d.distractors), "image_size": m.image_size,
            "undershoot": d.undershoot}
    if m.ee_view:       # only then: the demonstrations without it keep their cache key
        spec.update(ee_view=m.ee_view, ee_view_zoom=m.ee_view_zoom)
        if m.ee_camera != "crop":
            spec["ee_camera"] = m.ee_camera
    return spec


def train_bc(config_path=None, seed: int = 0, out=None, overrides: dict | None = None,
             progress: bool = True, log: Callable[[str], None] = print) -> dict:
    """Train the policy; returns the record written next to the weights."""
    import torch
    from tqdm import tqdm

    from saycan_ros.learning import data as D
    from saycan_ros.learning.modeling_bc import (BCPolicyNet, PickPolicy, augment, autocast,
                                                 bc_loss, count_parameters, cosine_lr)
    from saycan_ros.learning.modeling_common import (preprocess_images, resolve_precision,
                                                     start_rows, training_host,
                                                     with_start_frames)
    from saycan_ros.learning.text_encoder import ENCODER_NAME, EmbeddingTable

    cfg = with_overrides(BCConfig.load(config_path), overrides)   # "train.steps": 100
    check_sampling(dict(cfg.train.oversample), cfg.train.grasp_weight)
    precision = resolve_precision(cfg.train.precision)   # rejects an unknown one up front
    out = resolve_output(out, DEFAULT_OUT)
    torch.set_num_threads(cfg.train.threads)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    t_start = time.time()

    d = cfg.data
    demos = D.cached("bc_demos", _demo_spec(cfg), lambda: D.collect_demos(
        d.episodes, d.seed_base, tuple(d.noise), tuple(d.distractors), cfg.model.image_size,
        progress, d.undershoot, cfg.model.ee_view, cfg.model.ee_view_zoom, cfg.model.ee_camera,
        workers=cfg.train.threads),
        log=log)
    t_data = time.time() - t_start
    texts = [str(t) for t in demos["skill_texts"]]
    table = EmbeddingTable.for_texts(texts)
    text_matrix = torch.as_tensor(table(texts))
    images = torch.from_numpy(demos["images"])
    states = torch.from_numpy(demos["states"])
    actions = torch.from_numpy(demos["actions"])
    aux = torch.from_numpy(demos["aux"])
    pix = torch.from_numpy(demos["pix"])
    ee_images = torch.from_numpy(demos["ee_images"]) if cfg.model.ee_view else None
    skill_index = torch.from_numpy(demos["skill_index"].astype(np.int64))
    start = torch.from_numpy(start_rows(demos["step"]))   # demonstrations: in episode order
    log(f"training precision: {precision} (config: {cfg.train.precision})")
    log(f"demonstrations: {int(demos['ep_seed'].size)} episodes, {len(images)} frames, expert "
        f"success under noise {demos['ep_success'].mean():.1%} ({t_data:.0f} s)")

    oversample = dict(cfg.train.oversample)
    grasp_weight = cfg.train.grasp_weight

    def sampling_weights():
        return frame_weights(texts, skill_index, oversample, grasp_weight, states, aux)

    weights = sampling_weights()
    if oversample:
        log(f"oversampling {oversample}: "
            + ", ".join(f"{t.removeprefix('pick up the ')} x{w:g}"
                        for t, w in zip(texts, object_weights(texts, oversample)) if w != 1.0))
    if grasp_weight != 1.0:
        n = int(grasp_frames(texts, skill_index, states, aux).sum())
        log(f"grasp-decision frames: {n} ({n / len(states):.1%}), sampled x{grasp_weight:g}")

    net = BCPolicyNet(cfg.model)
    net.text_norm.fit(text_matrix)
    opt = torch.optim.AdamW(net.parameters(), lr=cfg.train.lr, weight_decay=cfg.train.weight_decay)
    tc = cfg.train
    dagger_at = set()
    if cfg.dagger.rounds:
        dg = cfg.dagger
        dagger_at = {int(tc.steps * (dg.start + (1 - dg.start) * r / dg.rounds)) for r in range(dg.rounds)}
    history, dagger_log = [], []
    running = None
    t_train = time.time()
    bar = tqdm(range(tc.steps), desc="train bc", disable=not progress, mininterval=2)
    for step in bar:
        if step in dagger_at:
            net.eval()
            r = len(dagger_log)
            specs = D.feasible_starts(D.pick_objects(), max(1, cfg.dagger.episodes // 15),
                                      cfg.dagger.seed_base + 100_000 * r)
            policy = PickPolicy(net, table)
            roll = D.rollout(policy, specs, record=True, expert_labels=True,
                             noise=tuple(cfg.dagger.noise), progress=progress, desc=f"dagger {r + 1}",
                             undershoot=d.undershoot)
            order = np.lexsort((roll.steps["step"], roll.steps["episode"]))
            st = {k: v[order] for k, v in roll.steps.items()}     # (episode, step) order
            index = {t: i for i, t in enumerate(texts)}
            start = torch.cat([start, len(images) + torch.from_numpy(start_rows(st["step"]))])
            images = torch.cat([images, torch.from_numpy(st["images"])])
            if ee_images is not None:
                ee_images = torch.cat([ee_images, torch.from_numpy(st["ee_images"])])
            states = torch.cat([states, torch.from_numpy(st["states"])])
            actions = torch.cat([actions, torch.from_numpy(st["labels"])])
            aux = torch.cat([aux, torch.from_numpy(st["aux"])])
            pix = torch.cat([pix, torch.from_numpy(st["pix"])])
            skill_index = torch.cat([skill_index, torch.as_tensor([index[s] for s in st["skills"]])])
            dagger_log.append({"step": step, "episodes": len(specs), "frames": int(len(st["states"])),
                               "success_rate": float(roll.success.mean())})
            log(f"dagger round {r + 1}: policy success {roll.success.mean():.1%} on {len(specs)} "
                f"episodes; dataset now {len(images)} frames")
            net.train()
        for group in opt.param_groups:
            group["lr"] = tc.lr * cosine_lr(step, tc.steps, tc.warmup)
        if weights is None:
            idx = torch.randint(0, len(images), (tc.batch_size,), generator=gen)
        else:
            if len(weights) != len(images):          # DAgger frames were added
                weights = sampling_weights()
            idx = torch.multinomial(weights, tc.batch_size, replacement=True, generator=gen)
        frames = with_start_frames(images[idx], images[start[idx]]) if cfg.model.start_frame \
            else images[idx]
        x, shift = augment(frames, cfg.augment, gen, return_shift=True)
        x = preprocess_images(x)
        shifts = [shift, shift]                          # head: target, fingertips
        ee = None
        if ee_images is not None:
            ee, ee_shift = augment(ee_images[idx], cfg.augment, gen, return_shift=True)
            ee = preprocess_images(ee)
            shifts.append(ee_shift)                      # the target in the end-effector view
        with autocast(precision):
            out_ = net(x, states[idx], text_matrix[skill_index[idx]], ee)
        loss, parts = bc_loss(out_, actions[idx], aux[idx], tc.aux_weight,
                              pix[idx] + torch.cat(shifts, dim=1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        running = parts if running is None else {k: 0.98 * running[k] + 0.02 * v for k, v in parts.items()}
        if step % 100 == 0 or step == tc.steps - 1:
            bar.set_postfix({k: f"{v:.3f}" for k, v in running.items()})
            history.append({"step": step, **{k: round(v, 5) for k, v in running.items()}})
    bar.close()
    t_train = time.time() - t_train
    net.eval()
    policy = PickPolicy(net, table)
    quick = None
    if tc.eval_episodes_per_object:
        # A quick check on seeds of the training range (the real evaluation is eval-skill).
        specs = D.feasible_starts(D.pick_objects(), tc.eval_episodes_per_object, d.seed_base + 5_000_000)
        roll = D.rollout(policy, specs, progress=progress, desc="quick check")
        quick = {"episodes": len(specs), "success_rate": float(roll.success.mean())}
        log(f"quick check (training-range seeds): {roll.success.mean():.1%} of {len(specs)}")
    record = {
        "kind": "bc_pick",
        "weights": out.name,
        "seed": seed,
        "config": cfg.to_dict(),
        "text_encoder": ENCODER_NAME,
        "skills": texts,
        "data": {"demonstrations": {**_demo_spec(cfg), "frames": int(len(demos["images"])),
                                    "env_seeds": [int(demos["ep_seed"].min()), int(demos["ep_seed"].max())],
                                    "expert_success_under_noise": float(demos["ep_success"].mean())},
                 "dagger": dagger_log},
        "model": {"parameters": count_parameters(net)},
        "training": {"steps": tc.steps, "samples": tc.steps * tc.batch_size,
                     "data_seconds": round(t_data, 1), "train_seconds": round(t_train, 1),
                     "total_seconds": round(time.time() - t_start, 1),
                     "precision": precision, **training_host(tc.threads),
                     "final_losses": history[-1] if history else None, "loss_curve": history[::5]},
        "metrics": {"quick_check": quick},
    }
    policy.save(out, extra={"seed": seed})
    record["model"]["file_bytes"] = out.stat().st_size
    write_record(out, record)
    log(f"wrote {out} ({out.stat().st_size / 1e6:.2f} MB) and {out.with_suffix('.json')} "
        f"in {record['training']['total_seconds']:.0f} s")
    return record


def _object_shapes(texts) -> list:
    """The simulator shape of each pick skill's object (None for an unknown object)."""
    from saycan_ros.core.kitchen import load_kitchen
    from saycan_ros.sim.objects import shape_of
    objects = load_kitchen().objects
    names = [text.removeprefix("pick up the ") for text in texts]
    return [shape_of(objects[name]) if name in objects else None for name in names]


def check_sampling(oversample: dict, grasp_weight: float) -> None:
    """Reject sampling settings that make no sense (before any data is built)."""
    unknown = set(oversample) - {"cylinder", "sphere", "box"}
    if unknown:
        raise ConfigError(f"bc.train.oversample: unknown shape kinds {sorted(unknown)}")
    if not (isinstance(grasp_weight, (int, float)) and math.isfinite(grasp_weight) and grasp_weight > 0):
        raise ConfigError(f"bc.train.grasp_weight: expected a positive number, got {grasp_weight!r}")


def object_weights(texts, oversample: dict) -> list[float]:
    """Sampling weight of each skill's frames: ``oversample[shape kind]`` of its object, else 1."""
    check_sampling(oversample, 1.0)
    return [float(oversample.get(shape.kind, 1.0)) if shape else 1.0 for shape in _object_shapes(texts)]


def grasp_frames(texts, skill_index, states, aux):
    """Frames where the grasp is decided, by the expert's own thresholds: fingertips at most
    CLOSE_ABOVE_M above the grasp height (the auxiliary label's dz), hand open at least
    OPEN_MARGIN_M wider than the object, nothing held. About 6% of the frames, yet the only ones
    where closing is the right answer before anything is held."""
    import torch
    from saycan_ros.robot.arm import ArmLimits
    from saycan_ros.sim.expert import CLOSE_ABOVE_M, OPEN_MARGIN_M
    widths = torch.as_tensor([shape.width if shape else 0.0 for shape in _object_shapes(texts)])
    opening = torch.as_tensor(states)[:, 3] * ArmLimits().gripper[1]
    return ((torch.as_tensor(aux)[:, 2] >= -CLOSE_ABOVE_M)
            & (opening >= widths[skill_index] + OPEN_MARGIN_M)
            & (torch.as_tensor(states)[:, 4] < 0.5))


def frame_weights(texts, skill_index, oversample: dict, grasp_weight: float = 1.0,
                  states=None, aux=None):
    """Per-frame sampling weights (a float tensor), or None when every frame weighs 1."""
    import torch
    check_sampling(oversample, grasp_weight)
    if not oversample and grasp_weight == 1.0:
        return None
    weights = torch.as_tensor(object_weights(texts, oversample), dtype=torch.float64)[skill_index]
    if grasp_weight != 1.0:
        weights[grasp_frames(texts, skill_index, states, aux)] *= grasp_weight
    return weights


def write_record(weights: Path, record: dict) -> Path:
    path = Path(weights).with_suffix(".json")
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(record, handle, indent=1)
        handle.write("\n")
    return path


def update_record(weights, section: str, value) -> None:
    """Set ``metrics[section]`` in the record next to ``weights`` (evaluations add theirs)."""
    path = Path(weights).with_suffix(".json")
    try:
        with open(path, encoding="utf-8") as handle:
            record = json.load(handle)
    except (OSError, ValueError):
        record = {}
    record.setdefault("metrics", {})[section] = value
    write_record(path, record)
