"""The learning commands of ``saycan``, added by :func:`register` (called from
``saycan_ros/cli/main.py``):

    saycan train bc    [--config F] [--seed 0] [--out models/bc_pick.pt] [--set train.steps=100]
    saycan train value [--config F] [--seed 0] [--out models/value_pick.pt] [--policy bc_pick.pt]
    saycan eval-skill pick [--episodes 20 (per object)] [--seed 0] [--weights F] [--json F] [--record]
    saycan eval-value  [--episodes 1800] [--seed 0] [--elsewhere 0.5] [--png F] [--record]

``eval-skill pick`` is listed with the other skills' evaluators in
:data:`saycan_ros.cli.eval_skill.SKILL_EVALUATORS` (``run_eval_skill_pick``, ``pick_arguments``).
"""
from __future__ import annotations

import contextlib
import json
import os


def _nested(subparsers, name: str, help_: str):
    """The nested subparsers action of command ``name`` (created on first use), so several
    modules can add their own ``saycan <name> <what>`` commands."""
    parser = subparsers.choices.get(name)
    if parser is None:
        parser = subparsers.add_parser(name, help=help_)
    nested = getattr(parser, "_saycan_nested", None)
    if nested is None:
        nested = parser.add_subparsers(dest=f"{name.replace('-', '_')}_what", required=True)
        parser._saycan_nested = nested
    return nested


def train_subparsers(subparsers):
    return _nested(subparsers, "train", "train a learned model (weights go to models/)")


def _overrides(pairs) -> dict:
    out = {}
    for pair in pairs or []:
        key, _, value = pair.partition("=")
        if not _ or "." not in key:
            raise SystemExit(f"--set expects SECTION.KEY=VALUE, got {pair!r}")
        out[key] = _value(value)
    return out


