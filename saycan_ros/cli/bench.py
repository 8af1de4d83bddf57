"""``saycan bench scoring|training|sim|speech|memory|chaos``: the benchmarks, reported as ratios
measured side by side in one run (packed vs naive scoring; the planner adapter's training step
under each attention and dropout setting; simulator steps with and without the camera; the
speech recognisers on the same spoken instructions; the scorer's memory with and without freed
memory given back), and the fault suite over the node graph
(:mod:`saycan_ros.ros.chaos`; exit status 1 when any part finds a problem)."""
from __future__ import annotations

import sys

from saycan_ros.cli.common import add_kitchen_argument, kitchen_option, write_json


def _bench_scoring(args) -> int:
    """Record the steps of development plans with the default scorer, then time every lever
    on them with ``--model`` (the default one, or another model on the same prompts)."""
    from saycan_ros.evaluation.bench_scoring import (format_arms, format_scoring_result,
                                                     record_steps, run_scoring_bench)
    from saycan_ros.llm.config import DEFAULT_MODEL, LLMConfig, resolve_adapter
    from saycan_ros.llm.transformers_backend import TransformersBackend
    from saycan_ros.planning.vocabulary import load_vocabulary
    from saycan_ros.stack import make_language_scorer
    if args.threads:
        import torch
        torch.set_num_threads(args.threads)
    if args.bench_tasks < 1 or args.naive_steps < 1:
        print("saycan bench scoring: --bench-tasks and --naive-steps must be >= 1", file=sys.stderr)
        return 2
    kitchen_file, error = kitchen_option(args, "bench scoring")
    if error:
        print(error, file=sys.stderr)
        return 2
    if kitchen_file and not args.tasks:
        print("saycan bench scoring: --kitchen needs --tasks (a task file over that kitchen)",
              file=sys.stderr)
        return 2
    try:
        LLMConfig(model=args.model, adapter=args.adapter)
        adapter = resolve_adapter(args.model, args.adapter)
    except ValueError as exc:
        print(f"saycan bench scoring: {exc}", file=sys.stderr)
        return 2
    default = make_language_scorer(LLMConfig(model=DEFAULT_MODEL),
                                   load_vocabulary(kitchen_file).prompt)
    steps = record_steps(args.bench_tasks, args.tasks or "tasks_dev.yaml", scorer=default,
                         kitchen_file=kitchen_file)
    try:
        default_backend = default.backend if args.model == DEFAULT_MODEL and \
            args.adapter == "auto" else TransformersBackend(args.model, adapter=str(adapter or ""))
        plain = TransformersBackend(args.model, adapter=str(adapter or ""), kernels="aten")
        int8 = None if args.no_int8 else TransformersBackend(
            args.model, adapter=str(adapter or ""), quantize="int8")
    except (ValueError, OSError) as exc:
        print(f"saycan bench scoring: {args.model}: {exc}", file=sys.stderr)
        return 2
    kernel = default_backend if default_backend.kernels != "aten" else None
    result = run_scoring_bench(plain, steps, naive_steps=args.naive_steps, kernel_backend=kernel,
                               int8_backend=int8)
    if args.json:
        write_json(args.json, result)
    print(format_arms(result))
    print(format_scoring_result(result))
    return 0


def _report(args, run, formatter, errors=(ValueError,)) -> int:
    """Run a bench; its result to ``--json`` and, formatted, to stdout; a bad setting
    (``errors``) is one line and exit status 2."""
    try:
        result = run()
    except errors as exc:
        print(f"saycan bench {args.what}: {exc}", file=sys.stderr)
        return 2
    if args.json:
        write_json(args.json, result)
    print(formatter(result))
    return 0


def _bench_training(args) -> int:
    """Time the planner adapter's training step under each arm, on the same batches."""
    from saycan_ros.evaluation.bench_training import format_training_result, run_training_bench
    return _report(args, lambda: run_training_bench(
        args.config or None, model=args.model or "", batches=args.batches,
        dialogues=args.dialogues, seed=args.seed, threads=args.threads),
        format_training_result, errors=(ValueError, OSError))


