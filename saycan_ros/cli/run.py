"""``saycan run "<instruction>"``: start the SayCan node graph (in this process, or one process
per node with ``--processes``), send the instruction, print every step's scores and say
honestly how the plan ended."""
from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time

from saycan_ros.cli.common import (add_kitchen_argument, add_model_arguments, bad_llm_options,
                                   kitchen_option, write_json)


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


def node_params(args, kitchen_file: str = "") -> dict:
    """Each node's parameters; ``kitchen_file`` reaches every node that reads the kitchen."""
    from saycan_ros.llm.config import LLMConfig
    from saycan_ros.planning.asking import calibration_params
    where = {"kitchen_file": kitchen_file} if kitchen_file else {}
    llm = LLMConfig.from_args(args).params()
    ask = {}
    if getattr(args, "ask", 0.0):      # the calibration of the model that scores, not the default's
        ask = {"ask_epsilon": args.ask, "answer_timeout_s": args.answer_timeout,
               **calibration_params(llm["model"])}
    return {"llm_scorer": {**llm, **where},
            "affordance": dict(where),
            "skill_executor": {"world": args.world, "seed": args.seed, **where},
            "planner": {"strategy": args.strategy, "max_steps": args.max_steps, **ask, **where}}


def cmd_run(args) -> int:
    if bad_llm_options(args, "run"):
        print(bad_llm_options(args, "run"), file=sys.stderr)
        return 2
    kitchen_file, error = kitchen_option(args, "run")
    if error:
        print(error, file=sys.stderr)
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
            TaskInit.from_mapping(init, load_kitchen(kitchen_file or None))
    except json.JSONDecodeError as exc:
        print(f"saycan run: --init is not JSON ({exc.msg} at character {exc.pos})",
              file=sys.stderr)
        return 2
    except TaskError as exc:
        print(f"saycan run: {'--init: ' if args.init and 'init' not in str(exc) else ''}{exc}",
              file=sys.stderr)
        return 2
    try:
        goal = parse_goal(args.goal, load_kitchen(kitchen_file or None)) if args.goal is not None else None
    except TaskError as exc:
        print(f"saycan run: --goal: {exc}", file=sys.stderr)
        return 2
    if args.strategy not in node_strategy_names():
        print(f"saycan run: --strategy {args.strategy!r} does not run in the planner node; "
              f"it runs {', '.join(node_strategy_names())} (the others: saycan eval)",
              file=sys.stderr)
        return 2
    try:
        answers = _answers(args)
    except ValueError as exc:
        print(f"saycan run: {exc}", file=sys.stderr)
        return 2
    params = node_params(args, kitchen_file)
    graph.init_rclpy()
    procs, spinning = [], None
    log_dir = tempfile.mkdtemp(prefix="saycan_run_")
    keep_logs = False          # kept only when a message points the user at them
    try:
        print(f"starting the SayCan graph ({'one process per node' if args.processes else 'one process'}"
              f", model {args.model})...", flush=True)
        if args.processes:
            procs = graph.start_processes(params, log_dir=log_dir)
        else:
            spinning = graph.start_in_process(params, quiet=not args.verbose)
        commander = SayCanCommander(on_scores=lambda m: _print_scores(m, args.top),
                                    on_status=_print_status)
        if spinning is None:         # the nodes are other processes: spin the commander here
            spinning = graph.InProcessGraph.spinning(threads=3)
        spinning.add(commander)
        gone = (lambda: graph.exited(procs)) if procs else None
        commander.wait_until_ready(timeout_s=args.ready_timeout, gone=gone)
        if init is not None:
            commander.reset_world(init)
        print(f"\ninstruction: {instruction}", flush=True)
        commander.follow_instruction(instruction)
        deadline = time.monotonic() + args.timeout
        asked: set[int] = set()
        while not commander.is_task_complete():
            question = commander.get_question()
            if question is not None and question["id"] not in asked:
                asked.add(question["id"])
                _answer(commander, question, answers)
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
            write_json(args.json, {"result": result, "world": state})
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
        if spinning is not None:     # before rclpy shuts down: a thread still spinning aborts
            spinning.shutdown()
        graph.stop_processes(procs)
        import rclpy
        if rclpy.ok():
            rclpy.shutdown()
        if not keep_logs:
            shutil.rmtree(log_dir, ignore_errors=True)


def _answers(args) -> list[int]:
    """``--answers 2,1``: the answers to give, in order (checked before anything starts)."""
    if not args.ask and not args.answers:
        return []
    if args.answers and not args.ask:
        raise ValueError("--answers needs --ask EPS (the planner asks only then)")
    if not 0.0 < args.ask < 1.0:
        raise ValueError(f"--ask (epsilon) must be in (0, 1), got {args.ask}")
    if not args.answer_timeout > 0:
        raise ValueError(f"--answer-timeout must be > 0, got {args.answer_timeout}")
    try:
        out = [int(a) for a in args.answers.split(",") if a.strip()] if args.answers else []
    except ValueError:
        raise ValueError(f"--answers {args.answers!r}: numbers separated by commas, e.g. 2,1 "
                         f"(0: something else)") from None
    if any(a < 0 for a in out):
        raise ValueError("--answers: options are numbered from 1 (0: something else)")
    return out


def _answer(commander, question: dict, answers: list[int]) -> None:
    """Answer the planner's question: the next of ``answers``, else typed in the terminal;
    with neither, nobody answers and the plan ends when the question times out."""
    print(f"\nthe robot asks: {question['text']}", flush=True)
    if answers:
        choice = answers.pop(0)
        print(f"answer (--answers): {choice}", flush=True)
        if choice == len(question["options"]) + 1:      # the question's "something else"
            choice = 0
    elif sys.stdin is not None and sys.stdin.isatty():
        n = len(question["options"]) + 1
        while True:
            typed = input(f"your answer (1-{n}): ").strip()
            if typed.isdigit() and 1 <= int(typed) <= n:
                choice = 0 if int(typed) == n else int(typed)
                break
            print(f"a number from 1 to {n}, please", flush=True)
    else:
        print(f"no answer to give (--answers): the plan ends in {question['timeout_s']:g} s",
              flush=True)
        return
    try:
        print(commander.answer(choice, question["id"]), flush=True)
    except (ValueError, RuntimeError, TimeoutError) as exc:
        print(f"saycan run: {exc}", file=sys.stderr)


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


def register(sub) -> None:
    run = sub.add_parser("run", help="plan and execute one instruction on the kitchen")
    run.add_argument("instruction")
    add_kitchen_argument(run)
    add_model_arguments(run)
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
    run.add_argument("--ask", type=float, default=0.0, metavar="EPS",
                     help="ask when the step's conformal prediction set (coverage 1 - EPS, e.g. "
                          "0.1) holds skills that do different things (0: never ask)")
    run.add_argument("--answers", default="",
                     help="with --ask: answers to the questions in order, e.g. 2,1 (option "
                          "numbers; the last number of a question, or 0, is 'something else'); "
                          "without, a terminal is asked")
    run.add_argument("--answer-timeout", type=float, default=60.0,
                     help="seconds a question waits for its answer")
    run.add_argument("--timeout", type=float, default=600.0)
    run.add_argument("--ready-timeout", type=float, default=300.0)
    run.set_defaults(func=cmd_run)
