"""The learning commands of ``saycan``, added by :func:`register_cli` (called from
``saycan_ros/cli.py``):

    saycan train bc    [--config F] [--seed 0] [--out models/bc_pick.pt] [--set train.steps=100]
    saycan train value [--config F] [--seed 0] [--out models/value_pick.pt] [--policy bc_pick.pt]
    saycan eval-skill pick [--episodes-per-object 20] [--seed 0] [--weights F] [--json F] [--record]
    saycan eval-value  [--episodes 600] [--seed 0] [--png docs/value_reliability.png] [--record]

Other skills' evaluations join ``eval-skill`` through :func:`eval_skill_subparsers`.
"""
from __future__ import annotations

import argparse
import json
import os
import sys


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


def eval_skill_subparsers(subparsers):
    return _nested(subparsers, "eval-skill", "success rate of a learned/scripted skill in the simulator")


def train_subparsers(subparsers):
    return _nested(subparsers, "train", "train a learned model (weights go to models/)")


def _overrides(pairs) -> dict:
    out = {}
    for pair in pairs or []:
        key, _, value = pair.partition("=")
        if not _ or "." not in key:
            raise SystemExit(f"--set expects SECTION.KEY=VALUE, got {pair!r}")
        out[key] = json.loads(value) if value[:1] in "[{0123456789-tfn" else value
    return out


def _dump(path, result) -> None:
    if path:
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(result, handle, indent=1)


def cmd_train_bc(args) -> int:
    from saycan_ros.learning.train_bc import train_bc
    train_bc(config_path=args.config or None, seed=args.seed, out=args.out or None,
             overrides=_overrides(args.set))
    return 0


def cmd_train_value(args) -> int:
    from saycan_ros.learning.train_value import train_value
    train_value(config_path=args.config or None, seed=args.seed, out=args.out or None,
                policy=args.policy or None, overrides=_overrides(args.set))
    return 0


def cmd_eval_skill_pick(args) -> int:
    from saycan_ros.learning.evaluate import eval_skill_pick, format_skill_result, format_skill_table
    result = eval_skill_pick(args.episodes_per_object, args.seed, weights=args.weights or None,
                             n_envs=args.n_envs, record=args.record)
    _dump(args.json, result)
    print(format_skill_table(result))
    print(format_skill_result(result))
    return 0


def cmd_eval_value(args) -> int:
    from saycan_ros.learning.evaluate import eval_value, format_value_result
    result = eval_value(args.episodes, args.seed, weights=args.weights or None,
                        policy=args.policy or None, n_envs=args.n_envs, png=args.png,
                        record=args.record)
    _dump(args.json, result)
    print(format_value_result(result))
    return 0


def register_cli(subparsers) -> None:
    """Add ``train {bc,value}``, ``eval-skill pick`` and ``eval-value`` to ``saycan``."""
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

    pick = eval_skill_subparsers(subparsers).add_parser(
        "pick", help="BC pick policy on fresh feasible starts, per object")
    pick.add_argument("--episodes-per-object", type=int, default=20)
    pick.add_argument("--seed", type=int, default=0, help="evaluation seed (never used in training)")
    pick.add_argument("--weights", default="", help="default models/bc_pick.pt")
    pick.add_argument("--n-envs", type=int, default=16)
    pick.add_argument("--json", default="")
    pick.add_argument("--record", action="store_true", help="store the result in models/bc_pick.json")
    pick.set_defaults(func=cmd_eval_skill_pick)

    ev = subparsers.add_parser("eval-value", help="pick affordance vs. BC success on held-out starts")
    ev.add_argument("--episodes", type=int, default=600)
    ev.add_argument("--seed", type=int, default=0, help="evaluation seed (never used in training)")
    ev.add_argument("--weights", default="", help="default models/value_pick.pt")
    ev.add_argument("--policy", default="", help="default models/bc_pick.pt")
    ev.add_argument("--n-envs", type=int, default=16)
    ev.add_argument("--png", default="docs/value_reliability.png", help="reliability diagram ('' = none)")
    ev.add_argument("--json", default="")
    ev.add_argument("--record", action="store_true", help="store the result in models/value_pick.json")
    ev.set_defaults(func=cmd_eval_value)


def main(argv=None) -> int:
    """Stand-alone entry (``python -m saycan_ros.learning.cli ...``) until saycan's CLI calls
    :func:`register_cli`."""
    parser = argparse.ArgumentParser(prog="saycan")
    register_cli(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
