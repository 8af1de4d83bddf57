"""``saycan bench chaos``: the SayCan node graph, one process per node over DDS (loopback
only), under hostile input, killed nodes, cancels and load. Each part prints

    chaos <part>: tried N, crashed C, hung H, wrong W, lost L  [figures]

- crashed: a node process that exited; hung: no answer (status, response) within its timeout;
  wrong: an answer that breaks the contract (a bad request that succeeds, a plan that runs a
  skill outside the registry, a valid instruction refused); lost: an input never answered.

The parts: ``instructions`` (fuzzed text, idle and while a plan runs), ``services``
(malformed SkillScore / ExecuteSkill / ResetWorld requests, the YAML alias bomb among them: how
fast each is answered, RSS of each node), ``faults`` (SIGKILL a node mid-plan, restart it, plan
again; SIGSTOP the language scorer and cancel), ``injected`` (20% of skill executions fail:
re-planning keeps the successes), ``cancel`` (mid-plan and mid-navigation, time to stop; a
second drive refused while one runs; the simulator's watchdog when cmd_vel goes silent) and
``load`` (instructions back to back: latency and RSS stay flat). Bounded in count and time.
"""
from __future__ import annotations

import os
import signal
import statistics
import tempfile
import threading
import time
from dataclasses import dataclass, field

import rclpy
from geometry_msgs.msg import Twist, TwistStamped
from nav_msgs.msg import Odometry
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import String
from std_srvs.srv import Trigger
from tqdm import tqdm

from saycan_ros.core.memory import cpu_seconds, rss_mb
from saycan_ros.core.tasks import TaskError, check_instruction
from saycan_ros.evaluation.fuzz import (fuzz_execute_requests, fuzz_instructions,
                                        fuzz_reset_requests, fuzz_score_requests)
from saycan_ros.msg import PlanResult, PlanStatus
from saycan_ros.ros.graph import start_processes, stop_processes
from saycan_ros.ros.nodes.common import (AFFORDANCE_SERVICE, CANCEL_SERVICE, EXECUTE_SERVICE,
                                         INSTRUCTION_TOPIC, LLM_SERVICE,
                                         RESET_SERVICE, RESULT_TOPIC, STATUS_TOPIC)
from saycan_ros.srv import ExecuteSkill, ResetWorld, SkillScore

PARTS = ("instructions", "services", "faults", "injected", "cancel", "load")
TERMINAL = (PlanStatus.STATE_SUCCEEDED, PlanStatus.STATE_FAILED, PlanStatus.STATE_CANCELLED,
            "max_steps")
#: The planner's timeouts in the bench: a dead node must be noticed within these.
SCORE_TIMEOUT_S = 10.0
EXECUTE_TIMEOUT_S = 15.0
#: A short plan (go, done) and a longer one (find, pick, bring, put down, done).
SHORT = ("Go to the table.", "Go to the far counter.", "Go to the close counter.",
         "Go to the trash can.")
LONG = "Bring me the sponge."
BUSY_PLAN = "Bring me the sponge, then the energy bar, then the rice chips."


EVERY_STATUS_QOS = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE,
                              durability=DurabilityPolicy.TRANSIENT_LOCAL)


@dataclass
class PartResult:
    part: str
    tried: int = 0
    crashed: int = 0
    hung: int = 0
    wrong: int = 0
    lost: int = 0
    figures: dict = field(default_factory=dict)
    problems: list = field(default_factory=list)

    def fail(self, kind: str, what: str) -> None:
        setattr(self, kind, getattr(self, kind) + 1)
        self.problems.append(f"{kind}: {what}")

    @property
    def clean(self) -> bool:
        return not (self.crashed or self.hung or self.wrong or self.lost)

    def line(self) -> str:
        text = (f"chaos {self.part}: tried {self.tried}, crashed {self.crashed}, hung {self.hung}, "
                f"wrong {self.wrong}, lost {self.lost}")
        if self.figures:
            text += "  [" + ", ".join(f"{k} {_fmt(v)}" for k, v in self.figures.items()) + "]"
        return text


def _fmt(value) -> str:
    return f"{value:.3f}" if isinstance(value, float) else str(value)


