"""The ``saycan`` command: run the graph on the built-in kitchen, evaluate, benchmark, simulate.

    saycan run "I spilled my coke, can you bring me something to clean it up?" [--plot f.png]
    saycan eval --tasks config/tasks.yaml [--strategy saycan] [--json out.json]
    saycan bench scoring
    saycan bench sim
    saycan sim --render kitchen.png
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time

os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")  # DDS stays on loopback


# -- run -----------------------------------------------------------------------------------------
def _print_scores(msg, top_k: int) -> None:
    import numpy as np
    combined = np.nan_to_num(np.asarray(msg.combined, dtype=float), nan=-1.0)
    order = np.argsort(-combined, kind="stable")[:top_k]
    print(f"\nstep {msg.step}  ({msg.strategy})" + " " * 22 + "LLM   afford.  product")
    for i in order:
        mark = "▶" if msg.skills[i] == msg.selected else " "
        print(f"  {mark} {msg.skills[i]:<34} {msg.llm[i]:6.3f}  {msg.affordance[i]:6.3f}  "
              f"{msg.combined[i]:7.4f}")
    sys.stdout.flush()


def _print_status(msg) -> None:
    if msg.state == "executing" and ("succeeded" in msg.message or "failed" in msg.message):
        print(f"  -> {msg.message.split(': ', 1)[1]}")
        sys.stdout.flush()


def node_params(args) -> dict:
    from saycan_ros.llm.config import LLMConfig
    return {"llm_scorer": LLMConfig.from_args(args).params(),
            "skill_executor": {"world": args.world, "seed": args.seed},
            "planner": {"strategy": args.strategy, "max_steps": args.max_steps}}


def _bad_llm_options(args, command: str) -> str:
    """One line naming the first bad language-model flag (--adapter, --prior-weight,
    --retrieve, --backend openai without --base-url ...), or "" (checked before any model
    loads)."""
    from saycan_ros.llm.config import LLMConfig, LLMConfigError
    try:
        problems = LLMConfig.from_args(args).problems(check_adapter=True)
    except LLMConfigError as exc:
        problems = [(exc.field, exc.text)]
    if not problems:
        return ""
    name, text = problems[0]
    return f"saycan {command}: {LLMConfig.flag(name)} {text}"


def cmd_run(args) -> int:
    if _bad_llm_options(args, "run"):
        print(_bad_llm_options(args, "run"), file=sys.stderr)
        return 2
    from saycan_ros.ros import graph
    from saycan_ros.ros.commander import GraphDown, SayCanCommander
    from saycan_ros.core.tasks import TaskError, check_instruction

    from saycan_ros.core.kitchen import load_kitchen
    from saycan_ros.strategies.registry import node_strategy_names
    from saycan_ros.core.tasks import TaskInit, parse_goal
    from saycan_ros.core.world import WorldSnapshot
    # everything the user typed is checked here, before a node starts or a model loads
    try:
        instruction = check_instruction(args.instruction)
        init = json.loads(args.init) if args.init else None
        if init is not None:
            TaskInit.from_mapping(init, load_kitchen())
    except json.JSONDecodeError as exc:
        print(f"saycan run: --init is not JSON ({exc.msg} at character {exc.pos})",
              file=sys.stderr)
        return 2
    except TaskError as exc:
        print(f"saycan run: {'--init: ' if args.init and 'init' not in str(exc) else ''}{exc}",
              file=sys.stderr)
        return 2
    try:
        goal = parse_goal(args.goal, load_kitchen()) if args.goal is not None else None
    except TaskError as exc:
        print(f"saycan run: --goal: {exc}", file=sys.stderr)
        return 2
    if args.strategy not in node_strategy_names():
        print(f"saycan run: --strategy {args.strategy!r} does not run in the planner node; "
              f"it runs {', '.join(node_strategy_names())} (the others: saycan eval)",
              file=sys.stderr)
        return 2
    params = node_params(args)
    graph.init_rclpy()
    procs, in_process, own_executor, commander = [], None, None, None
    log_dir = tempfile.mkdtemp(prefix="saycan_run_")
    keep_logs = False          # kept only when a message points the user at them
    try:
        print(f"starting the SayCan graph ({'one process per node' if args.processes else 'one process'}"
              f", model {args.model})...", flush=True)
        if args.processes:
            procs = graph.start_processes(params, log_dir=log_dir)
        else:
            in_process = graph.start_in_process(params, quiet=not args.verbose)
        commander = SayCanCommander(on_scores=lambda m: _print_scores(m, args.top),
                                    on_status=_print_status)
        executor = in_process.executor if in_process else None
        if executor is None:
            from rclpy.executors import MultiThreadedExecutor
            executor = own_executor = MultiThreadedExecutor(num_threads=3)
            spin_thread = threading.Thread(target=executor.spin, daemon=True)
            spin_thread.start()
        executor.add_node(commander)
        gone = (lambda: graph.exited(procs)) if procs else None
        commander.wait_until_ready(timeout_s=args.ready_timeout, gone=gone)
        if init is not None:
            commander.reset_world(init)
        print(f"\ninstruction: {instruction}", flush=True)
        commander.send_instruction(instruction)
        deadline = time.monotonic() + args.timeout
        while not commander.is_task_complete():
            if gone is not None and gone():
                raise GraphDown(f"a node died during the plan: {gone()}")
            if time.monotonic() > deadline:
                print(f"saycan run: no result within {args.timeout:g} s; cancelling",
                      file=sys.stderr)
                commander.cancel_task()
                return 1
            time.sleep(0.05)
        result = commander.get_result()
        state = commander.world_state()
        goal_holds = (goal.holds(WorldSnapshot.from_dict(state)) if goal is not None
                      else None)
        for line in outcome_lines(result, state, goal, goal_holds):
            print(line)
        if args.plot:
            from saycan_ros.evaluation.plotting import plot_plan
            steps = [{"step": m.step, "skills": list(m.skills), "llm": list(m.llm),
                      "affordance": list(m.affordance), "combined": list(m.combined),
                      "selected": m.selected} for m in commander.scores]
            print(f"plot: {plot_plan(steps, instruction, args.plot)}")
        if args.json:
            with open(args.json, "w", encoding="utf-8") as handle:
                json.dump({"result": result, "world": state}, handle, indent=1)
        return 0 if result["state"] == "succeeded" and goal_holds is not False else 1
    except GraphDown as exc:
        keep_logs = True
        print(f"saycan run: {exc}", file=sys.stderr)
        return 1
    except TimeoutError as exc:
        keep_logs = bool(procs)
        print(f"saycan run: {exc}" + (f" (node logs: {log_dir})" if keep_logs else ""),
              file=sys.stderr)
        return 1
    finally:
        # Stop every executor before rclpy shuts down: a thread still spinning then aborts.
        if own_executor is not None:
            own_executor.shutdown(timeout_sec=5.0)
            spin_thread.join(timeout=5.0)
        if in_process is not None:
            in_process.shutdown()
        if commander is not None:
            commander.destroy_node()
        graph.stop_processes(procs)
        import rclpy
        if rclpy.ok():
            rclpy.shutdown()
        if not keep_logs:
            shutil.rmtree(log_dir, ignore_errors=True)


def outcome_lines(result: dict, state: dict, goal=None, goal_holds: bool | None = None
                  ) -> list[str]:
    """What ``saycan run`` can honestly say at the end: how the plan ended (choosing ``done``
    is the model's judgement, not proof), whether the ``--goal`` holds when one was given, the
    plan and the final world."""
    if result["state"] == "succeeded":
        n = max(0, len(result["plan"]) - 1)
        head = (f"result: the planner chose 'done' after {n} skill{'' if n == 1 else 's'}"
                + (", all of which succeeded" if n > 1 else ", which succeeded" if n else ""))
    else:
        head = f"result: {result['state']} — {result['message']}"
    if goal is None:
        check = "goal: not checked (give --goal \"…\" in the task-file grammar to check it)"
    else:
        check = f"goal: {'holds' if goal_holds else 'does NOT hold'} — {goal.text}"
    world = (f"world: robot at the {state['robot_at']}, holding "
             f"{state['holding'] or 'nothing'}; " + ", ".join(
                 f"{o}: {l}" for o, l in sorted(state["objects"].items())))
    return ["", head, check, "plan: " + " → ".join(result["plan"]), world]


# -- eval ----------------------------------------------------------------------------------------
def cmd_eval(args) -> int:
    if _bad_llm_options(args, "eval"):
        print(_bad_llm_options(args, "eval"), file=sys.stderr)
        return 2
    from saycan_ros.planning.vocabulary import load_vocabulary
    from saycan_ros.core.tasks import TaskError, load_tasks

    vocabulary = load_vocabulary()
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
    if args.jobs > 1 and args.executor == "nodes":
        print("saycan eval: --jobs > 1 runs the oracle or sim executor; the node graph is one "
              "simulator for the whole run", file=sys.stderr)
        return 2
    models = args.llm or [args.model]
    world_options, affordance_file = {}, args.affordance
    if args.executor == "sim":      # learned pick + value-function affordances when trained
        from saycan_ros.skills.pick.policy import sim_eval_setup
        pick, affordance_file = sim_eval_setup(args.pick, args.affordance)
        world_options = {"pick": pick}
        print(f"simulator: pick {pick}, affordances {affordance_file or 'affordance.yaml'}",
              file=sys.stderr)
    elif args.executor == "nodes":  # kitchen_sim + navigate/pick/place skill nodes over DDS
        from saycan_ros.ros.nodes.graph_world import NodeGraphWorld
        from saycan_ros.skills.pick.policy import sim_eval_setup
        affordance_file = sim_eval_setup("learned", args.affordance)[1]
        world_options = {"graph": NodeGraphWorld(vocabulary.kitchen, vocabulary.skills)}
        print(f"node graph: kitchen_sim, navigate_skill, pick_skill, place_skill (ROS_DOMAIN_ID "
              f"{world_options['graph'].domain_id}, logs {world_options['graph'].log_dir}); "
              f"affordances {affordance_file or 'affordance.yaml'}", file=sys.stderr)
    from saycan_ros.evaluation.runner import EvalJob, run_jobs
    from saycan_ros.llm.config import LLMConfig
    llm = LLMConfig.from_args(args).params()
    del llm["model"]              # one job per model (--llm)
    if max_failures is None:      # the symbolic world is deterministic: a retry changes nothing
        max_failures = 0 if args.executor == "oracle" else 2
    jobs = [EvalJob(model, strategy, llm, affordance_file or "", args.max_steps, args.executor,
                    args.seed, world_options, max_failures)
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
    if "graph" in world_options:            # --executor nodes: stop the node graph
        world_options["graph"].close()
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump([r.to_dict() for r in reports], handle, indent=1)
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
    if args.executor != "oracle":
        print(reports[0].summary_line("execution_success"))
    print(reports[0].summary_line())
    return 0


# -- bench ---------------------------------------------------------------------------------------
def cmd_bench(args) -> int:
    if args.what == "scoring":
        from saycan_ros.evaluation.bench_scoring import format_scoring_result, run_scoring_bench
        from saycan_ros.planning.scene import scene_of
        from saycan_ros.llm.config import resolve_adapter
        from saycan_ros.planning.vocabulary import load_vocabulary
        from saycan_ros.stack import adapter_prompt
        from saycan_ros.core.world import SymbolicWorld
        vocabulary = load_vocabulary()
        prompt, backend = vocabulary.prompt, None
        adapter = resolve_adapter(args.model, args.adapter)
        if adapter is not None:      # the planner's real step: the adapter's prompt and scene
            from saycan_ros.llm.transformers_backend import TransformersBackend
            prompt = adapter_prompt(adapter)
            backend = TransformersBackend(args.model, adapter=str(adapter))
        scene = scene_of(vocabulary.kitchen, SymbolicWorld(vocabulary.kitchen).snapshot())
        result = run_scoring_bench(
            args.model, prompt.prefix(),
            prompt.query("I spilled my coke, can you bring me something to clean it up?",
                         ["find a sponge"], scene if prompt.scene else ""),
            [prompt.option(s) for s in vocabulary.skills.texts],
            repeats=args.repeats, backend=backend)
        if args.json:
            with open(args.json, "w", encoding="utf-8") as handle:
                json.dump(result, handle, indent=1)
        print(format_scoring_result(result))
        return 0
    if args.what == "sim":
        from saycan_ros.sim.bench import format_sim_result, run_sim_bench
        result = run_sim_bench(steps=args.steps, camera=not args.no_camera)
        if args.json:
            with open(args.json, "w", encoding="utf-8") as handle:
                json.dump(result, handle, indent=1)
        print(format_sim_result(result))
        return 0
    raise AssertionError(args.what)


def cmd_sim(args) -> int:
    from saycan_ros.worlds.render import render_kitchen
    init = json.loads(args.init) if args.init else None
    print(render_kitchen(args.render, seed=args.seed, init=init))
    return 0


# -- parser --------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    from saycan_ros.llm.config import DEFAULT_MODEL, LLMConfig
    parser = argparse.ArgumentParser(prog="saycan", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)

    def model_args(p):
        LLMConfig.add_arguments(p)          # --model, --backend, --adapter, --threads, ...
        p.add_argument("--strategy", default="saycan", help="saycan | no_vf (comma list in eval)")
        p.add_argument("--max-steps", type=int, default=20)

    run = sub.add_parser("run", help="plan and execute one instruction on the kitchen")
    run.add_argument("instruction")
    model_args(run)
    run.add_argument("--processes", action="store_true", help="one process per node")
    run.add_argument("--verbose", action="store_true",
                     help="show the nodes' [INFO] logs and model-loading progress bars")
    run.add_argument("--world", default="symbolic", choices=["symbolic", "sim"],
                     help="where skills run: the symbolic kitchen or the built-in simulator")
    run.add_argument("--seed", type=int, default=0, help="sim: layout seed")
    run.add_argument("--plot", help="draw per-step scores to this PNG")
    run.add_argument("--json", help="write the result to this file")
    run.add_argument("--init", help="task init as JSON, e.g. '{\"holding\": \"apple\"}'")
    run.add_argument("--goal", help="check this goal on the final world, in the task-file "
                                    "grammar, e.g. 'at(coke can, trash can)'")
    run.add_argument("--top", type=int, default=5, help="skills shown per step")
    run.add_argument("--timeout", type=float, default=600.0)
    run.add_argument("--ready-timeout", type=float, default=300.0)
    run.set_defaults(func=cmd_run)

    ev = sub.add_parser("eval", help="plan success over a task file")
    ev.add_argument("--tasks", default="tasks.yaml")
    model_args(ev)
    ev.add_argument("--executor", default="oracle", choices=["oracle", "sim", "nodes"],
                    help="world the skills run in (nodes: kitchen_sim and the navigate/pick/place "
                         "skill nodes over DDS); plan success is always judged on the oracle")
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
                         "with the oracle, 2 in the simulator, where a grasp can miss)")
    ev.add_argument("--jobs", type=int, default=1,
                    help="worker processes sharing the runs in chunks of tasks (oracle or sim "
                         "executor; same results as one process)")
    ev.add_argument("--json")
    ev.add_argument("--jsonl", help="append each task's outcome to this file as it finishes")
    ev.add_argument("--limit", type=int, default=0)
    ev.add_argument("--families", default="", help="comma-separated families to keep")
    ev.set_defaults(func=cmd_eval)

    bench = sub.add_parser("bench", help="benchmarks (ratios measured side by side)")
    bench.add_argument("what", choices=["scoring", "sim"])
    bench.add_argument("--model", default=DEFAULT_MODEL)
    bench.add_argument("--adapter", default=LLMConfig().adapter,
                       help="scoring: the planner adapter's prompt and weights (auto, the "
                            "planner's default), or none (the frozen model's few-shot prompt)")
    bench.add_argument("--repeats", type=int, default=3)
    bench.add_argument("--steps", type=int, default=5000)
    bench.add_argument("--no-camera", action="store_true")
    bench.add_argument("--json")
    bench.set_defaults(func=cmd_bench)

    from saycan_ros.cli.train import register_cli as register_learning
    register_learning(sub)          # train bc|value|planner, eval-value
    from saycan_ros.cli.eval_skill import register_cli as register_eval_skill
    register_eval_skill(sub)

    sim = sub.add_parser("sim", help="the built-in simulator")
    sim.add_argument("--render", required=True, help="FILE.png or FILE.mp4")
    sim.add_argument("--seed", type=int, default=0)
    sim.add_argument("--init", help="task init as JSON")
    sim.set_defaults(func=cmd_sim)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
