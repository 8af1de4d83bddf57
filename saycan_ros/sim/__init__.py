"""The built-in kitchen simulator, free of ROS: world physics (``world``), sensors (``camera``,
``scan``), scripted control (``navigation``, ``expert``), gymnasium environments (``envs``), pictures
(``render``) and the benchmark (``bench``). ``ros/nodes/kitchen_sim_node.py`` puts it on ROS
topics; ``worlds/simulated.py`` runs skills in it.
"""
from __future__ import annotations

# The robot it simulates is described in saycan_ros.robot (arm, joints, cameras).


def run_sim_bench(steps: int = 5000, camera: bool = True) -> dict:
    """Simulator steps per second on one core (see ``bench``)."""
    from saycan_ros.sim.bench import run_sim_bench as bench      # noqa: PLC0415
    return bench(steps=steps, camera=camera)
