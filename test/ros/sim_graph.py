"""Test harness shared by the skill-node DDS tests: kitchen_sim in a child process (the robot),
the nodes under test in this process on their own rclpy context, spun by a multi-threaded
executor, plus a client node for the world's reset and state services. DDS stays on localhost
in ``domain_id``."""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import rclpy

from saycan_ros.ros.graph import InProcessGraph, stop_processes
from saycan_ros.ros.nodes.common import call_service
from saycan_ros.srv import GetWorldState, ResetWorld

#: How long a test's router waits for an executor's answer on top of the skill's timeout: the
#: executor's stop_grace_s (2 s) and settle_s, plus DDS delivery in a one-process graph on a
#: loaded 2-core machine (a clean-clone CI run once had no answer 3 s after a 1.5 s timeout,
#: although the executor had logged the timeout).
ROUTER_MARGIN_S = 8.0
#: The most an executor itself may run past a skill's timeout before it answers (its own
#: ``duration_s``): stop_grace_s 2 s + settle_s 0.3 s at most, and 1 s of scheduling slack.
WIND_DOWN_S = 3.3


class SimGraph:
    def __init__(self, tmp: Path, domain_id: int, client_name: str, sim_args: tuple = ()):
        env = dict(os.environ, ROS_DOMAIN_ID=str(domain_id),
                   ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
        env.pop("ROS_STATIC_PEERS", None)
        self.tmp = tmp
        self.log = open(tmp / "kitchen_sim.log", "w")
        self.sim = subprocess.Popen([sys.executable, "-m", "saycan_ros.ros.nodes.kitchen_sim_node",
                                     "--ros-args", "-p", "camera_rate_hz:=10.0", *sim_args],
                                    cwd=tmp, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        self.context = rclpy.Context()
        rclpy.init(context=self.context, domain_id=domain_id)
        self.client = rclpy.create_node(client_name, context=self.context)
        self.reset_client = self.client.create_client(ResetWorld, "/saycan/world/reset")
        self.state_client = self.client.create_client(GetWorldState, "/saycan/world/state")
        self.spinning = None

    def spin(self, *nodes) -> None:
        """Spin the client and ``nodes`` (the nodes under test) in a background thread."""
        self.spinning = InProcessGraph.spinning(threads=6, context=self.context)
        for node in (*nodes, self.client):
            self.spinning.add(node)

    def reset(self, init: dict, seed: int = 1) -> int:
        response = call_service(self.client, self.reset_client,
                                ResetWorld.Request(init=json.dumps(init), seed=seed), 20, "reset")
        assert response.success, response.message
        time.sleep(0.4)                     # the new scene reaches the nodes' subscriptions
        return response.state_revision

    def state(self) -> dict:
        return json.loads(call_service(self.client, self.state_client, GetWorldState.Request(),
                                       10, "state").state_json)

    def ready(self) -> bool:
        """The nodes under test have what they need from the simulator (override)."""
        return True

    def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.reset_client.service_is_ready() and self.ready():
                return
            time.sleep(0.1)
        raise TimeoutError(f"kitchen_sim did not come up (see {self.tmp / 'kitchen_sim.log'})")

    def close(self) -> None:
        if self.spinning is not None:       # stops spinning, then destroys the nodes
            self.spinning.shutdown()
        else:
            self.client.destroy_node()
        rclpy.shutdown(context=self.context)
        stop_processes([self.sim])          # SIGINT, then kill after 5 s
        self.log.close()


def running(graph: SimGraph):
    """Fixture body: yield ``graph`` once it is ready, close it whatever happens."""
    try:
        graph.wait_ready()
        yield graph
    finally:
        graph.close()
