"""The end-effector view from a real head camera: the ROS-free crop of a full-resolution frame
(saycan_ros.robot.ee_view) equals the simulator's rendered view (the ee_view node that runs it
over DDS: test/ros/test_ee_view_node.py)."""
import numpy as np
import pytest

from saycan_ros.robot.arm import MAST
from saycan_ros.robot.cameras import EE_VIEW_SIZE, HEAD_CAMERA_SIZE
from saycan_ros.robot.ee_view import crop_ee_view, ee_in_optical
from saycan_ros.sim.camera import Camera
from saycan_ros.sim.envs import KitchenSkillEnv
from saycan_ros.skills.pick.policy import ee_from_joints

FINE = 4 * HEAD_CAMERA_SIZE          # the "real" head camera: 384 px over the same field of view


def intrinsics_k(camera) -> list[float]:
    fx, fy, cx, cy = camera.intrinsics
    return [fx, 0.0, cx, 0.0, fy, cy, 0.0, 0.0, 1.0]


def test_crop_of_a_full_resolution_frame_is_the_simulated_view():
    env = KitchenSkillEnv("pick", ee_view=EE_VIEW_SIZE)
    env.reset(seed=5, options={"object": "energy bar", "location": "table"})
    fine, expert = Camera(env.world, FINE, FINE), env.expert()
    for _ in range(10):                                       # along the expert's reach
        lift, yaw, extend, _ = env.world.arm.joint_positions
        point = ee_in_optical(ee_from_joints(lift, yaw, extend, MAST))
        view, (fx, fy, cx, cy) = crop_ee_view(fine.render(), intrinsics_k(fine), point)
        rendered = env.ee_camera.render()
        assert view.shape == rendered.shape == (EE_VIEW_SIZE, EE_VIEW_SIZE, 3)
        assert (fx, cx, cy) == pytest.approx((env.ee_camera.f, env.ee_camera.cx, env.ee_camera.cy))
        assert np.abs(view.astype(int) - rendered).mean() < 6           # resampled edges only
        env.step(expert.clean_action())


def test_crop_rejects_what_it_cannot_use():
    frame = np.zeros((FINE, FINE, 3), np.uint8)
    k = [300.0, 0, 192, 0, 300.0, 192, 0, 0, 1]
    with pytest.raises(ValueError, match="intrinsics"):
        crop_ee_view(frame, [0.0] * 9, (0.0, 0.0, 1.0))
    with pytest.raises(ValueError, match="in front of the camera"):
        crop_ee_view(frame, k, (0.0, 0.0, -0.3))
    with pytest.raises(ValueError, match="HxWx3"):
        crop_ee_view(frame[..., 0], k, (0.0, 0.0, 1.0))
    # Off the frame's edge: the missing part is black, the view keeps its size.
    view, _ = crop_ee_view(np.full((FINE, FINE, 3), 200, np.uint8), k, (0.64, 0.0, 1.0))
    assert view.shape == (EE_VIEW_SIZE, EE_VIEW_SIZE, 3)
    assert (view[:, :8] == 200).all() and (view[:, -8:] == 0).all()
