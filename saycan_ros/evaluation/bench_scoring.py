"""Benchmark of candidate scoring over the steps of real plans, each lever side by side.

:func:`record_steps` plans a few development tasks in the symbolic world (the default scorer,
every skill scored) and keeps what the language model saw at each step: the prefix, the query,
every skill's option text and which skills could run. :func:`run_scoring_bench` then replays
those steps, in order, through each arm (the arms before ``onednn`` on one model loaded with
``kernels: aten``):

=========  ==============================================================================
naive      one forward pass per option over the whole text (a sample of the steps)
flat       packed pass, options concatenated (no trie), the whole query each step
trie       + the options' common starts shared (a token trie): the plain packed path
grow       + the context grows with the plan: only its new tokens run, in the same pass
prune      + only the skills that can run (affordance > 0) are scored
onednn     + linear layers on oneDNN, weights packed once, projections fused (a second copy
           of the model, ``kernels: onednn``): the default
int8       + dynamic int8 linear layers (a third copy of the model; not the default)
=========  ==============================================================================

Each arm runs the steps once untimed (kernels made for each shape, memory allocated: the steady
state of a node that has planned before; ``naive`` one step), then timed with its caches
cleared. Each arm's time is the median over the steps; its choices (argmax of language probability x
affordance, as SayCan picks) are compared with the ``trie`` arm's, and so are its scores.
"""

from __future__ import annotations

import dataclasses
import math
import platform
import resource
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

#: Cumulative levers, in order (module docstring).
ARMS = ("naive", "flat", "trie", "grow", "prune", "onednn", "int8")
#: The arm the others' choices and scores are compared with (the plain packed path).
REFERENCE_ARM = "trie"
DEFAULT_ARM = "onednn"
#: Arms that score only the skills that can run.
PRUNED_ARMS = ("prune", "onednn", "int8")
#: The development-set tasks whose plans make the bench's steps (one per kind of plan).
BENCH_TASKS = 6


@dataclasses.dataclass(frozen=True)
class BenchStep:
    """What the language model scores at one planning step."""

    prefix: str
    query: str
    options: tuple[str, ...]        # every skill's option text
    runnable: tuple[bool, ...]      # affordance > 0
    affordance: tuple[float, ...]
    temperature: float = 1.0        # the prompt's: SayCan ranks by softmax(raw / T) x affordance


def _sig3(x: float) -> str:
    """``x`` with 3 significant digits, never in scientific notation (0.560, 12.3, 1234)."""
    if not math.isfinite(x):
        return str(x)
    if x == 0:
        return "0.00"
    decimals = max(0, 2 - math.floor(math.log10(abs(x))))
    s = f"{x:.{decimals}f}"
    # rounding can add a digit (9.996 -> "10.00"): redo with the rounded magnitude
    r = float(s)
    if r != 0 and math.floor(math.log10(abs(r))) != math.floor(math.log10(abs(x))):
        s = f"{r:.{max(0, 2 - math.floor(math.log10(abs(r))))}f}"
    return s


def format_scoring_result(d: dict) -> str:
    """``scoring: naive A s/step, packed B s/step, speedup Rx[, peak RSS M MB]`` (A, B: 3
    significant digits; R: 1 decimal). ``packed`` is the default scoring path."""
    return (f"scoring: naive {_sig3(float(d['naive_s_per_step']))} s/step, "
            f"packed {_sig3(float(d['packed_s_per_step']))} s/step, "
            f"speedup {float(d['speedup']):.1f}x"
            + (f", peak RSS {float(d['peak_rss_mb']):.0f} MB" if "peak_rss_mb" in d else ""))


def cpu_description() -> dict[str, Any]:
    """The CPU's model name, cores and the vector features that decide the arithmetic."""
    model, flags = platform.processor() or platform.machine(), set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                model = value.strip()
            elif key.strip() == "flags":
                flags = set(value.split())
    except OSError:
        pass
    wanted = ("avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_bf16",
              "amx_int8")
    import os
    return {"model": model, "cores": os.cpu_count(),
            "vector": [f for f in wanted if f in flags],
            "native_bf16": bool({"avx512_bf16", "amx_bf16"} & flags),
            "torch_isa": _torch_isa(),
            # caps that make an AVX-512 machine compute as an AVX2-only one would
            "isa_caps": {k: os.environ[k] for k in ISA_CAPS if os.environ.get(k)}}


#: Environment variables that cap the instructions torch's kernels and oneDNN use.
ISA_CAPS = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA")


def _torch_isa() -> str:
    """The instruction set torch's own kernels dispatch to ("AVX512", "AVX2" ...)."""
    try:
        import torch
        return str(torch.backends.cpu.get_cpu_capability())
    except (ImportError, AttributeError):
        return ""


