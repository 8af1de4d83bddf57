"""The robot's head camera: a pinhole camera rendered with OpenCV polygons.

Painter's algorithm: the walls, then furniture far to near, each piece followed by the
objects standing on it (far to near), then the arm and gripper. The gripper casts a shadow on
the surface below it, so its height shows in the image as well as its opening. All points of
a frame are projected in a few vectorised batches, which keeps a 96x96 frame well under a
millisecond.
"""
from __future__ import annotations

import math

import cv2
import numpy as np

from saycan_ros.core.kitchen import GRIPPER
from saycan_ros.robot.arm import MAST
from saycan_ros.robot.cameras import (EE_CAMERAS, EE_VIEW_SIZE, EE_VIEW_ZOOM, HEAD_CAMERA_SIZE,
                                      CameraMount, WristMount, base_from_optical, view_focal)
from saycan_ros.sim.objects import SimObject
from saycan_ros.sim.world import FINGER, KitchenWorld

FLOOR_COLOUR = (150, 140, 125)
WALL_COLOUR = (215, 210, 195)
FURNITURE_COLOURS = {"close counter": (110, 110, 120), "far counter": (110, 110, 120),
                     "table": (150, 105, 60), "trash can": (70, 90, 70), "user": (60, 90, 170)}
GRIPPER_COLOUR = (45, 45, 50)
ARM_COLOUR = (90, 90, 100)
SHADOW_COLOUR = (25, 25, 25)
SHIFT = 4                         # sub-pixel bits for OpenCV drawing
SCALE = 1 << SHIFT
NEAR = 0.05
FAR = 5.0
RING = 10                         # points around a cylinder
_CIRCLE = np.stack([np.cos(np.linspace(0, 2 * np.pi, RING, endpoint=False)),
                    np.sin(np.linspace(0, 2 * np.pi, RING, endpoint=False))], axis=1)
_LEVELS = np.array([0.0, 0.35, 0.7, 1.0])   # lower body | label band | upper body | top
_FACES = ((0, 1), (1, 2), (2, 3), (3, 0))   # box side faces by corner pair (counter-clockwise)
# The six faces (corner cycles) of a box given as 8 corners indexed 4a + 2b + c, one bit per axis.
_BOX_FACES = tuple(np.array(f) for f in ((0, 1, 3, 2), (4, 5, 7, 6), (0, 1, 5, 4), (2, 3, 7, 6),
                                         (0, 2, 6, 4), (1, 3, 7, 5)))