def _value(text: str):
    """A ``--set`` value: JSON where it parses (numbers, lists, true/false/null, "quoted"),
    else the text itself (``train.precision=fp32``)."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def _dump(path, result) -> None:
    if path:
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(result, handle, indent=1)


def cmd_train_bc(args) -> int:
    from saycan_ros.learning.train_bc import train_bc
    with _config_errors("train bc"):
        train_bc(config_path=args.config or None, seed=args.seed, out=args.out or None,
                 overrides=_overrides(args.set))
    return 0


def cmd_train_value(args) -> int:
    from saycan_ros.learning.train_value import train_value
    with _config_errors("train value"):
        train_value(config_path=args.config or None, seed=args.seed, out=args.out or None,
                    policy=args.policy or None, overrides=_overrides(args.set))
    return 0


def cmd_train_planner(args) -> int:
    from saycan_ros.cli.common import kitchen_option
    kitchen_file, error = kitchen_option(args, "train planner")
    if error:
        raise SystemExit(error)
    from saycan_ros.learning.train_planner import stop_on_signals, train_planner
    with _config_errors("train planner"), stop_on_signals() as stop:
        record = train_planner(config_path=args.config or None, seed=args.seed,
                               out=args.out or None, overrides=_overrides(args.set),
                               kitchen_file=kitchen_file, resume=args.resume,
                               init_adapter=args.init_adapter, stop=stop)
    if "stopped_at" in record:      # Ctrl-C or SIGTERM: the step it was in is kept
        print(f"planner adapter: stopped after step {record['stopped_at']} of {record['steps']}; "
              f"{record['checkpoint']} holds it (the same command with --resume continues)")
        return 130
    m = record["metrics"]
    print(f"planner adapter: {record['dialogues']} dialogues, {m['steps']} steps in "
          f"{m['seconds']:.0f} s; loss {m['first_loss']} -> {m['final_loss']}, held-out option "
          f"token accuracy {m['held_out_token_accuracy']:.3f}")
    return 0


@contextlib.contextmanager
def _config_errors(command: str):
    """A bad configuration or ``--set`` is one clear line (exit status 1), not a traceback."""
    from saycan_ros.core.config import ConfigError
    try:
        yield
    except ConfigError as error:
        raise SystemExit(f"saycan {command}: {error}") from None


def cmd_eval_value(args) -> int:
    from saycan_ros.learning.evaluate import eval_value, format_value_result
    if args.elsewhere is not None and not 0.0 <= args.elsewhere <= 1.0:
        raise SystemExit(f"saycan eval-value: --elsewhere is a share in [0, 1], got {args.elsewhere}")
    result = eval_value(args.episodes, args.seed, weights=args.weights or None,
                        policy=args.policy or None, n_envs=args.n_envs, png=args.png,
                        record=args.record, elsewhere=args.elsewhere)
    _dump(args.json, result)
    print(format_value_result(result))
    return 0


def run_eval_skill_pick(args):
    """``saycan eval-skill pick``: a :class:`~saycan_ros.cli.eval_skill.SkillEvalReport` with
    one group per object (``--episodes`` per object, default 20)."""
    from saycan_ros.learning.evaluate import eval_skill_pick
    from saycan_ros.cli.eval_skill import SkillEvalReport
    result = eval_skill_pick(args.episodes or 20, args.seed, weights=args.weights or None,
                             n_envs=args.n_envs, record=args.record, progress=not args.quiet)
    report = SkillEvalReport("pick", seconds=result["seconds"])
    for obj, v in result["per_object"].items():
        report.groups[obj] = [v["success"], v["episodes"]]
    report.extra = {"weights": result["weights"], "env seeds": result["env_seeds"],
                    "mean episode length": round(result["mean_length"], 1),
                    "by location": ", ".join(f"{where} {v['success']}/{v['episodes']}" for where, v
                                             in result["per_location"].items())}
    return report


def pick_arguments(parser) -> None:
    parser.add_argument("--weights", default="", help="pick: BC weights (default models/bc_pick.pt)")
    parser.add_argument("--n-envs", type=int, default=16, help="pick: episodes run side by side")
    parser.add_argument("--record", action="store_true",
                        help="pick: store the result in the weights' record (models/bc_pick.json)")


def register(subparsers) -> None:
    """Add ``train {bc,value,planner}`` and ``eval-value`` to ``saycan``."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    train = train_subparsers(subparsers)
    for name, func, out in (("bc", cmd_train_bc, "bc_pick.pt"), ("value", cmd_train_value, "value_pick.pt")):
        p = train.add_parser(name, help=f"train {out} (reproducible from --seed)")
        p.add_argument("--config", default="", help="hyper-parameters (default config/learning.yaml)")
        p.add_argument("--seed", type=int, default=0)
        p.add_argument("--out", default="", help=f"weights file (default models/{out})")
        p.add_argument("--set", action="append", metavar="SECTION.KEY=VALUE",
                       help="override one hyper-parameter, e.g. train.steps=200")
        if name == "value":
            p.add_argument("--policy", default="", help="BC weights whose value is learned")
        p.set_defaults(func=func)

    p = train.add_parser("planner", help="train the LoRA planner adapter of the language model "
                                         "(models/planner_qwen05/ for the default model, "
                                         "reproducible from --seed)")
    p.add_argument("--config", default="", help="hyper-parameters (default config/learning.yaml)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="", help="adapter folder (default the base model's, e.g. "
                                             "models/planner_qwen05; with --kitchen K: "
                                             "models/planner_qwen05_K)")
    p.add_argument("--set", action="append", metavar="SECTION.KEY=VALUE",
                   help="override one hyper-parameter, e.g. data.dialogues=200")
    p.add_argument("--init-adapter", default=None, metavar="NAME",
                   help="continue this adapter (a folder under models/ or a path; '' = a fresh "
                        "LoRA) instead of the config's init_adapter (with --kitchen: instead of "
                        "the shipped adapter)")
    p.add_argument("--resume", action="store_true",
                   help="continue from <out>/checkpoint.pt (same config and seed), written every "
                        "train.checkpoint_every steps")
    from saycan_ros.cli.common import add_kitchen_argument
    add_kitchen_argument(p)
    p.set_defaults(func=cmd_train_planner)

    ev = subparsers.add_parser("eval-value", help="pick affordance vs. BC success on held-out starts")
    # 1,800 starts: on 600, two seeds differed by 0.024 in AUROC and 0.019 in ECE, too much
    # to judge a 0.05 ECE bound (1.5 min on one core).
    ev.add_argument("--episodes", type=int, default=1800)
    ev.add_argument("--seed", type=int, default=0, help="evaluation seed (never used in training)")
    ev.add_argument("--weights", default="", help="default models/value_pick.pt")
    ev.add_argument("--policy", default="", help="default models/bc_pick.pt")
    ev.add_argument("--n-envs", type=int, default=16)
    ev.add_argument("--elsewhere", type=float, default=None,
                    help="share of starts with the other shelves stocked too (default: the value "
                         "configuration's data.elsewhere)")
    ev.add_argument("--png", default="docs/value_reliability.png", help="reliability diagram ('' = none)")
    ev.add_argument("--json", default="")
    ev.add_argument("--record", action="store_true", help="store the result in models/value_pick.json")
    ev.set_defaults(func=cmd_eval_value)