def format_cpu(cpu: dict, threads: int) -> str:
    caps = cpu.get("isa_caps") or {}
    return (f"CPU: {cpu['model']}, {cpu['cores']} cores, {threads} torch threads; vector: "
            f"{' '.join(cpu['vector']) or 'none of avx2/avx512'}"
            f"{'' if cpu['native_bf16'] else ' (no native bf16)'}"
            + (f"; torch kernels: {cpu['torch_isa']}" if cpu.get("torch_isa") else "")
            + (f"; capped: {' '.join(f'{k}={v}' for k, v in caps.items())}" if caps else ""))


def record_steps(n_tasks: int = BENCH_TASKS, tasks_file: str = "tasks_dev.yaml",
                 scorer=None, progress: bool = True, kitchen_file: str = "") -> list[BenchStep]:
    """The steps of SayCan plans for the first task of ``n_tasks`` development families
    (symbolic world, every skill scored), as the language model saw them. ``tasks_file``: a
    name in the config folder or a path; ``kitchen_file``: the kitchen it is over."""
    from saycan_ros.core.tasks import load_tasks
    from saycan_ros.evaluation.plans import evaluate
    from saycan_ros.planning.affordance import load_affordance
    from saycan_ros.planning.language import LanguageScorer
    from saycan_ros.planning.vocabulary import load_vocabulary
    from saycan_ros.core.config import resolve_config
    vocabulary = load_vocabulary(kitchen_file)
    tasks, families = [], set()
    for task in load_tasks(resolve_config(tasks_file, tasks_file), vocabulary.kitchen):
        if task.family not in families and len(tasks) < n_tasks:
            families.add(task.family)
            tasks.append(task)
    calls: list[tuple[str, str, tuple[str, ...]]] = []

    class Recording(LanguageScorer):
        def score(self, instruction, history, skills, scene=""):
            shown = scene if self.prompt.scene else ""
            calls.append((self.prefix_for(instruction),
                          self.prompt.query(instruction, history, shown),
                          tuple(self.prompt.option(s) for s in skills)))
            return super().score(instruction, history, skills, scene)

    recording = Recording(scorer.backend, scorer.prompt, scorer.prior_weight,
                          scorer.examples_for)
    report = evaluate(tasks, kitchen=vocabulary.kitchen, skills=vocabulary.skills,
                      language_scorer=recording, affordance_scorer=load_affordance(),
                      strategy_options={"prune": False}, progress=progress)
    records = [step for outcome in report.outcomes for step in outcome.result.steps]
    if len(records) != len(calls):
        raise RuntimeError(f"{len(calls)} scoring calls for {len(records)} plan steps")
    return [BenchStep(prefix, query, options, tuple(bool(a > 0) for a in r.affordance),
                      tuple(float(a) for a in r.affordance), scorer.prompt.temperature)
            for (prefix, query, options), r in zip(calls, records)]


def _choice(scores: np.ndarray, step: BenchStep, pruned: bool) -> int:
    """SayCan's pick from raw summed log-probs: argmax of softmax x affordance, i.e. of
    log-prob + log affordance (pruned arms scored only the runnable skills)."""
    aff = np.asarray(step.affordance)
    with np.errstate(divide="ignore"):
        value = np.asarray(scores, dtype=float) / step.temperature + np.log(aff)
    if pruned:
        value = np.where(np.asarray(step.runnable), value, -np.inf)
    return int(np.argmax(value)) if np.isfinite(value).any() else 0


def _run_arm(backend, steps: Sequence[BenchStep], arm: str, bar=None) -> tuple[list, list]:
    """Times and full-length score vectors (NaN where not scored) of ``arm`` over ``steps``."""
    scoring = {"naive": "naive", "flat": "packed", "trie": "packed"}.get(arm, "fast")
    backend.share_option_prefixes = arm != "flat"
    backend.clear_prefix_cache()
    times, scores = [], []
    try:
        for step in steps:
            keep = np.asarray(step.runnable) if arm in PRUNED_ARMS else \
                np.ones(len(step.options), dtype=bool)
            if not keep.any():
                keep[:] = True
            options = [o for o, k in zip(step.options, keep) if k]
            t0 = time.perf_counter()
            raw = backend.option_logprobs(step.prefix, step.query, options, scoring=scoring)
            times.append(time.perf_counter() - t0)
            full = np.full(len(step.options), np.nan)
            full[keep] = raw
            scores.append(full)
            if bar is not None:
                bar.update()
    finally:
        backend.share_option_prefixes = True
    return times, scores


