"""sensor_msgs Image / CameraInfo for the RGB frames the simulator and the ee_view node publish."""
from __future__ import annotations

import numpy as np
from sensor_msgs.msg import CameraInfo, Image


def rgb_image(frame: np.ndarray, header) -> Image:
    """An ``rgb8`` Image of an HxWx3 uint8 frame."""
    msg = Image()
    msg.header = header
    msg.height, msg.width = frame.shape[:2]
    msg.encoding, msg.step = "rgb8", frame.shape[1] * 3
    msg.data = np.ascontiguousarray(frame, dtype=np.uint8).tobytes()
    return msg


def pinhole_info(header, width: int, height: int, intrinsics) -> CameraInfo:
    """The CameraInfo of an undistorted pinhole camera, ``intrinsics`` = (fx, fy, cx, cy)."""
    fx, fy, cx, cy = (float(v) for v in intrinsics)
    info = CameraInfo()
    info.header = header
    info.height, info.width = int(height), int(width)
    info.distortion_model = "plumb_bob"
    info.d = [0.0] * 5
    info.k = [fx, 0.0, cx, 0.0, fy, cy, 0.0, 0.0, 1.0]
    info.r = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
    info.p = [fx, 0.0, cx, 0.0, 0.0, fy, cy, 0.0, 0.0, 0.0, 1.0, 0.0]
    return info