class Probe(Node):
    """The bench's own node: sends instructions and requests, records statuses and results."""

    def __init__(self):
        super().__init__("saycan_chaos_probe")
        self._cond = threading.Condition()
        self.statuses: list[PlanStatus] = []
        self.results: list[PlanResult] = []
        # every status, not the last one only: the planner answers bursts faster than one take
        self.create_subscription(PlanStatus, STATUS_TOPIC, self._on_status, EVERY_STATUS_QOS)
        self.create_subscription(PlanResult, RESULT_TOPIC, self._on_result, EVERY_STATUS_QOS)
        self.instruction_pub = self.create_publisher(String, INSTRUCTION_TOPIC, 10)
        self.endpoints = {"llm": self.create_client(SkillScore, LLM_SERVICE),
                          "affordance": self.create_client(SkillScore, AFFORDANCE_SERVICE),
                          "execute": self.create_client(ExecuteSkill, EXECUTE_SERVICE),
                          "reset": self.create_client(ResetWorld, RESET_SERVICE),
                          "cancel": self.create_client(Trigger, CANCEL_SERVICE)}

    def _on_status(self, msg: PlanStatus) -> None:
        with self._cond:
            self.statuses.append(msg)
            self._cond.notify_all()

    def _on_result(self, msg: PlanResult) -> None:
        with self._cond:
            self.results.append(msg)
            self._cond.notify_all()

    def mark(self) -> int:
        with self._cond:
            return len(self.statuses)

    def wait_status(self, since: int, predicate, timeout_s: float) -> PlanStatus | None:
        """The first status after index ``since`` for which ``predicate`` holds, or None."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while True:
                for msg in self.statuses[since:]:
                    if predicate(msg):
                        return msg
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._cond.wait(left)

    def send(self, text: str) -> None:
        self.instruction_pub.publish(String(data=text))

    def call(self, client: str, request, timeout_s: float):
        """The response, or None when none came within ``timeout_s``."""
        future = self.endpoints[client].call_async(request)
        done = threading.Event()
        future.add_done_callback(lambda _f: done.set())
        if not done.wait(timeout_s):
            future.cancel()
            return None
        return future.result()

    def wait_services(self, names, timeout_s: float = 180.0) -> bool:
        deadline = time.monotonic() + timeout_s
        for name in names:
            while not self.endpoints[name].wait_for_service(timeout_sec=0.5):
                if time.monotonic() > deadline:
                    return False
        return True

    def wait_subscribers(self, timeout_s: float = 30.0) -> bool:
        deadline = time.monotonic() + timeout_s
        while self.instruction_pub.get_subscription_count() < 1:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True


def shown(text: str) -> str:
    """The instruction as the planner's status shows it when it refuses it."""
    return " ".join(text.split())[:200]


def about(text: str):
    """Whether a status is about ``text`` (accepted: whitespace folded; refused: 200 chars)."""
    folded = " ".join(text.split())
    return lambda m: m.instruction in (folded, folded[:200])


