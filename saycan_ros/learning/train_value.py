"""``saycan train value``: the pick value function V(s, skill), learned by TD from rollouts of
the BC policy, then calibrated.

    saycan train value [--config config/learning.yaml] [--seed 0] [--out models/value_pick.pt]

1. Roll the shipped BC policy out from ``train_episodes`` diverse starts (half feasible, half
   impossible: object absent, hand full, object out of reach, robot away from any pick
   location), recording every observation; the sparse reward is 1 at the end of a successful
   episode, else 0.
2. Train V with n-step TD targets from a Polyak-averaged target network,
   y_t = gamma^(T-1-t) R if the episode ends within n steps, else gamma^n V'(s_{t+n}),
   and a log (binary cross-entropy) loss on the sigmoid output: V is the BC policy's value.
3. Roll the policy out from ``calib_episodes`` other starts and fit v_min / v_max of the
   paper's clamp((v - v_min) / (v_max - v_min), 0, 1) to their outcomes.
"""
from __future__ import annotations

import copy
import hashlib
import time
from typing import Callable

import numpy as np

from saycan_ros.core.config import ConfigError
from saycan_ros.learning import resolve_model, resolve_output
from saycan_ros.learning._config_util import with_overrides
from saycan_ros.learning.configuration_value import ValueConfig

DEFAULT_OUT = "value_pick.pt"


def policy_encoder_weights(policy_net, value_net) -> dict:
    """The policy's encoder and text projection, for the value network to start from; raises
    ValueError unless the two encoders match exactly (both ways: a frozen encoder without the
    policy's fine keypoint layers is another detector: calibration AUROC 0.877 against 0.963),
    input size included (the value function sees the policy's camera)."""
    if value_net.cfg.image_size != policy_net.cfg.image_size:
        raise ValueError(f"value.model.image_size {value_net.cfg.image_size} differs from the "
                         f"policy's {policy_net.cfg.image_size}")
    own = value_net.state_dict()
    theirs = policy_net.state_dict()
    moved = {k: v for k, v in theirs.items()
             if k.split(".")[0] in ("encoder", "text_proj") and k in own and own[k].shape == v.shape}
    missing = [k for k in own if k.startswith("encoder.") and k not in moved]
    missing += [k for k in theirs if k.startswith("encoder.") and k not in own]
    if missing:
        raise ValueError(f"value.model does not match the policy's encoder: {missing[:4]}")
    return moved


def file_digest(path) -> str:
    h = hashlib.sha1()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()[:12]


def collect_value_rollouts(policy, policy_digest: str, n: int, seed_base: int, cfg: ValueConfig,
                           record: bool, progress: bool, log, desc: str) -> dict:
    """Rollouts of ``policy`` from ``n`` mixed starts, cached; steps sorted by (episode, step)."""
    from saycan_ros.learning import data as D
    spec = {"policy": policy_digest, "n": n, "seed_base": seed_base,
            "feasible_fraction": cfg.data.feasible_fraction, "reasons": list(cfg.data.reasons),
            "distractors": list(cfg.data.distractors), "record": record,
            **({"elsewhere": cfg.data.elsewhere} if cfg.data.elsewhere else {})}

    def build():
        specs = D.mixed_starts(n, seed_base, cfg.data.feasible_fraction, tuple(cfg.data.reasons))
        roll = D.rollout(policy, specs, n_envs=cfg.data.n_envs, record=record, progress=progress,
                         desc=desc, distractors=tuple(cfg.data.distractors),
                         elsewhere=cfg.data.elsewhere)
        out = {**D.specs_to_arrays(specs), "success": roll.success, "length": roll.length}
        if record:
            st = roll.steps
            st.pop("ee_images", None)       # the policy's input; the value sees the head camera
            order = np.lexsort((st["step"], st["episode"]))
            out.update({f"step_{k}": v[order] for k, v in st.items()})
        return out
    return D.cached("value_rollouts", spec, build, log=log)


def first_observations(rollouts: dict, distractors: tuple[int, int], image_size: int,
                       elsewhere: float = 0.0) -> dict:
    """Re-create every episode's start observation (cheap: resets only); ``distractors``,
    ``image_size`` and ``elsewhere`` must be the rollouts' own, or the scenes differ from those
    the outcomes were measured in."""
    from saycan_ros.learning import data as D
    env = D.make_pick_env(image_size, tuple(distractors), elsewhere=elsewhere)
    images, states, skills = [], [], []
    for spec in D.specs_from_arrays(rollouts):
        obs, _ = D.reset_to(env, spec)
        images.append(obs["image"])
        states.append(obs["state"])
        skills.append(obs["skill"])
    return {"images": np.stack(images), "states": np.stack(states).astype(np.float32),
            "skills": skills}


