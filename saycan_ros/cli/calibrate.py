"""``saycan calibrate``: rebuild the conformal calibration of asking for help (the shipped
models/ask_calibration_qwen05.json for the default model, ..._smollm2.json for SmolLM2),
from generated plans that no task file holds; prints the threshold and the held-aside
coverage at several epsilons."""
from __future__ import annotations

import sys

from saycan_ros.cli.common import add_model_arguments, bad_llm_options


def cmd_calibrate(args) -> int:
    if bad_llm_options(args, "calibrate"):
        print(bad_llm_options(args, "calibrate"), file=sys.stderr)
        return 2
    if not 0.0 <= args.ambiguous_share <= 1.0:
        print("saycan calibrate: --ambiguous-share must be in [0, 1]", file=sys.stderr)
        return 2
    if args.plans < 3:
        print("saycan calibrate: --plans must be at least 3", file=sys.stderr)
        return 2
    from saycan_ros.evaluation.calibrate import CALIBRATION_SEED, SPLITS, calibrate
    from saycan_ros.llm.config import LLMConfig
    from saycan_ros.planning.affordance import load_affordance
    from saycan_ros.planning.asking import CALIBRATION_FILES
    from saycan_ros.planning.vocabulary import load_vocabulary
    from saycan_ros.core.paths import models_dir
    from saycan_ros.stack import make_language_scorer

    out = args.out or (models_dir() / CALIBRATION_FILES[args.model]
                       if args.model in CALIBRATION_FILES else "")
    if not out:
        print(f"saycan calibrate: --out FILE is needed for {args.model} (no shipped file)",
              file=sys.stderr)
        return 2
    vocabulary = load_vocabulary("")
    scorer = make_language_scorer(LLMConfig.from_args(args), vocabulary.prompt)
    calibration = calibrate(vocabulary, scorer, load_affordance(), n=args.plans,
                            seed=CALIBRATION_SEED + args.seed,
                            model_name=getattr(scorer.backend, "name", args.model),
                            details=args.details or None,
                            ambiguous_share=args.ambiguous_share)
    calibration.save(out)
    summary = calibration.to_dict()
    data = summary["data"]
    print(f"calibration: {len(calibration.scores)} steps of {data['calibration_plans']} plans, "
          f"{len(calibration.heldout)} steps of {data['heldout_plans']} plans held aside -> {out}")
    for eps, row in summary["coverage"].items():
        splits = data["heldout_coverage_over_splits"][eps]
        print(f"  epsilon {eps}: threshold q {row['q']:.4f} (skills with p >= "
              f"{1 - row['q']:.4f}), held-aside step coverage {row['heldout_coverage']:.3f} "
              f"(target {1 - float(eps):.2f}; over {SPLITS} random splits "
              f"{splits['mean']:.3f} ± {splits['sd']:.3f}), plans with every step covered "
              f"{data['plans_covered_at'][eps]:.2f}")
    return 0


def register(sub) -> None:
    from saycan_ros.evaluation.calibrate import AMBIGUOUS_SHARE
    cal = sub.add_parser("calibrate", help="calibrate when the planner asks for help "
                                           "(conformal prediction sets)")
    add_model_arguments(cal)
    cal.add_argument("--plans", type=int, default=400,
                     help="generated plans (their steps are the samples; a third of the plans "
                          "held aside to measure coverage)")
    cal.add_argument("--ambiguous-share", type=float, default=AMBIGUOUS_SHARE,
                     help="share of the plans that are requests with several readings "
                          "(the person means one of them)")
    cal.add_argument("--seed", type=int, default=0, help="added to the calibration data's seed")
    cal.add_argument("--out", default="", help="calibration file (default: the shipped one)")
    cal.add_argument("--details", default="", metavar="FILE.json.gz",
                     help="also write every step's offered probabilities and right options")
    cal.set_defaults(func=cmd_calibrate)
