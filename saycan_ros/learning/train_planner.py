"""``saycan train planner``: fine-tune a LoRA adapter of the scoring language model on
synthetic planning dialogues (:mod:`saycan_ros.learning.planner_data`) of the built-in kitchen,
of random kitchens (:mod:`saycan_ros.learning.kitchens`) or of the user's kitchen file.

The model learns exactly what the SayCan scorer asks of it: the log-probability of each step's
option text after the dialogue so far. Each dialogue is tokenised as the scorer tokenises it
(prefix, query and option encoded separately and joined), and the loss is the cross-entropy of
the option tokens only. Seeded (data, LoRA initialisation, batch order), with a progress bar and
a record (``planner.json``: data version, config, seed, CPU, metrics) beside the adapter.
"""
from __future__ import annotations

import contextlib
import json
import random
import threading
import time
from collections import Counter
from pathlib import Path

import torch
from tqdm import tqdm

from saycan_ros.learning import models_dir, repo_root
from saycan_ros.learning._config_util import to_dict, with_overrides
from saycan_ros.learning.configuration_planner import PlannerAdapterConfig, resolve_attention
from saycan_ros.learning.modeling_common import (autocast, cosine_lr, resolve_device,
                                                 resolve_precision, training_host)
from saycan_ros.llm.config import ADAPTER_DIRS

RECORD = "planner.json"


def encode_dialogue(tokenizer, prompt, dialogue, bos: list[int]
                    ) -> list[tuple[list[int], list[int]]]:
    """The dialogue as the scorer sees it, as few (input ids, target flags) sequences as it
    packs into: a step whose query extends the text before it (same scene line) continues the
    sequence, a step with a new scene line starts the next one. Each step's option tokens are
    flagged. Text is encoded piece by piece, as ``prefix + query + option`` are at scoring time
    (option tokens never depend on context)."""
    def enc(text: str) -> list[int]:
        return list(tokenizer(text, add_special_tokens=False)["input_ids"]) if text else []

    prefix = bos + enc(prompt.prefix())
    sequences: list[tuple[list[int], list[int]]] = []
    ids: list[int] = []
    flags: list[int] = []
    done_text = None
    for query, option in prompt.dialogue(dialogue.instruction, dialogue.steps, dialogue.scenes):
        if done_text is None or not query.startswith(done_text):
            if ids:
                sequences.append((ids, flags))
            ids, flags, done_text = list(prefix), [0] * len(prefix), ""
        head = enc(query[len(done_text):])
        opt = enc(option)
        ids += head + opt
        flags += [0] * len(head) + [1] * len(opt)
        done_text = query + option
    sequences.append((ids, flags))
    return sequences


def _batches(examples, batch_size: int, rng: random.Random):
    """Batches of similar length (little padding), in a seeded random order."""
    order = list(range(len(examples)))
    rng.shuffle(order)
    chunk = batch_size * 32
    batches = []
    for start in range(0, len(order), chunk):
        part = sorted(order[start:start + chunk], key=lambda i: len(examples[i][0]))
        batches += [part[i:i + batch_size] for i in range(0, len(part), batch_size)]
    rng.shuffle(batches)
    return batches


def _collate(examples, index, pad_id: int):
    width = max(len(examples[i][0]) for i in index)
    ids = torch.full((len(index), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(index), width), dtype=torch.long)
    flags = torch.zeros((len(index), width), dtype=torch.bool)
    for row, i in enumerate(index):
        seq, flag = examples[i]
        ids[row, :len(seq)] = torch.tensor(seq)
        mask[row, :len(seq)] = 1
        flags[row, :len(seq)] = torch.tensor(flag, dtype=torch.bool)
    return ids, mask, flags


def micro_batches(mask, max_tokens: int) -> list[slice]:
    """Consecutive rows of a padded batch whose padded size (rows x their longest) stays within
    ``max_tokens`` (one row at least); the whole batch when ``max_tokens`` is 0."""
    lengths = [int(n) for n in mask.sum(dim=1)]
    if not max_tokens:
        return [slice(0, len(lengths))]
    parts, start, longest = [], 0, 0
    for row, n in enumerate(lengths):
        if row > start and (row - start + 1) * max(longest, n) > max_tokens:
            parts.append(slice(start, row))
            start, longest = row, 0
        longest = max(longest, n)
    parts.append(slice(start, len(lengths)))
    return parts


