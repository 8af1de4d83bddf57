"""``saycan sim --render FILE.png|FILE.mp4``: a picture of the simulated kitchen, or a video
of a scripted errand run by the skill controllers."""
from __future__ import annotations

import json
import sys

from saycan_ros.cli.common import add_kitchen_argument, kitchen_option


def cmd_sim(args) -> int:
    kitchen_file, error = kitchen_option(args, "sim")
    if error:
        print(error, file=sys.stderr)
        return 2
    from saycan_ros.worlds.render import render_kitchen
    init = json.loads(args.init) if args.init else None
    print(render_kitchen(args.render, seed=args.seed, init=init, kitchen_file=kitchen_file))
    return 0


def register(sub) -> None:
    sim = sub.add_parser("sim", help="the built-in simulator")
    sim.add_argument("--render", required=True, help="FILE.png or FILE.mp4")
    sim.add_argument("--seed", type=int, default=0)
    sim.add_argument("--init", help="task init as JSON")
    add_kitchen_argument(sim)
    sim.set_defaults(func=cmd_sim)
