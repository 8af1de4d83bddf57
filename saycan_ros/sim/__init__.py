"""The built-in kitchen simulator, free of ROS: world physics (``world``), sensors (``camera``,
``scan``), scripted control (``navigation``, ``expert``, ``executor``), gymnasium environments
(``envs``), pictures (``render``) and the benchmark (``bench``). ``nodes/kitchen_sim_node.py``
puts it on ROS topics.
"""
from __future__ import annotations

# The robot it simulates is described in saycan_ros.robot (arm, joints, cameras).


def render_kitchen(path, seed: int = 0, init=None) -> str:
    """A top-down ``.png`` of the kitchen, or an ``.mp4`` of a scripted errand (see ``render``)."""
    from saycan_ros.sim.render import render_kitchen as render   # noqa: PLC0415 - loads OpenCV
    return render(path, seed=seed, init=init)


def run_sim_bench(steps: int = 5000, camera: bool = True) -> dict:
    """Simulator steps per second on one core (see ``bench``)."""
    from saycan_ros.sim.bench import run_sim_bench as bench      # noqa: PLC0415
    return bench(steps=steps, camera=camera)