class ChaosBench:
    """Starts the graph as processes, runs the parts, stops everything (use as a context)."""

    def __init__(self, skills: list[str], log_dir: str | None = None, seed: int = 0,
                 progress: bool = True, model_params: dict | None = None):
        self.skills, self.seed, self.progress = list(skills), seed, progress
        self.log_dir = log_dir or tempfile.mkdtemp(prefix="saycan_chaos_")
        self.params = {"llm_scorer": dict(model_params or {}),
                       "planner": {"max_steps": 12, "score_timeout_s": SCORE_TIMEOUT_S,
                                   "execute_timeout_s": EXECUTE_TIMEOUT_S}}
        self.procs: dict = {}
        self.expected_exit: set[str] = set()

    # -- the graph -----------------------------------------------------------------------------
    def __enter__(self):
        rclpy.init(args=[])
        self.probe = Probe()
        self.executor = rclpy.executors.MultiThreadedExecutor(num_threads=4)
        self.executor.add_node(self.probe)
        self._spin = threading.Thread(target=self.executor.spin, daemon=True)
        self._spin.start()
        for name in ("llm_scorer", "affordance", "skill_executor", "planner"):
            self.start_node(name)
        if not (self.probe.wait_services(["llm", "affordance", "execute", "reset", "cancel"])
                and self.probe.wait_subscribers()):
            raise RuntimeError(f"the node graph did not come up (logs: {self.log_dir})")
        return self

    def __exit__(self, *exc):
        stop_processes(list(self.procs.values()))
        self.executor.shutdown(timeout_sec=2.0)
        self._spin.join(timeout=5.0)
        self.probe.destroy_node()
        rclpy.shutdown()

    def start_node(self, name: str) -> None:
        log = os.path.join(self.log_dir, name)
        os.makedirs(log, exist_ok=True)
        self.procs[name] = start_processes(self.params, include=[name], log_dir=log)[0]
        self.expected_exit.discard(name)

    def crashed(self) -> list[str]:
        return [n for n, p in self.procs.items() if p.poll() is not None and n not in self.expected_exit]

    def rss(self) -> dict[str, float]:
        return {n: rss_mb(p.pid) for n, p in self.procs.items()}

    def _check_crashes(self, result: PartResult, seen: set) -> None:
        for name in self.crashed():
            if name not in seen:
                seen.add(name)
                result.fail("crashed", f"{name} exited with {self.procs[name].poll()} "
                                       f"(log {self.log_dir}/{name})")

    def _registry_violations(self, since: int) -> list[str]:
        known = set(self.skills)
        bad = []
        for msg in self.probe.statuses[since:]:
            bad += [s for s in msg.plan if s not in known]
        return bad

    def wait_serving(self, name: str, timeout_s: float = 180.0) -> bool:
        """Until ``name`` answers a real request: a killed server stays in the DDS graph until
        its lease ends, so ``wait_for_service`` alone can see the dead one."""
        client, request = {
            "llm_scorer": ("llm", SkillScore.Request(instruction="Go to the table.",
                                                     skills=["done"])),
            "affordance": ("affordance", SkillScore.Request(instruction="x", skills=["done"])),
            "skill_executor": ("reset", ResetWorld.Request(init="{}", seed=-1)),
            "planner": ("cancel", Trigger.Request()),
        }[name]
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            answer = self.probe.call(client, request, 5.0)
            if answer is not None and (answer.success or name == "planner"):
                return True
            time.sleep(0.5)
        return False

    def reset(self) -> None:
        self.probe.call("reset", ResetWorld.Request(init="{}", seed=-1), 10.0)

    def run_to_end(self, text: str, timeout_s: float = 120.0, cancel_after_start: bool = False):
        """Send ``text``; the terminal status (or a rejection), None if none came in time."""
        since, ours = self.probe.mark(), about(text)
        self.probe.send(text)
        first = self.probe.wait_status(
            since, lambda m: ours(m) or m.state == PlanStatus.STATE_REJECTED, 10.0)
        if first is None or first.state == PlanStatus.STATE_REJECTED:
            return first
        ended = lambda m: ours(m) and m.state in TERMINAL   # noqa: E731
        if cancel_after_start:      # until the plan exists to be cancelled, or it has ended
            deadline = time.monotonic() + 5.0
            while time.monotonic() < deadline:
                answer = self.probe.call("cancel", Trigger.Request(), 5.0)
                if (answer is not None and answer.success) or self.probe.wait_status(
                        since, ended, 0.2):
                    break
        return self.probe.wait_status(since, ended, timeout_s)

    # -- part 1 -------------------------------------------------------------------------------
    def part_instructions(self, n: int = 1000, idle: int = 40) -> PartResult:
        result, crashed = PartResult("instructions"), set()
        cases = fuzz_instructions(n, self.seed)
        mark = self.probe.mark()
        bar = tqdm(total=n, desc="chaos instructions", disable=not self.progress)
        started = time.monotonic()
        for kind, text in cases[:idle]:                       # idle: planned or refused
            result.tried += 1
            try:
                check_instruction(text)
                valid = True
            except TaskError:
                valid = False
            end = self.run_to_end(text, timeout_s=SCORE_TIMEOUT_S * 4, cancel_after_start=True)
            if end is None:
                result.fail("hung", f"{kind}: no status for {shown(text)[:60]!r}")
            elif valid and end.state == PlanStatus.STATE_REJECTED and "busy" not in end.message:
                result.fail("wrong", f"{kind}: a valid instruction was refused: {end.message}")
            elif not valid and end.state != PlanStatus.STATE_REJECTED:
                result.fail("wrong", f"{kind}: an invalid instruction ran ({end.state})")
            self._check_crashes(result, crashed)
            bar.update()
        idle_s, started = time.monotonic() - started, time.monotonic()
        busy_sent = busy_answered = 0
        for kind, text in cases[idle:]:                       # while a plan runs: all refused
            if not self._plan_running():
                self.reset()
                since = self.probe.mark()
                self.probe.send(BUSY_PLAN)
                self.probe.wait_status(since, lambda m: m.instruction == BUSY_PLAN and m.state in (
                    PlanStatus.STATE_PLANNING, PlanStatus.STATE_EXECUTING), 10.0)
            result.tried += 1
            since, ours = self.probe.mark(), about(text)
            self.probe.send(text)
            busy_sent += 1
            answer = self.probe.wait_status(           # refused; or run, had the plan just ended
                since, lambda m: m.state == PlanStatus.STATE_REJECTED or ours(m), 5.0)
            if answer is None:
                result.fail("lost", f"{kind}: no answer to {shown(text)[:60]!r} during a plan")
            elif answer.state != PlanStatus.STATE_REJECTED:
                self.probe.call("cancel", Trigger.Request(), 5.0)
                self.probe.wait_status(since, lambda m: ours(m) and m.state in TERMINAL, 60.0)
            else:
                busy_answered += 1
            self._check_crashes(result, crashed)
            bar.update()
        bar.close()
        self.probe.call("cancel", Trigger.Request(), 5.0)
        self.probe.wait_status(self.probe.mark() - 1, lambda m: m.state in TERMINAL, 30.0)
        bad = self._registry_violations(mark)
        for skill in bad:
            result.fail("wrong", f"executed a skill outside the registry: {skill!r}")
        result.figures.update(idle=idle, during_plan=busy_sent, refused_during_plan=busy_answered,
                              idle_s=idle_s, during_plan_s=time.monotonic() - started)
        return result

    def _plan_running(self) -> bool:
        """Whether the planner's latest word on its own plan is that it runs (refusals of
        other instructions say nothing about it)."""
        with self.probe._cond:
            for msg in reversed(self.probe.statuses):
                if msg.state != PlanStatus.STATE_REJECTED:
                    return msg.state in (PlanStatus.STATE_PLANNING, PlanStatus.STATE_EXECUTING)
        return False

    # -- part 2 -------------------------------------------------------------------------------
    def part_services(self, timeout_s: float = 60.0) -> PartResult:
        result, crashed = PartResult("services"), set()
        before = self.rss()
        cases = [(scorer, kind, SkillScore.Request(**fields), expect[scorer])
                 for kind, fields, expect in fuzz_score_requests(self.skills, self.seed)
                 for scorer in ("llm", "affordance")]
        cases += [("execute", kind, ExecuteSkill.Request(**fields), expect)
                  for kind, fields, expect in fuzz_execute_requests(self.skills, self.seed)]
        cases += [("reset", kind, ResetWorld.Request(**fields), expect)
                  for kind, fields, expect, _word in fuzz_reset_requests()]
        self.reset()
        answered: dict[str, list[float]] = {}    # client -> seconds to each answer
        slowest = (0.0, "")
        for _ in range(3):                # every case three times: memory that grows shows
            for client, kind, request, expect in tqdm(cases, desc="chaos services",
                                                      disable=not self.progress):
                result.tried += 1
                sent = time.monotonic()
                response = self.probe.call(client, request, timeout_s)
                if response is not None:
                    seconds = time.monotonic() - sent
                    answered.setdefault(client, []).append(seconds)
                    slowest = max(slowest, (seconds, f"{client} {kind}"))
                if response is None:
                    result.fail("hung", f"{client} {kind}: no response in {timeout_s:g} s")
                elif expect is not None and bool(response.success) != expect:
                    result.fail("wrong", f"{client} {kind}: success={response.success} "
                                         f"({response.message[:120]})")
                elif not response.success and not response.message:
                    result.fail("wrong", f"{client} {kind}: refused without a message")
                self._check_crashes(result, crashed)
        after = self.rss()
        for name in ("llm_scorer", "affordance", "skill_executor"):
            result.figures[f"{name}_rss_growth"] = after[name] / before[name] - 1.0
        # how fast a malformed request is answered (a refusal must not wait on a timeout)
        for client, seconds in answered.items():
            result.figures[f"{client}_answer_s_median"] = statistics.median(seconds)
        result.figures["slowest_answer_s"] = slowest[0]
        result.figures["slowest_answer"] = slowest[1].replace(" ", "/") or "-"
        return result

    # -- part 3 -------------------------------------------------------------------------------
    def part_faults(self) -> PartResult:
        result = PartResult("faults")
        for victim in ("llm_scorer", "affordance", "skill_executor"):
            result.tried += 1
            self.reset()
            since = self.probe.mark()
            self.probe.send(LONG)
            started = self.probe.wait_status(
                since, lambda m: m.instruction == LONG and len(m.plan) >= 1, 60.0)
            if started is None:
                result.fail("hung", f"{victim}: the plan never executed a first skill")
                continue
            executed = len(started.plan)
            self.expected_exit.add(victim)
            self.procs[victim].send_signal(signal.SIGKILL)
            killed = time.monotonic()
            end = self.probe.wait_status(
                since, lambda m: m.instruction == LONG and m.state in TERMINAL,
                SCORE_TIMEOUT_S + EXECUTE_TIMEOUT_S + 10.0)
            if end is None:
                result.fail("hung", f"{victim} killed: the planner never ended the plan")
                continue
            result.figures[f"{victim}_to_failed_s"] = time.monotonic() - killed
            if end.state != PlanStatus.STATE_FAILED:
                result.fail("wrong", f"{victim} killed: the plan ended {end.state}, not failed")
            if len(end.plan) > executed + 1:     # at most the skill that was in flight
                result.fail("wrong", f"{victim} killed: {len(end.plan) - executed} more skills ran")
            others = [n for n in self.crashed() if n != victim]
            for name in others:
                result.fail("crashed", f"{name} exited after {victim} was killed")
            self.procs[victim].wait(10)
            self.start_node(victim)
            if not self.wait_serving(victim):
                result.fail("hung", f"{victim} did not come back after a restart")
                continue
            self.reset()
            again = self.run_to_end(SHORT[0], timeout_s=120.0)
            if again is None:
                result.fail("hung", f"after restarting {victim}: no result for {SHORT[0]!r}")
            elif again.state != PlanStatus.STATE_SUCCEEDED:
                result.fail("wrong", f"after restarting {victim}: {SHORT[0]!r} {again.state}: "
                                     f"{again.message}")
        self._cancel_with_a_stopped_scorer(result)
        return result

    def _cancel_with_a_stopped_scorer(self, result: PartResult) -> None:
        """SIGSTOP the language scorer mid-plan (a hang: it neither answers nor dies), cancel:
        the plan ends ``cancelled`` at once, not ``failed`` by the score timeout or liveliness."""
        result.tried += 1
        self.reset()
        since = self.probe.mark()
        self.probe.send(LONG)
        if self.probe.wait_status(since, lambda m: m.instruction == LONG and m.plan, 60.0) is None:
            result.fail("hung", "hung scorer: the plan never executed a first skill")
            return
        scorer = self.procs["llm_scorer"]
        scorer.send_signal(signal.SIGSTOP)
        try:
            time.sleep(0.5)                              # the next step's request waits on it
            start = time.monotonic()
            answer = self.probe.call("cancel", Trigger.Request(), 5.0)
            end = self.probe.wait_status(
                since, lambda m: m.instruction == LONG and m.state in TERMINAL, SCORE_TIMEOUT_S)
        finally:
            scorer.send_signal(signal.SIGCONT)
        if answer is None or end is None:
            result.fail("hung", "hung scorer: no answer to the cancel")
        elif end.state != PlanStatus.STATE_CANCELLED:
            result.fail("wrong", f"hung scorer: the cancelled plan ended {end.state} "
                                 f"({end.message[:120]})")
        else:
            result.figures["hung_scorer_to_cancelled_s"] = time.monotonic() - start
        if not self.wait_serving("llm_scorer", 60.0):
            result.fail("hung", "the language scorer did not answer after SIGCONT")

    # -- part 5 (mid-plan; mid-navigation is CancelNavigationBench) -------------------------
    def part_cancel_plan(self, repeats: int = 20) -> tuple[PartResult, list[float]]:
        result, times = PartResult("cancel"), []
        for _ in tqdm(range(repeats), desc="chaos cancel (plan)", disable=not self.progress):
            result.tried += 1
            self.reset()
            since = self.probe.mark()
            self.probe.send(LONG)
            if self.probe.wait_status(since, lambda m: m.instruction == LONG and m.plan,
                                      60.0) is None:
                result.fail("hung", "the plan never started")
                continue
            start = time.monotonic()
            answer = self.probe.call("cancel", Trigger.Request(), 5.0)
            end = self.probe.wait_status(
                since, lambda m: m.instruction == LONG and m.state in TERMINAL, 30.0)
            if answer is None or end is None:
                result.fail("hung", "no answer to the cancel")
            elif end.state != PlanStatus.STATE_CANCELLED:
                result.fail("wrong", f"cancelled plan ended {end.state}")
            else:
                times.append(time.monotonic() - start)
        return result, times

    # -- part 6 -------------------------------------------------------------------------------
    def part_load(self, n: int = 200) -> PartResult:
        result = PartResult("load")
        latencies, rss_start = [], None
        for i in tqdm(range(n), desc="chaos load", disable=not self.progress):
            if i == 20:
                rss_start = self.rss()
            text = SHORT[i % len(SHORT)]
            result.tried += 1
            start = time.monotonic()
            end = self.run_to_end(text, timeout_s=120.0)
            if end is None:
                result.fail("lost", f"#{i} {text!r}: no result")
                continue
            latencies.append(time.monotonic() - start)
            if end.state != PlanStatus.STATE_SUCCEEDED:
                result.fail("wrong", f"#{i} {text!r} {end.state}: {end.message}")
        rss_end = self.rss()
        if len(latencies) >= 40:
            first, last = statistics.median(latencies[:20]), statistics.median(latencies[-20:])
            blocks = [statistics.median(latencies[i:i + 50]) for i in range(0, len(latencies), 50)]
            result.figures.update(first20_median_s=first, last20_median_s=last,
                                  latency_ratio=last / first,
                                  median_by_50_s="/".join(f"{b:.2f}" for b in blocks))
        for name, mb in (rss_start or {}).items():
            growth = rss_end[name] / mb - 1.0
            result.figures[f"{name}_rss_growth"] = growth
            if growth > 0.10:
                result.fail("wrong", f"{name} RSS grew {growth:.1%} over the load")
        return result


