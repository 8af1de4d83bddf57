"""The scripted place skill ("put down the <object>"), free of ROS.

A Cartesian motion of the end effector, the way MoveIt Servo would run it: carry the held
object over a free spot of the surface in front of the robot, lower it until it rests on the
surface (the arm stops descending: contact), open the gripper, rise clear, and fold the arm
home. Every decision comes from what a robot reports on its standard topics: the arm's joint
positions (``/joint_states``: lift, yaw, extension, finger opening), the base pose (``/odom``
and tf) and the kitchen's geometry (``config/kitchen.yaml``: where each surface is and how
high). The same :class:`PlaceController` drives the ``place_skill`` node and the ROS-free
evaluation on the simulator core.

A spot is free when the arm reaches it with room to spare, it keeps ``clearance`` from every
point in ``occupied`` (objects a perception source reports, if any), and, when a camera image
is given, the head camera sees bare surface all around it (:func:`visible_free`: every pixel of
a disc around the spot has the surface's colour, which is estimated from the image as the
median colour of the surface's top; spots hidden behind the arm or the held object count as
taken).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from saycan_ros.core.kitchen import Kitchen, Location
from saycan_ros.robot.arm import HOME, JOINT_NAMES, MAST, ArmLimits

Pose = tuple[float, float, float]


_LIMITS = ArmLimits()


@dataclass(frozen=True)
class ArmModel:
    """Kinematics of the arm (:mod:`saycan_ros.robot.arm`; defaults: the robot described
    there). Joints: lift (fingertip height above the floor, m), yaw (rad), extend (reach from
    the mast, m), gripper (finger opening, m). End effector in base_link:
    ``(mast_x + extend cos yaw, mast_y + extend sin yaw, lift)``.
    """
    mast: tuple[float, float] = MAST
    lift: tuple[float, float] = _LIMITS.lift
    yaw: tuple[float, float] = _LIMITS.yaw
    extend: tuple[float, float] = _LIMITS.extend
    gripper: tuple[float, float] = _LIMITS.gripper
    home: tuple[float, float, float] = HOME[:3]               # lift, yaw, extend
    joint_names: tuple[str, str, str, str] = JOINT_NAMES

    def ee(self, joints: Sequence[float]) -> tuple[float, float, float]:
        lift, yaw, extend = joints[0], joints[1], joints[2]
        return (self.mast[0] + extend * math.cos(yaw), self.mast[1] + extend * math.sin(yaw), lift)

    def reaches(self, forward: float, left: float, margin: float = 0.08) -> bool:
        """Whether the gripper can be centred over a base-frame point with ``margin`` to spare."""
        x, y = forward - self.mast[0], left - self.mast[1]
        r, yaw = math.hypot(x, y), math.atan2(y, x)
        return (self.extend[0] + margin <= r <= self.extend[1] - margin
                and abs(yaw) <= self.yaw[1] - margin / max(r, 0.3))


@dataclass(frozen=True)
class PlaceParams:
    at_location_m: float = 0.4         # the robot is at a location this close to its approach
    at_location_rad: float = 0.6
    edge_margin: float = 0.08          # spots keep this far inside the surface's edges, m
    spot_spacing: float = 0.04         # candidate grid, m
    clearance: float = 0.12            # from occupied points, m
    carry_above: float = 0.25          # carry the object this high above the surface, m
    move_speed: float = 0.25           # end-effector speed over the surface, m/s
    xy_tolerance: float = 0.01         # over the spot, m
    lower_fast: float = 0.2            # m/s, until slow_above over the surface
    lower_slow: float = 0.06           # m/s, near the surface
    slow_above: float = 0.18           # m above the surface (plus the object under the hand)
    contact_window_s: float = 0.3      # descending less than contact_mm over this long = contact
    contact_mm: float = 2.0
    open_wait_s: float = 2.5           # for the fingers to open
    retract: float = 0.12              # rise this far after letting go, m
    home_tolerance: float = 0.01       # joint error at home (m or rad)
    phase_timeout_s: float = 15.0      # any one phase
    image_wait_s: float = 2.0          # for a head camera image after looking (then: blind)
    free_radii: tuple[float, ...] = (0.075, 0.055, 0.04)   # bare surface around a spot, m
    allow_crowded: bool = True         # no free spot seen: put it where there is most room


@dataclass
class PlaceCommand:
    """What to send this cycle: an end-effector twist (base_link, m/s), a gripper opening (m),
    a joint trajectory point (joint name -> position); None = send nothing of that kind."""
    twist: tuple[float, float, float] | None = None
    gripper: float | None = None
    trajectory: dict[str, float] | None = None
    done: bool = False
    success: bool = False
    message: str = ""
    phase: str = ""
    want_image: bool = False           # pass a fresh head camera image to the next update


def location_at(kitchen: Kitchen, pose: Pose,
                params: PlaceParams = PlaceParams()) -> Location | None:
    """The kitchen location whose approach pose the robot is at (the simulator's rule)."""
    x, y, yaw = pose
    for loc in kitchen.locations.values():
        d = math.hypot(x - loc.approach[0], y - loc.approach[1])
        err = abs(math.atan2(math.sin(yaw - loc.yaw), math.cos(yaw - loc.yaw)))
        if d < params.at_location_m and err < params.at_location_rad:
            return loc
    return None


def to_base(pose: Pose, x: float, y: float) -> tuple[float, float]:
    dx, dy = x - pose[0], y - pose[1]
    c, s = math.cos(pose[2]), math.sin(pose[2])
    return c * dx + s * dy, -s * dx + c * dy


def candidate_spots(surface: Location, pose: Pose, arm: ArmModel, params: PlaceParams,
                    occupied: Sequence[tuple[float, float]] = (),
                    free: Callable[[list], list] | None = None) -> list[tuple[float, float]]:
    """Free, reachable points of ``surface`` (map frame), best first: straight ahead at a
    comfortable reach, away from occupied points."""
    hx = surface.size[0] / 2 - params.edge_margin
    hy = surface.size[1] / 2 - params.edge_margin
    if hx < 0 or hy < 0:
        return []
    nx = int(2 * hx / params.spot_spacing) + 1
    ny = int(2 * hy / params.spot_spacing) + 1
    mid_reach = (arm.extend[0] + arm.extend[1]) / 2
    scored = []
    for i in range(nx):
        for j in range(ny):
            x = surface.center[0] - hx + (2 * hx * i / (nx - 1) if nx > 1 else hx)
            y = surface.center[1] - hy + (2 * hy * j / (ny - 1) if ny > 1 else hy)
            forward, left = to_base(pose, x, y)
            if not arm.reaches(forward, left):
                continue
            gap = min((math.hypot(x - ox, y - oy) for ox, oy in occupied), default=math.inf)
            if gap < params.clearance:
                continue
            r = math.hypot(forward - arm.mast[0], left - arm.mast[1])
            score = abs(math.atan2(left, forward)) + abs(r - mid_reach)
            scored.append((score, (x, y)))
    scored.sort(key=lambda item: item[0])
    spots = [spot for _, spot in scored]
    if free is not None and spots:
        spots = [spot for spot, ok in zip(spots, free(spots)) if ok]
    return spots


# -- seeing free space -----------------------------------------------------------------------------
def quaternion_matrix(x: float, y: float, z: float, w: float) -> np.ndarray:
    """3x3 rotation of a unit quaternion (x, y, z, w), as in geometry_msgs/Quaternion."""
    n = math.sqrt(x * x + y * y + z * z + w * w) or 1.0
    x, y, z, w = x / n, y / n, z / n, w / n
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def euler_quaternion(yaw: float = 0.0, pitch: float = 0.0, roll: float = 0.0) -> tuple:
    """(x, y, z, w) of intrinsic z-y-x Euler angles (tf2's setRPY(roll, pitch, yaw))."""
    cy, sy = math.cos(yaw / 2), math.sin(yaw / 2)
    cp, sp = math.cos(pitch / 2), math.sin(pitch / 2)
    cr, sr = math.cos(roll / 2), math.sin(roll / 2)
    return (sr * cp * cy - cr * sp * sy, cr * sp * cy + sr * cp * sy,
            cr * cp * sy - sr * sp * cy, cr * cp * cy + sr * sp * sy)


@dataclass(frozen=True)
class CameraModel:
    """A pinhole camera (sensor_msgs/CameraInfo's K) and its optical frame in base_link."""
    fx: float
    fy: float
    cx: float
    cy: float
    width: int
    height: int
    rotation: np.ndarray          # base_link <- optical frame (REP-103 optical: z forward)
    translation: np.ndarray       # optical frame origin in base_link

    @classmethod
    def from_mount(cls, x: float, z: float, pitch: float, hfov: float, width: int,
                   height: int) -> "CameraModel":
        """A camera at (x, 0, z) on the base pitched down by ``pitch``, with the optical frame
        convention of kitchen_sim's tf (camera_link -> optical: yaw -pi/2, roll -pi/2)."""
        link = quaternion_matrix(*euler_quaternion(pitch=pitch))
        optical = quaternion_matrix(*euler_quaternion(yaw=-math.pi / 2, roll=-math.pi / 2))
        f = width / (2 * math.tan(hfov / 2))
        return cls(f, f, width / 2, height / 2, width, height, link @ optical,
                   np.array([x, 0.0, z]))

    def project(self, points: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Pixel (u, v) of base_link points, and which are in front of the camera and inside
        the image."""
        cam = (np.asarray(points, dtype=np.float64) - self.translation) @ self.rotation
        z = cam[:, 2]
        ok = z > 0.05
        zs = np.where(ok, z, 1.0)
        u = self.fx * cam[:, 0] / zs + self.cx
        v = self.fy * cam[:, 1] / zs + self.cy
        ok &= (u >= -0.5) & (u < self.width - 0.5) & (v >= -0.5) & (v < self.height - 0.5)
        return u, v, ok


def _to_base_points(pose: Pose, xy: np.ndarray, z: float) -> np.ndarray:
    dx, dy = xy[:, 0] - pose[0], xy[:, 1] - pose[1]
    c, s = math.cos(pose[2]), math.sin(pose[2])
    return np.column_stack([c * dx + s * dy, -s * dx + c * dy, np.full(len(xy), z)])


def _pixel(coordinate: np.ndarray) -> np.ndarray:
    """Pixel index of an image coordinate (pixel centres at integers, as OpenCV draws)."""
    return np.rint(coordinate).astype(int)


def visible_free(image: np.ndarray, camera: CameraModel, pose: Pose, surface: Location,
                 spots: Sequence[tuple[float, float]], radius: float = 0.075,
                 tolerance: float = 14.0) -> list[bool] | None:
    """For each spot (map frame) on ``surface``: whether the camera sees bare surface within
    ``radius`` of it. None when too little of the surface is visible to tell its colour."""
    fractions = visible_free_fraction(image, camera, pose, surface, spots, radius, tolerance)
    return None if fractions is None else [f >= 1.0 for f in fractions]


def visible_free_fraction(image: np.ndarray, camera: CameraModel, pose: Pose, surface: Location,
                          spots: Sequence[tuple[float, float]], radius: float = 0.075,
                          tolerance: float = 14.0) -> list[float] | None:
    """For each spot: the fraction of a disc of ``radius`` around it that is seen as bare
    surface (0 where the disc leaves the image). None: the surface's colour is not clear."""
    image = np.asarray(image)
    if image.ndim != 3 or image.shape[2] < 3 or len(spots) == 0:
        return None
    h = surface.height
    hx, hy = surface.size[0] / 2, surface.size[1] / 2
    gx, gy = np.meshgrid(np.linspace(-hx + 0.02, hx - 0.02, 24),
                         np.linspace(-hy + 0.02, hy - 0.02, 24))
    grid = np.column_stack([surface.center[0] + gx.ravel(), surface.center[1] + gy.ravel()])
    u, v, ok = camera.project(_to_base_points(pose, grid, h))
    if ok.sum() < 20:
        return None
    colours = image[_pixel(v[ok]), _pixel(u[ok]), :3].astype(np.float64)
    reference = np.median(colours, axis=0)
    matching = np.abs(colours - reference).max(axis=1) <= tolerance
    if matching.mean() < 0.35:
        return None
    angles = np.linspace(0.0, 2 * math.pi, 16, endpoint=False)
    ring = np.concatenate([[[0.0, 0.0]]]
                          + [np.column_stack([r * np.cos(angles), r * np.sin(angles)])
                             for r in (radius / 3, 2 * radius / 3, radius)])
    result = []
    for sx, sy in spots:
        u, v, ok = camera.project(_to_base_points(pose, ring + (sx, sy), h))
        if not ok.all():
            result.append(0.0)
            continue
        px = image[_pixel(v), _pixel(u), :3].astype(np.float64)
        result.append(float((np.abs(px - reference).max(axis=1) <= tolerance).mean()))
    return result


@dataclass
class _State:
    phase: str = "start"
    since: float = 0.0
    spot: tuple[float, float] | None = None
    surface: Location | None = None
    window: list = field(default_factory=list)     # (time, lift) while lowering
    release_lift: float = 0.0
    occupied: list = field(default_factory=list)
    seen: bool = False                             # the spot was seen free by the camera
    sent_at: float | None = None                   # last trajectory point sent
    crowded: bool = False                          # no free spot: the least crowded one


class PlaceController:
    """One put-down, cycle by cycle: ``start(...)`` then ``update(joints, pose, now)``."""

    def __init__(self, kitchen: Kitchen, arm: ArmModel | None = None,
                 params: PlaceParams | None = None):
        self.kitchen = kitchen
        self.arm = arm or ArmModel()
        self.params = params or PlaceParams()
        self.state = _State()

    # -- checks ------------------------------------------------------------------------------------
    def holding_something(self, opening: float) -> bool:
        """Fingers stopped part-way: something is between them (not open, not shut on nothing)."""
        low, high = self.arm.gripper
        return low + 0.005 < opening < high - 0.01

    def start(self, joints: Sequence[float], pose: Pose, now: float,
              occupied: Sequence[tuple[float, float]] = (), look: bool = True
              ) -> PlaceCommand | None:
        """Prepare the motion; returns a final (failed) command when it cannot start.

        ``look``: first swing the arm aside and wait for a head camera image (``update(...,
        image=, camera=)``) to choose a spot seen free; else choose without seeing."""
        self.state = _State(since=now, occupied=list(occupied))
        if not self.holding_something(joints[3]):
            what = "the gripper is open" if joints[3] >= self.arm.gripper[1] - 0.01 else \
                "the gripper is closed on nothing"
            return self._end(False, f"not holding anything ({what})")
        surface = location_at(self.kitchen, pose, self.params)
        if surface is None:
            return self._end(False, "not at a surface (no kitchen location here)")
        self.state.surface = surface
        if not candidate_spots(surface, pose, self.arm, self.params, occupied):
            return self._end(False, f"no free spot within reach on the {surface.name}")
        if look:
            self._phase("look", now)
            return None
        return self._choose(pose, now, None, None)

    def look_point(self) -> dict[str, float]:
        """The arm aside and up, out of the head camera's view of the surface, still gripping."""
        names = self.arm.joint_names
        return {names[0]: self.arm.lift[1], names[1]: self.arm.yaw[1],
                names[2]: self.arm.extend[0], names[3]: self.arm.gripper[0]}

    def _choose(self, pose: Pose, now: float, image, camera) -> PlaceCommand | None:
        """The best reachable spot: seen free within the widest radius that leaves one."""
        st = self.state
        spots = candidate_spots(st.surface, pose, self.arm, self.params, st.occupied)
        if image is not None and camera is not None and spots:
            for radius in self.params.free_radii:
                seen = visible_free_fraction(image, camera, pose, st.surface, spots, radius)
                if seen is None:          # too little of the surface in view: choose blind
                    break
                free = [spot for spot, f in zip(spots, seen) if f >= 1.0]
                if free:
                    spots, st.seen = free, True
                    break
            else:
                if not self.params.allow_crowded:
                    return self._end(False, f"no free spot seen within reach on the "
                                            f"{st.surface.name}")
                # Crowded (a full trash can): where the most bare surface is seen.
                order = sorted(range(len(spots)), key=lambda i: -seen[i])
                spots, st.crowded = [spots[order[0]]], True
        if not spots:
            return self._end(False, f"no free spot within reach on the {st.surface.name}")
        st.spot = spots[0]
        self._phase("move_over", now)
        return None

    # -- the cycle ---------------------------------------------------------------------------------
    def _phase(self, name: str, now: float) -> None:
        self.state.phase, self.state.since = name, now
        self.state.window = []
        self.state.sent_at = None

    def _end(self, success: bool, message: str) -> PlaceCommand:
        self.state.phase = "succeeded" if success else "failed"
        return PlaceCommand(twist=(0.0, 0.0, 0.0), done=True, success=success, message=message,
                            phase=self.state.phase)

    def update(self, joints: Sequence[float], pose: Pose, now: float,
               image: np.ndarray | None = None, camera: CameraModel | None = None) -> PlaceCommand:
        """One control cycle. In the ``perceive`` phase (``command.want_image``) pass the first
        head camera ``image`` taken after the phase began, with its ``camera`` model (None when
        there is no camera: the spot is then chosen without seeing)."""
        st, p, arm = self.state, self.params, self.arm
        if st.phase in ("succeeded", "failed", "start"):
            return PlaceCommand(done=True, success=st.phase == "succeeded", phase=st.phase)
        if now - st.since > p.phase_timeout_s:
            return self._end(False, f"timed out in phase {st.phase}")
        ee = arm.ee(joints)
        height = st.surface.height
        opening = joints[3]
        if st.phase in ("look", "perceive", "move_over", "lower") and \
                not self.holding_something(opening):
            return self._end(False, f"lost the object while {st.phase.replace('_', ' ')}")
        if st.phase == "look":
            target = self.look_point()
            if all(abs(a - b) <= p.home_tolerance for a, b in zip(joints[:3], target.values())):
                self._phase("perceive", now)
                return PlaceCommand(phase="perceive", want_image=True)
            return PlaceCommand(trajectory=self._resend(target, now), phase="look")
        if st.phase == "perceive":
            if image is None and camera is None and now - st.since < p.image_wait_s:
                return PlaceCommand(phase="perceive", want_image=True)
            final = self._choose(pose, now, image, camera)
            if final is not None:
                return final
            return PlaceCommand(twist=(0.0, 0.0, 0.0), phase="move_over")
        if st.phase == "move_over":
            fx, fy = to_base(pose, *st.spot)
            ex, ey = fx - ee[0], fy - ee[1]
            z_goal = min(max(ee[2], height + p.carry_above), arm.lift[1] - 0.01)
            ez = z_goal - ee[2]
            if math.hypot(ex, ey) <= p.xy_tolerance and abs(ez) < 0.01:
                self._phase("lower", now)
                return PlaceCommand(twist=(0.0, 0.0, 0.0), phase="lower")
            return PlaceCommand(twist=_limit((3.0 * ex, 3.0 * ey, 3.0 * ez), p.move_speed),
                                phase="move_over")
        if st.phase == "lower":
            st.window.append((now, ee[2]))
            while st.window and now - st.window[0][0] > p.contact_window_s:
                st.window.pop(0)
            if (st.window and now - st.since > p.contact_window_s and len(st.window) >= 3
                    and st.window[0][1] - ee[2] < p.contact_mm / 1000.0):
                if ee[2] > height + 0.35:
                    return self._end(False, f"the arm stopped {ee[2] - height:.2f} m above the "
                                            f"{st.surface.name}")
                st.release_lift = ee[2]
                self._phase("release", now)
                return PlaceCommand(twist=(0.0, 0.0, 0.0), gripper=arm.gripper[1], phase="release")
            fx, fy = to_base(pose, *st.spot)
            ex, ey = fx - ee[0], fy - ee[1]
            speed = p.lower_fast if ee[2] > height + p.slow_above else p.lower_slow
            return PlaceCommand(twist=(_clip(3.0 * ex, 0.05), _clip(3.0 * ey, 0.05), -speed),
                                phase="lower")
        if st.phase == "release":
            if opening >= arm.gripper[1] - 0.005:
                self._phase("retract", now)
                return PlaceCommand(twist=(0.0, 0.0, 0.1), gripper=arm.gripper[1], phase="retract")
            if now - st.since > p.open_wait_s:
                return self._end(False, f"the gripper did not open (opening {opening:.3f} m)")
            return PlaceCommand(twist=(0.0, 0.0, 0.0), gripper=arm.gripper[1], phase="release")
        if st.phase == "retract":
            if ee[2] >= min(st.release_lift + p.retract, arm.lift[1] - 0.01):
                self._phase("home", now)
                return PlaceCommand(twist=(0.0, 0.0, 0.0),
                                    trajectory=self._resend(self.home_point(), now), phase="home")
            return PlaceCommand(twist=(0.0, 0.0, 0.15), gripper=arm.gripper[1], phase="retract")
        if st.phase == "home":
            target = (*arm.home, arm.gripper[1])
            if all(abs(a - b) <= p.home_tolerance for a, b in zip(joints, target)):
                seen = ("the least crowded spot (no free one)" if st.crowded else
                        "a spot seen free" if st.seen else "a spot not seen (no camera)")
                return self._end(True, f"put down on the {st.surface.name} at {seen} "
                                       f"({st.spot[0]:.2f}, {st.spot[1]:.2f})")
            return PlaceCommand(trajectory=self._resend(self.home_point(), now), phase="home")
        return self._end(False, f"unknown phase {st.phase}")

    def _resend(self, point: dict[str, float], now: float) -> dict[str, float] | None:
        """A trajectory point: at the start of a phase, then again every second (a lost
        message must not stall the skill; re-sending the same goal changes nothing)."""
        st = self.state
        if st.sent_at is None or now - st.sent_at >= 1.0:
            st.sent_at = now
            return point
        return None

    def home_point(self) -> dict[str, float]:
        lift, yaw, extend = self.arm.home
        names = self.arm.joint_names
        return {names[0]: lift, names[1]: yaw, names[2]: extend, names[3]: self.arm.gripper[1]}


def _clip(value: float, limit: float) -> float:
    return max(-limit, min(limit, value))


def _limit(v: tuple[float, float, float], speed: float) -> tuple[float, float, float]:
    norm = math.sqrt(sum(c * c for c in v))
    if norm <= speed or norm == 0.0:
        return v
    return tuple(c * speed / norm for c in v)
