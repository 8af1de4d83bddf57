"""``saycan bench training``: the planner adapter's training step, setting by setting, side by side.

Each arm trains a fresh LoRA on the same batches of real dialogues (the planner section of
``config/learning.yaml``, or ``--config``), one arm after another in one process, and times each
optimiser step after one warm-up step. The arms are the settings that change what a step costs:

- ``sdpa, dropout 0.05``: torch's fused attention and the LoRA dropout of the shipped recipe;
- ``eager, dropout 0.05``: the plain attention (the same function: the same first loss);
- ``eager, dropout 0``: no dropout mask to draw (a regulariser traded for speed).

The CPU's per-batch figure decides whether a run fits a sitting; a GPU's is printed the same way.
"""
from __future__ import annotations

import dataclasses
import random
import resource
import statistics
import time

#: (attention, LoRA dropout) of each arm; the first is the reference of the ratios.
ARMS = (("sdpa", 0.05), ("eager", 0.05), ("eager", 0.0))


def run_training_bench(config_path=None, model: str = "", batches: int = 4, dialogues: int = 32,
                       seed: int = 0, threads: int = 0, progress: bool = True) -> dict:
    """Time ``batches`` optimiser steps (after one warm-up) of each arm of :data:`ARMS` on the
    first batches of ``dialogues`` generated dialogues; ``model``: another base model than the
    config's. Returns the arms' median seconds per batch, tokens per second, first loss and
    their ratio to the first arm, the host and the peak RSS."""
    import torch
    from peft import LoraConfig, get_peft_model
    from tqdm import tqdm

    from saycan_ros.core.config import config_dir
    from saycan_ros.learning._config_util import with_overrides
    from saycan_ros.learning.configuration_planner import PlannerAdapterConfig
    from saycan_ros.learning.modeling_common import (autocast, resolve_device, resolve_precision,
                                                     training_host)
    from saycan_ros.learning.planner_data import heldout_instructions
    from saycan_ros.learning.train_planner import (_batches, _collate, encode_dialogue,
                                                   option_loss, training_dialogues)
    from saycan_ros.llm.models import load_causal_lm
    from saycan_ros.llm.transformers_backend import leading_special_ids
    from saycan_ros.planning.prompt import load_prompt
    from saycan_ros.planning.vocabulary import load_vocabulary

    if batches < 1 or dialogues < 1:
        raise ValueError("--batches and --dialogues must be >= 1")
    cfg = with_overrides(PlannerAdapterConfig.load(config_path), {"data.dialogues": dialogues})
    if model:
        cfg = dataclasses.replace(cfg, base_model=model)
    device = resolve_device(cfg.train.device)
    precision = resolve_precision(cfg.train.precision, device)
    threads = threads or cfg.train.threads
    torch.set_num_threads(threads)

    vocabulary = load_vocabulary()
    prompt = load_prompt(cfg.prompt)
    exclude = heldout_instructions(config_dir(), vocabulary.kitchen)
    data = training_dialogues(cfg, seed, vocabulary, exclude, progress=False,
                              scene_details=prompt.scene_details)
    base, tokenizer, _ = load_causal_lm(cfg.base_model, "float32")
    base.to(device)
    bos = leading_special_ids(tokenizer)
    examples = [seq for d in data for seq in encode_dialogue(tokenizer, prompt, d, bos)]
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    schedule = _batches(examples, cfg.train.batch_size, random.Random(seed))[:batches + 1]
    if len(schedule) < batches + 1:
        raise ValueError(f"{dialogues} dialogues make {len(schedule)} batches; the bench needs "
                         f"{batches + 1} (one to warm up): raise --dialogues")
    tensors = [_collate(examples, index, pad_id) for index in schedule]

    arms = []
    bar = tqdm(total=len(ARMS) * len(tensors), desc="bench training", unit="batch",
               disable=not progress)
    for attention, dropout in ARMS:
        torch.manual_seed(seed)
        base.config._attn_implementation = attention
        lora = LoraConfig(r=cfg.lora.r, lora_alpha=cfg.lora.alpha, lora_dropout=dropout,
                          target_modules=list(cfg.lora.target_modules), task_type="CAUSAL_LM")
        peft_model = get_peft_model(base, lora)
        params = [p for p in peft_model.parameters() if p.requires_grad]
        optimiser = torch.optim.AdamW(params, lr=cfg.train.lr)
        peft_model.train()
        seconds, losses = [], []
        for ids, mask, flags in tensors:
            ids, mask, flags = ids.to(device), mask.to(device), flags.to(device)
            started = time.perf_counter()
            with autocast(precision, device):
                loss, _, _ = option_loss(peft_model.base_model.model, ids, mask, flags)
            loss.backward()
            optimiser.step()
            optimiser.zero_grad(set_to_none=True)
            if device == "cuda":
                torch.cuda.synchronize()
            seconds.append(time.perf_counter() - started)
            losses.append(loss.item())
            bar.update()
        base = peft_model.unload()           # the base model back, for the next arm's LoRA
        timed = seconds[1:]                  # the first step warms caches and kernels up
        tokens = sum(int(m.sum()) for _, m, _ in tensors[1:])
        arms.append({"attention": attention, "dropout": dropout,
                     "s_per_batch": round(statistics.median(timed), 3),
                     "tokens_per_s": round(tokens / sum(timed), 1),
                     "first_loss": round(losses[0], 4)})
    bar.close()
    for arm in arms:
        arm["speedup"] = round(arms[0]["s_per_batch"] / arm["s_per_batch"], 2)
    return {"model": cfg.base_model, "prompt": cfg.prompt, "batches": batches,
            "batch_size": cfg.train.batch_size, "dialogues": dialogues, "seed": seed,
            "precision": precision, "device": device, "host": training_host(threads, device),
            "arms": arms,
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}


def format_training_result(d: dict) -> str:
    """One line per arm, then ``training: <model> A s/batch -> B s/batch, speedup Rx, peak RSS
    M MB`` (the first arm against the last)."""
    host = d["host"]
    lines = [f"{d['model']}, batch {d['batch_size']}, {d['batches']} timed batches, "
             f"{d['precision']} on {d['device']} ({host.get('cpu', '?')}, "
             f"{host.get('threads', '?')} threads)"]
    for arm in d["arms"]:
        lines.append(f"  {arm['attention']:5s} dropout {arm['dropout']:<4}  "
                     f"{arm['s_per_batch']:.3f} s/batch  {arm['tokens_per_s']:.0f} tokens/s  "
                     f"x{arm['speedup']:.2f}  first loss {arm['first_loss']:.4f}")
    first, last = d["arms"][0], d["arms"][-1]
    lines.append(f"training: {d['model']} {first['s_per_batch']:.3f} s/batch -> "
                 f"{last['s_per_batch']:.3f} s/batch, speedup {last['speedup']:.2f}x, "
                 f"peak RSS {float(d['peak_rss_mb']):.0f} MB")
    return "\n".join(lines)