class CancelNavigationBench:
    """kitchen_sim and navigate_skill in a namespace of their own: cancel a drive mid-way and
    time how long until ``odom`` shows the base standing (the bar: 100 ms)."""
    NS = "/saycan_chaos_sim"
    STOPPED_LINEAR, STOPPED_ANGULAR = 0.01, 0.02

    def __init__(self, probe: Probe, log_dir: str, progress: bool = True):
        import subprocess
        import sys
        self.probe, self.progress = probe, progress
        self.procs = []
        for module, name in (("kitchen_sim_node", "kitchen_sim"),
                             ("navigate_skill_node", "navigate_skill")):
            out = open(os.path.join(log_dir, f"{name}.log"), "w")
            # stamped cmd_vel: the stop command carries the moment the node issued it
            args = [sys.executable, "-m", f"saycan_ros.ros.nodes.{module}", "--ros-args",
                    "-r", f"__ns:={self.NS}", "-p", "cmd_vel_stamped:=true"]
            if name == "kitchen_sim":
                args += ["-p", "camera_rate_hz:=2.0"]
            self.procs.append(subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT))
        self._odom = None
        self._zero_cmd_at = None            # when cmd_vel last went to zero
        self._lock = threading.Lock()
        probe.create_subscription(Odometry, f"{self.NS}/odom", self._on_odom, 50)
        probe.create_subscription(TwistStamped, f"{self.NS}/cmd_vel", self._on_cmd, 50)
        self.execute = probe.create_client(ExecuteSkill, f"{self.NS}/navigate_skill")
        self.cancel = probe.create_client(Trigger, f"{self.NS}/navigate_skill/cancel")
        self.reset = probe.create_client(ResetWorld, f"{self.NS}/saycan/world/reset")

    def _on_odom(self, msg: Odometry) -> None:
        with self._lock:
            self._odom = (time.monotonic(), msg.twist.twist)

    def _on_cmd(self, msg: TwistStamped) -> None:
        with self._lock:
            t = msg.twist
            zero = t.linear.x == 0.0 and t.angular.z == 0.0
            if zero and self._zero_cmd_at is None:     # when the node issued it (wall clock)
                self._zero_cmd_at = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
            elif not zero:
                self._zero_cmd_at = None

    def _twist(self) -> Twist | None:
        with self._lock:
            return self._odom[1] if self._odom else None

    def _stopped(self) -> bool:
        t = self._twist()
        return t is not None and abs(t.linear.x) < self.STOPPED_LINEAR and \
            abs(t.angular.z) < self.STOPPED_ANGULAR

    def close(self) -> None:
        stop_processes(self.procs)

    def run(self, repeats: int = 20) -> tuple[PartResult, list[float], list[float]]:
        result, to_stop, to_answer = PartResult("cancel"), [], []
        self.to_zero_command: list[float] = []
        self.second_drive_refused: list[float] = []
        for client in (self.execute, self.cancel, self.reset):
            if not client.wait_for_service(timeout_sec=120.0):
                result.fail("hung", f"{client.srv_name} never came up")
                return result, to_stop, to_answer
        goals = ("go to the far counter", "go to the close counter", "go to the trash can")
        navigate_pid, began = self.procs[1].pid, time.monotonic()
        cpu_before = cpu_seconds(navigate_pid)
        for i in tqdm(range(repeats), desc="chaos cancel (drive)", disable=not self.progress):
            result.tried += 1
            self.reset.call_async(ResetWorld.Request(init="{}", seed=i))
            time.sleep(0.5)
            future = self.execute.call_async(ExecuteSkill.Request(skill=goals[i % len(goals)],
                                                                  timeout_s=60.0))
            deadline = time.monotonic() + 20.0
            while time.monotonic() < deadline:          # driving at speed
                t = self._twist()
                if t is not None and abs(t.linear.x) > 0.2:
                    break
                time.sleep(0.005)
            else:
                result.fail("hung", f"{goals[i % len(goals)]!r}: the base never drove")
                continue
            time.sleep(0.3)
            self._second_drive(result, goals[(i + 1) % len(goals)])
            start, sent_wall = time.monotonic(), time.time()
            answer = self.cancel.call_async(Trigger.Request())
            while not self._stopped() and time.monotonic() - start < 5.0:
                time.sleep(0.001)
            if not self._stopped():
                result.fail("wrong", "the base did not stop within 5 s of the cancel")
                continue
            to_stop.append(time.monotonic() - start)
            with self._lock:
                zero_at = self._zero_cmd_at
            if zero_at is None or zero_at < sent_wall:
                result.fail("wrong", "no zero cmd_vel after the cancel")
            else:       # includes the cancel request's way to the node: an upper bound
                self.to_zero_command.append(zero_at - sent_wall)
            end = time.monotonic() + 10.0
            while not future.done() and time.monotonic() < end:
                time.sleep(0.01)
            if not future.done():
                result.fail("hung", "the cancelled skill never answered")
                continue
            to_answer.append(time.monotonic() - start)
            if future.result().success:
                result.fail("wrong", "a cancelled drive reported success")
            if not answer.done():
                result.fail("hung", "the cancel service never answered")
        # share of one core the skill node used over the drives (its executor's cost)
        result.figures["navigate_skill_cpu"] = ((cpu_seconds(navigate_pid) - cpu_before)
                                                / (time.monotonic() - began))
        self._watchdog(result)
        return result, to_stop, to_answer

    def _second_drive(self, result: PartResult, goal: str) -> None:
        """A second drive while one runs is refused at once ("busy"), never queued."""
        start = time.monotonic()
        future = self.execute.call_async(ExecuteSkill.Request(skill=goal, timeout_s=60.0))
        while not future.done() and time.monotonic() - start < 10.0:
            time.sleep(0.001)
        if not future.done():
            result.fail("hung", "a second drive while one runs: no answer in 10 s")
            return
        self.second_drive_refused.append(time.monotonic() - start)
        answer = future.result()
        if answer.success or "busy" not in answer.message:
            result.fail("wrong", f"a second drive while one runs: success={answer.success} "
                                 f"({answer.message[:120]})")

    def _watchdog(self, result: PartResult, repeats: int = 5) -> None:
        """Drive the base on cmd_vel directly, then go silent: the simulator's watchdog stops
        it (``cmd_timeout_s``, then its deceleration limit). Figure: silence to odom at rest."""
        publisher = self.probe.create_publisher(TwistStamped, f"{self.NS}/cmd_vel", 10)
        stops = []
        try:
            for _ in range(repeats):
                result.tried += 1
                command = TwistStamped()
                command.twist.linear.x = 0.5
                deadline = time.monotonic() + 10.0
                while time.monotonic() < deadline:
                    command.header.stamp = self.probe.get_clock().now().to_msg()
                    publisher.publish(command)
                    t = self._twist()
                    if t is not None and t.linear.x > 0.4:
                        break
                    time.sleep(0.05)
                else:
                    result.fail("hung", "watchdog: the base never drove on cmd_vel")
                    continue
                silent = time.monotonic()
                while not self._stopped() and time.monotonic() - silent < 5.0:
                    time.sleep(0.001)
                if not self._stopped():
                    result.fail("wrong", "watchdog: the base still moved 5 s after cmd_vel "
                                         "went silent")
                    continue
                stops.append(time.monotonic() - silent)
        finally:
            self.probe.destroy_publisher(publisher)
        if stops:
            result.figures["watchdog_stop_s_median"] = statistics.median(stops)
            result.figures["watchdog_stop_s_worst"] = max(stops)


