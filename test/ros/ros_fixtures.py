"""Helpers shared by the tests that run nodes in the test process."""
import contextlib
import threading

import rclpy
from rclpy.executors import MultiThreadedExecutor


def remapped(prefix: str, *names: str) -> list[str]:
    """``--ros-args -r`` rules moving the given names under ``prefix`` (an isolated graph)."""
    args = ["--ros-args"]
    for name in names:
        args += ["-r", f"{name}:={prefix}{name}"]
    return args


@contextlib.contextmanager
def spinning(threads: int):
    """rclpy initialised and a multi-threaded executor spinning in a thread, for one module."""
    rclpy.init()
    executor = MultiThreadedExecutor(num_threads=threads)
    thread = threading.Thread(target=executor.spin, daemon=True)
    thread.start()
    try:
        yield executor
    finally:
        executor.shutdown(timeout_sec=2)
        rclpy.shutdown()


@contextlib.contextmanager
def graph_on(executor, nodes, commander, ready_s: float = 60.0):
    """``nodes`` and ``commander`` spun by ``executor`` until the graph is ready; yields the
    commander and removes and destroys them all afterwards."""
    for node in list(nodes) + [commander]:
        executor.add_node(node)
    try:
        commander.wait_until_ready(ready_s)
        yield commander
    finally:
        for node in list(nodes) + [commander]:
            executor.remove_node(node)
            node.destroy_node()


class Spinner:
    """Nodes spun by an executor of their own in a thread. :meth:`close` stops the executor,
    waiting for the callbacks that run, before it destroys the nodes: a node destroyed under a
    running callback (a service about to answer) kills the spinning thread with InvalidHandle,
    and every node still on that executor goes deaf."""

    def __init__(self, nodes, threads: int = 8):
        self.nodes = list(nodes)
        self.executor = MultiThreadedExecutor(num_threads=threads)
        for node in self.nodes:
            self.executor.add_node(node)
        self.thread = threading.Thread(target=self.executor.spin, daemon=True)
        self.thread.start()

    def close(self, timeout_s: float = 10.0) -> None:
        self.executor.shutdown(timeout_sec=timeout_s)
        self.thread.join(timeout_s)
        for node in self.nodes:
            node.destroy_node()
