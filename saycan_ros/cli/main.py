"""The ``saycan`` command: run the graph on the built-in kitchen, evaluate, benchmark, simulate.

    saycan run "I spilled my coke, can you bring me something to clean it up?" [--plot f.png]
    saycan eval --tasks config/tasks.yaml [--strategy saycan] [--json out.json]
    saycan bench scoring
    saycan bench sim
    saycan sim --render kitchen.png
    saycan check --kitchen my_kitchen.yaml
    saycan calibrate
    saycan launch saycan_sim.launch.py [name:=value ...]
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys

os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")  # DDS stays on loopback


#: One module per verb, each with ``register(subparsers)``; the order is ``saycan --help``'s.
VERBS = ("saycan_ros.cli.run", "saycan_ros.cli.eval", "saycan_ros.cli.bench",
         "saycan_ros.cli.train", "saycan_ros.cli.eval_skill", "saycan_ros.cli.sim",
         "saycan_ros.cli.check", "saycan_ros.cli.calibrate", "saycan_ros.cli.launching")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="saycan", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for verb in VERBS:
        importlib.import_module(verb).register(sub)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