def summary_line(results: list[PartResult], seconds: float) -> str:
    total = PartResult("total")
    for r in results:
        for k in ("tried", "crashed", "hung", "wrong", "lost"):
            setattr(total, k, getattr(total, k) + getattr(r, k))
    verdict = "clean" if total.clean else "PROBLEMS"
    return (f"chaos summary: {len(results)} parts, tried {total.tried}, crashed {total.crashed}, "
            f"hung {total.hung}, wrong {total.wrong}, lost {total.lost} in {seconds / 60:.1f} min: "
            f"{verdict}")


def part_injected(every: int = 7, rate: float = 0.2, workers: int = 2, seed: int = 0) -> PartResult:
    """Part 4, ROS-free: the oracle world on every ``every``-th task of tasks.yaml, without and
    with ``rate`` of skill executions failing (re-planning on): the successes that survive.
    (The whole file: ``saycan eval --tasks tasks.yaml --fault-rate 0.2``, docs/results/faults.md.)"""
    from saycan_ros.core.config import config_dir
    from saycan_ros.core.tasks import load_tasks
    from saycan_ros.evaluation.runner import EvalJob, run_jobs
    from saycan_ros.llm.config import DEFAULT_MODEL, LLMConfig
    from saycan_ros.planning.vocabulary import load_vocabulary
    vocabulary = load_vocabulary()
    tasks = load_tasks(config_dir() / "tasks.yaml", vocabulary.kitchen)[::every]
    llm = LLMConfig().params()
    del llm["model"]
    jobs = [EvalJob(DEFAULT_MODEL, "saycan", llm, "", 20, "symbolic", seed, {},
                    20 if r else 0, r) for r in (0.0, rate)]
    clean, faulty = run_jobs(jobs, tasks, vocabulary, workers=workers, chunks_per_job=1)
    result = PartResult("injected", tried=len(tasks))
    ok = {o.task.id for o in clean.outcomes if o.plan_success}
    kept = {o.task.id for o in faulty.outcomes if o.plan_success} & ok
    share = len(kept) / max(1, len(ok))
    result.figures.update(tasks=len(tasks), succeed_without_faults=len(ok),
                          still_succeed=len(kept), kept=share)
    if share < 0.9:
        result.fail("wrong", f"only {share:.0%} of the fault-free successes survive {rate:.0%} "
                             "injected failures (bar 90%)")
    return result


