"""The skill controllers that the nodes run, closed on the simulator core without ROS.

:func:`drive` runs a :class:`saycan_ros.skills.navigation.Navigator` (what the
``navigate_skill`` node runs) and :func:`place_in_sim` a
:class:`saycan_ros.skills.place.controller.PlaceController` (what the ``place_skill`` node
runs) on a :class:`saycan_ros.sim.world.KitchenWorld`, at the nodes' control rate, on what
the nodes see: the odometry pose, the laser scan, the occupancy grid, the joint positions and
the head camera. So ``saycan eval --world sim`` and ``saycan eval-skill navigate|place``
measure the controllers that drive a robot, not a second implementation.
"""
from __future__ import annotations

from typing import Callable

from saycan_ros.skills.navigation import NavResult, NavStatus, ScanData
from saycan_ros.skills.place.controller import CameraModel, PlaceCommand

#: The skill nodes' control period (20 Hz); the simulator steps at 50 Hz.
CONTROL_PERIOD_S = 0.05


def scan_data(scanner, pose) -> ScanData:
    """What ``/scan`` carries, from a simulated :class:`saycan_ros.sim.scan.LaserScanner`."""
    spec = scanner.spec
    return ScanData(scanner.scan(*pose), spec.angle_min, spec.angle_increment, spec.range_min,
                    spec.range_max, mount=(spec.x, 0.0, 0.0))


def _stepper(world, on_step: Callable | None) -> Callable[[], None]:
    def step() -> None:
        world.step()
        if on_step is not None:
            on_step(world)
    return step


def drive(world, navigator, goal, scanner=None, control_period: float = CONTROL_PERIOD_S,
          timeout_s: float = 120.0, on_step: Callable | None = None) -> NavResult:
    """Run ``navigator`` toward ``goal`` (x, y, yaw) on a KitchenWorld, then let the base come
    to rest; returns the NavResult. ``on_step(world)`` runs after every simulator step."""
    step = _stepper(world, on_step)
    t0 = world.time
    result = navigator.start(goal, world.base.pose, world.time)
    next_control = world.time
    while result is None:
        if world.time - t0 > timeout_s:
            navigator.cancel()
            result = NavResult(NavStatus.ABORTED, 9003, f"timed out after {timeout_s:g} s")
            break
        if world.time >= next_control - 1e-9:
            scan = scan_data(scanner, world.base.pose) if scanner is not None else None
            command = navigator.update(world.base.pose, scan, world.time)
            world.command_base(command.linear, command.angular)
            result = command.result
            next_control += control_period
        step()
    world.command_base(0.0, 0.0)
    for _ in range(25):          # come to rest (acceleration limits)
        step()
    return result


def place_in_sim(world, controller, control_period: float = CONTROL_PERIOD_S,
                 timeout_s: float = 60.0, camera=None,
                 on_step: Callable | None = None) -> PlaceCommand:
    """Run a PlaceController on a KitchenWorld holding something; returns the final command.
    ``camera``: a simulated head camera (:class:`saycan_ros.sim.camera.Camera`) to look for
    free space; without one the spot is chosen unseen."""
    step = _stepper(world, on_step)
    model = None
    if camera is not None:
        m = camera.mount
        model = CameraModel.from_mount(m.x, m.z, m.pitch, m.hfov, camera.width, camera.height)
    final = controller.start(world.arm.joint_positions, world.base.pose, world.time,
                             look=camera is not None)
    if final is not None:
        return final
    t0 = world.time
    next_control = world.time
    command = PlaceCommand()
    while True:
        if world.time - t0 > timeout_s:
            command = PlaceCommand(done=True, success=False, message="timed out")
            break
        if world.time >= next_control - 1e-9:
            image = camera.render().copy() if command.want_image else None
            command = controller.update(world.arm.joint_positions, world.base.pose, world.time,
                                        image=image, camera=model if image is not None else None)
            if command.twist is not None:
                world.command_ee_twist(*command.twist)
            if command.gripper is not None:
                world.command_gripper(command.gripper)
            if command.trajectory is not None:
                world.command_arm_trajectory([command.trajectory])
            next_control += control_period
            if command.done:
                break
        step()
    world.command_ee_twist(0.0, 0.0, 0.0)       # the node's stop_robot: hold the arm
    for _ in range(10):
        step()
    return command