def run_scoring_bench(backend, steps: Sequence[BenchStep], *, naive_steps: int = 3,
                      kernel_backend=None, int8_backend=None, progress: bool = True) -> dict:
    """Every arm of :data:`ARMS` over ``steps`` on ``backend`` (a loaded TransformersBackend,
    best with ``kernels="aten"``); ``kernel_backend``: the same model with ``kernels="onednn"``
    for that arm, ``int8_backend``: with ``quantize="int8"``; None leaves the arm out (without
    ``onednn`` the default arm is ``prune``). ``naive`` runs on ``naive_steps`` steps spread over
    the plans (it is ~100x dearer).

    Returns per arm ``{s_per_step (median), mean_s, steps, same_choice, max_abs_diff}`` under
    ``arms``, plus the summary fields ``naive_s_per_step``, ``packed_s_per_step`` (the default
    arm), ``speedup``, ``plain_packed_s_per_step``, ``peak_rss_mb`` and the CPU."""
    from tqdm.auto import tqdm

    if not steps:
        raise ValueError("no steps to bench")
    if naive_steps < 1:
        raise ValueError("naive_steps must be >= 1")
    picks = sorted({round(i * (len(steps) - 1) / max(naive_steps - 1, 1))
                    for i in range(min(naive_steps, len(steps)))})
    other = {"onednn": kernel_backend, "int8": int8_backend}
    arms = [a for a in ARMS if a not in other or other[a] is not None]
    total = sum(len(picks) if a == "naive" else len(steps) for a in arms) + 1
    bar = tqdm(total=total, desc=f"scoring bench {backend.name}", unit="step",
               disable=not progress, leave=False)
    out: dict[str, dict] = {}
    try:
        # warm-up: the prompt's fixed prefix is encoded once in a planning run too
        backend.option_logprobs(steps[0].prefix, steps[0].query, list(steps[0].options[:2]))
        bar.update()
        results = {}
        for arm in arms:
            bar.set_postfix_str(arm)
            chosen = [steps[i] for i in picks] if arm == "naive" else steps
            # an untimed pass first, as a node that has planned before: each arm's kernels for
            # each shape are made and its memory is allocated (its caches are cleared again)
            _run_arm(other.get(arm) or backend, chosen[:1] if arm == "naive" else chosen, arm)
            results[arm] = _run_arm(other.get(arm) or backend, chosen, arm, bar)
    finally:
        bar.close()
    ref_scores = results[REFERENCE_ARM][1]
    for arm, (times, scores) in results.items():
        ref = [ref_scores[i] for i in picks] if arm == "naive" else ref_scores
        chosen = [steps[i] for i in picks] if arm == "naive" else steps
        pruned = arm in PRUNED_ARMS
        same = sum(_choice(s, st, pruned) == _choice(r, st, False)
                   for s, r, st in zip(scores, ref, chosen))
        diffs = [np.nanmax(np.abs(s - r)) for s, r in zip(scores, ref)]
        out[arm] = {"s_per_step": float(np.median(times)), "mean_s": float(np.mean(times)),
                    "steps": len(times), "same_choice": int(same),
                    "max_abs_diff": float(np.max(diffs))}
    default_arm = DEFAULT_ARM if DEFAULT_ARM in out else "prune"
    naive_s = out["naive"]["s_per_step"]
    fast_s = out[default_arm]["s_per_step"]
    import torch
    return {
        "model": backend.name,
        "cpu": cpu_description(),
        "threads": torch.get_num_threads(),
        "steps": len(steps),
        "n_options": len(steps[0].options),
        "arms": out,
        "naive_s_per_step": naive_s,
        "packed_s_per_step": fast_s,
        "plain_packed_s_per_step": out[REFERENCE_ARM]["s_per_step"],
        "speedup": naive_s / fast_s if fast_s > 0 else float("inf"),
        "default_arm": default_arm,
        "max_abs_diff": out[default_arm]["max_abs_diff"],
        "same_top1": out[default_arm]["same_choice"] == len(steps),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def format_arms(d: dict) -> str:
    """The per-lever table: each arm's median s/step, its ratio to naive and to the plain packed
    path, and how many of its choices equal the plain packed path's."""
    naive = d["naive_s_per_step"]
    plain = d["plain_packed_s_per_step"]
    lines = [format_cpu(d["cpu"], d["threads"]),
             f"model: {d['model']}; {d['steps']} steps of development plans, "
             f"{d['n_options']} skills",
             f"{'arm':<7} {'s/step':>8} {'x naive':>8} {'x plain':>8} {'same choice':>12} "
             f"{'max |diff|':>10}"]
    for arm, r in d["arms"].items():
        lines.append(f"{arm:<7} {_sig3(r['s_per_step']):>8} {naive / r['s_per_step']:>8.1f} "
                     f"{plain / r['s_per_step']:>8.2f} {r['same_choice']:>6}/{r['steps']:<5} "
                     f"{r['max_abs_diff']:>10.2g}")
    return "\n".join(lines)
