"""The launch files, for real: ``launch.LaunchService`` (through ``saycan launch``) runs them from
an install space (AMENT_PREFIX_PATH: the colcon install of .ci/colcon-check, or the venv's own
prefix where pip installed the package), every node it starts answers a service call, a
FollowInstruction goal "Bring me the sponge." succeeds with the sponge at the user, and Ctrl-C
stops the launch with no process of it left running. Slow (a graph each, about a minute): run
with ``pytest test/launch``; .ci/colcon-check runs them from the colcon install space.

Skipped, saying why, only where neither a ROS installation nor the launch wheels are installed
(``make launch-wheels``)."""
import os
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from launch_harness import LaunchRun  # noqa: E402

from saycan_ros.cli.launching import ament_prefix_with_package  # noqa: E402

try:
    import launch  # noqa: F401
    import launch_ros.actions  # noqa: F401
except ImportError as exc:      # not ImportError's subclass only: composition_interfaces too
    pytest.skip(f"the ROS 2 launch packages are not installed ({exc}): source a ROS 2 "
                f"installation or `make launch-wheels`", allow_module_level=True)

AMENT_PREFIX_PATH = ament_prefix_with_package()
if not AMENT_PREFIX_PATH:
    pytest.skip("saycan_ros is in no install space (colcon build, or pip install)",
                allow_module_level=True)

import rclpy  # noqa: E402
from rcl_interfaces.srv import GetParameters  # noqa: E402
from rclpy.executors import MultiThreadedExecutor  # noqa: E402

from saycan_ros.ros.commander import SayCanCommander  # noqa: E402

pytestmark = pytest.mark.launch

PLANNING = ("llm_scorer", "affordance", "skill_executor", "planner")
SIMULATED = ("kitchen_sim", "navigate_skill", "pick_skill", "place_skill", "llm_scorer",
             "affordance", "planner")
UP_S = 240.0          # every node answers (models load on two busy cores)
PLAN_S = 300.0        # the plan, carried out
#: The tests beyond the defaults check wiring, not plans: the small model loads faster.
SMALL_MODEL = "model:=smollm2-135m"


@pytest.fixture
def domain():
    """A ROS domain for one launch: the nodes of an earlier one (their DDS participants linger
    for a lease) are never mistaken for this one's."""
    base = int(os.environ.get("SAYCAN_TEST_DOMAIN_ID", os.environ["ROS_DOMAIN_ID"]))
    domain._next = getattr(domain, "_next", 0) + 1
    return 100 + (base * 7 + domain._next) % 100      # 100..199: no other test's


