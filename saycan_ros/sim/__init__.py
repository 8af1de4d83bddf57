"""The built-in kitchen simulator, free of ROS: world physics (``world``), sensors (``camera``,
``scan``), scripted control (``navigation``, ``expert``, ``executor``), gymnasium environments
(``envs``), pictures (``render``) and the benchmark (``bench``). ``nodes/kitchen_sim_node.py``
puts it on ROS topics.
"""
from __future__ import annotations

#: The simulated head camera's image side in pixels (kitchen_sim's camera_width / height, the
#: pick env's observation, the learned skills' input). One pixel is about 1.2 cm across the
#: counters; a policy trained on 128-px frames (0.9 cm) did no better (94.2% vs 94.2%).
HEAD_CAMERA_SIZE = 96
#: The end-effector view (``camera.EEViewCamera``): side in pixels and pixels per head pixel
#: (0.6 cm across the counters: the fingers and the object between them).
EE_VIEW_SIZE = 48
EE_VIEW_ZOOM = 2.0
#: The end-effector view's cameras: a zoomed crop of the head camera, or a wrist camera.
EE_CAMERAS = ("crop", "wrist")


def render_kitchen(path, seed: int = 0, init=None) -> str:
    """A top-down ``.png`` of the kitchen, or an ``.mp4`` of a scripted errand (see ``render``)."""
    from saycan_ros.sim.render import render_kitchen as render   # noqa: PLC0415 - loads OpenCV
    return render(path, seed=seed, init=init)


def run_sim_bench(steps: int = 5000, camera: bool = True) -> dict:
    """Simulator steps per second on one core (see ``bench``)."""
    from saycan_ros.sim.bench import run_sim_bench as bench      # noqa: PLC0415
    return bench(steps=steps, camera=camera)