def run_chaos(parts=PARTS, seed: int = 0, instructions: int = 1000, idle: int = 40,
              load: int = 200, repeats: int = 20, progress: bool = True, echo=print) -> dict:
    """Run the ``parts``; every part's line goes to ``echo`` as it finishes."""
    from saycan_ros.planning.vocabulary import load_vocabulary
    started = time.monotonic()
    results: list[PartResult] = []

    def done(result: PartResult) -> None:
        results.append(result)
        echo(result.line())
        for problem in result.problems[:10]:
            echo(f"    {problem}")

    skills = load_vocabulary().skills.texts
    graph_parts = [p for p in parts if p != "injected"]
    log_dir = None
    if graph_parts:
        with ChaosBench(skills, seed=seed, progress=progress) as bench:
            log_dir = bench.log_dir
            if "instructions" in parts:
                done(bench.part_instructions(instructions, idle))
            if "services" in parts:
                done(bench.part_services())
            if "faults" in parts:
                done(bench.part_faults())
            if "cancel" in parts:
                plan, plan_times = bench.part_cancel_plan(repeats)
                nav = CancelNavigationBench(bench.probe, bench.log_dir, progress)
                try:
                    drive, stop_times, answer_times = nav.run(repeats)
                finally:
                    nav.close()
                for key in ("tried", "crashed", "hung", "wrong", "lost"):
                    setattr(plan, key, getattr(plan, key) + getattr(drive, key))
                plan.problems += drive.problems
                plan.figures.update(drive.figures)
                late = [t for t in nav.to_zero_command if t > 0.1]
                plan.figures["zero_cmd_vel_over_100ms"] = len(late)
                for name, values in (("plan_to_cancelled_s", plan_times),
                                     ("zero_cmd_vel_s", nav.to_zero_command),
                                     ("odom_stopped_s", stop_times),
                                     ("drive_answered_s", answer_times),
                                     ("second_drive_refused_s", nav.second_drive_refused)):
                    if values:
                        plan.figures[f"{name}_median"] = statistics.median(values)
                        plan.figures[f"{name}_worst"] = max(values)
                # The bar is on the command: the base then brakes at its deceleration limit
                # (the simulator's 1 m/s^2 from up to 0.8 m/s: up to 0.8 s until odom reads 0).
                if nav.to_zero_command and max(nav.to_zero_command) > 0.1:
                    plan.fail("wrong", f"cmd_vel went to zero {max(nav.to_zero_command) * 1e3:.0f}"
                                       " ms after a cancel (bar 100 ms)")
                done(plan)
            if "load" in parts:
                done(bench.part_load(load))
    if "injected" in parts:
        done(part_injected(seed=seed))
    seconds = time.monotonic() - started
    echo(summary_line(results, seconds))
    return {"seconds": seconds, "log_dir": log_dir,
            "parts": [{"part": r.part, "tried": r.tried, "crashed": r.crashed, "hung": r.hung,
                       "wrong": r.wrong, "lost": r.lost, "figures": r.figures,
                       "problems": r.problems} for r in results]}
