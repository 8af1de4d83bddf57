"""Benchmark of candidate scoring: one forward pass per option (naive) against the cached prefix
+ all options packed in one forward pass (packed), side by side on the same loaded model.

``run_scoring_bench`` returns the timings and the largest score difference between the modes;
``format_scoring_result`` renders the summary line printed by ``saycan bench scoring``.
"""

from __future__ import annotations

import math
import resource
import time
from typing import Any

import numpy as np


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
    significant digits; R: 1 decimal)."""
    return (f"scoring: naive {_sig3(float(d['naive_s_per_step']))} s/step, "
            f"packed {_sig3(float(d['packed_s_per_step']))} s/step, "
            f"speedup {float(d['speedup']):.1f}x"
            + (f", peak RSS {float(d['peak_rss_mb']):.0f} MB" if "peak_rss_mb" in d else ""))


def run_scoring_bench(model: str, prefix: str, query: str, options: list[str],
                      repeats: int = 3, naive_repeats: int = 1, *, backend: Any = None,
                      dtype: str = "float32", threads: int | None = None,
                      progress: bool = True) -> dict:
    """Time naive and packed scoring of ``options`` after ``prefix + query`` on one model.

    The model is loaded once (or ``backend``, a loaded TransformersBackend, is reused); a warm-up
    packed call builds the prefix KV cache (as in a planning run, where the few-shot prefix is
    constant), then each packed step re-does the per-step work (copy of the cache, query tokens,
    the packed pass). Returns ``{model, n_options, naive_s_per_step, packed_s_per_step, speedup,
    max_abs_diff}`` plus ``load_s``, ``same_top1``, ``prompt_tokens`` and ``peak_rss_mb`` (the
    process's peak resident memory: the scorer's footprint, model and both passes included).
    """
    from tqdm.auto import tqdm

    if repeats < 1 or naive_repeats < 1:
        raise ValueError("repeats and naive_repeats must be >= 1")
    load_s = 0.0
    if backend is None:
        from saycan_ros.llm.transformers_backend import TransformersBackend

        t0 = time.perf_counter()
        backend = TransformersBackend(model, dtype=dtype, threads=threads, packed=True)
        load_s = time.perf_counter() - t0
    options = list(options)
    total = 1 + repeats + naive_repeats
    bar = tqdm(total=total, desc=f"scoring bench {backend.name}", unit="step",
               disable=not progress, leave=False)
    try:
        bar.set_postfix_str("warm-up")
        backend.option_logprobs(prefix, query, options, packed=True)
        bar.update()

        bar.set_postfix_str("packed")
        packed_times, packed_scores = [], None
        for _ in range(repeats):
            t0 = time.perf_counter()
            packed_scores = backend.option_logprobs(prefix, query, options, packed=True)
            packed_times.append(time.perf_counter() - t0)
            bar.update()

        bar.set_postfix_str("naive")
        naive_times, naive_scores = [], None
        for _ in range(naive_repeats):
            t0 = time.perf_counter()
            naive_scores = backend.option_logprobs(prefix, query, options, packed=False)
            naive_times.append(time.perf_counter() - t0)
            bar.update()
    finally:
        bar.close()

    naive_s = float(np.median(naive_times))
    packed_s = float(np.median(packed_times))
    n_prompt = len(backend._bos + backend._encode(prefix) + backend._encode(query)) \
        if hasattr(backend, "_encode") else None
    return {
        "model": backend.name,
        "n_options": len(options),
        "naive_s_per_step": naive_s,
        "packed_s_per_step": packed_s,
        "speedup": naive_s / packed_s if packed_s > 0 else float("inf"),
        "max_abs_diff": float(np.max(np.abs(np.asarray(packed_scores) - np.asarray(naive_scores)))),
        "same_top1": int(np.argmax(packed_scores)) == int(np.argmax(naive_scores)),
        "load_s": load_s,
        "prompt_tokens": n_prompt,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }
