"""``saycan eval``: plan (and execute) every task of a task file with one or more strategies
and models, in the symbolic world, the simulator or the node graph; tables, reports, failed
plans."""
from __future__ import annotations

import argparse
import json
import sys
import time

from saycan_ros.cli.common import (add_kitchen_argument, add_model_arguments, bad_llm_options,
                                   kitchen_option, write_json)

OLD_WORLD_NAMES = {"oracle": "symbolic", "sim": "sim", "nodes": "nodes"}   # --executor


def cmd_eval(args) -> int:
    if args.executor:             # the flag's old name, still understood
        args.world = OLD_WORLD_NAMES[args.executor]
        print(f"saycan eval: --executor {args.executor} is now --world {args.world}",
              file=sys.stderr)
    if bad_llm_options(args, "eval"):
        print(bad_llm_options(args, "eval"), file=sys.stderr)
        return 2
    from saycan_ros.core.tasks import TaskError, load_tasks, task_file_kitchen
    if not args.kitchen:          # a task file over another kitchen names it
        try:
            args.kitchen = task_file_kitchen(args.tasks)
        except TaskError as exc:
            print(f"saycan eval: {exc}", file=sys.stderr)
            return 2
    kitchen_file, error = kitchen_option(args, "eval")
    if error:
        print(error, file=sys.stderr)
        return 2
    from saycan_ros.planning.vocabulary import load_vocabulary

    vocabulary = load_vocabulary(kitchen_file)
    try:
        tasks = load_tasks(args.tasks, vocabulary.kitchen)
    except TaskError as exc:
        print(f"saycan eval: {exc}", file=sys.stderr)
        return 2
    if args.families:
        wanted = {f.strip() for f in args.families.split(",") if f.strip()}
        unknown = sorted(wanted - {t.family for t in tasks})
        if unknown:
            print(f"saycan eval: --families {', '.join(unknown)}: not in {args.tasks} (it has "
                  f"{', '.join(sorted({t.family for t in tasks}))})", file=sys.stderr)
            return 2
        tasks = [t for t in tasks if t.family in wanted]
    if args.limit:
        tasks = tasks[:args.limit]
    from saycan_ros.strategies.registry import strategy_names
    strategies = [x.strip() for x in (args.strategies or args.strategy).split(",") if x.strip()]
    unknown = [x for x in strategies if x not in strategy_names()]
    if unknown or not strategies:
        print(f"saycan eval: unknown strategy {unknown or strategies}; known: "
              f"{', '.join(strategy_names())}", file=sys.stderr)
        return 2
    max_failures = args.max_failures
    if args.jobs < 1 or (max_failures is not None and max_failures < 0):
        print("saycan eval: --jobs must be >= 1 and --max-failures >= 0", file=sys.stderr)
        return 2
    from saycan_ros.planning.faults import check_fault_rate
    try:
        fault_rate = check_fault_rate(args.fault_rate)
    except ValueError as exc:
        print(f"saycan eval: --fault-rate: {exc}", file=sys.stderr)
        return 2
    if args.jobs > 1 and args.world == "nodes":
        print("saycan eval: --jobs > 1 runs the symbolic or the sim world; the node graph is one "
              "simulator for the whole run", file=sys.stderr)
        return 2
    models = args.llm or [args.model]
    ask, error = _ask_setting(args, strategies, models)
    if error:
        print(f"saycan eval: {error}", file=sys.stderr)
        return 2
    world_options, affordance_file = {}, args.affordance
    if args.world == "sim":      # learned pick + value-function affordances when trained
        from saycan_ros.skills.pick.policy import learned_pick_unseen, sim_eval_setup
        pick, affordance_file = sim_eval_setup(args.pick, args.affordance, vocabulary.kitchen)
        world_options = {"pick": pick}
        unseen = learned_pick_unseen(vocabulary.kitchen) if args.pick == "auto" else []
        print(f"simulator: pick {pick}, affordances {affordance_file or 'affordance.yaml'}"
              + (f" (the learned pick never saw {', '.join(unseen[:4])}"
                 f"{' …' if len(unseen) > 4 else ''}: the scripted pick picks here)"
                 if unseen else ""), file=sys.stderr)
    elif args.world == "nodes":  # kitchen_sim + navigate/pick/place skill nodes over DDS
        from saycan_ros.ros.nodes.graph_world import NodeGraphWorld
        from saycan_ros.skills.pick.policy import sim_eval_setup
        affordance_file = sim_eval_setup("learned", args.affordance)[1]
        world_options = {"graph": NodeGraphWorld(vocabulary.kitchen, vocabulary.skills,
                                                 kitchen_file=kitchen_file)}
        print(f"node graph: kitchen_sim, navigate_skill, pick_skill, place_skill (ROS_DOMAIN_ID "
              f"{world_options['graph'].domain_id}, logs {world_options['graph'].log_dir}); "
              f"affordances {affordance_file or 'affordance.yaml'}", file=sys.stderr)
    from saycan_ros.evaluation.runner import EvalJob, run_jobs
    from saycan_ros.llm.config import LLMConfig
    llm = LLMConfig.from_args(args).params()
    del llm["model"]              # one job per model (--llm)
    if max_failures is None:      # the symbolic world is deterministic: a retry changes nothing
        # In the simulator a grasp can miss; with injected faults only the step limit bounds
        # the retries (a fault leaves the world as it was).
        max_failures = (args.max_steps if fault_rate else
                        0 if args.world == "symbolic" else 2)
    jobs = [EvalJob(model, strategy, llm, affordance_file or "", args.max_steps, args.world,
                    args.seed, world_options, max_failures, fault_rate, not args.no_prune,
                    kitchen_file, ask, not args.no_refuse,
                    skill_reliability=args.skill_reliability)
            for model in models for strategy in strategies]
    jsonl = open(args.jsonl, "a", encoding="utf-8") if args.jsonl else None

    def record(job, outcome) -> None:  # one line per task as it finishes: long runs lose nothing
        if jsonl:
            jsonl.write(json.dumps({"strategy": job.strategy, "model": job.model,
                                    **outcome.to_dict()}) + "\n")
            jsonl.flush()

    def show(report) -> None:
        print(report.table() + "\n", flush=True)

    started = time.perf_counter()
    reports = run_jobs(jobs, tasks, vocabulary, workers=args.jobs, on_task=record,
                       on_report=show)
    print(f"{len(jobs)} runs of {len(tasks)} tasks in {time.perf_counter() - started:.0f} s "
          f"({args.jobs} job{'s' if args.jobs > 1 else ''})")
    if "graph" in world_options:            # --world nodes: stop the node graph
        world_options["graph"].close()
    if args.json:
        write_json(args.json, [r.to_dict() for r in reports])
    if args.report:
        from saycan_ros.evaluation.report import write_report
        paths = write_report(reports, args.report, kitchen=vocabulary.kitchen,
                             skills=vocabulary.skills, command="saycan " + " ".join(sys.argv[1:]))
        print("report: " + ", ".join(str(p) for p in paths.values()))
    for report in reports:
        for line in report.failed_lines():
            print(line)
    for report in reports[1:]:
        print(f"{report.strategy} ({report.model}): {report.summary_line()}")
    if args.world != "symbolic":
        print(reports[0].summary_line("execution_success"))
    if ask:
        for report in reports:
            print(f"{report.strategy} ({report.model}): {report.help_line()}")
    print(reports[0].summary_line())
    return 0


