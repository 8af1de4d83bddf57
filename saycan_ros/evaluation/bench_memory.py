"""Benchmark of the language scorer's resident memory over many distinct instructions, with and
without giving freed heap memory back after each request (:func:`saycan_ros.core.memory.
release_freed_memory`, what the nodes do), side by side in one run: each arm in a fresh process
on the same instructions, so one arm's heap cannot flatter the other's.

The instructions are what a scorer meets in service: the planner data generator's phrasings
(every family and language) with one in five drawn from the fuzzer (up to 3,000 characters,
other scripts, injections), each scored once over every skill, every third with a history.
"""
from __future__ import annotations

import multiprocessing
import random
import time

#: Instructions scored before the baseline is taken (model warm-up, first caches).
WARMUP = 20
#: An RSS mark after every this many instructions.
MARK_EVERY = 100
#: none: never trim; trim: after every instruction; grown: when RSS grew 32 MB (what the nodes do).
POLICIES = ("none", "trim", "grown")


def memory_instructions(n: int, seed: int = 0) -> list[str]:
    """``n`` distinct instructions, each accepted by ``check_instruction`` (seeded)."""
    from saycan_ros.core.tasks import TaskError, check_instruction
    from saycan_ros.evaluation.fuzz import fuzz_instructions
    from saycan_ros.learning.planner_data import PlanDataGenerator, load_lexicon
    from saycan_ros.planning.vocabulary import load_vocabulary

    vocabulary = load_vocabulary()
    generator = PlanDataGenerator(vocabulary.kitchen, vocabulary.skills,
                                  load_lexicon(vocabulary.kitchen), seed=seed)
    phrased = list(dict.fromkeys(d.instruction for d in generator.dialogues(n)))
    fuzzed = []
    for _, text in fuzz_instructions(2 * n, seed=seed):
        try:
            fuzzed.append(check_instruction(text))
        except TaskError:
            continue
    out, seen = [], set()
    for i in range(n * 2):
        source = fuzzed if (i % 5 == 4 and fuzzed) or not phrased else phrased
        if source:
            text = source.pop(0)
            if text not in seen:
                seen.add(text)
                out.append(text)
        if len(out) == n:
            break
    if len(out) < n:
        raise RuntimeError(f"only {len(out)} distinct instructions for {n}")
    return out


def _arm(policy: str, instructions: list[str], model: str, adapter: str, seed: int,
         queue) -> None:
    """One arm in its own process: load the scorer, score every instruction, send the marks."""
    import torch
    from tqdm.auto import tqdm

    from saycan_ros.core.memory import HeapTrimmer, release_freed_memory, rss_mb
    from saycan_ros.llm.config import LLMConfig
    from saycan_ros.planning.vocabulary import load_vocabulary
    from saycan_ros.stack import make_language_scorer

    torch.set_num_threads(2)
    vocabulary = load_vocabulary()
    scorer = make_language_scorer(LLMConfig(model=model, adapter=adapter), vocabulary.prompt)
    skills = vocabulary.skills.texts
    rng = random.Random(seed)
    grown = HeapTrimmer()
    marks, started, baseline_at = [], 0.0, None
    for i, text in enumerate(tqdm(instructions, desc=f"memory ({policy})", unit="instr")):
        history = rng.sample(skills, 2) if i % 3 == 0 else []
        scorer.score(text, history, skills)
        if policy == "trim":
            release_freed_memory()
        elif policy == "grown":
            grown()
        done = i + 1
        if done == WARMUP:
            started, baseline_at = time.perf_counter(), done
        if done == WARMUP or done % MARK_EVERY == 0 or done == len(instructions):
            marks.append((done, round(rss_mb(), 1)))
    seconds = time.perf_counter() - started if baseline_at else 0.0
    queue.put({"policy": policy, "marks": marks,
               "s_per_instruction": seconds / max(len(instructions) - WARMUP, 1)})


def run_memory_bench(n: int = 1000, model: str = "smollm2-135m", adapter: str = "auto",
                     seed: int = 0, policies=POLICIES) -> dict:
    """RSS marks of each policy's arm over the same ``n`` instructions, and the ratios.
    Returns ``{n, arms: {policy: {marks, growth, s_per_instruction}}, time_ratios}`` (each
    policy's time per instruction over none's)."""
    if n <= WARMUP:
        raise ValueError(f"instructions must be more than the {WARMUP} of the warm-up, got {n}")
    unknown = sorted(set(policies) - set(POLICIES))
    if unknown:
        raise ValueError(f"unknown policies {unknown}; known: {', '.join(POLICIES)}")
    instructions = memory_instructions(n, seed)
    context = multiprocessing.get_context("spawn")     # a fresh heap per arm
    arms = {}
    for policy in policies:
        queue = context.Queue()
        process = context.Process(target=_arm,
                                  args=(policy, instructions, model, adapter, seed, queue))
        process.start()
        result = queue.get()
        process.join()
        base, end = result["marks"][0][1], result["marks"][-1][1]
        arms[policy] = {**result, "growth": (end - base) / base if base else float("nan")}
    out = {"n": n, "model": model, "adapter": adapter, "warmup": WARMUP, "arms": arms}
    if "none" in arms:
        base = max(arms["none"]["s_per_instruction"], 1e-9)
        out["time_ratios"] = {p: arms[p]["s_per_instruction"] / base for p in arms if p != "none"}
    return out


def format_memory_result(d: dict) -> str:
    """One line per arm (RSS after the warm-up, at the end, growth, marks) and the time ratio."""
    lines = []
    for policy, arm in d["arms"].items():
        marks = ", ".join(f"{k}: {mb:.0f}" for k, mb in arm["marks"])
        lines.append(f"memory {policy}: {d['n']} instructions, RSS {arm['marks'][0][1]:.0f} -> "
                     f"{arm['marks'][-1][1]:.0f} MB (growth {arm['growth']:+.1%}), "
                     f"{arm['s_per_instruction']:.3f} s/instruction  [MB after {marks}]")
    for policy, ratio in d.get("time_ratios", {}).items():
        lines.append(f"memory: {policy}/none time {ratio:.2f}x")
    return "\n".join(lines)
