"""Whole-kitchen top-down pictures for people (``saycan sim --render FILE``; videos of skills
running are made in :mod:`saycan_ros.worlds.render`, which drives the skill controllers)."""
from __future__ import annotations

import math
from pathlib import Path

import cv2
import numpy as np

from saycan_ros.core.kitchen import GRIPPER, USER
from saycan_ros.sim.camera import FURNITURE_COLOURS, Camera
from saycan_ros.sim.objects import SimObject
from saycan_ros.sim.scan import LaserScanner
from saycan_ros.sim.world import KitchenWorld

PX_PER_M = 100
MARGIN = 30
INSET = 240                    # head-camera picture beside the plan, pixels
FONT = cv2.FONT_HERSHEY_SIMPLEX


class TopDownRenderer:
    def __init__(self, world: KitchenWorld, px_per_m: int = PX_PER_M):
        self.world = world
        self.scale = px_per_m
        self.camera = Camera(world, INSET, INSET)
        self.laser = LaserScanner(world.plan)
        w, d = world.plan.width, world.plan.depth
        self.plan_size = (int(w * px_per_m) + 2 * MARGIN, int(d * px_per_m) + 2 * MARGIN)
        self.size = (self.plan_size[0] + INSET + MARGIN, self.plan_size[1])
        self._background = self._draw_background()

    def px(self, x: float, y: float) -> tuple[int, int]:
        """Map metres to image pixels (y up in the map is up in the picture)."""
        return (int(round(MARGIN + x * self.scale)),
                int(round(self.plan_size[1] - MARGIN - y * self.scale)))

    def _draw_background(self) -> np.ndarray:
        img = np.full((self.size[1], self.size[0], 3), 245, np.uint8)
        plan = self.world.plan
        cv2.rectangle(img, self.px(0, 0), self.px(plan.width, plan.depth), (205, 195, 175), -1)
        for i in range(1, int(plan.width)):        # a 1 m grid to read distances off
            cv2.line(img, self.px(i, 0), self.px(i, plan.depth), (190, 180, 160), 1)
        for j in range(1, int(plan.depth)):
            cv2.line(img, self.px(0, j), self.px(plan.width, j), (190, 180, 160), 1)
        for wall in plan.walls:
            cv2.rectangle(img, self.px(wall.x0, wall.y0), self.px(wall.x1, wall.y1), (70, 70, 70), -1)
        for name, box in plan.furniture.items():
            colour = FURNITURE_COLOURS.get(name, (120, 120, 120))
            cv2.rectangle(img, self.px(box.x0, box.y0), self.px(box.x1, box.y1), colour, -1)
            cv2.rectangle(img, self.px(box.x0, box.y0), self.px(box.x1, box.y1), (40, 40, 40), 1)
            loc = self.world.kitchen.location(name)
            label = "user" if name == USER else name
            tx, ty = self.px(box.x0, box.y1 if loc.approach[1] < loc.center[1] else box.y0)
            ty += -6 if loc.approach[1] < loc.center[1] else 16
            cv2.putText(img, label, (tx, ty), FONT, 0.45, (30, 30, 30), 1, cv2.LINE_AA)
            ax, ay = self.px(*loc.approach)      # where the robot stands to work there
            end = self.px(loc.approach[0] + 0.2 * math.cos(loc.yaw),
                          loc.approach[1] + 0.2 * math.sin(loc.yaw))
            cv2.circle(img, (ax, ay), 4, (90, 90, 90), 1, cv2.LINE_AA)
            cv2.line(img, (ax, ay), end, (90, 90, 90), 1, cv2.LINE_AA)
        cv2.putText(img, "map  (1 m grid)", (MARGIN, self.size[1] - 8), FONT, 0.4, (60, 60, 60), 1,
                    cv2.LINE_AA)
        return img

    def render(self, caption: str = "") -> np.ndarray:
        """An RGB picture: plan, objects, robot with its laser scan, and the head camera view."""
        img = self._background.copy()
        world = self.world
        b = world.base
        ranges = self.laser.scan(*b.pose)
        spec = self.laser.spec
        lx, ly = b.x + spec.x * math.cos(b.yaw), b.y + spec.x * math.sin(b.yaw)
        for angle, r in zip(self.laser.angles[::2], ranges[::2]):
            if np.isfinite(r):
                cv2.circle(img, self.px(lx + r * math.cos(b.yaw + angle), ly + r * math.sin(b.yaw + angle)),
                           2, (220, 40, 40), -1)
        for name in world.present:
            obj = world.objects[name]
            if obj.location != GRIPPER:
                self._draw_object(img, obj)
        centre = self.px(b.x, b.y)
        radius = int(b.limits.radius * self.scale)
        cv2.circle(img, centre, radius, (235, 235, 240), -1, cv2.LINE_AA)
        cv2.circle(img, centre, radius, (40, 40, 60), 2, cv2.LINE_AA)
        cv2.line(img, centre, self.px(b.x + 0.3 * math.cos(b.yaw), b.y + 0.3 * math.sin(b.yaw)),
                 (40, 40, 60), 2, cv2.LINE_AA)
        ee = world.ee_world()
        cv2.line(img, centre, self.px(ee[0], ee[1]), (90, 90, 110), 4, cv2.LINE_AA)
        heading = b.yaw + world.arm.yaw
        half = world.arm.opening / 2 + 0.01
        for side in (-1, 1):
            fx, fy = ee[0] - math.sin(heading) * side * half, ee[1] + math.cos(heading) * side * half
            cv2.circle(img, self.px(fx, fy), 3, (30, 30, 30), -1, cv2.LINE_AA)
        if world.held:
            self._draw_object(img, world.objects[world.held])
        # The head camera's picture, beside the plan.
        x0 = self.plan_size[0]
        view = self.camera.render()
        img[MARGIN:MARGIN + INSET, x0:x0 + INSET] = view
        cv2.rectangle(img, (x0 - 1, MARGIN - 1), (x0 + INSET, MARGIN + INSET), (40, 40, 40), 1)
        cv2.putText(img, "head camera", (x0, MARGIN - 8), FONT, 0.45, (30, 30, 30), 1, cv2.LINE_AA)
        lines = [f"t = {world.time:6.1f} s", f"at: {world.robot_location or '-'}",
                 f"holding: {world.held or '-'}"] + ([caption] if caption else [])
        for i, text in enumerate(lines):
            cv2.putText(img, text, (x0, MARGIN + INSET + 25 + 20 * i), FONT, 0.45, (30, 30, 30), 1,
                        cv2.LINE_AA)
        return img

    def _draw_object(self, img: np.ndarray, obj: SimObject) -> None:
        r = max(3, int(obj.shape.width / 2 * self.scale))
        colour = tuple(int(c) for c in obj.colour)
        if obj.shape.kind == "box":
            c, s = math.cos(obj.yaw), math.sin(obj.yaw)
            hw, hl = obj.shape.width / 2, obj.shape.length / 2
            pts = np.array([self.px(obj.x + c * a - s * w, obj.y + s * a + c * w)
                            for a, w in ((hl, hw), (-hl, hw), (-hl, -hw), (hl, -hw))], np.int32)
            cv2.fillConvexPoly(img, pts, colour, cv2.LINE_AA)
            cv2.polylines(img, [pts], True, (30, 30, 30), 1, cv2.LINE_AA)
        else:
            cv2.circle(img, self.px(obj.x, obj.y), r, colour, -1, cv2.LINE_AA)
            cv2.circle(img, self.px(obj.x, obj.y), r, (30, 30, 30), 1, cv2.LINE_AA)


def write_png(path: Path, rgb: np.ndarray) -> None:
    if not cv2.imwrite(str(path), cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR)):
        raise OSError(f"could not write {path}")
