"""The cameras: the head camera's mount and image size, the end-effector view (a zoomed crop
of the head camera, or a wrist camera on the gripper) and the optical-frame convention."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: The head camera's image side in pixels (kitchen_sim's camera_width / height, the pick env's
#: observation, the learned skills' input). One pixel is about 1.2 cm across the counters; a
#: policy trained on 128-px frames (0.9 cm) did no better (94.2% vs 94.2%).
HEAD_CAMERA_SIZE = 96
#: The end-effector view: side in pixels and pixels per head pixel (0.6 cm across the
#: counters: the fingers and the object between them).
EE_VIEW_SIZE = 48
EE_VIEW_ZOOM = 2.0
#: The end-effector view's cameras: a zoomed crop of the head camera, or a wrist camera.
EE_CAMERAS = ("crop", "wrist")


@dataclass(frozen=True)
class CameraMount:
    """Where the head camera sits on the base (metres, base frame) and how it looks down."""
    x: float = 0.05               # above the arm's mast (tried 15 cm beside it: the arm hid less of a
    z: float = 1.55               # flat object, yet the retrained pick policy did worse, 91.7% vs 97.6%)
    pitch: float = 0.75           # radians below the horizon
    hfov: float = math.radians(60)


@dataclass(frozen=True)
class WristMount:
    """Where the wrist camera sits on the gripper (metres, in the gripper's frame: x along
    the arm, z up, from the fingertips) and how it looks down."""
    back: float = 0.03            # behind the fingers along the arm, between their roots
    up: float = 0.08              # above the fingertips, just under the palm
    pitch: float = math.radians(69)   # the fingertips near the image centre
    hfov: float = math.radians(80)


def view_focal(zoom: float = EE_VIEW_ZOOM, mount: CameraMount | None = None) -> float:
    """The end-effector view's focal length in its pixels: ``zoom`` times the policy's 96-px
    head frame's over the mount's field of view (whatever size the head camera has)."""
    hfov = (mount or CameraMount()).hfov
    return HEAD_CAMERA_SIZE * float(zoom) / (2 * math.tan(hfov / 2))


def base_from_optical(pitch: float) -> np.ndarray:
    """The rotation base <- optical frame (REP-103: z forward, x right, y down) of a camera
    looking ahead, ``pitch`` radians below the horizon."""
    forward = np.array([math.cos(pitch), 0.0, -math.sin(pitch)])
    right = np.array([0.0, -1.0, 0.0])
    return np.stack([right, np.cross(forward, right), forward], axis=1)