def _env(domain_id: int) -> dict:
    env = dict(os.environ, ROS_DOMAIN_ID=str(domain_id), AMENT_PREFIX_PATH=AMENT_PREFIX_PATH,
               ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST", PYTHONUNBUFFERED="1")
    return env


class Client:
    """rclpy in this process, on the launch's domain: a commander and parameter calls."""

    def __init__(self, domain_id: int, namespace: str):
        self.context = rclpy.Context()
        rclpy.init(context=self.context, domain_id=domain_id)
        self.commander = SayCanCommander("launch_test_commander", namespace=namespace,
                                         context=self.context)
        self.executor = MultiThreadedExecutor(num_threads=4, context=self.context)
        self.executor.add_node(self.commander)
        import threading
        self.thread = threading.Thread(target=self.executor.spin, daemon=True)
        self.thread.start()

    def answers(self, node: str) -> bool:
        """Whether ``node`` (full name) answers its get_parameters service."""
        client = self.commander.create_client(GetParameters, f"{node}/get_parameters")
        try:
            if not client.wait_for_service(timeout_sec=0.5):
                return False
            future = client.call_async(GetParameters.Request(names=["use_sim_time"]))
            deadline = time.monotonic() + 5
            while not future.done() and time.monotonic() < deadline:
                time.sleep(0.05)
            return future.done() and future.result() is not None
        finally:
            self.commander.destroy_client(client)

    def close(self) -> None:
        self.executor.shutdown(timeout_sec=2)
        self.commander.destroy_node()
        rclpy.shutdown(context=self.context)


def _sponge_location(state: dict) -> str:
    """The sponge's place in a world state: the skill executor's (name -> place) or the
    simulator's (name -> {location: ...})."""
    sponge = state["objects"]["sponge"]
    return sponge["location"] if isinstance(sponge, dict) else sponge


def _run(launch_file, arguments, nodes, domain_id, namespace="", spoken=""):
    run = LaunchRun(launch_file, arguments, env=_env(domain_id))
    client = Client(domain_id, namespace)
    prefix = f"/{namespace}" if namespace else ""
    try:
        for node in nodes:
            run.wait_for(lambda n=f"{prefix}/{node}": client.answers(n), UP_S, f"node {node}")
        commander = client.commander
        run.wait_for(commander.action_client.server_is_ready, 30, "the FollowInstruction server")
        if spoken:        # the speech node sends it: follow it by status and result
            commander.track_instruction(spoken)
        else:
            assert commander.follow_instruction("Bring me the sponge."), commander.get_result()
        run.wait_for(commander.is_task_complete, PLAN_S, "the plan")
        result = commander.get_result()
        # what the nodes printed goes with a failure: a flake is then readable from CI's log
        assert result["state"] == "succeeded", f"{result}\n{run.output(80)}"
        assert _sponge_location(commander.world_state()) == "user", result
    finally:
        code, left = run.shutdown()
        client.close()
    assert not left, f"still running after the launch exited: {left}\n{run.output(30)}"
    assert code == 0, f"launch exit status {code}\n{run.output(30)}"
    return run


def test_saycan_launch_with_its_defaults(domain):
    _run("saycan.launch.py", [], PLANNING, domain)


def test_saycan_sim_launch_with_its_defaults(domain):
    _run("saycan_sim.launch.py", [], SIMULATED, domain)


def test_saycan_launch_in_a_namespace(domain):
    run = _run("saycan.launch.py", ["namespace:=robot1", SMALL_MODEL], PLANNING, domain, namespace="robot1")
    assert set(run.started()) >= {f"{n}-{i}" for i, n in enumerate(PLANNING, 1)}


def test_saycan_launch_with_voice_from_a_wav_file(domain, speech, tmp_path):
    from saycan_ros.speech.synth import speak_to_wav
    wav = speak_to_wav("bring me the sponge", tmp_path / "sponge.wav")
    _run("saycan.launch.py", ["voice:=true", f"audio_file:={wav}", SMALL_MODEL],
         PLANNING + ("speech_to_text",), domain, spoken="Bring me the sponge.")


@pytest.mark.parametrize("refused, said", [
    ("ask_epsilon:=1.5", "ask_epsilon must be 0 (never ask) or in (0, 1), got 1.5"),
    ("params_file", "Trying to set parameter 'ask_epsilon' to 'high' of type 'STRING'"),
])
def test_a_parameter_a_node_refuses_fails_the_run_with_its_message(domain, tmp_path, refused,
                                                                   said):
    """A launch argument (ask_epsilon outside [0, 1)) or a parameter file (a string where a
    number belongs) that the planner refuses at start: the run fails at once with the planner's
    own line, not after a timeout."""
    if refused == "params_file":
        params = tmp_path / "saycan.yaml"
        params.write_text("/**/planner:\n  ros__parameters:\n    ask_epsilon: high\n")
        refused = f"params_file:={params}"
    run = LaunchRun("saycan.launch.py", [refused], env=_env(domain))
    start = time.monotonic()
    try:
        with pytest.raises(AssertionError, match="process has died") as failure:
            run.wait_for(lambda: False, UP_S, "the graph")
    finally:
        run.shutdown()
    assert f"PlannerNode: refused to start: {said}" in str(failure.value), failure.value
    assert time.monotonic() - start < UP_S
