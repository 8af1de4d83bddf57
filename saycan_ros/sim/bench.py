"""``saycan bench sim``: simulator steps per second on one core, camera rendering included.

Throughput is steps per CPU second of the benchmarking thread (one core), so that a busy
machine does not make the number meaningless; the wall-clock rate is reported beside it.
The scene is the default kitchen (15 objects) with the robot at the far counter, where the
camera sees the most objects, while the base turns on the spot and the arm sweeps, so every
step moves things and every frame is drawn anew.
"""
from __future__ import annotations

import math
import platform
import time

from saycan_ros.sim.camera import Camera
from saycan_ros.sim.world import KitchenWorld


def run_sim_bench(steps: int = 5000, camera: bool = True, width: int = 96, height: int = 96,
                  seed: int = 0) -> dict:
    world = KitchenWorld(seed=seed, cmd_timeout=None)
    world.reset({"robot_at": "far counter"}, seed=seed)
    cam = Camera(world, width, height) if camera else None
    warmup = min(200, steps)
    start = cpu_start = 0.0
    for i in range(warmup + steps):
        if i == warmup:
            start, cpu_start = time.perf_counter(), time.thread_time()
        phase = 2 * math.pi * i / 400
        world.command_base(0.0, 0.3 * math.sin(phase))
        world.command_ee_twist(0.1 * math.cos(phase), 0.1 * math.sin(phase), 0.05 * math.cos(2 * phase))
        world.command_gripper(0.05 + 0.05 * math.sin(phase))
        world.step()
        if cam is not None:
            cam.render()
    elapsed, cpu = time.perf_counter() - start, time.thread_time() - cpu_start
    # Steps per CPU second of this thread: one core's throughput, even on a busy machine.
    return {"steps": steps, "seconds": elapsed, "cpu_seconds": cpu, "steps_per_s": steps / cpu,
            "wall_steps_per_s": steps / elapsed,
            "camera": camera, "image": [width, height] if camera else None,
            "objects": len(world.present), "dt": world.dt,
            "python": platform.python_version(), "machine": platform.machine()}


def format_sim_result(result: dict) -> str:
    camera = f"camera {result['image'][0]}x{result['image'][1]}" if result["camera"] else "no camera"
    return (f"{result['steps']} steps in {result['cpu_seconds']:.2f} s of CPU time, "
            f"{result['seconds']:.2f} s wall ({camera}, {result['objects']} objects, "
            f"dt {result['dt']} s)\n"
            f"sim: {result['steps_per_s']:.0f} steps/s")
