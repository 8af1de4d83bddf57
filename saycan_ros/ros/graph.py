"""Starting the SayCan node graph: in one process (one multi-threaded executor) or as one
process per node (real DDS between them), as ``launch/saycan.launch.py`` does on a ROS install.
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import warnings
from dataclasses import dataclass, field
from typing import Any, Mapping

import rclpy
from rclpy.executors import MultiThreadedExecutor
from rclpy.parameter import Parameter

#: node name -> module with main() and the node class
NODES = {
    "llm_scorer": ("saycan_ros.ros.nodes.llm_scorer_node", "LlmScorerNode"),
    "affordance": ("saycan_ros.ros.nodes.affordance_node", "AffordanceNode"),
    "skill_executor": ("saycan_ros.ros.nodes.skill_executor_node", "SkillExecutorNode"),
    "planner": ("saycan_ros.ros.nodes.planner_node", "PlannerNode"),
}


def _overrides(params: Mapping[str, Any]) -> list[Parameter]:
    return [Parameter(name, value=value) for name, value in params.items()]


@dataclass
class InProcessGraph:
    """Nodes spun by one multi-threaded executor on a background thread: the one runtime of the
    in-process graph, ``saycan run``'s commander and the eval world's skill nodes. ``add``
    nodes (before or after ``start``), then :meth:`shutdown` stops the spinning and destroys
    them, in the order rclpy needs."""
    executor: MultiThreadedExecutor
    nodes: list = field(default_factory=list)
    thread: threading.Thread | None = None

    @classmethod
    def spinning(cls, threads: int = 3, context=None) -> "InProcessGraph":
        graph = cls(MultiThreadedExecutor(num_threads=threads, context=context))
        graph.start()
        return graph

    def add(self, node) -> None:
        self.nodes.append(node)
        self.executor.add_node(node)

    def start(self) -> None:
        self.thread = threading.Thread(target=self.executor.spin, daemon=True,
                                       name="saycan-executor")
        self.thread.start()

    def shutdown(self) -> None:
        self.executor.shutdown(timeout_sec=5.0)
        if self.thread is not None:  # rclpy aborts if it shuts down under a spinning thread
            self.thread.join(timeout=5.0)
        for node in self.nodes:
            node.destroy_node()


def start_in_process(params: Mapping[str, Mapping[str, Any]], threads: int = 6,
                     include=tuple(NODES), quiet: bool = False) -> InProcessGraph:
    """Build the nodes named in ``include`` (rclpy must be initialised) and spin them.
    ``quiet``: the nodes log warnings and errors only, and model loading shows no progress
    bars (their output would interleave with whatever the caller prints)."""
    import importlib
    if quiet:
        quiet_nodes(include)
    graph = InProcessGraph(MultiThreadedExecutor(num_threads=threads))
    for name in include:
        module, cls = NODES[name]
        node_cls = getattr(importlib.import_module(module), cls)
        graph.add(node_cls(parameter_overrides=_overrides(params.get(name, {}))))
    graph.start()
    return graph


def quiet_nodes(names) -> None:
    """Warnings and errors only from these nodes' loggers, and no progress bars of model
    loading in this process."""
    for name in names:
        rclpy.logging.set_logger_level(name, rclpy.logging.LoggingSeverity.WARN)
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    warnings.filterwarnings("ignore", category=FutureWarning, module=r"transformers\b")
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:
        return
    hf_logging.disable_progress_bar()


def _ros_arg(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value if value else "''"
    return repr(value)


def start_processes(params: Mapping[str, Mapping[str, Any]], include=tuple(NODES),
                    log_dir: str | None = None) -> list[subprocess.Popen]:
    """One ``python -m <node module>`` process per node, with ``--ros-args -p`` parameters."""
    env = dict(os.environ)
    env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    procs = []
    for name in include:
        module, _ = NODES[name]
        args = [sys.executable, "-m", module, "--ros-args"]
        for key, value in params.get(name, {}).items():
            args += ["-p", f"{key}:={_ros_arg(value)}"]
        out = open(os.path.join(log_dir, f"{name}.log"), "w") if log_dir else subprocess.DEVNULL
        proc = subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT)
        proc.node_name = name           # for exited(): which node it was
        proc.log_path = os.path.join(log_dir, f"{name}.log") if log_dir else None
        procs.append(proc)
    return procs


def exited(procs: list[subprocess.Popen]) -> str:
    """Empty while every node process runs; else which ones have exited, with their exit codes and
    the last line of each one's log (what a user needs to see at once, not after a timeout)."""
    gone = []
    for proc in procs:
        code = proc.poll()
        if code is None:
            continue
        text = f"node '{getattr(proc, 'node_name', proc.args)}' exited with code {code}"
        log = getattr(proc, "log_path", None)
        if log and os.path.isfile(log):
            with open(log, encoding="utf-8", errors="replace") as handle:
                lines = [line.strip() for line in handle if line.strip()]
            if lines:
                text += f": {lines[-1][:300]} (log: {log})"
        gone.append(text)
    return "; ".join(gone)


def stop_processes(procs: list[subprocess.Popen], timeout_s: float = 5.0) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(2)  # SIGINT: rclpy shuts down cleanly
    for proc in procs:
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()


def init_rclpy() -> None:
    if not rclpy.ok():
        rclpy.init(args=[])