def cmd_bench(args) -> int:
    if args.what == "training":
        return _bench_training(args)
    from saycan_ros.llm.config import DEFAULT_MODEL
    args.model = args.model or DEFAULT_MODEL
    if args.what == "scoring":
        return _bench_scoring(args)
    if args.what == "speech":
        from saycan_ros.core.kitchen import load_kitchen
        from saycan_ros.evaluation.bench_speech import format_speech_result, run_speech_bench
        from saycan_ros.speech.recognisers import kitchen_prompt, make_recogniser
        prompt = kitchen_prompt(load_kitchen())
        return _report(args, lambda: run_speech_bench({
            "whisper": lambda: make_recogniser("whisper", threads=2, prompt=prompt),
            "whisper-noprompt": lambda: make_recogniser("whisper", threads=2),
            "pocketsphinx": lambda: make_recogniser("pocketsphinx")}),
            format_speech_result, errors=())
    if args.what == "chaos":
        from saycan_ros.ros.chaos import PARTS, run_chaos
        parts = [p.strip() for p in args.parts.split(",") if p.strip()] if args.parts else PARTS
        unknown = sorted(set(parts) - set(PARTS))
        if unknown:
            print(f"saycan bench chaos: unknown part(s) {', '.join(unknown)}; the parts: "
                  f"{', '.join(PARTS)}", file=sys.stderr)
            return 2
        result = run_chaos(parts, seed=args.seed, instructions=args.instructions,
                           load=args.load, repeats=args.repeats_cancel)
        if args.json:
            write_json(args.json, result)
        parts_ok = all(not (p["crashed"] or p["hung"] or p["wrong"] or p["lost"])
                       for p in result["parts"])
        return 0 if parts_ok else 1
    if args.what == "memory":
        from saycan_ros.evaluation.bench_memory import format_memory_result, run_memory_bench
        policies = [p.strip() for p in args.policies.split(",") if p.strip()]
        return _report(args, lambda: run_memory_bench(args.instructions, args.model,
                                                      args.adapter, args.seed, policies),
                       format_memory_result)
    if args.what == "sim":
        from saycan_ros.sim.bench import format_sim_result, run_sim_bench
        return _report(args, lambda: run_sim_bench(steps=args.steps, camera=not args.no_camera),
                       format_sim_result, errors=())
    raise AssertionError(args.what)


def register(sub) -> None:
    from saycan_ros.llm.config import DEFAULT_MODEL, LLMConfig
    bench = sub.add_parser("bench", help="benchmarks (ratios measured side by side)")
    bench.add_argument("what", choices=["scoring", "training", "sim", "speech", "chaos", "memory"])
    bench.add_argument("--model", default="",
                       help=f"the language model (default {DEFAULT_MODEL}; training: the config's)")
    bench.add_argument("--adapter", default=LLMConfig().adapter,
                       help="scoring: the planner adapter's prompt and weights (auto, the "
                            "planner's default), or none (the frozen model's few-shot prompt)")
    bench.add_argument("--repeats", type=int, default=3)
    scoring = bench.add_argument_group("scoring")
    scoring.add_argument("--bench-tasks", type=int, default=6,
                         help="development tasks (one per family) whose plan steps are timed")
    scoring.add_argument("--naive-steps", type=int, default=3,
                         help="steps the one-pass-per-option reference is timed on")
    scoring.add_argument("--no-int8", action="store_true", help="leave out the int8 arm")
    scoring.add_argument("--tasks", default="",
                         help="the task file whose plans are timed (default: tasks_dev.yaml)")
    add_kitchen_argument(scoring)
    scoring.add_argument("--threads", type=int, default=0, help="torch threads (0 = default)")
    training = bench.add_argument_group("training (the planner adapter)")
    training.add_argument("--config", default="",
                          help="hyper-parameters: the planner section (default config/learning.yaml)")
    training.add_argument("--batches", type=int, default=4,
                          help="optimiser steps timed per arm (after one warm-up step)")
    training.add_argument("--dialogues", type=int, default=32,
                          help="dialogues generated for the batches")
    bench.add_argument("--steps", type=int, default=5000)
    bench.add_argument("--no-camera", action="store_true")
    bench.add_argument("--json")
    chaos = bench.add_argument_group("chaos (the node graph in processes, loopback only)")
    chaos.add_argument("--parts", default="",
                       help="comma-separated: instructions,services,faults,injected,cancel,load")
    chaos.add_argument("--instructions", type=int, default=1000,
                       help="fuzzed instructions (memory: distinct instructions scored per arm)")
    chaos.add_argument("--load", type=int, default=200, help="instructions back to back")
    chaos.add_argument("--repeats-cancel", type=int, default=20, help="cancels of each kind")
    chaos.add_argument("--seed", type=int, default=0)
    bench.add_argument("--policies", default="none,trim,grown",
                       help="memory: arms, comma-separated: none (never give freed memory "
                            "back), trim (after every request), grown (when RSS grew 32 MB)")
    bench.set_defaults(func=cmd_bench)