def absent_relabels(rollouts: dict, per_episode: int, distractors: tuple[int, int],
                    image_size: int, elsewhere: float, seed: int) -> tuple[np.ndarray, list[str]]:
    """(episode, pick text) pairs: for each episode, ``per_episode`` objects that are not where
    the robot stands (absent from the scene, or on another shelf; drawn without replacement,
    fewer where fewer are missing). The scenes are re-created by resets, so ``distractors``,
    ``image_size`` and ``elsewhere`` must be the rollouts' own."""
    from saycan_ros.learning import data as D
    env = D.make_pick_env(image_size, tuple(distractors), elsewhere=elsewhere)
    objects = D.pick_objects()
    rng = np.random.default_rng(seed)
    episodes, texts = [], []
    for e, spec in enumerate(D.specs_from_arrays(rollouts)):
        _, info = D.reset_to(env, spec)
        world = env.world
        here = {n for n in world.present if world.objects[n].location == info["location"]}
        missing = [o for o in objects if o not in here and o != world.held]
        for i in rng.permutation(len(missing))[:per_episode]:
            episodes.append(e)
            texts.append(f"pick up the {missing[i]}")
    return np.asarray(episodes, np.int64), texts


def train_value(config_path=None, seed: int = 0, out=None, policy=None,
                overrides: dict | None = None, progress: bool = True,
                log: Callable[[str], None] = print) -> dict:
    import torch
    import torch.nn.functional as F
    from tqdm import tqdm

    from saycan_ros.learning.modeling_bc import PickPolicy, augment, count_parameters, cosine_lr
    from saycan_ros.learning.modeling_common import start_rows, training_host, with_start_frames
    from saycan_ros.learning.modeling_value import PickValue, ValueNet, fit_calibration
    from saycan_ros.learning.text_encoder import ENCODER_NAME, EmbeddingTable
    from saycan_ros.learning.train_bc import write_record

    cfg = with_overrides(ValueConfig.load(config_path), overrides)   # "train.steps": 100
    if cfg.train.precision != "fp32":
        # The value head trains on cached features of the frozen encoder: nothing to speed up.
        raise ConfigError(f"value.train.precision: only fp32 is supported, "
                          f"got {cfg.train.precision!r}")
    elsewhere = cfg.data.elsewhere
    if isinstance(elsewhere, bool) or not isinstance(elsewhere, (int, float)) \
            or not 0.0 <= elsewhere <= 1.0:
        raise ConfigError(f"value.data.elsewhere: a share in [0, 1], got {elsewhere!r}")
    if cfg.td.absent_fraction and not cfg.data.absent_relabels:
        raise ConfigError("value.td.absent_fraction needs value.data.absent_relabels > 0")
    out = resolve_output(out, DEFAULT_OUT)
    policy_path = resolve_model(policy or cfg.data.policy, "bc_pick.pt")
    tc, td = cfg.train, cfg.td
    torch.set_num_threads(tc.threads)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    t_start = time.time()

    bc = PickPolicy.load(policy_path)
    digest = file_digest(policy_path)
    train = collect_value_rollouts(bc, digest, cfg.data.train_episodes, cfg.data.train_seed_base,
                                   cfg, True, progress, log, "value rollouts")
    calib = collect_value_rollouts(bc, digest, cfg.data.calib_episodes, cfg.data.calib_seed_base,
                                   cfg, False, progress, log, "calibration rollouts")
    t_data = time.time() - t_start
    reasons = train["spec_reason"]
    feasible = reasons == ""
    log(f"value data: {len(reasons)} episodes ({feasible.mean():.0%} feasible; BC success "
        f"{train['success'][feasible].mean():.1%} on feasible, {train['success'][~feasible].mean():.1%} "
        f"on impossible), {len(train['step_states'])} states ({t_data:.0f} s)")

    # -- TD bookkeeping: steps are sorted by (episode, step) -------------------------------------
    ep = train["step_episode"].astype(np.int64)
    t_idx = train["step_step"].astype(np.int64)
    length = train["length"].astype(np.int64)[ep]
    reward = train["success"].astype(np.float32)[ep]
    ahead = t_idx + td.n_step < length                           # bootstrap from s_{t+n}
    mc_target = (td.gamma ** (length - 1 - t_idx)) * reward       # the episode ends within n steps
    next_index = np.where(ahead, np.arange(len(ep)) + td.n_step, 0)
    first = np.flatnonzero(t_idx == 0)
    # Rows past the recorded steps are absent relabels: an episode's first frame with another
    # object's text, target 0, never bootstrapped.
    relabel_episodes, relabel_texts = np.zeros(0, np.int64), []
    if cfg.data.absent_relabels and td.absent_fraction:
        relabel_episodes, relabel_texts = absent_relabels(
            train, cfg.data.absent_relabels, cfg.data.distractors, bc.image_size,
            cfg.data.elsewhere, seed)
        log(f"absent relabels: {len(relabel_texts)} (first frame, missing object, target 0)")
    first_of_episode = np.full(int(ep.max()) + 1, -1, np.int64)
    first_of_episode[ep[first]] = first
    relabel_rows = first_of_episode[relabel_episodes]
    if (relabel_rows < 0).any():
        raise ValueError("value rollouts: an episode without its first step")
    n_steps = len(ep)
    image_row = torch.from_numpy(np.concatenate([np.arange(n_steps), relabel_rows]))
    relabels = torch.arange(n_steps, len(image_row))
    step_texts = [str(s) for s in train["step_skills"]] + relabel_texts
    texts = sorted(set(step_texts))
    table = EmbeddingTable.for_texts(texts)
    text_index = {t: i for i, t in enumerate(texts)}
    text_matrix = torch.as_tensor(table(texts))
    skill_ix = torch.as_tensor([text_index[t] for t in step_texts])
    images = torch.from_numpy(train["step_images"])
    start = torch.from_numpy(start_rows(t_idx))

    def frames(rows):
        """uint8 inputs of these rows (with ``start_frame``: + their episode's first frame)."""
        rows = image_row[rows]
        if cfg.model.start_frame:
            return with_start_frames(images[rows], images[start[rows]])
        return images[rows]
    states = torch.from_numpy(train["step_states"])[image_row]
    n_relabels = len(relabel_rows)
    ahead_t = torch.from_numpy(np.concatenate([ahead, np.zeros(n_relabels, bool)]))
    mc_t = torch.from_numpy(np.concatenate([mc_target, np.zeros(n_relabels)]).astype(np.float32))
    next_t = torch.from_numpy(np.concatenate([next_index, np.zeros(n_relabels, np.int64)]))

    net = ValueNet(cfg.model)
    net.text_norm.fit(text_matrix)
    if tc.init_from_policy:
        # The policy's encoder already finds the named object in the image; the value network
        # starts from it (same architecture) and is then trained end to end by TD.
        moved = policy_encoder_weights(bc.net, net)
        net.load_state_dict(moved, strict=False)
        log(f"value encoder initialised from the policy ({len(moved)} tensors)")
    if tc.freeze_encoder and not tc.init_from_policy:
        raise ValueError("value.train.freeze_encoder needs init_from_policy")
    history, running = [], None
    n_first = int(round(tc.batch_size * td.initial_fraction))
    n_absent = int(round(tc.batch_size * td.absent_fraction)) if n_relabels else 0
    t_train = time.time()
    if tc.freeze_encoder:
        # The encoder is the policy's and stays fixed: its features (no augmentation) are
        # computed once per state; the head is trained by TD on them.
        net.eval()
        feats = []
        with torch.no_grad():
            for i in tqdm(range(0, len(image_row), 256), desc="features", disable=not progress,
                          mininterval=2):
                j = torch.arange(i, min(i + 256, len(image_row)))
                feats.append(net.features((frames(j).permute(0, 3, 1, 2).float() / 255 - 0.5) / 0.25,
                                          text_matrix[skill_ix[j]]))
        feats = torch.cat(feats)
        for p in net.encoder.parameters():
            p.requires_grad_(False)
        params = [p for p in net.parameters() if p.requires_grad]

        def predict(model, idx, augmented):
            return model.head(feats[idx], states[idx], text_matrix[skill_ix[idx]])
    else:
        params = list(net.parameters())

        def predict(model, idx, augmented):
            x = augment(frames(idx), cfg.augment, gen) if augmented else \
                frames(idx).permute(0, 3, 1, 2).float() / 255
            return model((x - 0.5) / 0.25, states[idx], text_matrix[skill_ix[idx]])
    target = copy.deepcopy(net).eval()
    for p in target.parameters():
        p.requires_grad_(False)
    opt = torch.optim.AdamW(params, lr=tc.lr, weight_decay=tc.weight_decay)
    bar = tqdm(range(tc.steps), desc="train value", disable=not progress, mininterval=2)
    for step in bar:
        for group in opt.param_groups:
            group["lr"] = tc.lr * cosine_lr(step, tc.steps, tc.warmup)
        idx = torch.cat([
            torch.randint(0, n_steps, (tc.batch_size - n_first - n_absent,), generator=gen),
            torch.as_tensor(first)[torch.randint(0, len(first), (n_first,), generator=gen)],
            relabels[torch.randint(0, max(n_relabels, 1), (n_absent,), generator=gen)]])
        with torch.no_grad():
            y = mc_t[idx].clone()
            boot = ahead_t[idx]
            if boot.any():
                y[boot] = (td.gamma ** td.n_step) * torch.sigmoid(predict(target, next_t[idx[boot]], True))
        if not tc.freeze_encoder:
            net.train()
        logits = predict(net, idx, True)
        loss = F.binary_cross_entropy_with_logits(logits, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        with torch.no_grad():
            for p, q in zip(target.parameters(), net.parameters()):
                p.mul_(1 - td.tau).add_(q, alpha=td.tau)
        value = loss.item()
        running = value if running is None else 0.98 * running + 0.02 * value
        if step % 100 == 0 or step == tc.steps - 1:
            bar.set_postfix(loss=f"{running:.4f}")
            history.append({"step": step, "loss": round(running, 5)})
    bar.close()
    t_train = time.time() - t_train

    # -- calibration on held-out rollouts --------------------------------------------------------
    value = PickValue(net.eval(), table)
    starts = first_observations(calib, cfg.data.distractors, bc.image_size, cfg.data.elsewhere)
    raw = np.concatenate([value.raw(starts["images"][i:i + 256], starts["states"][i:i + 256],
                                    starts["skills"][i:i + 256])
                          for i in range(0, len(starts["skills"]), 256)])
    cal, fit = fit_calibration(raw, calib["success"], cfg.calibration.objective, cfg.calibration.grid)
    value.calibration = cal
    log(f"calibration on {len(raw)} held-out starts: v_min {cal.v_min:.4f}, v_max {cal.v_max:.4f}; "
        f"ECE {fit['ece']:.4f}, AUROC "
        + ("n/a (one outcome only)" if fit["auroc"] is None else f"{fit['auroc']:.4f}"))
    record = {
        "kind": "value_pick",
        "weights": out.name,
        "seed": seed,
        "v_min": cal.v_min,
        "v_max": cal.v_max,
        "calibration_formula": "clamp((v - v_min) / (v_max - v_min), 0, 1)",
        "config": cfg.to_dict(),
        "policy": {"weights": policy_path.name, "sha1": digest},
        "text_encoder": ENCODER_NAME,
        "skills": texts,
        "data": {"train_rollouts": _rollout_stats(train), "calibration_rollouts": _rollout_stats(calib),
                 "train_states": int(n_steps), "absent_relabels": int(n_relabels)},
        "model": {"parameters": count_parameters(net)},
        "training": {"steps": tc.steps, "samples": tc.steps * tc.batch_size,
                     "data_seconds": round(t_data, 1), "train_seconds": round(t_train, 1),
                     "total_seconds": round(time.time() - t_start, 1), **training_host(tc.threads),
                     "final_loss": history[-1] if history else None,
                     "loss_curve": history[::5]},
        "metrics": {"calibration_fit": fit},
    }
    value.save(out, extra={"seed": seed, "policy_sha1": digest})
    record["model"]["file_bytes"] = out.stat().st_size
    write_record(out, record)
    log(f"wrote {out} ({out.stat().st_size / 1e6:.2f} MB) and {out.with_suffix('.json')} "
        f"in {record['training']['total_seconds']:.0f} s")
    return record


def _rollout_stats(r: dict) -> dict:
    reasons = r["spec_reason"]
    out = {"episodes": int(len(reasons)),
           "env_seeds": [int(r["spec_seed"].min()), int(r["spec_seed"].max())],
           "success_by_start": {}}
    for reason in sorted(set(reasons.tolist())):
        m = reasons == reason
        out["success_by_start"][reason or "feasible"] = {
            "episodes": int(m.sum()), "success_rate": float(r["success"][m].mean())}
    return out