def batch_option_loss(causal_lm, ids, mask, flags, max_tokens: int, autocast_ctx) -> float:
    """The batch's mean option-token loss, back-propagated in parts of at most ``max_tokens``
    padded tokens (:func:`micro_batches`): each part's mean loss weighted by its share of the
    batch's option tokens, so the gradients add up to the whole batch's."""
    total = int(flags[:, 1:].sum())
    if total == 0:
        return 0.0
    value = 0.0
    for rows in micro_batches(mask, max_tokens):
        width = int(mask[rows].sum(dim=1).max())          # right-padded: drop the part's padding
        part = [t[rows, :width] for t in (ids, mask, flags)]
        if not bool(part[2][:, 1:].any()):
            continue
        with autocast_ctx():
            loss, _, count = option_loss(causal_lm, *part)
        (loss * (count / total)).backward()
        value += float(loss.detach()) * count / total
    return value


def _init_adapter(name: str) -> Path | None:
    """The adapter folder to continue from (``init_adapter``): an absolute path, a path in the
    source checkout (``training/planner_smollm2_v6``: the parents of shipped adapters live in
    ``training/``, not in ``models/``), or a folder under ``models/``."""
    from saycan_ros.core.config import ConfigError
    if not name:
        return None
    tried = [Path(name)] if Path(name).is_absolute() else [repo_root() / name, models_dir() / name]
    for path in tried:
        if (path / "adapter_config.json").is_file():
            return path
    raise ConfigError(f"init_adapter {name!r}: no adapter at {' or '.join(map(str, tried))}")


def _adapter_identity(path: Path | None) -> dict | None:
    """What the run continued from: folder, sha256 of the weights, its own record's summary."""
    if path is None:
        return None
    import hashlib
    weights = path / "adapter_model.safetensors"
    record = json.loads((path / RECORD).read_text()) if (path / RECORD).is_file() else {}
    return {"folder": path.name,
            "sha256": hashlib.sha256(weights.read_bytes()).hexdigest() if weights.is_file() else "",
            "data_version": record.get("data_version"), "seed": record.get("seed"),
            "dialogues": record.get("dialogues")}


def option_loss(causal_lm, ids, mask, flags):
    """(mean cross-entropy, correct top-1 count, count) over the flagged tokens; logits are
    computed only where a flagged token is predicted (the vocabulary projection is costly)."""
    hidden = causal_lm.model(input_ids=ids, attention_mask=mask, use_cache=False).last_hidden_state
    predict = flags[:, 1:]                       # token t+1 is predicted from position t
    rows = hidden[:, :-1][predict]
    logits = causal_lm.lm_head(rows).float()
    targets = ids[:, 1:][predict]
    loss = torch.nn.functional.cross_entropy(logits, targets)
    correct = int((logits.argmax(-1) == targets).sum())
    return loss, correct, int(targets.numel())


CHECKPOINT = "checkpoint.pt"


def training_dialogues(cfg, seed: int, vocabulary, exclude, kitchen_file: str = "",
                       progress: bool = True, held_out: bool = False, scene_details: bool = False):
    """The run's dialogues: in ``kitchen_file``'s kitchen when one is given (specialising an
    adapter to a user's kitchen), else ``data.many_kitchens`` of them in random kitchens and
    the rest in the built-in one. ``held_out``: 100 of another seed (at most as many as the
    run trains on), for the held-out check."""
    from saycan_ros.learning.kitchens import (ManyKitchenGenerator, kitchen_lexicon,
                                              load_kitchen_lexicon)
    from saycan_ros.learning.planner_data import PlanDataGenerator, load_lexicon
    data = cfg.data
    n = min(100, data.dialogues) if held_out else data.dialogues
    seed = seed + data.seed_offset + (1_000_003 if held_out else 0)
    kitchen, skills = vocabulary.kitchen, vocabulary.skills
    if kitchen_file:
        lexicon = kitchen_lexicon(kitchen, load_kitchen_lexicon())
    else:
        lexicon = load_lexicon(kitchen, languages_path=None if data.languages else False)
    builtin = PlanDataGenerator(kitchen, skills, lexicon, seed=seed, exclude=exclude,
                                scene_refresh=data.scene_refresh,
                                family_weights=None if held_out else data.family_weights,
                                scene_details=scene_details, any_reading=data.any_reading,
                                missing_names=load_kitchen_lexicon().objects)
    generator = builtin
    if data.many_kitchens > 0 and not kitchen_file:
        generator = ManyKitchenGenerator(load_kitchen_lexicon(), seed=seed + 17, exclude=exclude,
                                         scene_refresh=data.scene_refresh, builtin=builtin,
                                         builtin_share=1 - data.many_kitchens,
                                         per_kitchen=data.per_kitchen,
                                         family_weights=data.family_weights,
                                         scene_details=scene_details,
                                         any_reading=data.any_reading)
    with tqdm(total=n, desc="planner dialogues", disable=not progress or held_out) as bar:
        return generator.dialogues(n, progress=bar)


