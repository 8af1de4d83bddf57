"""The built-in kitchen simulator, free of ROS: world physics (``world``), sensors (``camera``,
``scan``), scripted control (``navigation``, ``expert``), gymnasium environments (``envs``), pictures
(``render``) and the benchmark (``bench``). ``ros/nodes/kitchen_sim_node.py`` puts it on ROS
topics; ``worlds/simulated.py`` runs skills in it.
"""
from __future__ import annotations

# The robot it simulates is described in saycan_ros.robot (arm, joints, cameras).

#: The gymnasium ids of the skill environments (``gym.make(ENV_IDS["pick"])``).
ENV_IDS = {"pick": "SayCanKitchen-Pick-v0", "place": "SayCanKitchen-Place-v0"}
ENTRY_POINT = "saycan_ros.sim.envs:KitchenSkillEnv"


def register_envs() -> None:
    """Register the skill environments with gymnasium (idempotent). The entry point is a string,
    so the simulator itself is imported only by ``gym.make``. Gymnasium 1.x has no entry-point
    plugins any more: ``import saycan_ros.sim`` registers the ids, and
    ``gym.make("saycan_ros.sim:SayCanKitchen-Pick-v0")`` imports and registers in one go."""
    try:
        import gymnasium as gym
    except ImportError:          # the simulator's gym environments need gymnasium; nothing else does
        return
    for task, env_id in ENV_IDS.items():
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point=ENTRY_POINT, kwargs={"task": task})


register_envs()


def run_sim_bench(steps: int = 5000, camera: bool = True) -> dict:
    """Simulator steps per second on one core (see ``bench``)."""
    from saycan_ros.sim.bench import run_sim_bench as bench      # noqa: PLC0415
    return bench(steps=steps, camera=camera)
