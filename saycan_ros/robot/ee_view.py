"""The end-effector view from a real camera (ROS-free; the ``ee_view`` node wraps it).

The pick policy's second input is the head camera at a fixed angular resolution, cropped
around the point the fingertips project to (:class:`saycan_ros.sim.camera.EEViewCamera` renders
it in the simulator). A real head camera has more pixels than the policy's 96-px frame: this
module cuts the same view out of its full-resolution image, given its intrinsics and where the
fingertips are in its optical frame (tf, or the arm's kinematics and the camera mount).
"""
from __future__ import annotations

import math
from typing import Sequence

import cv2
import numpy as np

from saycan_ros.robot.cameras import EE_VIEW_SIZE, CameraMount, base_from_optical, view_focal

NEAR_M = 0.05


def crop_ee_view(image: np.ndarray, k: Sequence[float], point: Sequence[float],
                 size: int = EE_VIEW_SIZE, focal: float | None = None) -> tuple[np.ndarray, tuple]:
    """(view, (fx, fy, cx, cy) of the view): the ``size`` x ``size`` view of focal length
    ``focal`` (default :func:`view_focal`) centred on ``point`` (x, y, z in the camera's optical
    frame, m), cut from ``image`` (H x W x 3) of intrinsics ``k`` (the 9 values of
    CameraInfo.k). Parts of the window off the image are black. Raises ValueError on bad
    intrinsics or a point behind the camera."""
    k = np.asarray(k, dtype=np.float64).reshape(-1)
    if k.size != 9 or not np.all(np.isfinite(k)) or k[0] <= 0 or k[4] <= 0:
        raise ValueError(f"camera intrinsics: expected 9 finite values with fx, fy > 0, got {k.tolist()}")
    x, y, z = (float(v) for v in point)
    if not (math.isfinite(x) and math.isfinite(y) and math.isfinite(z)) or z <= NEAR_M:
        raise ValueError(f"the end effector is not in front of the camera: {(x, y, z)}")
    image = np.asarray(image)
    if image.ndim != 3 or image.shape[2] != 3:
        raise ValueError(f"expected an HxWx3 image, got shape {image.shape}")
    fx, fy, cx, cy = k[0], k[4], k[2], k[5]
    focal = float(focal or view_focal())
    # The view's principal point, in whole view pixels as the simulator's EEViewCamera puts it.
    vcx = size / 2 - round(x * focal / z)
    vcy = size / 2 - round(y * focal / z)
    sx, sy = fx / focal, fy / focal                  # source pixels per view pixel
    x0, y0 = cx - sx * vcx, cy - sy * vcy             # the view's corner in the source
    w, h = max(1, round(sx * size)), max(1, round(sy * size))
    c0, r0 = round(x0), round(y0)
    window = np.zeros((h, w, 3), np.uint8)
    rows = slice(max(r0, 0), min(r0 + h, image.shape[0]))
    cols = slice(max(c0, 0), min(c0 + w, image.shape[1]))
    if rows.start < rows.stop and cols.start < cols.stop:
        window[rows.start - r0:rows.stop - r0, cols.start - c0:cols.stop - c0] = image[rows, cols]
    interpolation = cv2.INTER_AREA if w >= size else cv2.INTER_LINEAR
    view = cv2.resize(window, (size, size), interpolation=interpolation)
    return view, (focal, focal * fy / fx, float(vcx), float(vcy))


def ee_in_optical(ee_base: Sequence[float], mount: CameraMount | None = None) -> np.ndarray:
    """The end effector (base frame, m) in the optical frame of a head camera on ``mount``
    (REP-103: z forward, x right, y down), for a robot without tf at hand."""
    mount = mount or CameraMount()
    offset = np.asarray(ee_base, dtype=np.float64) - (mount.x, 0.0, mount.z)
    return offset @ base_from_optical(mount.pitch)