def _unit_interval(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be in [0, 1], got {text}")
    return value


def _ask_setting(args, strategies, models) -> tuple[dict, str]:
    """The ask policy of ``--ask`` / ``--ask-threshold`` (planning.asking.make_ask_policy),
    checked before any model loads; (setting, "") or ({}, what is wrong)."""
    if args.ask is None and args.ask_threshold is None:
        return {}, "--ask-scores-only needs --ask or --ask-threshold" if args.ask_scores_only \
            else ""
    if args.ask is not None and args.ask_threshold is not None:
        return {}, "--ask and --ask-threshold are two policies: give one"
    if args.world != "symbolic":
        return {}, "asking is evaluated in the symbolic world (the simulated person reads it)"
    if set(strategies) - {"saycan", "no_vf"}:
        return {}, "asking needs the scoring strategies saycan or no_vf"
    if args.ask_threshold is not None:
        if not 0.0 < args.ask_threshold <= 1.0:
            return {}, f"--ask-threshold must be in (0, 1], got {args.ask_threshold}"
        return {"threshold": args.ask_threshold, "words": not args.ask_scores_only}, ""
    if not 0.0 < args.ask < 1.0:
        return {}, f"--ask (epsilon) must be in (0, 1), got {args.ask}"
    from saycan_ros.planning.asking import Calibration, default_calibration
    path = args.calibration or default_calibration(models[0])
    if not path:
        return {}, (f"no calibration for {models[0]}: give --calibration FILE "
                    f"(saycan calibrate makes one)")
    try:
        Calibration.load(path)
    except ValueError as exc:
        return {}, str(exc)
    return {"epsilon": args.ask, "calibration": str(path), "words": not args.ask_scores_only}, ""


def register(sub) -> None:
    from saycan_ros.stack import WORLDS
    ev = sub.add_parser("eval", help="plan success over a task file")
    ev.add_argument("--tasks", default="tasks.yaml",
                    help="task file (a name in config/ or a path); its kitchen is --kitchen, "
                         "else the one the file names (kitchen: FILE), else the built-in one")
    add_kitchen_argument(ev)
    add_model_arguments(ev)
    ev.add_argument("--world", default="symbolic", choices=WORLDS,
                    help="where the skills run: the symbolic kitchen, the built-in simulator, or "
                         "the node graph (kitchen_sim and the navigate/pick/place skill nodes over "
                         "DDS); plan success is always judged on the symbolic world")
    ev.add_argument("--executor", choices=sorted(OLD_WORLD_NAMES), help=argparse.SUPPRESS)
    ev.add_argument("--seed", type=int, default=0, help="sim: seed of the first task")
    ev.add_argument("--pick", default="auto", choices=["auto", "learned", "expert"],
                    help="sim: pick with the BC policy or the scripted expert (auto: learned "
                         "when models/bc_pick.pt is there)")
    ev.add_argument("--affordance", default="",
                    help="affordance config (default: affordance.yaml; sim with learned pick: "
                         "affordance_sim.yaml, the pick value function)")
    ev.add_argument("--strategies", default="",
                    help="comma list of strategies (overrides --strategy): saycan, no_vf, "
                         "generative, llm_planner, saycan_cot, bc_use, bc_nl")
    ev.add_argument("--llm", nargs="+", default=None, metavar="NAME",
                    help="evaluate with each of these models in turn (default: --model)")
    ev.add_argument("--report", default="",
                    help="write DIR/report.md (table, cost, failure attribution), report.json "
                         "and report.png")
    ev.add_argument("--max-failures", type=int, default=None,
                    help="failed skills tolerated per task before the plan ends (default: 0 "
                         "in the symbolic world, 2 in the simulator, where a grasp can miss; "
                         "with --fault-rate, --max-steps)")
    ev.add_argument("--fault-rate", type=float, default=0.0,
                    help="fail this fraction of skill executions at random before they run "
                         "(seeded per task; the world is unchanged), to measure re-planning")
    ev.add_argument("--no-prune", action="store_true",
                    help="saycan: the language model scores every skill, not only those that "
                         "can run (the same choices, slower; for comparing scores)")
    ev.add_argument("--skill-reliability", type=_unit_interval, default=0.95,
                    help="saycan: the chance that a skill which can succeed does; a failure "
                         "updates that skill's affordance by Bayes' rule until the next success "
                         "(0: failures change nothing)")
    ev.add_argument("--jobs", type=int, default=1,
                    help="worker processes sharing the runs in chunks of tasks (symbolic or sim "
                         "world; same results as one process)")
    ev.add_argument("--no-refuse", action="store_true",
                    help="carry out every request: no 'I can't ...' for an action no skill does "
                         "or a thing the kitchen lacks (the planner node's refuse_impossible)")
    ev.add_argument("--ask", type=float, default=None, metavar="EPS",
                    help="ask for help when the step's conformal prediction set (coverage "
                         "1 - EPS) is not one skill; a simulated person answers from the goal")
    ev.add_argument("--ask-threshold", type=float, default=None, metavar="TAU",
                    help="baseline: ask when the top skill's probability is below TAU")
    ev.add_argument("--calibration", default="",
                    help="calibration file for --ask (default: the shipped one of the model)")
    ev.add_argument("--ask-scores-only", action="store_true",
                    help="ask from the scores alone, without reading the instruction's words "
                         "(planning.wording: 'the chips' with three bags, 'a soda')")
    ev.add_argument("--json")
    ev.add_argument("--jsonl", help="append each task's outcome to this file as it finishes")
    ev.add_argument("--limit", type=int, default=0)
    ev.add_argument("--families", default="", help="comma-separated families to keep")
    ev.set_defaults(func=cmd_eval)
