"""``saycan check --kitchen FILE``: is this kitchen file ready to plan in? Its places and
objects, the skills made from them, the prompts that will score them, the scene line the
planner shows, and a few errands solved on its symbolic world. Exit status 2 with one line
naming the field when something is wrong; no language model is loaded."""
from __future__ import annotations

import sys

from saycan_ros.cli.common import add_kitchen_argument, kitchen_option


def kitchen_report(kitchen_file: str = "", errands: int = 3) -> list[str]:
    """The lines ``saycan check`` prints for a kitchen (the built-in one for "")."""
    from collections import Counter

    from saycan_ros.core.kitchen import USER
    from saycan_ros.core.solver import shortest_plan
    from saycan_ros.core.tasks import parse_goal
    from saycan_ros.core.world import SymbolicWorld
    from saycan_ros.planning.scene import scene_of
    from saycan_ros.planning.vocabulary import load_vocabulary
    from saycan_ros.stack import adapter_prompt
    from saycan_ros.llm.config import DEFAULT_MODEL, resolve_adapter

    vocabulary = load_vocabulary(kitchen_file)
    kitchen, skills = vocabulary.kitchen, vocabulary.skills
    described = [o for o in kitchen.objects.values() if o.about]
    lines = [f"kitchen: {kitchen.source}",
             f"  places: {', '.join(kitchen.locations)} (robot starts at the {kitchen.robot_start}; "
             f"throw away: {kitchen.disposal or 'none - no skill throws things away'})",
             f"  objects: {len(kitchen.objects)}, {len(described)} with attributes or a "
             f"description the planner can read"]
    kinds = Counter(s.kind for s in skills)
    lines.append(f"skills: {len(skills)} (" + ", ".join(f"{n} {k}" for k, n in kinds.items())
                 + ")")
    lines.append(f"  e.g. {', '.join(repr(s.text) for s in list(skills)[:3])}, ..., "
                 f"{skills.terminate.text!r}")
    adapter = resolve_adapter(DEFAULT_MODEL, "auto")
    prompt = adapter_prompt(adapter) if adapter else vocabulary.prompt
    lines.append(f"prompt: {len(prompt.examples)} example(s) fit this kitchen"
                 + (f" (planner adapter {adapter.name}: none needed)" if adapter else "")
                 + (", scene line shown" if prompt.scene else ""))
    world = SymbolicWorld(kitchen)
    lines.append(f"  {scene_of(kitchen, world)}")
    lines.append("errands solved on the symbolic world:")
    surfaces = [p for p in kitchen.surfaces if p in kitchen.navigable] or list(kitchen.surfaces)
    for name in list(kitchen.objects)[:errands]:
        goals = [f"at({name}, {USER})"]
        if kitchen.disposal:
            goals.append(f"at({name}, {kitchen.disposal})")
        other = [p for p in surfaces if p != kitchen.object(name).default_location]
        if other:
            goals.append(f"at({name}, {other[0]})")
        for text in goals:
            plan = shortest_plan(parse_goal(text, kitchen), world, {name}, skills)
            shown = " → ".join(plan) if plan is not None else "NO PLAN within the step limit"
            lines.append(f"  {text}: {shown}")
    return lines


def cmd_check(args) -> int:
    kitchen_file, error = kitchen_option(args, "check")
    if error:
        print(error, file=sys.stderr)
        return 2
    for line in kitchen_report(kitchen_file, args.errands):
        print(line)
    return 0


def register(sub) -> None:
    check = sub.add_parser("check", help="check a kitchen file: places, objects, skills, "
                                         "prompt, a few solved errands")
    add_kitchen_argument(check)
    check.add_argument("--errands", type=int, default=3,
                       help="how many objects to solve errands for (bring, throw away, move)")
    check.set_defaults(func=cmd_check)