def shipped_adapter(base_model: str) -> str | None:
    """The folder under models/ of ``base_model``'s shipped adapter, None when there is none:
    what specialising to a kitchen continues unless told otherwise."""
    name = ADAPTER_DIRS.get(base_model)
    return name if name and (models_dir() / name / "adapter_config.json").is_file() else None


def default_out(base_model: str, kitchen_file: str = "") -> Path:
    """Where a run's adapter goes: the base model's adapter folder under models/, or beside
    it with the kitchen's name for a run specialised to a kitchen (the shipped adapter is
    never overwritten by one)."""
    name = ADAPTER_DIRS.get(base_model, "planner_adapter")
    return models_dir() / (f"{name}_{Path(kitchen_file).stem}" if kitchen_file else name)


def train_planner(config_path=None, seed: int = 0, out=None, overrides=None,
                  progress: bool = True, kitchen_file: str = "", resume: bool = False,
                  stop_after: int | None = None, init_adapter: str | None = None,
                  stop: threading.Event | None = None) -> dict:
    """Train the adapter; returns the record (also written beside it). ``kitchen_file``: train
    on that kitchen's dialogues, continuing the base model's shipped adapter unless
    ``init_adapter`` says otherwise, into ``models/<adapter>_<kitchen>`` unless ``out`` does.
    Every ``train.checkpoint_every`` steps the LoRA weights, the optimiser and the random
    states go to ``<out>/checkpoint.pt``; ``resume`` continues from it to the same adapter an
    uninterrupted run gives. ``stop_after``: stop after that many steps (a test's interruption),
    leaving the checkpoint and no adapter. ``stop``: once set (SIGINT or SIGTERM under
    :func:`stop_on_signals`), the run checkpoints after the step it is in and returns
    ``{"stopped_at": step, ...}``, so that an interrupted run loses no step. ``init_adapter``:
    continue that adapter (a folder under models/ or a path; "" = a fresh LoRA) instead of
    the config's."""
    from peft import LoraConfig, get_peft_model

    from saycan_ros.core.config import config_dir
    from saycan_ros.learning.planner_data import DATA_VERSION, heldout_instructions
    from saycan_ros.llm.models import load_causal_lm
    from saycan_ros.llm.transformers_backend import leading_special_ids
    from saycan_ros.planning.prompt import load_prompt
    from saycan_ros.planning.vocabulary import load_vocabulary

    cfg = with_overrides(PlannerAdapterConfig.load(config_path), overrides)
    if init_adapter is None and kitchen_file:
        init_adapter = shipped_adapter(cfg.base_model)
    if init_adapter is not None:
        import dataclasses
        cfg = dataclasses.replace(cfg, init_adapter=init_adapter)
    device = resolve_device(cfg.train.device)
    precision = resolve_precision(cfg.train.precision, device)
    torch.set_num_threads(cfg.train.threads)
    out = Path(out) if out else default_out(cfg.base_model, kitchen_file)
    started = time.perf_counter()

    vocabulary = load_vocabulary(kitchen_file)
    prompt = load_prompt(cfg.prompt)
    prompt.check_against(vocabulary.skills)
    exclude = heldout_instructions(config_dir(), load_vocabulary().kitchen)
    dialogues = training_dialogues(cfg, seed, vocabulary, exclude, kitchen_file, progress,
                                   scene_details=prompt.scene_details)
    digest = dialogues_digest(dialogues)

    torch.manual_seed(seed)
    model, tokenizer, _ = load_causal_lm(cfg.base_model, "float32")
    model.to(device)                      # before the LoRA layers, which follow their base layer
    attention = resolve_attention(cfg.train.attention, device)
    model.config._attn_implementation = attention     # the same function, a faster kernel
    bos = leading_special_ids(tokenizer)
    examples = [seq for d in dialogues for seq in encode_dialogue(tokenizer, prompt, d, bos)]
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0

    lora = LoraConfig(r=cfg.lora.r, lora_alpha=cfg.lora.alpha, lora_dropout=cfg.lora.dropout,
                      target_modules=list(cfg.lora.target_modules), task_type="CAUSAL_LM")
    torch.manual_seed(seed)
    init = _init_adapter(cfg.init_adapter)
    if init is None:
        peft_model = get_peft_model(model, lora)
    else:   # continue training an earlier version (its LoRA shape, not this config's)
        from peft import PeftModel
        peft_model = PeftModel.from_pretrained(model, str(init), is_trainable=True)
        for p in peft_model.parameters():
            if p.requires_grad:
                p.data = p.data.float()      # stored in bf16, trained in fp32
    causal_lm = peft_model.base_model.model
    params = [p for p in peft_model.parameters() if p.requires_grad]
    optimiser = torch.optim.AdamW(params, lr=cfg.train.lr, weight_decay=cfg.train.weight_decay)
    rng = random.Random(seed)
    schedule = [b for _ in range(cfg.train.epochs) for b in _batches(examples, cfg.train.batch_size, rng)]
    total = len(schedule)
    peft_model.train()
    losses, tokens, first, earlier = [], 0, 0, 0.0
    checkpoint = out / CHECKPOINT
    if resume and checkpoint.is_file():
        first, losses, tokens, earlier = _load_checkpoint(checkpoint, params, optimiser, cfg,
                                                          seed, digest)
    bar = tqdm(range(first, total), desc="train planner", unit="batch", disable=not progress)
    for step in bar:
        index = schedule[step]
        if stop_after is not None and step >= stop_after:
            return {"stopped_at": step, "checkpoint": str(checkpoint)}
        for group in optimiser.param_groups:
            group["lr"] = cfg.train.lr * cosine_lr(step, total, cfg.train.warmup)
        ids, mask, flags = (t.to(device) for t in _collate(examples, index, pad_id))
        loss = batch_option_loss(causal_lm, ids, mask, flags, cfg.train.max_batch_tokens,
                                 lambda: autocast(precision, device))
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimiser.step()
        optimiser.zero_grad(set_to_none=True)
        losses.append(loss)
        tokens += int(mask.sum())
        bar.set_postfix(loss=f"{sum(losses[-20:]) / len(losses[-20:]):.3f}")
        stopping = stop is not None and stop.is_set() and step + 1 < total
        if stopping or ((step + 1) % cfg.train.checkpoint_every == 0 and step + 1 < total):
            _save_checkpoint(checkpoint, step + 1, params, optimiser, losses, tokens, cfg, seed,
                             digest, earlier + time.perf_counter() - started)
        if stopping:
            bar.close()
            return {"stopped_at": step + 1, "steps": total, "checkpoint": str(checkpoint)}
    train_seconds = earlier + time.perf_counter() - started     # every sitting's

    # held out: dialogues of another generator seed, top-1 of each option token (teacher forced)
    peft_model.eval()
    held = training_dialogues(cfg, seed, vocabulary, exclude, kitchen_file, held_out=True,
                              scene_details=prompt.scene_details)
    held_examples = [seq for d in held for seq in encode_dialogue(tokenizer, prompt, d, bos)]
    correct = count = 0
    held_loss = 0.0
    with torch.no_grad(), autocast(precision, device):
        for index in _batches(held_examples, cfg.train.batch_size, random.Random(0)):
            batch = (t.to(device) for t in _collate(held_examples, index, pad_id))
            loss, c, n = option_loss(causal_lm, *batch)
            held_loss += float(loss) * n
            correct, count = correct + c, count + n

    out.mkdir(parents=True, exist_ok=True)
    for p in params:                      # bf16 on disk halves the adapter; merged in fp32
        p.data = p.data.to(torch.bfloat16)
    peft_model.save_pretrained(str(out))
    (out / "README.md").unlink(missing_ok=True)     # peft's empty model card template
    record = {
        "kind": "planner_adapter", "base_model": cfg.base_model, "prompt": cfg.prompt,
        "seed": seed, "data_version": DATA_VERSION, "config": to_dict(cfg),
        "init_adapter": _adapter_identity(init),
        "precision": precision, "device": device, "attention": attention,
        "host": training_host(cfg.train.threads, device),
        "dialogues": len(dialogues), "dialogues_sha256": digest,
        "families": dict(Counter(d.family for d in dialogues)),
        "languages": dict(Counter(d.language for d in dialogues)),
        "kitchens": dict(Counter(d.kitchen for d in dialogues)),
        "metrics": {"steps": total, "train_tokens": tokens,
                    "final_loss": round(sum(losses[-20:]) / max(1, len(losses[-20:])), 4),
                    "first_loss": round(sum(losses[:20]) / max(1, len(losses[:20])), 4),
                    "held_out_loss": round(held_loss / max(1, count), 4),
                    "held_out_token_accuracy": round(correct / max(1, count), 4),
                    "seconds": round(train_seconds, 1)},
        "trained_at": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    (out / RECORD).write_text(json.dumps(record, indent=1), encoding="utf-8")
    checkpoint.unlink(missing_ok=True)
    return record


@contextlib.contextmanager
def stop_on_signals():
    """An event that SIGINT (Ctrl-C) and SIGTERM set while the block runs, instead of killing
    the process: :func:`train_planner` then checkpoints after the step it is in. Outside the
    main thread (where handlers cannot be set) the event is never set by a signal. A second
    signal does what it did before (Ctrl-C twice: stop now, losing the step)."""
    import signal
    event = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield event
        return
    previous = {}

    def on_signal(signum, _frame):
        if event.is_set():
            signal.signal(signum, previous[signum])
            signal.raise_signal(signum)
        event.set()
    for s in (signal.SIGINT, signal.SIGTERM):
        previous[s] = signal.signal(s, on_signal)
    try:
        yield event
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def dialogues_digest(dialogues) -> str:
    """sha256 of the run's dialogues (text, steps, scenes): a resumed run must train on the
    same ones, whatever changed since (a kitchen file, the lexicon, the generator's code)."""
    import hashlib
    h = hashlib.sha256()
    for d in dialogues:
        h.update(json.dumps([d.instruction, d.family, d.language, list(d.steps),
                             list(d.scenes)]).encode("utf-8"))
    return h.hexdigest()


def _save_checkpoint(path: Path, step: int, params, optimiser, losses, tokens, cfg, seed,
                     digest: str = "", seconds: float = 0.0) -> None:
    """Everything the rest of the run depends on, written atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {"step": step, "params": [p.detach().clone() for p in params],
             "optimiser": optimiser.state_dict(), "losses": list(losses), "tokens": tokens,
             "torch_rng": torch.get_rng_state(), "config": to_dict(cfg), "seed": seed,
             "dialogues_sha256": digest, "seconds": seconds}
    if torch.cuda.is_available():
        state["cuda_rng"] = torch.cuda.get_rng_state_all()
    tmp = path.with_suffix(".tmp")
    torch.save(state, tmp)
    tmp.replace(path)


#: Settings a resumed run may change: where and how fast the same arithmetic runs (a run
#: started on the CPU may finish on a GPU, or with the attention kernel that fits in memory).
RESUME_FREE = {"train": ("attention", "device", "threads", "checkpoint_every",
                         "max_batch_tokens")}


def _resume_key(config: dict | None) -> dict | None:
    if config is None:
        return None
    key = {section: dict(values) if isinstance(values, dict) else values
           for section, values in config.items()}
    for section, names in RESUME_FREE.items():
        for name in names:
            key.get(section, {}).pop(name, None)
    return key


def _load_checkpoint(path: Path, params, optimiser, cfg, seed,
                     digest: str = "") -> tuple[int, list, int, float]:
    from saycan_ros.core.config import ConfigError
    state = torch.load(path, map_location="cpu", weights_only=True)
    if _resume_key(state.get("config")) != _resume_key(to_dict(cfg)) or state.get("seed") != seed:
        raise ConfigError(f"{path}: the checkpoint is of another configuration or seed; "
                          "delete it or run with the settings it was made with")
    if state.get("dialogues_sha256") and digest and state["dialogues_sha256"] != digest:
        raise ConfigError(f"{path}: the checkpoint was trained on other dialogues (a kitchen "
                          "file, the lexicon or the generator changed since it was made); "
                          "delete it, or resume where the run started")
    with torch.no_grad():
        for p, saved in zip(params, state["params"]):
            p.copy_(saved.to(p.device))
    optimiser.load_state_dict(state["optimiser"])
    torch.set_rng_state(state["torch_rng"])
    if "cuda_rng" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda_rng"])
    return (int(state["step"]), list(state["losses"]), int(state["tokens"]),
            float(state.get("seconds", 0.0)))     # checkpoints before 2026-12-07 lack seconds
