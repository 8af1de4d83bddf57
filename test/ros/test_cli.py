"""The ``saycan`` command as a user runs it: a real graph, a real model, real output files."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

MODEL = "smollm2-135m"


def saycan(*args, cwd, timeout=600, **env_extra):
    env = dict(os.environ, PYTHONUNBUFFERED="1", **env_extra)
    return subprocess.run([sys.executable, "-m", "saycan_ros.cli.main", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("mode", [[], ["--processes"], ["--world", "sim"]],
                         ids=["one-process", "processes", "simulator"])
def test_run_plans_and_executes_an_instruction(tmp_path, mode):
    plot, out = tmp_path / "plan.png", tmp_path / "result.json"
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc = saycan("run", "Pick up the apple.", "--model", MODEL, "--plot", str(plot),
                  "--json", str(out), "--goal", "holding(apple)", *mode, cwd=tmp_path,
                  TMPDIR=str(tmp))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert not list(tmp.glob("saycan_run_*")), "the run left its temporary folder behind"
    assert "[INFO]" not in proc.stdout + proc.stderr    # quiet unless --verbose
    assert "result: the planner chose 'done' after 2 skills" in proc.stdout
    assert "goal: holds — holding(apple)" in proc.stdout
    lines = proc.stdout.splitlines()
    assert any(line.startswith("step 1") for line in lines)
    assert any("▶ find an apple" in line for line in lines)
    assert "plan: find an apple → pick up the apple → done" in proc.stdout
    result = json.loads(out.read_text())
    assert result["result"]["state"] == "succeeded"
    assert result["world"]["holding"] == "apple"
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_run_asks_and_takes_the_answers_given(tmp_path):
    """"Go to the counter." has two readings: with --ask the planner asks which (the default
    model puts ~0.5 and ~0.4 on the two counters), and --answers 2 picks the second option."""
    proc = saycan("run", "Go to the counter.", "--model", MODEL, "--ask", "0.15", "--answers",
                  "2", "--goal", "robot_at(far counter)", cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "the robot asks: Which do you mean? 1) go to the close counter 2) go to the far " \
           "counter 3) something else" in proc.stdout
    assert "answer (--answers): 2" in proc.stdout
    assert "plan: go to the far counter → done" in proc.stdout
    assert "goal: holds — robot_at(far counter)" in proc.stdout


def test_run_rejects_an_empty_instruction(tmp_path):
    proc = saycan("run", "   ", cwd=tmp_path, timeout=120)
    assert proc.returncode == 2 and "instruction is empty" in proc.stderr


def test_eval_reports_per_family_and_the_last_line(tmp_path):
    tasks = {"instructions": [
        {"id": "a", "family": "nl_single", "text": "Pick up the orange.",
         "goal": "holding(orange)"},
        {"id": "b", "family": "embodiment", "text": "Put down the apple.",
         "init": {"holding": "apple"}, "goal": "at(apple, table)"},
    ]}
    path = tmp_path / "tasks.yaml"
    path.write_text(yaml.safe_dump(tasks))
    proc = saycan("eval", "--tasks", str(path), "--model", MODEL, "--strategy", "saycan,no_vf",
                  "--json", str(tmp_path / "eval.json"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("plan success: ") and last.endswith("%)")
    assert "| nl_single | 1 |" in proc.stdout and "| embodiment | 1 |" in proc.stdout
    reports = json.loads((tmp_path / "eval.json").read_text())
    assert [r["strategy"] for r in reports] == ["saycan", "no_vf"]
    assert all(len(r["tasks_detail"]) == 2 for r in reports)


def test_eval_reports_a_bad_task_file_without_a_traceback(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("instructions:\n- {id: x1, family: nl_single, text: hi, goal: 'at(apple'}\n")
    proc = saycan("eval", "--tasks", str(path), "--model", MODEL, cwd=tmp_path, timeout=120)
    assert proc.returncode == 2
    assert "instructions[0] (id x1)" in proc.stderr and "Traceback" not in proc.stderr


def test_run_says_what_is_known_at_the_end():
    """'done' is the model's judgement: the result line says so, and only a --goal check says
    whether the instruction was carried out."""
    from saycan_ros.cli.run import outcome_lines
    from saycan_ros.core.kitchen import load_kitchen
    from saycan_ros.core.tasks import parse_goal
    result = {"state": "succeeded", "message": "done after 4 skills",
              "plan": ["find a coke can", "pick up the coke can", "bring it to you",
                       "put down the coke can", "done"]}
    state = {"robot_at": "user", "holding": None, "objects": {"coke can": "user"}}
    lines = outcome_lines(result, state)
    assert "result: the planner chose 'done' after 4 skills, all of which succeeded" in lines
    assert any(line.startswith("goal: not checked") for line in lines)
    assert lines[-1].startswith("world: robot at the user, holding nothing; coke can: user")
    goal = parse_goal("at(coke can, trash can)", load_kitchen())
    assert "goal: does NOT hold — at(coke can, trash can)" in outcome_lines(
        result, state, goal, False)
    failed = outcome_lines({"state": "failed", "message": "step 2: no", "plan": []}, state)
    assert "result: failed — step 2: no" in failed


def test_eval_lists_the_failed_tasks():
    from saycan_ros.core.kitchen import load_kitchen
    from saycan_ros.core.tasks import Task, TaskInit, parse_goal
    from saycan_ros.evaluation.plans import EvalReport, TaskOutcome
    from saycan_ros.planning.planner import PlanResult
    kitchen = load_kitchen()
    report = EvalReport("saycan", MODEL)
    for i in range(25):
        task = Task(f"t{i}", "crowd", f"Bring me thing {i}.", TaskInit(),
                    parse_goal("robot_at(user)", kitchen))
        result = PlanResult(task.text, "saycan", "max_steps", "no 'done' within 20 steps")
        report.outcomes.append(TaskOutcome(task, result, i == 0, i == 0, 0.1))
    lines = report.failed_lines(limit=3)
    assert lines[0] == f"failed plans (saycan, {MODEL}): 24"
    assert lines[1] == ("  t1 [crowd] 'Bring me thing 1.': (no step) "
                        "(max_steps: no 'done' within 20 steps)")
    assert lines[-1].startswith("  … and 21 more")
    assert EvalReport("saycan", MODEL).failed_lines() == []


def test_the_public_task_file_is_found_by_name(tmp_path):
    from saycan_ros.core.config import resolve_config
    assert Path(resolve_config("tasks.yaml", "tasks.yaml")).is_file()


@pytest.mark.parametrize("argv, reason", [
    (["eval", "--adapter", "/nonexistent"], "not a LoRA adapter folder"),
    (["run", "Bring me a coke.", "--prior-weight", "3"], "--prior-weight must be in [0, 1]"),
    (["eval", "--retrieve", "-1"], "--retrieve must be in [0, 16] examples, got -1"),
    (["run", "Bring me a coke.", "--model", "gpt-5"], "--model 'gpt-5' is not a shipped model"),
    (["eval", "--backend", "openai"], "--base-url is required by the openai back end"),
    (["run", "Bring me a coke.", "--init", "nonsense{"], "--init is not JSON"),
    (["run", "Bring me a coke.", "--init", '{"holding": "banana"}'], "banana"),
    (["run", "Bring me a coke.", "--strategy", "foo"], "--strategy 'foo' does not run"),
    (["run", "Bring me a coke.", "--goal", "at(coke, moon)"], "--goal: goal 'at(coke, moon)'"),
    (["eval", "--families", "nonexistent"], "--families nonexistent: not in tasks.yaml"),
    (["eval", "--tasks", "latin1.yaml"], "latin1.yaml: not UTF-8 text (byte 0xe9 at offset"),
    (["eval", "--fault-rate", "1.5"], "--fault-rate: fault rate must be in [0, 1], got 1.5"),
    (["eval", "--fault-rate", "nan"], "--fault-rate: fault rate must be in [0, 1], got nan"),
    (["run", "Bring me a coke.", "--answers", "2"], "--answers needs --ask EPS"),
    (["run", "Bring me a coke.", "--ask", "0.15", "--answers", "2,x"],
     "numbers separated by commas"),
    (["run", "Bring me a coke.", "--ask", "1.5"], "--ask (epsilon) must be in (0, 1)"),
    (["eval", "--ask", "0.15", "--world", "sim"], "asking is evaluated in the symbolic world"),
    (["eval", "--ask", "0.15", "--ask-threshold", "0.5"], "two policies: give one"),
    (["eval", "--ask", "0.15", "--calibration", "nope.json"], "not a calibration file"),
    (["eval", "--ask-scores-only"], "--ask-scores-only needs --ask or --ask-threshold"),
    (["eval", "--ask-threshold", "0.5", "--strategies", "generative"],
     "asking needs the scoring strategies"),
    (["calibrate", "--plans", "1"], "--plans must be at least 3"),
])
def test_bad_input_is_one_line_before_any_model_loads(tmp_path, argv, reason):
    (tmp_path / "latin1.yaml").write_bytes(
        b'instructions:\n- {id: x, text: "caf\xe9", goal: "robot_at(table)"}\n')
    proc = saycan(*argv, cwd=tmp_path, timeout=60)
    assert proc.returncode == 2 and reason in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