class Camera:
    near = NEAR                   # the near clipping plane, metres

    def __init__(self, world: KitchenWorld, width: int = HEAD_CAMERA_SIZE,
                 height: int = HEAD_CAMERA_SIZE, mount: CameraMount | None = None):
        if width < 8 or height < 8:
            raise ValueError(f"camera image too small: {width}x{height}")
        self.world = world
        self.width, self.height = int(width), int(height)
        self.mount = mount or CameraMount()
        self.f = self.width / (2 * math.tan(self.mount.hfov / 2))
        self.cx, self.cy = self.width / 2, self.height / 2
        self.base_from_optical = base_from_optical(self.mount.pitch)
        self._boxes = list(world.plan.boxes)
        self._walls = len(world.plan.walls)
        # Each box: 4 bottom corners then 4 top corners, all stacked for one projection.
        self._vertices = np.concatenate([np.vstack([b.corners(0.0), b.corners(b.height)])
                                         for b in self._boxes])
        normals, anchors = [], []
        for b in self._boxes:
            corners = b.corners(0.0)
            for i, j in _FACES:
                edge = corners[j] - corners[i]
                normals.append((edge[1], -edge[0]))      # outward for counter-clockwise corners
                anchors.append(corners[i][:2])
        self._face_normals = np.array(normals)
        self._face_anchors = np.array(anchors)
        # Vertex indices of every box's side faces (box, face, corner) and top face (box, corner).
        self._side_index = np.array([[[8 * i + a, 8 * i + b, 8 * i + 4 + b, 8 * i + 4 + a]
                                      for a, b in _FACES] for i in range(len(self._boxes))])
        self._top_index = np.array([[8 * i + 4 + k for k in range(4)] for i in range(len(self._boxes))])
        self._box_heights = np.array([b.height for b in self._boxes])
        self._frame = np.empty((self.height, self.width, 3), dtype=np.uint8)
        self._shapes: dict[str, tuple] = {}               # object -> (pose key, world points)
        self._palette_of = None

    # -- geometry -------------------------------------------------------------------------------
    @property
    def intrinsics(self) -> tuple[float, float, float, float]:
        """fx, fy, cx, cy in pixels."""
        return self.f, self.f, self.cx, self.cy

    def pose(self) -> tuple[np.ndarray, np.ndarray]:
        """(rotation map<-optical, position in map) of the camera now."""
        b = self.world.base
        c, s = math.cos(b.yaw), math.sin(b.yaw)
        rz = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
        position = np.array([b.x + c * self.mount.x, b.y + s * self.mount.x, self.mount.z])
        return rz @ self.base_from_optical, position

    def _project(self, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(camera-frame points, fixed-point pixel coordinates) of map-frame points."""
        cam = (points - self._position) @ self._rotation
        z = np.maximum(cam[:, 2:3], self.near)
        px = np.rint((cam[:, :2] * (self.f / z) + (self.cx, self.cy)) * SCALE).astype(np.int32)
        return cam, px

    def _polygon(self, px: np.ndarray, colour) -> None:
        cv2.fillConvexPoly(self._frame, px, colour, cv2.LINE_AA, SHIFT)

    def _hull(self, px: np.ndarray, colour) -> None:
        cv2.fillConvexPoly(self._frame, cv2.convexHull(px), colour, cv2.LINE_AA, SHIFT)

    def _clipped(self, cam: np.ndarray, colour) -> None:
        """A polygon crossing the near plane: clip it, then fill what is in front."""
        cam = _clip_near(cam, self.near)
        if len(cam) >= 3:
            self._polygon(self._pixels(cam), colour)

    def _pixels(self, cam: np.ndarray) -> np.ndarray:
        """Fixed-point pixel coordinates of camera-frame points on or beyond the near plane."""
        return np.rint((cam[:, :2] * (self.f / cam[:, 2:3]) + (self.cx, self.cy)) * SCALE).astype(np.int32)

    # -- rendering ----------------------------------------------------------------------------------
    def render(self) -> np.ndarray:
        """An RGB image (height, width, 3) uint8 of what the camera sees now (reused buffer)."""
        world = self.world
        palette = self._lit_palette()
        self._rotation, self._position = self.pose()
        eye = self._position
        self._frame[:] = palette["floor"]

        # Objects in view, grouped by what they stand on, with one projection for them all.
        groups: dict[str, list] = {}
        points, spans = [], []
        start = 0
        for name in world.present:
            obj = world.objects[name]
            if obj.location == GRIPPER or not self._may_see(obj):
                continue
            pts = self._object_points(obj)
            points.append(pts)
            spans.append((obj, start, start + len(pts)))
            start += len(pts)
        if points:
            cam, px = self._project(np.concatenate(points))
            for obj, a, b in spans:
                if cam[a:b, 2].min() > self.near:
                    dist = (obj.x - eye[0]) ** 2 + (obj.y - eye[1]) ** 2
                    groups.setdefault(obj.location, []).append(
                        (-dist, obj.name, px[a:b], float(cam[a, 2])))

        for _, name, opx, depth in sorted(groups.get("floor", ()), key=_far_first):
            self._draw_object(name, opx, palette, depth)
        cam, px = self._project(self._vertices)
        sides, tops = self._visible_faces(cam, px, eye)
        furniture = range(self._walls, len(self._boxes))
        order = [*range(self._walls),     # the walls enclose everything: first
                 *sorted(furniture, key=lambda i: -_box_distance(self._boxes[i], eye))]
        ee = world.ee_world()
        for i in order:
            box = self._boxes[i]
            top, side = palette[box.name]
            for k, clip in sides[i]:
                idx = self._side_index[i, k]
                if clip:
                    self._clipped(cam[idx], side)
                else:
                    self._polygon(px[idx], side)
            if tops[i] is not None:
                idx = self._top_index[i]
                if tops[i]:
                    self._clipped(cam[idx], top)
                else:
                    self._polygon(px[idx], top)
            if i >= self._walls and box.contains(ee[0], ee[1]):
                self._draw_shadow(ee, box.height, palette)
            for _, name, opx, depth in sorted(groups.get(box.name, ()), key=_far_first):
                self._draw_object(name, opx, palette, depth)
        self._draw_arm(palette)
        return self._frame

    def _visible_faces(self, cam: np.ndarray, px: np.ndarray, eye) -> tuple[list, list]:
        """Per box: [(side face, needs clipping)] and top (None: hidden, else needs clipping).

        Vectorised over all boxes: back faces, faces behind the camera and faces off the image
        are dropped before any drawing call.
        """
        in_front = cam[:, 2] > self.near
        facing = (((eye[:2] - self._face_anchors) * self._face_normals).sum(axis=1) > 0)
        facing = facing.reshape(-1, 4)
        side_front = in_front[self._side_index]                     # (box, face, corner)
        side_all, side_any = side_front.all(axis=2), side_front.any(axis=2)
        corners = px[self._side_index]
        w, h = self.width * SCALE, self.height * SCALE
        off = ((corners[..., 0].max(axis=2) < 0) | (corners[..., 1].max(axis=2) < 0)
               | (corners[..., 0].min(axis=2) > w) | (corners[..., 1].min(axis=2) > h))
        draw = facing & side_any & ~(side_all & off)
        top_front = in_front[self._top_index]
        top_all, top_any = top_front.all(axis=1), top_front.any(axis=1)
        show_top = (eye[2] > self._box_heights) & top_any
        clip = (~side_all).tolist()
        sides = [[(k, clip[i][k]) for k, d in enumerate(row) if d] for i, row in enumerate(draw.tolist())]
        tops = [(not a) if shown else None for a, shown in zip(top_all.tolist(), show_top.tolist())]
        return sides, tops

    def _may_see(self, obj: SimObject) -> bool:
        """Cheap culling: objects behind the camera or far away are not drawn."""
        b = self.world.base
        dx, dy = obj.x - b.x, obj.y - b.y
        forward = dx * math.cos(b.yaw) + dy * math.sin(b.yaw)
        return 0.05 < forward < FAR and abs(-dx * math.sin(b.yaw) + dy * math.cos(b.yaw)) < forward + 0.5

    def _object_points(self, obj: SimObject) -> np.ndarray:
        """Outline rings of an object at four heights (map frame), cached while it stays put."""
        key = (obj.x, obj.y, obj.z, obj.yaw)
        cached = self._shapes.get(obj.name)
        if cached is not None and cached[0] == key:
            return cached[1]
        shape = obj.shape
        if shape.kind == "sphere":   # centre, top, the stalk
            pts = np.array([[obj.x, obj.y, obj.z + shape.height / 2],
                            [obj.x, obj.y, obj.z + shape.height],
                            [obj.x, obj.y, obj.z + shape.height + 0.012]])
        else:
            if shape.kind == "cylinder":
                outline = shape.width / 2 * _CIRCLE
            else:
                c, s = math.cos(obj.yaw), math.sin(obj.yaw)
                hw, hl = shape.width / 2, shape.length / 2
                outline = (np.array([[hl, hw], [-hl, hw], [-hl, -hw], [hl, -hw]])
                           @ np.array([[c, s], [-s, c]]))
            n = len(outline)
            xy = np.tile(outline + (obj.x, obj.y), (len(_LEVELS), 1))
            z = np.repeat(obj.z + shape.height * _LEVELS, n)
            pts = np.column_stack([xy, z])
        self._shapes[obj.name] = (key, pts)
        return pts

    def _draw_object(self, name: str, px: np.ndarray, palette, depth: float) -> None:
        """Draw one object from its projected points; depth: its first point's camera z."""
        body, side, band = palette[name]
        if len(px) == 3:          # a sphere: its silhouette radius is f·R/z from any side
            # (centre-to-top in the image would shrink with the camera's downward pitch)
            radius = self.world.objects[name].shape.height / 2
            r = int(round(self.f * radius / max(depth, self.near) * SCALE))
            cv2.circle(self._frame, (int(px[0][0]), int(px[0][1])), max(r, SCALE // 2), body,
                       -1, cv2.LINE_AA, SHIFT)
            cv2.line(self._frame, (int(px[1][0]), int(px[1][1])), (int(px[2][0]), int(px[2][1])),
                     band, 1, cv2.LINE_AA, SHIFT)
            return
        n = len(px) // 4
        self._hull(px[: 2 * n], side)          # lower body
        self._hull(px[n: 3 * n], band)         # label band
        self._hull(px[2 * n:], side)           # upper body
        self._hull(px[3 * n:], body)           # top face, lit from above

    def _draw_shadow(self, ee, height: float, palette) -> None:
        ring = np.column_stack([ee[0] + 0.035 * _CIRCLE[:, 0], ee[1] + 0.035 * _CIRCLE[:, 1],
                                np.full(RING, height)])
        cam, px = self._project(ring)
        if cam[:, 2].min() > self.near:
            self._hull(px, palette["shadow"])

    def _draw_arm(self, palette) -> None:
        """The telescoping link, the held object, the fingers and the palm."""
        world = self.world
        b, arm = world.base, world.arm
        heading = b.yaw + arm.yaw
        c, s = math.cos(heading), math.sin(heading)
        ex, ey, ez = world.ee_world()
        mx = b.x + math.cos(b.yaw) * MAST[0] - math.sin(b.yaw) * MAST[1]
        my = b.y + math.sin(b.yaw) * MAST[0] + math.cos(b.yaw) * MAST[1]
        palm = ez + 0.09
        half = arm.opening / 2 + FINGER / 2
        pts = [(mx + c * 0.1, my + s * 0.1, palm + 0.02), (ex - c * 0.02, ey - s * 0.02, palm + 0.02)]
        for side_sign in (-1.0, 1.0):
            fx, fy = ex - s * side_sign * half, ey + c * side_sign * half
            pts += [(fx + c * a - s * w, fy + s * a + c * w, z)
                    for a in (-0.012, 0.012) for w in (-FINGER / 2, FINGER / 2) for z in (ez, palm)]
        reach = half + FINGER / 2
        pts += [(ex + c * a - s * w, ey + s * a + c * w, z)
                for a in (-0.015, 0.015) for w in (-reach, reach) for z in (palm, palm + 0.025)]
        cam, px = self._project(np.array(pts))
        if cam[:2, 2].max() > self.near:
            link = cam[:2]
            if link[:, 2].min() <= self.near:          # a camera on the arm: the part ahead of it
                a, b = link if link[0, 2] <= self.near else link[::-1]
                link = np.array([a + (self.near - a[2]) / (b[2] - a[2]) * (b - a), b])
                px[:2] = self._pixels(link)
            thick = max(1, int(self.f * 0.04 / link[:, 2].max()))
            cv2.line(self._frame, tuple(px[0]), tuple(px[1]), palette["arm"], thick,
                     cv2.LINE_AA, SHIFT)
        if world.held is not None:
            held = world.objects[world.held]
            hcam, hpx = self._project(self._object_points(held))
            if hcam[:, 2].min() > self.near:
                self._draw_object(held.name, hpx, palette, float(hcam[0, 2]))
        for a, b_ in ((2, 10), (10, 18), (18, 26)):
            if cam[a:b_, 2].min() > self.near:
                self._hull(px[a:b_], palette["gripper"])
            elif cam[a:b_, 2].max() > self.near:      # a camera on the gripper: what is ahead
                for face in _BOX_FACES:
                    self._clipped(cam[a:b_][face], palette["gripper"])

    def _lit_palette(self) -> dict:
        appearance = self.world.appearance
        if self._palette_of is not appearance:
            lit = appearance.lit
            palette = {"floor": lit(FLOOR_COLOUR), "gripper": lit(GRIPPER_COLOUR),
                       "arm": lit(ARM_COLOUR), "shadow": lit(SHADOW_COLOUR)}
            for box in self._boxes:
                base = FURNITURE_COLOURS.get(box.name, WALL_COLOUR)
                palette[box.name] = (lit(base), lit(tuple(0.75 * c for c in base)))
            for name, obj in self.world.objects.items():
                colour = appearance.colours.get(name, obj.colour)
                palette[name] = (lit(colour), lit(tuple(0.7 * c for c in colour)), lit(obj.band))
            self._palette, self._palette_of = palette, appearance
        return self._palette


class EEViewCamera(Camera):
    """A zoomed view from the head camera, centred on the end effector: exactly the
    ``size`` x ``size`` crop of a head image ``zoom`` times finer than the 96-px frame
    (:func:`view_focal`, whatever size the head camera has), around the pixel the fingertips
    project to. On a real robot it is a crop of the full-resolution frame at the
    point tf projects the gripper to; here it is rendered directly (only the crop is drawn).

    One pixel is 1/``zoom`` of a head-camera pixel (0.4 cm across the counters at 3x): the
    fine alignment of the fingers with a flat object that a 1.2-cm pixel blurs."""

    def __init__(self, world: KitchenWorld, size: int = EE_VIEW_SIZE, zoom: float = EE_VIEW_ZOOM,
                 mount: CameraMount | None = None):
        if not zoom >= 1.0:
            raise ValueError(f"end-effector view zoom must be at least 1, got {zoom!r}")
        super().__init__(world, size, size, mount)
        self.zoom = float(zoom)
        self.f = view_focal(self.zoom, self.mount)

    def render(self) -> np.ndarray:
        rotation, position = self.pose()
        c = (np.asarray(self.world.ee_world()) - position) @ rotation
        z = max(float(c[2]), self.near)
        # Whole pixels of the fine image: the crop's grid is the fine image's grid.
        self.cx = self.width / 2 - round(float(c[0]) * self.f / z)
        self.cy = self.height / 2 - round(float(c[1]) * self.f / z)
        frame = super().render()
        # Beyond the head frame's edges a crop of it has nothing: black, as on a real robot
        # (pixel centres are integer coordinates; the 96-px frame's edges at -0.5 and 95.5).
        half = HEAD_CAMERA_SIZE / 2
        for axis, c0 in ((1, self.cx), (0, self.cy)):
            lo = math.ceil(c0 - (half + 0.5) * self.zoom)
            hi = math.floor(c0 + (half - 0.5) * self.zoom) + 1
            index = [slice(None)] * 2
            if lo > 0:
                index[axis] = slice(0, min(lo, frame.shape[axis]))
                frame[tuple(index)] = 0
            if hi < frame.shape[axis]:
                index[axis] = slice(max(hi, 0), None)
                frame[tuple(index)] = 0
        return frame


class WristCamera(Camera):
    """A camera on the gripper, behind and above the fingers, looking forward and down past
    them (like a wrist camera on a real mobile manipulator): it sees an object between the
    fingers that the telescoping link hides from the head camera."""
    near = 0.01

    def __init__(self, world: KitchenWorld, size: int = EE_VIEW_SIZE, mount: WristMount | None = None):
        self.wrist = mount or WristMount()
        super().__init__(world, size, size, CameraMount(pitch=self.wrist.pitch, hfov=self.wrist.hfov))

    def pose(self) -> tuple[np.ndarray, np.ndarray]:
        world = self.world
        heading = world.base.yaw + world.arm.yaw
        c, s = math.cos(heading), math.sin(heading)
        rz = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
        ex, ey, ez = world.ee_world()
        return rz @ self.base_from_optical, np.array([ex - c * self.wrist.back,
                                                      ey - s * self.wrist.back, ez + self.wrist.up])


def make_ee_camera(world: KitchenWorld, kind: str = "crop", size: int = EE_VIEW_SIZE,
                   zoom: float = EE_VIEW_ZOOM) -> Camera:
    """The camera of an end-effector view: ``crop`` (:class:`EEViewCamera`, at ``zoom``) or
    ``wrist`` (:class:`WristCamera`, ``zoom`` unused)."""
    if kind == "crop":
        return EEViewCamera(world, size, zoom)
    if kind == "wrist":
        return WristCamera(world, size)
    raise ValueError(f"end-effector camera: expected one of {EE_CAMERAS}, got {kind!r}")


def _far_first(entry) -> tuple:
    """Painter's order of (−distance, name, pixels, depth) entries: far first, ties by name."""
    return entry[0], entry[1]


def _box_distance(box, eye) -> float:
    """Squared distance from the eye to a box's footprint (painter's order)."""
    dx = max(box.x0 - eye[0], 0.0, eye[0] - box.x1)
    dy = max(box.y0 - eye[1], 0.0, eye[1] - box.y1)
    return dx * dx + dy * dy


def _clip_near(cam: np.ndarray, near: float = NEAR) -> np.ndarray:
    """Sutherland-Hodgman clipping of a polygon against the plane z = ``near``."""
    out = []
    n = len(cam)
    for i in range(n):
        a, b = cam[i], cam[(i + 1) % n]
        a_in, b_in = a[2] >= near, b[2] >= near
        if a_in:
            out.append(a)
        if a_in != b_in:
            out.append(a + (near - a[2]) / (b[2] - a[2]) * (b - a))
    return np.array(out) if out else np.empty((0, 3))
